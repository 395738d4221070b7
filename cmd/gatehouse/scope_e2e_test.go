package main

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// A token made with --server reaches that server through gatehouse serve,
// and gets 403, saying why, at any other server's endpoint; token list says
// which servers each token reaches.
func TestServeTokenScope(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	home := t.TempDir()
	for _, name := range []string{"everything", "other"} {
		gatehouse(t, home, append([]string{"server", "add", name, "--"}, serverCmd(nm, "server-everything")...)...)
	}
	allow(t, home, "mcp.everything.echo")
	scoped := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "deploy", "--server", "everything"))
	gatehouse(t, home, "serve", "token", "add", "laptop")
	if out, err := exec.Command(gatehouseBin, "--home", home, "serve", "token", "add", "typo", "--server", "nosuch").CombinedOutput(); err == nil ||
		!strings.Contains(string(out), `"nosuch" is not a registered server`) {
		t.Errorf("token add --server nosuch: %v\n%s\nwant a refusal naming nosuch", err, out)
	}
	list := gatehouse(t, home, "serve", "token", "list")
	if !regexp.MustCompile(`(?m)^deploy\s+ghs_\S+\s+everything\s`).MatchString(list) || !regexp.MustCompile(`(?m)^laptop\s+ghs_\S+\s+all\s`).MatchString(list) {
		t.Errorf("token list:\n%s\nwant deploy reaching everything and laptop all", list)
	}

	srv := startServed(t, home)
	cs := connectHTTP(t, srv.URL+"/mcp/everything", scoped)
	callTools(t, cs, "scoped", 1)

	for _, path := range []string{"/mcp/other", "/metrics"} {
		method, body := http.MethodPost, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"x","version":"1"}}}`)
		if path == "/metrics" {
			method, body = http.MethodGet, strings.NewReader("")
		}
		req, _ := http.NewRequest(method, srv.URL+path, body)
		req.Header.Set("Authorization", "Bearer "+scoped)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(b.String(), `the token of \"deploy\"`) {
			t.Errorf("%s with deploy's token: %d %s; want 403 naming deploy", path, resp.StatusCode, b.String())
		}
	}
}

// gatehouse serve sends the collector's bearer token, read from the
// keychain, with every OTLP request, when the home's settings name it by
// reference: the collector requires it, and gets every record; the token
// is in no file of the home folder.
func TestOTelCollectorWithABearerToken(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	otelcolBin(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.echo")
	denyRule(t, home, "mcp.everything.get-sum")
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "agent"))

	const collectorToken = "otel-Zq9-collector-token"
	set := exec.Command(gatehouseBin, "--home", home, "secret", "set", "otel-auth")
	set.Stdin = strings.NewReader("Bearer " + collectorToken + "\n")
	if out, err := set.CombinedOutput(); err != nil {
		t.Fatalf("secret set: %v\n%s", err, out)
	}

	dir := t.TempDir()
	addr := freeAddr(t)
	file := filepath.Join(dir, "records.json")
	startCollector(t, addr, file, collectorToken)
	// The collector really wants the token.
	resp, err := http.Post("http://"+addr+"/v1/logs", "application/json", strings.NewReader(`{"resourceLogs":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a request without the token got %d from the collector, want 401", resp.StatusCode)
	}

	// The app's Settings write these.
	ctx := context.Background()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(st.SetExportOTLP(ctx, []string{"http://" + addr}),
		st.SetExportOTLPHeaders(ctx, map[string]string{"Authorization": "vault://secret/otel-auth"})); err != nil {
		t.Fatal(err)
	}
	st.Close()

	srv := startServed(t, home)
	cs := connectHTTP(t, srv.URL+"/mcp/everything", token)
	callTools(t, cs, "with a token", 2)
	want := evidenceOf(t, home, 2*2+1)
	waitUntil(t, 60*time.Second, "every record at the collector", func() bool {
		logs, _, _ := received(t, file)
		return containsAll(logs, want)
	})
	srv.Stop()

	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if b, _ := os.ReadFile(path); bytes.Contains(b, []byte(collectorToken)) {
			t.Errorf("%s holds the collector's token", path)
		}
		return nil
	})
}
