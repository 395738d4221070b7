package app

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// The client tokens live in the fake keychain beside the secrets.
func (k *fakeKeychain) SetClientToken(client, token string) error {
	return k.SetSecret("serve-token."+client, token)
}

func (k *fakeKeychain) DeleteClientToken(client string) error {
	return k.DeleteSecret("serve-token." + client)
}

// status of an HTTP request to the served address with token.
func httpStatus(t *testing.T, method, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// The Settings start and stop serving over HTTP, show where it serves and
// why it does not, add a token (shown once) that the served endpoint takes
// and revoke it; the Status says where the app serves; closing the app
// stops it.
func TestServeFromSettings(t *testing.T) {
	h := newHarness(t, nil, store.Server{Name: "docs", Transport: store.TransportStdio, Command: "/bin/false"})
	p := h.ui.settings.serve
	done := make(chan string, 1)
	errs := make(chan error, 1)
	p.shown = func(token string, err error) { done <- token; errs <- err }
	next := func(what string) string {
		t.Helper()
		tok, err := <-done, <-errs
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		h.settle()
		return tok
	}
	h.ui.Open(pageSettings)
	h.wait("the serve settings", func() bool { return strings.Contains(objectText(p.content), "Not serving") })
	assertShows(t, objectText(p.content), "Not serving · 0 tokens", "No client has a token yet.")

	// An address in use: the Settings say so, and nothing serves.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	h.locked(func() {
		test.Type(p.listen, busy.Addr().String())
		test.Tap(p.saveServe)
	})
	next("save the address")
	h.locked(func() { test.Tap(p.enabled) })
	<-done
	if err := <-errs; err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Fatalf("serving on a busy address: %v, want address already in use", err)
	}
	h.settle()
	h.wait("the failure shown", func() bool { return strings.Contains(objectText(p.content), "Not serving: ") })
	assertShows(t, objectText(p.content), "address already in use")

	// A free address: it serves, and says where.
	h.locked(func() {
		p.listen.SetText("127.0.0.1:0")
		test.Tap(p.saveServe)
	})
	next("save and start")
	st := h.ui.serve.state()
	if !st.on || !strings.HasPrefix(st.url, "http://127.0.0.1:") {
		t.Fatalf("state = %+v, want serving on loopback", st)
	}
	h.wait("the state", func() bool { return strings.Contains(objectText(p.content), "Serving at "+st.url) })
	assertShows(t, objectText(p.content), "TLS off", "0 sessions open")
	if got := h.ui.status.summary(); !strings.Contains(got, "serving over HTTP at "+st.url) {
		t.Errorf("status = %q, want it to say where the app serves", got)
	}
	if set, _ := h.st.Settings(context.Background()); !set.ServeEnabled || set.ServeListen != "127.0.0.1:0" {
		t.Errorf("settings = %+v, want serve on at 127.0.0.1:0", set)
	}
	if code := httpStatus(t, http.MethodGet, st.url+"/health", ""); code != http.StatusOK {
		t.Fatalf("GET /health = %d, want 200", code)
	}
	if code := httpStatus(t, http.MethodPost, st.url+"/mcp/docs", ""); code != http.StatusUnauthorized {
		t.Errorf("POST without a token = %d, want 401", code)
	}

	// A token, shown once in a dialog with a copy button.
	h.locked(func() {
		test.Type(p.client, "alice-laptop")
		test.Tap(p.addTok)
	})
	token := next("add a token")
	if !strings.HasPrefix(token, "ghs_") {
		t.Fatalf("token = %q", token)
	}
	h.wait("the token listed", func() bool { return strings.Contains(objectText(p.content), "alice-laptop") })
	assertShows(t, h.screen(), "Token for alice-laptop", "shown only this once", "Copy")
	assertShows(t, objectText(p.content), "reaches every server")
	h.locked(func() { test.Tap(findButton(h.ui.Window().Canvas().Overlays().Top(), "Copy")) })
	if got := h.ui.app.Clipboard().Content(); got != token {
		t.Errorf("clipboard = %q, want the token", got)
	}
	h.locked(func() { test.Tap(findButton(h.ui.Window().Canvas().Overlays().Top(), "Done")) })
	if strings.Contains(objectText(p.content), token) {
		t.Error("the Settings show the token after its dialog closed")
	}
	// The served endpoint takes it: past the token, docs (which cannot
	// start) answers within the session, not 401.
	if code := httpStatus(t, http.MethodPost, st.url+"/mcp/docs", token); code == http.StatusUnauthorized || code == 0 {
		t.Errorf("POST with the new token = %d, want it past authentication", code)
	}

	// Revoked: the next request gets 401.
	h.locked(func() { test.Tap(findButton(p.tokens, "Revoke")) })
	next("revoke")
	if code := httpStatus(t, http.MethodPost, st.url+"/mcp/docs", token); code != http.StatusUnauthorized {
		t.Errorf("POST with the revoked token = %d, want 401", code)
	}
	assertShows(t, objectText(p.content), "is revoked", "No client has a token yet.")

	// Off: it stops listening.
	h.locked(func() { test.Tap(p.enabled) })
	next("stop")
	if code := httpStatus(t, http.MethodGet, st.url+"/health", ""); code != 0 {
		t.Errorf("GET /health after stop = %d, want no answer", code)
	}
	h.wait("the state", func() bool { return strings.Contains(objectText(p.content), "Not serving · 0 tokens") })
	if got := h.ui.status.summary(); strings.Contains(got, "serving") {
		t.Errorf("status = %q after stop, want no word of serving", got)
	}

	// Closing the app stops it too.
	h.locked(func() { test.Tap(p.enabled) })
	next("start again")
	st = h.ui.serve.state()
	h.ui.Close()
	if code := httpStatus(t, http.MethodGet, st.url+"/health", ""); code != 0 {
		t.Errorf("GET /health after the app closed = %d, want no answer", code)
	}
}

