//lint:file-ignore SA1019 sampling is deprecated in MCP 2026-07-28, but clients and servers still use it: the proxy must relay it

package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rogpeppe/go-internal/testscript"
)

// These tests run the real gatehouse binary against real MCP servers and
// clients from npm (pinned in cmd/gatehouse/testdata/npm, installed by the test command).

var gatehouseBin string // built once by TestMain

func TestMain(m *testing.M) {
	// testscript runs `gatehouse` in scripts by re-running this binary, in
	// which case only the command runs; otherwise mainM builds the binary
	// the other tests drive, then runs the tests.
	os.Exit(testscript.RunMain(mainM{m}, map[string]func() int{
		"gatehouse": func() int {
			return run(context.Background(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
		},
	}))
}

type mainM struct{ m *testing.M }

func (m mainM) Run() int {
	dir, err := os.MkdirTemp("", "gatehouse-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	gatehouseBin = filepath.Join(dir, "gatehouse")
	// Under -race, the proxy the tests drive is race-checked too.
	args := []string{"build", "-o", gatehouseBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command("go", append(args, ".")...)
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build gatehouse:", err)
		return 1
	}
	return m.m.Run()
}

// npmPeers returns the node_modules folder of the pinned test peers.
func npmPeers(tb testing.TB) string {
	tb.Helper()
	nm, err := filepath.Abs(filepath.Join("testdata", "npm", "node_modules"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nm, "@modelcontextprotocol", "inspector")); err != nil {
		tb.Fatalf("the npm test peers are not installed (%v)\nhint: run 'make test', or: cd cmd/gatehouse/testdata/npm && npm ci", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		tb.Fatal("node is not on PATH; the test peers need Node.js 20 or later")
	}
	return nm
}

// serverCmd is the command line of an npm MCP server.
func serverCmd(nm, pkg string, args ...string) []string {
	return append([]string{"node", filepath.Join(nm, "@modelcontextprotocol", pkg, "dist", "index.js")}, args...)
}

// gatehouse runs the binary with a home folder and returns its stdout.
func gatehouse(tb testing.TB, home string, args ...string) string {
	tb.Helper()
	cmd := exec.Command(gatehouseBin, append([]string{"--home", home}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		tb.Fatalf("gatehouse %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// keychainEnv is what a client entry must pass a proxy for it to reach the
// keychain in a session without a systemd user bus (the tests' private
// D-Bus session): MCP clients pass their servers only a few variables.
func keychainEnv() []string {
	return []string{"DBUS_SESSION_BUS_ADDRESS=" + os.Getenv("DBUS_SESSION_BUS_ADDRESS")}
}

// allow adds a policy rule that allows capability (a glob) in home: the
// proxy governs every tools/call, and these tests are about what crosses it.
func allow(tb testing.TB, home, capability string) {
	tb.Helper()
	ctx := context.Background()
	c := &cli{home: home, stderr: io.Discard}
	st, l, err := c.openLog(ctx)
	if err != nil {
		tb.Fatalf("open the evidence log (the tests run inside make test's keychain session): %v", err)
	}
	defer st.Close()
	ps, err := policy.Open(ctx, st, &policy.Options{Recorder: policyRecorder(l)})
	if err != nil {
		tb.Fatal(err)
	}
	p, err := ps.Current(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	p = p.Clone()
	p.Rules = append(p.Rules, policy.Rule{ID: fmt.Sprintf("test-%d", len(p.Rules)), Capability: capability, Decision: policy.Allow})
	if _, err := ps.Save(ctx, p); err != nil {
		tb.Fatal(err)
	}
}

// inspector runs the MCP Inspector CLI against a server command line and
// returns its JSON output, normalised.
func inspector(t *testing.T, nm string, env []string, server []string, method ...string) string {
	t.Helper()
	args := []string{"--cli", "--format", "json"}
	for _, e := range env {
		args = append(args, "-e", e)
	}
	args = append(append(args, server...), method...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, ".bin", "mcp-inspector"), args...)
	cmd.Dir = filepath.Dir(nm)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	// The inspector exits non-zero for a tool result with isError, after
	// printing it; only output that is not JSON is a failure.
	var v any
	if jerr := json.Unmarshal(out, &v); jerr != nil {
		t.Fatalf("inspector %s: %v\nstdout: %s\nstderr: %s", strings.Join(args, " "), err, out, stderr.String())
	}
	norm, _ := json.Marshal(v)
	return string(norm)
}

// The MCP Inspector gets the same answers from three real servers through the
// proxy as it gets from them directly.
func TestInspectorSeesTheSameServers(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	nm := npmPeers(t)
	files := t.TempDir()
	os.WriteFile(filepath.Join(files, "notes.txt"), []byte("hello from the gate\n"), 0o600)
	memDirect := filepath.Join(t.TempDir(), "direct.jsonl")
	memProxied := filepath.Join(t.TempDir(), "proxied.jsonl")

	servers := []struct {
		name      string
		direct    []string
		directEnv []string // what the inspector passes to the direct server
		addArgs   []string // gatehouse server add flags
		calls     [][]string
	}{
		{
			name:   "everything",
			direct: serverCmd(nm, "server-everything"),
			calls: [][]string{
				{"--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=through the gate"},
				{"--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=2", "--tool-arg", "b=40"},
				{"--method", "resources/list"},
				{"--method", "prompts/list"},
			},
		},
		{
			name:   "filesystem",
			direct: serverCmd(nm, "server-filesystem", files),
			calls: [][]string{
				{"--method", "tools/call", "--tool-name", "read_text_file", "--tool-arg", "path=" + filepath.Join(files, "notes.txt")},
				{"--method", "tools/call", "--tool-name", "list_directory", "--tool-arg", "path=" + files},
				{"--method", "tools/call", "--tool-name", "read_text_file", "--tool-arg", "path=/etc/passwd"},
			},
		},
		{
			name:      "memory",
			direct:    serverCmd(nm, "server-memory"),
			directEnv: []string{"MEMORY_FILE_PATH=" + memDirect},
			addArgs:   []string{"--env", "MEMORY_FILE_PATH=" + memProxied},
			calls: [][]string{
				{"--method", "tools/call", "--tool-name", "create_entities", "--tool-arg",
					`entities=[{"name":"gate","entityType":"thing","observations":["guards calls"]}]`},
				{"--method", "tools/call", "--tool-name", "read_graph"},
			},
		},
	}
	for _, s := range servers {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			home := t.TempDir() // each server its own home: the subtests run side by side
			args := append(append([]string{"server", "add", s.name, "--no-quarantine"}, s.addArgs...), "--")
			gatehouse(t, home, append(args, s.direct...)...)
			allow(t, home, "mcp."+s.name+".*")
			proxied := []string{gatehouseBin, "proxy", s.name, "--home", home}
			calls := append([][]string{{"--method", "tools/list"}}, s.calls...)
			for _, call := range calls {
				direct := inspector(t, nm, s.directEnv, s.direct, call...)
				via := inspector(t, nm, keychainEnv(), proxied, call...)
				if direct != via {
					t.Errorf("%s %s:\ndirect: %.600s\nproxy:  %.600s", s.name, strings.Join(call, " "), direct, via)
				}
				if strings.Contains(via, `"error"`) && !strings.Contains(direct, `"error"`) {
					t.Errorf("proxy answered with an error: %.300s", via)
				}
			}
		})
	}
}

// Claude Code, offline in a scratch HOME, connects to a server whose entry
// runs gatehouse proxy.
func TestClaudeCodeConnects(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	userHome := t.TempDir()
	claude := filepath.Join(nm, ".bin", "claude")
	env := append(os.Environ(), "HOME="+userHome, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	entry, _ := json.Marshal(map[string]any{"type": "stdio", "command": gatehouseBin, "args": []string{"proxy", "everything", "--home", home}})
	run := func(args ...string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, claude, args...)
		cmd.Env = env
		cmd.Dir = userHome
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("claude %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mcp", "add-json", "everything", string(entry))
	out := run("mcp", "list")
	if !regexp.MustCompile(`everything: .*gatehouse proxy everything.* - ✔ Connected`).MatchString(out) {
		t.Errorf("claude mcp list:\n%s\nwant everything ✔ Connected through gatehouse proxy", out)
	}
}

// connect starts gatehouse proxy NAME as an MCP client would, with the SDK.
func connect(t *testing.T, home, name string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "e2e", Version: "1"}, opts)
	cmd := exec.Command(gatehouseBin, "proxy", name, "--home", home)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatalf("connect through gatehouse proxy %s: %v", name, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// Tools that server-everything adds after initialized reach the client with
// tools/list_changed; progress notifications and cancellation cross the
// proxy; server-to-client requests (roots) are answered through it.
func TestListChangedProgressCancellation(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.*")

	changed := make(chan struct{}, 10)
	progress := make(chan float64, 100)
	cs := connect(t, home, "everything", &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
		ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
			progress <- r.Params.Progress
		},
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "sampled"}}, nil
		},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	select {
	case <-changed:
	case <-ctx.Done():
		t.Fatal("no notifications/tools/list_changed through the proxy")
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, tool := range tools.Tools {
		names[tool.Name] = true
	}
	if !names["get-roots-list"] || !names["trigger-sampling-request"] {
		t.Errorf("tools after list_changed = %v, want the roots and sampling tools the server adds", names)
	}

	// roots/list from the server to the client, answered through the proxy.
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-roots-list"})
	if err != nil || res.IsError {
		t.Errorf("get-roots-list = %v, %v", res, err)
	}
	// sampling/createMessage from the server, answered by our handler.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "trigger-sampling-request", Arguments: map[string]any{"prompt": "hi"}})
	if err != nil || res.IsError || !strings.Contains(contentText(res), "sampled") {
		t.Errorf("trigger-sampling-request = %s, %v; want the client's sampled answer", contentText(res), err)
	}

	// Progress.
	params := &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 1, "steps": 3}}
	params.SetProgressToken("p-1")
	if _, err := cs.CallTool(ctx, params); err != nil {
		t.Fatal(err)
	}
	// The client handles notifications on goroutines of its own: they may
	// be counted after the result.
	for i := range 3 {
		select {
		case <-progress:
		case <-time.After(5 * time.Second):
			t.Fatalf("got %d progress notifications, want 3", i)
		}
	}

	// Cancellation: the call ends at once and the session goes on.
	cctx, ccancel := context.WithCancel(ctx)
	params = &mcp.CallToolParams{Name: "trigger-long-running-operation", Arguments: map[string]any{"duration": 20, "steps": 2}}
	params.SetProgressToken("p-2")
	errc := make(chan error, 1)
	go func() { _, err := cs.CallTool(cctx, params); errc <- err }()
	<-progress // the call is running
	ccancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled call = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("cancelled call did not return")
	}
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "still here"}})
	if err != nil || !strings.Contains(contentText(res), "still here") {
		t.Errorf("echo after a cancellation = %v, %v", res, err)
	}
}

