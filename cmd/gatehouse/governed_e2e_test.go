package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Through the MCP Inspector and a real filesystem server: a read runs, a
// write waits for the terminal approver and runs once it allows, a denied
// tool answers with Gatehouse's disclosure, a path outside the folder a rule
// allows is not allowed by it, and each call has its receipt (and its outcome
// where it ran) in a log that verifies.
func TestFilesystemGovernedThroughInspector(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	nm := npmPeers(t)
	home := t.TempDir()
	os.Chmod(home, 0o700)
	files := t.TempDir()
	outside := t.TempDir()
	os.WriteFile(filepath.Join(files, "notes.txt"), []byte("buy milk\n"), 0o600)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("not yours\n"), 0o600)
	gatehouse(t, home, append([]string{"server", "add", "files", "--"}, serverCmd(nm, "server-filesystem", files, outside)...)...)
	gatehouse(t, home, "policy", "set", "mcp.files.move_file", "DENY", "--id", "no-moves")
	gatehouse(t, home, "policy", "set", "mcp.files.read_text_file", "ALLOW", "--arg", "path", "--under", files, "--id", "read-my-files")
	gatehouse(t, home, "policy", "set", "mcp.files.read_text_file", "DENY", "--id", "no-other-reads")

	approver := exec.Command(gatehouseBin, "--home", home, "approvals", "--auto", "once")
	var approverOut syncBuffer
	approver.Stdout, approver.Stderr = &approverOut, &approverOut
	if err := approver.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { approver.Process.Signal(os.Interrupt); approver.Wait() })
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(home, "approvals.sock")); return err == nil }, "the approver to listen")

	proxy := []string{gatehouseBin, "--home", home, "proxy", "--client", "inspector", "files"}
	call := func(tool string, args ...string) (text string, isError bool) {
		t.Helper()
		method := []string{"--method", "tools/call", "--tool-name", tool}
		for _, a := range args {
			method = append(method, "--tool-arg", a)
		}
		var res struct {
			Result struct {
				Content []struct{ Text string }
				IsError bool
			}
		}
		out := inspector(t, nm, keychainEnv(), proxy, method...)
		if err := json.Unmarshal([]byte(out), &res); err != nil {
			t.Fatalf("%s: %v: %s", tool, err, out)
		}
		for _, c := range res.Result.Content {
			text += c.Text
		}
		return text, res.Result.IsError
	}

	if text, isErr := call("read_text_file", "path="+filepath.Join(files, "notes.txt")); isErr || !strings.Contains(text, "buy milk") {
		t.Errorf("read inside the allowed folder = %q (isError %v), want the file", text, isErr)
	}
	// Ways out of the allowed folder: a plain path elsewhere, "..", and a
	// symbolic link inside it that leads out.
	if err := os.Symlink(outside, filepath.Join(files, "link")); err != nil {
		t.Fatal(err)
	}
	for _, escape := range []string{
		filepath.Join(outside, "secret.txt"),
		files + "/../" + filepath.Base(outside) + "/secret.txt",
		filepath.Join(files, "link", "secret.txt"),
	} {
		text, isErr := call("read_text_file", "path="+escape)
		if !isErr || strings.Contains(text, "not yours") || !strings.Contains(text, "Gatehouse denied") || !strings.Contains(text, "no-other-reads") {
			t.Errorf("read of %s = %q (isError %v), want Gatehouse's denial by no-other-reads", escape, text, isErr)
		}
	}
	// An encoded "..": a server that decodes it would climb out, so the
	// path cannot be checked, and the rule that denies other reads applies.
	encoded := files + "/%2e%2e/" + filepath.Base(outside) + "/secret.txt"
	if text, isErr := call("read_text_file", "path="+encoded); !isErr || strings.Contains(text, "not yours") || !strings.Contains(text, "no-other-reads") {
		t.Errorf("read of %s = %q (isError %v), want Gatehouse's denial by no-other-reads", encoded, text, isErr)
	}
	target := filepath.Join(files, "todo.txt")
	if text, isErr := call("write_file", "path="+target, "content=call mum"); isErr {
		t.Errorf("approved write = %q, want it to run", text)
	}
	if b, err := os.ReadFile(target); err != nil || string(b) != "call mum" {
		t.Errorf("after the approved write the file holds %q, %v", b, err)
	}
	if !strings.Contains(approverOut.String(), "write_file") {
		t.Errorf("the terminal approver did not show the write:\n%s", approverOut.String())
	}
	text, isErr := call("move_file", "source="+target, "destination="+filepath.Join(files, "moved.txt"))
	if !isErr || !strings.Contains(text, "Gatehouse denied") || !strings.Contains(text, "no-moves") || !strings.Contains(text, "Receipt r-") {
		t.Errorf("denied move = %q (isError %v), want the disclosure naming Gatehouse, the rule and the receipt", text, isErr)
	}
	if _, err := os.Stat(target); err != nil {
		t.Errorf("the denied move ran: %v", err)
	}

	// gatehouse tools: what was listed is pinned, with its risk and rule.
	tools := gatehouse(t, home, "tools", "files")
	for _, want := range []string{"write_file", "move_file  ", "no-moves", "pinned"} {
		if !strings.Contains(tools, strings.TrimSpace(want)) {
			t.Errorf("gatehouse tools files lacks %q:\n%s", want, tools)
		}
	}

	// Every call has its receipt, and each that ran its outcome.
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	gatehouse(t, home, "verify", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ tool, decision string }
	receipts := map[key]int{}
	outcomes := map[string][]string{}
	ids := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			ID   string
			Kind string
			Body struct {
				Tool, Decision, Status, Receipt string
				Client                          struct{ Name string }
			}
		}
		json.Unmarshal([]byte(line), &e)
		switch e.Kind {
		case "receipt":
			receipts[key{e.Body.Tool, e.Body.Decision}]++
			ids[e.ID] = e.Body.Tool
			if e.Body.Client.Name != "inspector" {
				t.Errorf("receipt %s names client %q, want the proxy's --client", e.ID, e.Body.Client.Name)
			}
		case "outcome":
			outcomes[ids[e.Body.Receipt]] = append(outcomes[ids[e.Body.Receipt]], e.Body.Status)
		}
	}
	want := map[key]int{{"read_text_file", "ALLOW"}: 1, {"read_text_file", "DENY"}: 4, {"write_file", "ALLOW"}: 1, {"move_file", "DENY"}: 1}
	for k, n := range want {
		if receipts[k] != n {
			t.Errorf("%d receipts for %s %s, want %d (all: %v)", receipts[k], k.decision, k.tool, n, receipts)
		}
	}
	// The read ran, the write ran; nothing denied ran.
	if fmt.Sprint(outcomes) != "map[read_text_file:[SUCCEEDED] write_file:[SUCCEEDED]]" {
		t.Errorf("outcomes = %v, want the read and the write, and nothing denied", outcomes)
	}
}

