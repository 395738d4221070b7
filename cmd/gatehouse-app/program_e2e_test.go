package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/app"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// cliBinary builds gatehouse beside gatehouse-app: an approver's answers
// count only from a Gatehouse program installed beside the one that asks.
func cliBinary(t *testing.T) string {
	t.Helper()
	path := filepath.Join(filepath.Dir(appBinary(t)), "gatehouse")
	cliOnce.Do(func() { cliErr = goBuild(path, "../gatehouse") })
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return path
}

// A program over the real server-filesystem and server-memory, run with
// `gatehouse programs run`, whose write step asks a person: the tray app
// shows the whole plan, a click on Allow once answers it, and the program
// writes the file and finishes; its write's receipt names the app as the
// approver, through the plan.
func TestProgramPlanApprovedInTheAppUnderXvfb(t *testing.T) {
	xvfb := need(t, "Xvfb", "xvfb")
	xdotool := need(t, "xdotool", "xdotool")
	dbusDaemon := need(t, "dbus-daemon", "dbus")
	nm, err := filepath.Abs(filepath.Join("..", "gatehouse", "testdata", "npm", "node_modules", "@modelcontextprotocol"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nm, "server-filesystem")); err != nil {
		t.Fatalf("the npm test peers are not installed (%v)\nhint: run 'make test', or: cd cmd/gatehouse/testdata/npm && npm ci", err)
	}
	bin, cli := appBinary(t), cliBinary(t)

	// A short user home: the socket's path must fit in about 100 bytes.
	userHome, err := os.MkdirTemp("", "ghp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userHome) })
	home := filepath.Join(userHome, ".config", "gatehouse")
	files := t.TempDir()
	if err := os.WriteFile(filepath.Join(files, "notes.txt"), []byte("buy milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The command line runs in the tests' keychain session.
	gh := func(args ...string) (string, error) {
		cmd := exec.Command(cli, append([]string{"--home", home}, args...)...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return string(out), fmt.Errorf("gatehouse %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr.String())
		}
		return string(out), nil
	}
	for _, args := range [][]string{
		{"server", "add", "fs", "--", "node", filepath.Join(nm, "server-filesystem", "dist", "index.js"), files},
		{"server", "add", "memory", "--env", "MEMORY_FILE_PATH=" + filepath.Join(t.TempDir(), "memory.jsonl"), "--",
			"node", filepath.Join(nm, "server-memory", "dist", "index.js")},
		{"policy", "set", "mcp.fs.read_text_file", "ALLOW", "--id", "reads"},
		{"policy", "set", "mcp.fs.write_file", "APPROVAL_REQUIRED", "--id", "ask-writes"},
		{"policy", "set", "mcp.memory.*", "ALLOW", "--id", "memory"},
	} {
		if _, err := gh(args...); err != nil {
			t.Fatal(err)
		}
	}
	program, _ := json.Marshal(map[string]any{
		"name": "tidy-notes",
		"steps": []any{
			map[string]any{"name": "read", "kind": "tool", "server": "fs", "tool": "read_text_file",
				"args": map[string]any{"path": filepath.Join(files, "notes.txt")}},
			map[string]any{"name": "milk", "kind": "condition", "if": `steps.read.text contains "milk"`, "then": "save", "else": "end"},
			map[string]any{"name": "save", "kind": "tool", "server": "fs", "tool": "write_file",
				"args": map[string]any{"path": filepath.Join(files, "shopping.txt"), "content": "${steps.read.text}"}},
			map[string]any{"name": "remember", "kind": "tool", "server": "memory", "tool": "create_entities",
				"args": map[string]any{"entities": []any{map[string]any{"name": "shopping", "entityType": "note", "observations": []any{"${steps.read.text}"}}}}},
		},
	})
	programFile := filepath.Join(t.TempDir(), "tidy-notes.json")
	if err := os.WriteFile(programFile, program, 0o600); err != nil {
		t.Fatal(err)
	}

	display := startXvfb(t, xvfb)
	bus := startDBus(t, dbusDaemon)
	appCmd := exec.Command(bin, "--hidden")
	appCmd.Env = append(baseEnv(t, userHome, home), "DISPLAY="+display, "DBUS_SESSION_BUS_ADDRESS="+bus, "LIBGL_ALWAYS_SOFTWARE=1")
	var appErr bytes.Buffer
	appCmd.Stderr = &appErr
	if err := appCmd.Start(); err != nil {
		t.Fatalf("start gatehouse-app: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- appCmd.Wait() }()
	waited := false
	t.Cleanup(func() {
		if !waited {
			appCmd.Process.Kill()
			<-exited
		}
	})
	socket := approval.SocketPath(home)
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if _, err := os.Stat(socket); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the app does not listen on %s after 60s\nstderr:\n%s", socket, appErr.String())
		}
	}

	type ran struct {
		out string
		err error
	}
	done := make(chan ran, 1)
	go func() {
		out, err := gh("programs", "run", programFile)
		done <- ran{out, err}
	}()
	xdo := func(args ...string) (string, error) {
		c := exec.Command(xdotool, args...)
		c.Env = []string{"DISPLAY=" + display}
		out, err := c.Output()
		return strings.TrimSpace(string(out)), err
	}
	_, title, _ := strings.Cut(app.ApprovalTitle, " — ")
	id := waitWindow(t, xdo, regexp.QuoteMeta(title)+"$", exited, &waited, &appErr)
	time.Sleep(time.Second) // the answers take clicks once the window has been up a moment
	geom, err := xdo("getwindowgeometry", "--shell", id)
	if err != nil {
		t.Fatalf("xdotool getwindowgeometry: %v", err)
	}
	w, h := shellVar(geom, "WIDTH"), shellVar(geom, "HEIGHT")
	if _, err := xdo("mousemove", "--window", id, strconv.Itoa(w-60), strconv.Itoa(h-30), "click", "1"); err != nil {
		t.Fatalf("xdotool click: %v", err)
	}
	var r ran
	select {
	case r = <-done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the program did not end 60s after a click on Allow once\napp stderr:\n%s", appErr.String())
	}
	if r.err != nil {
		t.Fatal(r.err)
	}
	m := regexp.MustCompile(`(?m)^trace (tr_\S+) .*\nstatus (\S+?)(?::|$)`).FindStringSubmatch(r.out)
	if m == nil || m[2] != "SUCCESS" {
		t.Fatalf("gatehouse programs run printed:\n%s\nwant a trace with status SUCCESS", r.out)
	}
	if b, err := os.ReadFile(filepath.Join(files, "shopping.txt")); err != nil || string(b) != "buy milk\n" {
		t.Errorf("shopping.txt = %q, %v; want the notes written after the approval", b, err)
	}
	// The write's receipt, found by the run's trace, names the app.
	hist, err := gh("history", "--json", m[1])
	if err != nil {
		t.Fatal(err)
	}
	var page struct {
		Hits []struct{ ID, Kind, Tool string }
	}
	if err := json.Unmarshal([]byte(hist), &page); err != nil {
		t.Fatalf("gatehouse history --json: %v\n%s", err, hist)
	}
	receipt := ""
	for _, hit := range page.Hits {
		if hit.Kind == "receipt" && hit.Tool == "write_file" {
			receipt = hit.ID
		}
	}
	if receipt == "" {
		t.Fatalf("no receipt of write_file in the history of trace %s:\n%s", m[1], hist)
	}
	shown, err := gh("history", "show", receipt)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"kind": "tray"`, `"via": "plan"`, `"name": "tidy-notes"`} {
		if !strings.Contains(shown, want) {
			t.Errorf("the write's receipt lacks %s (approved in the tray app, for the program's plan):\n%s", want, shown)
		}
	}

	if err := appCmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		waited = true
		if err != nil {
			t.Errorf("gatehouse-app after SIGTERM: %v\nstderr:\n%s", err, appErr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("gatehouse-app still running 20s after SIGTERM")
	}
}