// The evidence settings are checked and saved as the CLI reads them; a
// header's value given in clear is refused and never stored.
func TestEvidenceOutSettings(t *testing.T) {
	h := newHarness(t, nil)
	p := h.ui.settings.serve
	errs := make(chan error, 1)
	p.shown = func(_ string, err error) { errs <- err }
	h.ui.Open(pageSettings)
	h.wait("the serve settings", func() bool { return strings.Contains(objectText(p.content), "Not serving") })
	h.locked(func() {
		test.Type(p.otlp, "http://127.0.0.1:4318")
		test.Type(p.header, "Authorization=Bearer s3cr3t")
		test.Tap(p.saveExport)
	})
	if err := <-errs; err == nil {
		t.Fatal("a header in clear was saved")
	}
	h.settle()
	if got := objectText(p.content); !strings.Contains(got, "vault://secret/ID") || strings.Contains(got, "Not saved: ") && strings.Contains(got[strings.Index(got, "Not saved: "):], "s3cr3t") {
		t.Errorf("the Settings say %q; want the refusal to name vault://secret/ID and not repeat the value", got)
	}
	h.locked(func() {
		p.header.SetText("Authorization=vault://secret/otel-auth")
		test.Type(p.syslog, "tcp://127.0.0.1:601")
		test.Tap(p.exportOn) // off: kept, not sent
		test.Tap(p.saveExport)
	})
	if err := <-errs; err != nil {
		t.Fatal(err)
	}
	set, _ := h.st.Settings(context.Background())
	if len(set.ExportOTLP) != 1 || set.ExportOTLP[0] != "http://127.0.0.1:4318" || set.ExportSyslog[0] != "tcp://127.0.0.1:601" ||
		set.ExportOTLPHeaders["Authorization"] != "vault://secret/otel-auth" || set.ExportOff != !p.exportOn.Checked {
		t.Errorf("settings = %+v", set)
	}
}
