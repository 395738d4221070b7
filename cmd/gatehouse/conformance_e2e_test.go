package main

import (
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// conformance runs the MCP conformance suite's server scenarios (the
// active suite of @modelcontextprotocol/conformance) against url, and
// returns the status of each check by scenario/check.
func conformance(t *testing.T, nm, url string) map[string]string {
	t.Helper()
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(nm, ".bin", "conformance"), "server", "--url", url, "-o", out)
	cmd.Dir = out
	log, err := cmd.CombinedOutput()
	// It exits 1 when any check fails; the checks are compared below.
	if _, exit := err.(*exec.ExitError); err != nil && !exit {
		t.Fatalf("conformance server --url %s: %v\n%s", url, err, log)
	}
	dirs, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	scenario := regexp.MustCompile(`^server-(.+)-\d{4}-\d\d-\d\dT[0-9-]+Z$`)
	checks := map[string]string{}
	for _, d := range dirs {
		m := scenario.FindStringSubmatch(d.Name())
		if m == nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(out, d.Name(), "checks.json"))
		if err != nil {
			t.Fatal(err)
		}
		var list []struct {
			ID     string `json:"id"`
			Status string `json:"status"`
			Error  string `json:"errorMessage"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			t.Fatalf("%s: %v", d.Name(), err)
		}
		for _, c := range list {
			checks[m[1]+"/"+c.ID] = c.Status
		}
	}
	if len(checks) < 20 {
		t.Fatalf("conformance against %s gave %d checks:\n%s", url, len(checks), log)
	}
	return checks
}

// withToken is a loopback reverse proxy that adds a client's token to
// each request: the conformance suite sends no headers of its own. The
// Host and Origin headers go through as they came.
func withToken(t *testing.T, target, token string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			r.Out.Host = r.In.Host
			r.Out.Header.Set("Authorization", "Bearer "+token)
		},
		FlushInterval: -1, // server-sent events as they come
	}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

// The MCP conformance suite passes the same checks through gatehouse
// serve as against server-everything over streamable HTTP directly (the
// suite is written against its own test server, so some checks fail
// either way). One check differs on purpose: gatehouse serve refuses a
// request whose Host is not its own (DNS rebinding), which
// server-everything lets through.
func TestConformanceThroughServe(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	if _, err := os.Stat(filepath.Join(nm, ".bin", "conformance")); err != nil {
		t.Fatalf("the conformance suite is not installed (%v)\nhint: .ci/deps.sh test", err)
	}

	// server-everything over streamable HTTP, directly.
	addr := freeAddr(t)
	_, port, _ := strings.Cut(addr, ":")
	ev := exec.Command("node", serverCmd(nm, "server-everything", "streamableHttp")[1:]...)
	ev.Env = append(os.Environ(), "PORT="+port)
	evLog := &syncBuffer{}
	ev.Stdout, ev.Stderr = evLog, evLog
	if err := ev.Start(); err != nil {
		t.Fatal(err)
	}
	evDone := make(chan struct{})
	go func() { ev.Wait(); close(evDone) }()
	t.Cleanup(func() { ev.Process.Kill(); <-evDone })
	listening(t, addr, evDone, evLog)
	direct := conformance(t, nm, "http://"+addr+"/mcp")

	const rebinding = "dns-rebinding-protection/localhost-host-rebinding-rejected"

	// The same server, over stdio behind gatehouse serve, every tool
	// allowed.
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--no-quarantine", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.*")
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "conformance"))
	srv := startServed(t, home)
	target := withToken(t, srv.URL, token) + "/mcp/everything"
	served := conformance(t, nm, target)
	// The suite's checks have timeouts of their own, which a loaded machine
	// can miss (a session through serve starts its own server). A check
	// that differs is run again, twice at most: a real difference differs
	// every time.
	for range 2 {
		again := false
		for k, d := range direct {
			if k != rebinding && served[k] != d {
				again = true
			}
		}
		if !again {
			break
		}
		for k, v := range conformance(t, nm, target) {
			if v == direct[k] {
				served[k] = v
			}
		}
	}

	var passed, differ []string
	for _, k := range sortedKeys(direct, served) {
		d, s := direct[k], served[k]
		if d == "SUCCESS" {
			passed = append(passed, k)
		}
		switch {
		case k == rebinding:
			if s != "SUCCESS" {
				t.Errorf("%s through gatehouse serve = %s, want SUCCESS (it refuses a foreign Host)", k, s)
			}
		case d != s:
			differ = append(differ, fmt.Sprintf("%s: directly %s, through gatehouse serve %s", k, orNone(d), orNone(s)))
		}
	}
	if len(differ) > 0 {
		t.Errorf("the conformance checks differ:\n%s", strings.Join(differ, "\n"))
	}
	t.Logf("%d checks, %d passed directly and through gatehouse serve alike", len(direct), len(passed))
}

func sortedKeys(ms ...map[string]string) []string {
	var keys []string
	for _, m := range ms {
		for k := range m {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

func orNone(s string) string {
	if s == "" {
		return "absent"
	}
	return s
}
