package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
)

// needLandlock skips a test of confinement on a kernel that cannot confine
// a server's network (Landlock ABI 4, Linux 6.7).
func needLandlock(tb testing.TB) int {
	tb.Helper()
	v, err := confine.ABI()
	if err != nil || v < confine.NetABI {
		tb.Skipf("no Landlock ABI %d here (ABI %d, %v)", confine.NetABI, v, err)
	}
	return v
}

// statusCall calls the adversary's status tool through a fresh proxy of
// server name, asking it to read secret, write into the Gatehouse home and
// connect to addr, and returns what it reported.
func statusCall(t *testing.T, home, name, secret, addr string) string {
	t.Helper()
	p := startRawProxy(t, home, name)
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	p.recvAnswer(t, 1)
	args, _ := json.Marshal(map[string]string{"read": secret, "write": filepath.Join(home, "planted.txt"), "connect": addr})
	p.send(t, fmt.Sprintf(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status","arguments":%s}}`, args))
	res, _ := p.recvAnswer(t, 2)["result"].(map[string]any)
	if res == nil || res["isError"] == true {
		t.Fatalf("status call = %v, want the server's report; stderr:\n%s", res, p.stderr)
	}
	p.close()
	p.cmd.Wait()
	return fmt.Sprint(res["content"])
}

// A malicious server, asked a harmless allowed call, tries to read a file
// outside its folders, write into the Gatehouse home and connect to a
// loopback port it did not declare. Confined, all three fail and the
// call's result says so; the same server unconfined succeeds at all three
// (so this test can fail). The receipts record whether it was confined.
func TestConfinedServerCannotEscape(t *testing.T) {
	needKeychain(t)
	abi := needLandlock(t)
	home := t.TempDir()
	os.Chmod(home, 0o700)
	work, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "id_ed25519")
	os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()

	gatehouse(t, home, "server", "add", "evil", "--no-quarantine", "--allow-write", work, "--",
		gatehouseBin, adversary.Command, "--record", filepath.Join(work, "record.jsonl"))
	gatehouse(t, home, "policy", "set", "mcp.evil.status", "ALLOW")
	if out := gatehouse(t, home, "server", "list"); !strings.Contains(out, fmt.Sprintf("yes (landlock %d)", abi)) {
		t.Errorf("server list = %q, want evil confined", out)
	}

	report := statusCall(t, home, "evil", secret, ln.Addr().String())
	for _, want := range []string{
		"read " + secret + ": failed: open " + secret + ": permission denied",
		"write " + filepath.Join(home, "planted.txt") + ": failed",
		"connect " + ln.Addr().String() + ": failed: dial tcp " + ln.Addr().String() + ": connect: permission denied",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("confined, the report = %q, want %q", report, want)
		}
	}
	if _, err := os.Stat(filepath.Join(home, "planted.txt")); err == nil {
		t.Error("confined, the server wrote into the Gatehouse home")
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("confined, the server connected %d times", n)
	}

	gatehouse(t, home, "server", "set", "evil", "--no-confine")
	report = statusCall(t, home, "evil", secret, ln.Addr().String())
	for _, want := range []string{"read " + secret + ": ok", "write " + filepath.Join(home, "planted.txt") + ": ok", "connect " + ln.Addr().String() + ": ok"} {
		if !strings.Contains(report, want) {
			t.Errorf("unconfined, the report = %q, want %q", report, want)
		}
	}
	if accepted.Load() == 0 {
		t.Error("unconfined, the server did not connect: the confined run proves nothing")
	}

	// The receipts say which run was confined, and the log verifies.
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	gatehouse(t, home, "verify", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Kind string
			Body struct {
				Confinement json.RawMessage
			}
		}
		json.Unmarshal([]byte(line), &e)
		if e.Kind == "receipt" {
			got = append(got, string(e.Body.Confinement))
		}
	}
	want := []string{fmt.Sprintf(`{"abi":%d,"confined":true,"mechanism":"landlock"}`, abi), `{"confined":false}`}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("receipts' confinement = %v, want %v", got, want)
	}
}