// An approver that is not a Gatehouse program beside the proxy (here, a copy
// of gatehouse in another folder) is not asked: its "allow" cannot run a
// call.
func TestImpostorApproverIsRefused(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the approver's program is checked on Linux only")
	}
	nm := npmPeers(t)
	home := t.TempDir()
	os.Chmod(home, 0o700)
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	impostor := filepath.Join(t.TempDir(), "gatehouse")
	data, err := os.ReadFile(gatehouseBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(impostor, data, 0o755); err != nil {
		t.Fatal(err)
	}
	approver := exec.Command(impostor, "--home", home, "approvals", "--auto", "once")
	var out syncBuffer
	approver.Stdout, approver.Stderr = &out, &out
	if err := approver.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { approver.Process.Signal(os.Interrupt); approver.Wait() })
	waitFor(t, func() bool { _, err := os.Stat(filepath.Join(home, "approvals.sock")); return err == nil }, "the impostor to listen")

	p := startRawProxy(t, home, "everything")
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	p.recvAnswer(t, 1)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`)
	res, _ := p.recvAnswer(t, 2)["result"].(map[string]any)
	if res["isError"] != true || strings.Contains(fmt.Sprint(res["content"]), "Echo: hi") {
		t.Errorf("a call approved by an impostor = %v, want it denied", res)
	}
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "not a Gatehouse program beside") }, "the proxy's log to say why")
	if strings.Contains(out.String(), "echo") {
		t.Errorf("the impostor was shown the request:\n%s", out.String())
	}
}