func contentText(res *mcp.CallToolResult) string {
	if res == nil {
		return ""
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// rawProxy runs gatehouse proxy with raw pipes, for input no SDK would send.
type rawProxy struct {
	cmd    *exec.Cmd
	stdin  interface{ Write([]byte) (int, error) }
	out    *bufio.Scanner
	stderr *syncBuffer
	close  func() error
}

// syncBuffer is a bytes.Buffer that a process can write while a test reads.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func startRawProxy(t *testing.T, home, name string) *rawProxy {
	t.Helper()
	cmd := exec.Command(gatehouseBin, "proxy", name, "--home", home)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	p := &rawProxy{cmd: cmd, stdin: stdin, stderr: &syncBuffer{}, close: stdin.Close}
	cmd.Stderr = p.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.out = bufio.NewScanner(stdout)
	p.out.Buffer(nil, 64<<20)
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return p
}

func (p *rawProxy) send(t *testing.T, line string) {
	t.Helper()
	if _, err := p.stdin.Write([]byte(line + "\n")); err != nil {
		t.Fatalf("write to proxy: %v", err)
	}
}

// recv reads one line and checks that it is a JSON-RPC message: the proxy's
// stdout carries nothing else.
func (p *rawProxy) recv(t *testing.T) map[string]any {
	t.Helper()
	line := make(chan []byte, 1)
	go func() {
		if p.out.Scan() {
			line <- append([]byte(nil), p.out.Bytes()...)
		}
		close(line)
	}()
	select {
	case l, ok := <-line:
		if !ok {
			t.Fatalf("proxy closed stdout; stderr:\n%s", p.stderr)
		}
		var m map[string]any
		if err := json.Unmarshal(l, &m); err != nil || m["jsonrpc"] != "2.0" {
			t.Fatalf("proxy wrote a non-protocol line to stdout: %.200q", l)
		}
		return m
	case <-time.After(30 * time.Second):
		t.Fatalf("no answer from the proxy within 30s; stderr:\n%s", p.stderr)
	}
	return nil
}

// recvAnswer reads messages until the answer to id, skipping the server's
// notifications and requests.
func (p *rawProxy) recvAnswer(t *testing.T, id float64) map[string]any {
	t.Helper()
	for {
		m := p.recv(t)
		if m["method"] == nil && m["id"] == id {
			return m
		}
	}
}

const initializeLine = `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`

func TestProxyBadInput(t *testing.T) {
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.*")

	t.Run("unknown server", func(t *testing.T) {
		p := startRawProxy(t, home, "nope")
		p.send(t, initializeLine)
		m := p.recv(t)
		if msg := fmt.Sprint(m["error"]); !strings.Contains(msg, `no server named "nope"`) || !strings.Contains(msg, "gatehouse server add") {
			t.Errorf("initialize answer = %v, want an error naming the server and how to add it", m)
		}
		p.close()
		if err := p.cmd.Wait(); err == nil {
			t.Error("proxy for an unknown server exited 0")
		}
	})
	t.Run("command not found", func(t *testing.T) {
		gatehouse(t, home, "server", "add", "ghost", "--", "/nonexistent/bin/mcp-ghost")
		p := startRawProxy(t, home, "ghost")
		p.send(t, initializeLine)
		if msg := fmt.Sprint(p.recv(t)["error"]); !strings.Contains(msg, "/nonexistent/bin/mcp-ghost") || !strings.Contains(msg, "not found") {
			t.Errorf("initialize answer = %v, want the missing command named", msg)
		}
	})
	t.Run("garbage and a 10 MB argument", func(t *testing.T) {
		p := startRawProxy(t, home, "everything")
		p.send(t, initializeLine)
		p.recv(t)
		p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		p.send(t, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
		for m := p.recv(t); m["id"] != "list"; m = p.recv(t) {
		}
		p.send(t, "GET / HTTP/1.1")
		if m := p.recv(t); !strings.Contains(fmt.Sprint(m["error"]), "-32700") {
			t.Errorf("answer to garbage = %v, want a parse error", m)
		}
		// 5 MB passes through and back.
		p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+strings.Repeat("x", 5<<20)+`"}}}`)
		m := p.recvAnswer(t, 1)
		res, _ := m["result"].(map[string]any)
		content, _ := res["content"].([]any)
		if len(content) != 1 || len(fmt.Sprint(content[0])) < 5<<20 {
			t.Errorf("5 MB echo came back as %.200v", m)
		}
		// 10 MB would overflow the server's read buffer and never be
		// answered; the proxy refuses it in a way the model can read.
		p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"`+strings.Repeat("y", 10<<20)+`"}}}`)
		m = p.recvAnswer(t, 2)
		res, _ = m["result"].(map[string]any)
		if res["isError"] != true || !strings.Contains(fmt.Sprint(res["content"]), "Gatehouse refused") || !strings.Contains(fmt.Sprint(res["content"]), "limit") {
			t.Errorf("10 MB call = %.300v, want an isError refusal naming the limit", m)
		}
		p.send(t, `{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"message":"ok"}}}`)
		if m := p.recvAnswer(t, 3); !strings.Contains(fmt.Sprint(m["result"]), "Echo: ok") {
			t.Errorf("echo after bad input = %v", m)
		}
	})
}

// A server that prints its environment (server-everything's get-env) has
// the secrets it was given redacted before the client sees them.
func TestSecretsAreRedacted(t *testing.T) {
	nm := npmPeers(t)
	home := t.TempDir()
	const secret = "sk-live-4f3c2b1a0987654321zz"
	add := exec.Command(gatehouseBin, append([]string{"--home", home, "server", "add", "everything", "--no-quarantine", "--secret-env", "API_KEY", "--"},
		serverCmd(nm, "server-everything")...)...)
	add.Stdin = strings.NewReader(secret + "\n")
	if out, err := add.CombinedOutput(); err != nil {
		t.Fatalf("server add: %v\n%s", err, out)
	}
	allow(t, home, "mcp.everything.get-env")
	p := startRawProxy(t, home, "everything")
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":"list","method":"tools/list"}`)
	for m := p.recv(t); m["id"] != "list"; m = p.recv(t) {
	}
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get-env"}}`)
	m := p.recvAnswer(t, 1)
	got := fmt.Sprint(m)
	if strings.Contains(got, secret) || strings.Contains(got, secret[4:20]) {
		t.Fatalf("the client received the secret: %.300s", got)
	}
	if !strings.Contains(got, "API_KEY") || !strings.Contains(got, "[redacted by Gatehouse: secret everything.API_KEY]") {
		t.Errorf("get-env answer does not show API_KEY redacted: %.500s", got)
	}
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "redacted a secret the server sent") },
		"the proxy's log to note the redaction")
	if strings.Contains(p.stderr.String(), secret) {
		t.Errorf("the proxy's log holds the secret:\n%s", p.stderr)
	}
	// The outcome records the finding (which secret, how encoded), and an
	// export of the log verifies and holds no trace of the value.
	p.close()
	p.cmd.Wait()
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	entries, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`"redactions":\[\{"count":\d+,"encoding":"raw","secret":"everything.API_KEY"\}`).Match(entries) {
		t.Errorf("no outcome records the redaction of everything.API_KEY:\n%s", entries)
	}
	gatehouse(t, home, "verify", bundle)
	// Nothing in the home folder or the export holds it.
	filepath.WalkDir(bundle, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret", path)
			}
		}
		return nil
	})
	filepath.WalkDir(home, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(secret)) {
				t.Errorf("%s holds the secret", path)
			}
		}
		return nil
	})
}