// A server to be confined whose declared folder does not exist does not
// start: every call is refused, saying why, and stderr says it too.
func TestConfinementThatCannotApplyRefuses(t *testing.T) {
	needKeychain(t)
	needLandlock(t)
	home := t.TempDir()
	os.Chmod(home, 0o700)
	missing := filepath.Join(t.TempDir(), "not-there")
	gatehouse(t, home, "server", "add", "evil", "--no-quarantine", "--allow-read", missing, "--", gatehouseBin, adversary.Command)
	gatehouse(t, home, "policy", "set", "mcp.evil.status", "ALLOW")
	p := startRawProxy(t, home, "evil")
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"status","arguments":{}}}`)
	res, _ := p.recvAnswer(t, 2)["result"].(map[string]any)
	text := fmt.Sprint(res["content"])
	if res["isError"] != true || !strings.Contains(text, "is to be confined, and cannot be") || !strings.Contains(text, missing+": does not exist") {
		t.Errorf("call to a server that cannot be confined = %v, want an isError naming the missing folder", res)
	}
	p.close()
	p.cmd.Wait()
	if s := p.stderr.String(); !strings.Contains(s, "gatehouse proxy: server evil is to be confined, and cannot be") || !strings.Contains(s, "hint: ") {
		t.Errorf("stderr = %q, want the reason and a hint", s)
	}
}

// The real filesystem and memory servers work confined, through the MCP
// Inspector: the filesystem server reads and writes in the folder its
// command line names, the memory server keeps its graph in the file its
// environment names, in a folder it was given.
func TestConfinedNpmServersThroughInspector(t *testing.T) {
	t.Parallel()
	needKeychain(t)
	needLandlock(t)
	nm := npmPeers(t)
	home := t.TempDir()
	os.Chmod(home, 0o700)
	files, mem := t.TempDir(), t.TempDir()
	os.WriteFile(filepath.Join(files, "notes.txt"), []byte("buy milk\n"), 0o600)
	gatehouse(t, home, append([]string{"server", "add", "files", "--confine", "--"}, serverCmd(nm, "server-filesystem", files)...)...)
	gatehouse(t, home, append([]string{"server", "add", "memory", "--allow-write", mem, "--env", "MEMORY_FILE_PATH=" + filepath.Join(mem, "memory.jsonl"), "--"},
		serverCmd(nm, "server-memory")...)...)
	allow(t, home, "mcp.files.*")
	allow(t, home, "mcp.memory.*")
	var list []struct{ Name, Confined string }
	json.Unmarshal([]byte(gatehouse(t, home, "server", "list", "--json")), &list)
	for _, s := range list {
		if s.Confined != "yes" {
			t.Errorf("server list --json: %s confined %q, want yes", s.Name, s.Confined)
		}
	}

	call := func(name, tool string, args ...string) string {
		t.Helper()
		method := []string{"--method", "tools/call", "--tool-name", tool}
		for _, a := range args {
			method = append(method, "--tool-arg", a)
		}
		out := inspector(t, nm, keychainEnv(), []string{gatehouseBin, "--home", home, "proxy", name}, method...)
		if strings.Contains(out, `"isError":true`) {
			t.Errorf("%s %s: %s", name, tool, out)
		}
		return out
	}
	if out := call("files", "read_text_file", "path="+filepath.Join(files, "notes.txt")); !strings.Contains(out, "buy milk") {
		t.Errorf("confined read = %s, want the file", out)
	}
	call("files", "write_file", "path="+filepath.Join(files, "new.txt"), "content=hello")
	call("files", "move_file", "source="+filepath.Join(files, "new.txt"), "destination="+filepath.Join(files, "moved.txt"))
	if b, err := os.ReadFile(filepath.Join(files, "moved.txt")); err != nil || string(b) != "hello" {
		t.Errorf("after write and move: %q, %v; want hello", b, err)
	}
	call("memory", "create_entities", `entities=[{"name":"Ada","entityType":"person","observations":["writes code"]}]`)
	if out := call("memory", "read_graph"); !strings.Contains(out, "writes code") {
		t.Errorf("read_graph = %s, want Ada's observation, kept across two confined runs", out)
	}
	if b, err := os.ReadFile(filepath.Join(mem, "memory.jsonl")); err != nil || !strings.Contains(string(b), "Ada") {
		t.Errorf("memory file = %q, %v; want the graph", b, err)
	}
}
