package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// startServe runs gatehouse serve on a free loopback port and returns its
// base URL.
func startServe(t *testing.T, home string, args ...string) string {
	t.Helper()
	cmd := exec.Command(gatehouseBin, append([]string{"--home", home, "serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(os.Interrupt); cmd.Wait() })
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`serving (http://[0-9.:]+)/mcp/NAME`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case u := <-found:
		return u
	case <-time.After(30 * time.Second):
		t.Fatal("gatehouse serve did not start")
		return ""
	}
}

// inspectorHTTP runs the MCP Inspector CLI against a URL, with headers;
// it returns its output and whether it exited 0.
func inspectorHTTP(t *testing.T, nm, url string, headers []string, method ...string) (string, bool) {
	t.Helper()
	args := []string{"--cli", "--format", "json", url, "--transport", "http"}
	for _, h := range headers {
		args = append(args, "--header", h)
	}
	args = append(args, method...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(nm, ".bin", "mcp-inspector"), args...)
	cmd.Dir = filepath.Dir(nm)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		// Refusals are told on either stream.
		return string(out) + stderr.String(), false
	}
	return string(out), true
}

var receiptID = regexp.MustCompile(`r-[a-z0-9]{10,}`)

// denyRule adds a policy rule that denies capability in home.
func denyRule(tb testing.TB, home, capability string) {
	tb.Helper()
	ctx := context.Background()
	c := &cli{home: home, stderr: io.Discard}
	st, l, err := c.openLog(ctx)
	if err != nil {
		tb.Fatal(err)
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
	p.Rules = append(p.Rules, policy.Rule{ID: "test-deny", Capability: capability, Decision: policy.Deny})
	if _, err := ps.Save(ctx, p); err != nil {
		tb.Fatal(err)
	}
}

// The MCP Inspector reaches a server through gatehouse serve with a token
// and gets what it gets from the server directly, and a denied call says
// what it says over stdio; without a token, or with a revoked one, it gets
// 401; a wrong Origin gets 403; /health answers.
func TestServeWithInspector(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.echo")
	denyRule(t, home, "mcp.everything.get-sum")
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "inspector"))
	base := startServe(t, home)
	url := base + "/mcp/everything"
	auth := []string{"Authorization: Bearer " + token}

	list, ok := inspectorHTTP(t, nm, url, auth, "--method", "tools/list")
	direct := inspector(t, nm, nil, serverCmd(nm, "server-everything"), "--method", "tools/list")
	var a, b any
	if !ok || json.Unmarshal([]byte(list), &a) != nil || json.Unmarshal([]byte(direct), &b) != nil {
		t.Fatalf("tools/list through serve: %s", list)
	}
	an, _ := json.Marshal(a)
	if string(an) != direct {
		t.Errorf("tools/list through serve differs from the server's own:\n%s\n%s", an, direct)
	}
	echo, _ := inspectorHTTP(t, nm, url, auth, "--method", "tools/call", "--tool-name", "echo", "--tool-arg", "message=hi")
	if !strings.Contains(echo, "Echo: hi") {
		t.Errorf("echo through serve: %s", echo)
	}
	// A call the policy does not allow: the same words as over stdio.
	denied, _ := inspectorHTTP(t, nm, url, auth, "--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=1", "b=2")
	stdio := inspector(t, nm, keychainEnv(), []string{gatehouseBin, "proxy", "everything", "--home", home, "--client", "inspector"},
		"--method", "tools/call", "--tool-name", "get-sum", "--tool-arg", "a=1", "b=2")
	if !strings.Contains(denied, "Gatehouse") || !strings.Contains(denied, `"isError": true`) && !strings.Contains(denied, `"isError":true`) {
		t.Errorf("a denied call through serve: %s", denied)
	}
	var d any
	json.NewDecoder(strings.NewReader(denied)).Decode(&d) // the result, then the Inspector's own error
	dn, _ := json.Marshal(d)
	if got, want := receiptID.ReplaceAllString(string(dn), "r-ID"), receiptID.ReplaceAllString(stdio, "r-ID"); got != want {
		t.Errorf("a denied call through serve says\n%s\nover stdio\n%s", got, want)
	}

	// The Inspector reads a 401 as a call to sign in (auth_required).
	refused401 := func(out string) bool { return strings.Contains(out, "401") || strings.Contains(out, "auth_required") }
	if out, ok := inspectorHTTP(t, nm, url, nil, "--method", "tools/list"); ok || !refused401(out) {
		t.Errorf("without a token: ok=%v %s", ok, out)
	}
	gatehouse(t, home, "serve", "token", "revoke", "inspector")
	if out, ok := inspectorHTTP(t, nm, url, auth, "--method", "tools/list"); ok || !refused401(out) {
		t.Errorf("with a revoked token: ok=%v %s", ok, out)
	}

	req, _ := http.NewRequest("POST", url, strings.NewReader(`{}`))
	req.Header.Set("Origin", "http://evil.example")
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 403 {
		t.Errorf("a wrong Origin: %v %v", resp, err)
	}
	if resp, err := http.Get(base + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/health: %v %v", resp, err)
	}
}

// Claude Code adds a server over HTTP with a token and connects through
// gatehouse serve; without the token it does not.
func TestServeWithClaudeCode(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--"}, serverCmd(nm, "server-everything")...)...)
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "claude-code"))
	base := startServe(t, home)
	userHome := t.TempDir()
	claude := filepath.Join(nm, ".bin", "claude")
	env := append(os.Environ(), "HOME="+userHome, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
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
	run("mcp", "add", "--transport", "http", "everything", base+"/mcp/everything", "--header", "Authorization: Bearer "+token)
	run("mcp", "add", "--transport", "http", "tokenless", base+"/mcp/everything")
	out := run("mcp", "list")
	if !regexp.MustCompile(`everything: \S+/mcp/everything \(HTTP\) - ✔ Connected`).MatchString(out) {
		t.Errorf("claude mcp list:\n%s\nwant everything ✔ Connected through gatehouse serve", out)
	}
	if regexp.MustCompile(`tokenless: .*✔ Connected`).MatchString(out) {
		t.Errorf("claude mcp list:\n%s\nwant tokenless not connected", out)
	}
	if strings.Contains(out, token) {
		t.Error("claude mcp list shows the token")
	}
}