// A proxy killed with SIGKILL mid-session leaves no server behind.
func TestProxyKilledTakesServerDown(t *testing.T) {
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	p := startRawProxy(t, home, "everything")
	p.send(t, initializeLine)
	p.recv(t)
	pid := serverPid(t, p.stderr.String())
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.cmd.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("server %d still runs 5s after its proxy was killed", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A server that does not exit when its stdin closes (server-everything after
// an unanswered roots/list) is still stopped, in bounded time.
func TestProxyStopsStubbornServer(t *testing.T) {
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	p := startRawProxy(t, home, "everything")
	p.send(t, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"raw","version":"1"}}}`)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if m := p.recv(t); m["method"] != "roots/list" {
		t.Logf("server sent %v first", m["method"])
	}
	pid := serverPid(t, p.stderr.String())
	start := time.Now()
	p.close() // never answer roots/list
	if err := p.cmd.Wait(); err != nil {
		t.Errorf("proxy exit: %v\n%s", err, p.stderr)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("proxy took %v to stop", d)
	}
	if syscall.Kill(pid, 0) == nil {
		t.Errorf("server %d still runs after its proxy stopped", pid)
	}
}

// waitFor polls cond until it holds, failing after 10s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

var serverPidRE = regexp.MustCompile(`server_pid=(\d+)`)

func serverPid(t *testing.T, stderr string) int {
	t.Helper()
	m := serverPidRE.FindStringSubmatch(stderr)
	if m == nil {
		t.Fatalf("no server_pid in the proxy's log:\n%s", stderr)
	}
	pid, _ := strconv.Atoi(m[1])
	return pid
}

// The gate end to end, on real processes: with the default policy a call
// that needs approval is denied while no approver runs, and says so; with
// `gatehouse approvals --auto once` running, the same call is approved and
// runs; each decision has its receipt in the evidence log.
func TestGovernedCallEndToEnd(t *testing.T) {
	nm := npmPeers(t)
	home := t.TempDir()
	os.Chmod(home, 0o700) // the approval socket wants a private home, as store.Open makes one
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	p := startRawProxy(t, home, "everything")
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	p.recvAnswer(t, 1)

	echo := `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello gate"}}}`
	p.send(t, fmt.Sprintf(echo, 2))
	res, _ := p.recvAnswer(t, 2)["result"].(map[string]any)
	text := fmt.Sprint(res["content"])
	if res["isError"] != true || !strings.Contains(text, "no approver is running") || !regexp.MustCompile(`Receipt r-[a-z2-7]{19}`).MatchString(text) {
		t.Fatalf("call without an approver = %v, want an isError denial naming the receipt", res)
	}

	approver := exec.Command(gatehouseBin, "--home", home, "approvals", "--auto", "once")
	var approverOut syncBuffer
	approver.Stdout, approver.Stderr = &approverOut, &approverOut
	if err := approver.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { approver.Process.Signal(os.Interrupt); approver.Wait() })
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(home, "approvals.sock")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the approver did not listen within 10s:\n%s", approverOut.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	p.send(t, fmt.Sprintf(echo, 3))
	res, _ = p.recvAnswer(t, 3)["result"].(map[string]any)
	if res["isError"] == true || !strings.Contains(fmt.Sprint(res["content"]), "Echo: hello gate") {
		t.Errorf("approved call = %v, want the server's echo", res)
	}
	if !strings.Contains(approverOut.String(), "echo") {
		t.Errorf("the terminal approver did not show the request:\n%s", approverOut.String())
	}

	// Both decisions have their receipts, the call that ran its outcome,
	// and the log verifies.
	p.close()
	p.cmd.Wait()
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	gatehouse(t, home, "verify", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	var denied, allowed, outcomes int
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Kind string
			Body struct {
				Capability, Decision, Status string
				Approver                     *struct{ Kind, Scope string }
			}
		}
		json.Unmarshal([]byte(line), &e)
		switch {
		case e.Kind == "receipt" && e.Body.Capability == "mcp.everything.echo" && e.Body.Decision == "DENY":
			denied++
		case e.Kind == "receipt" && e.Body.Decision == "ALLOW" && e.Body.Approver != nil && e.Body.Approver.Scope == "once":
			allowed++
		case e.Kind == "outcome" && e.Body.Status == "SUCCEEDED":
			outcomes++
		}
	}
	if denied != 1 || allowed != 1 || outcomes != 1 {
		t.Errorf("log holds %d denied and %d approved receipts and %d outcomes, want 1, 1, 1:\n%s", denied, allowed, outcomes, data)
	}
}
