package app

import (
	"context"
	"crypto"
	"crypto/ed25519"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/mcptest"
	"github.com/gatehouse-dev/gatehouse/internal/seed"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// The test binary doubles as a small MCP server over stdio, for Test
// connection: its tools' descriptions say what $TOKEN it was started with.
const roleEnv = "GATEHOUSE_APP_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "server" {
		serveMCP()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serveMCP() {
	desc, _ := json.Marshal("started with token " + os.Getenv("TOKEN"))
	mcptest.Serve(os.Stdin, os.Stdout, map[string]string{
		"initialize": `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"test-server","version":"1.2"}}`,
		"tools/list": `{"tools":[{"name":"read_notes","description":` + string(desc) + `,"inputSchema":{"type":"object"}},` +
			`{"name":"delete_notes","description":"Delete every note.","inputSchema":{"type":"object"}}]}`,
	})
}

// wait runs until cond holds, letting the UI's reads land, or fails.
func (h *harness) wait(what string, cond func() bool) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		var ok bool
		h.locked(func() { ok = h.ui.inflight.Load() == 0 && cond() })
		if ok {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not within 15s; the window shows:\n%s", what, h.screen())
		}
		time.Sleep(5 * time.Millisecond) // reads land on their own goroutines
	}
}

// settle waits until every read of the UI has reached the window: what
// the test does next races with nothing.
func (h *harness) settle() {
	h.t.Helper()
	h.wait("the reads", func() bool { return true })
}

// seeded seeds the harness's home, signing with the keychain's key, and
// returns the log.
func (h *harness) seeded(calls int) *receipts.Log {
	h.t.Helper()
	ctx := context.Background()
	key, _ := h.kc.SigningKey()
	l, err := receipts.Open(ctx, h.st, key)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := seed.Home(ctx, h.st, l, &seed.Options{Calls: calls, Secrets: h.kc, Seed: 3}); err != nil {
		h.t.Fatal(err)
	}
	return l
}

func TestViewsFitTheWindow(t *testing.T) {
	h := newHarness(t, nil, everything)
	h.seeded(20)
	for _, v := range h.ui.shell.views {
		h.locked(func() { h.ui.shell.open(v.id) })
		h.settle()
		h.locked(func() {
			room := windowMinSize.SubtractWidthHeight(2*theme.Padding(), 2*theme.Padding())
			if got := h.ui.shell.content.MinSize(); got.Width > room.Width || got.Height > room.Height {
				t.Errorf("with %s on screen the window needs %v, more than the %v of the smallest window", v.id, got, room)
			}
		})
	}
}

func TestNavigation(t *testing.T) {
	h := newHarness(t, nil)
	for _, v := range h.ui.shell.views {
		h.settle()
		h.locked(func() { test.Tap(v.item) })
		if h.ui.shell.current != v || !v.content.Visible() {
			t.Errorf("a tap on %q does not show its view", v.label)
		}
		for _, o := range h.ui.shell.views {
			if o != v && o.content.Visible() {
				t.Errorf("with %s on screen, %s is visible too", v.id, o.id)
			}
		}
	}
	for _, name := range Views {
		h.settle()
		h.locked(func() { h.ui.Open(name) })
		if h.ui.shell.current.id != name {
			t.Errorf("Open(%q) shows %s", name, h.ui.shell.current.id)
		}
	}
}

// --- Servers

// openServerForm opens the form to add a server.
func (h *harness) openServerForm() *serverForm {
	h.t.Helper()
	test.Tap(findButton(h.ui.view.content, "Add server"))
	if h.ui.view.lastForm == nil {
		h.t.Fatalf("no server form on screen:\n%s", h.screen())
	}
	return h.ui.view.lastForm
}

func TestAddServer(t *testing.T) {
	h := newHarness(t, nil)
	f := h.openServerForm()
	test.Type(f.name, "notes")
	test.Type(f.command, `npx -y @acme/notes-mcp --dir "/srv/my notes"`)
	test.Type(f.env, "NOTES_REGION=eu\n")
	f.addCred("", false)
	test.Type(f.creds[0].key, "NOTES_TOKEN")
	test.Type(f.creds[0].value, "s3cret-value")
	test.Tap(f.save)
	h.wait("the server is added", func() bool {
		return slices.ContainsFunc(h.ui.view.servers, func(s store.Server) bool { return s.Name == "notes" })
	})

	s, err := h.st.Server(context.Background(), "notes")
	if err != nil {
		t.Fatal(err)
	}
	if s.Command != "npx" || !slices.Equal(s.Args, []string{"-y", "@acme/notes-mcp", "--dir", "/srv/my notes"}) {
		t.Errorf("registered %q %q, want the command line split as a shell would", s.Command, s.Args)
	}
	if s.Env["NOTES_REGION"] != "eu" || s.Env["NOTES_TOKEN"] != vault.Ref("notes.NOTES_TOKEN") {
		t.Errorf("env = %v, want NOTES_REGION in plain and NOTES_TOKEN as a keychain reference", s.Env)
	}
	if got := h.kc.snapshot()["notes.NOTES_TOKEN"]; got != "s3cret-value" {
		t.Errorf("keychain holds %q for notes.NOTES_TOKEN, want the value typed", got)
	}
	ids, _ := h.st.SecretIDs(context.Background())
	if len(ids) != 1 || ids[0].ID != "notes.NOTES_TOKEN" {
		t.Errorf("store notes secrets %v, want notes.NOTES_TOKEN", ids)
	}
	assertHides(t, h.screen(), "s3cret-value")
	assertShows(t, h.page(), "notes", "NOTES_TOKEN  (in the keychain as")
}

func TestAddServerBadInput(t *testing.T) {
	tests := []struct {
		name  string
		fill  func(f *serverForm)
		error string
	}{
		{"name with a space", func(f *serverForm) { test.Type(f.name, "my server"); test.Type(f.command, "x") }, "Invalid server name"},
		{"no command", func(f *serverForm) { test.Type(f.name, "x") }, "type the command"},
		{"unclosed quote", func(f *serverForm) { test.Type(f.name, "x"); test.Type(f.command, `run "oops`) }, "double quote is not closed"},
		{"bad environment line", func(f *serverForm) {
			test.Type(f.name, "x")
			test.Type(f.command, "run")
			test.Type(f.env, "JUSTAKEY")
		}, "want NAME=VALUE"},
		{"credential without value", func(f *serverForm) {
			test.Type(f.name, "x")
			test.Type(f.command, "run")
			f.addCred("TOKEN", false)
			f.creds[0].key.SetText("TOKEN")
		}, "type its value"},
		{"remote without URL", func(f *serverForm) {
			test.Type(f.name, "x")
			f.kind.SetSelected(kindHTTP)
		}, "is not an http or https address"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			f := h.openServerForm()
			tt.fill(f)
			test.Tap(f.save)
			if got := f.errText.String(); !strings.Contains(got, tt.error) || !f.errPanel.Visible() {
				t.Errorf("form says %q, want %q", got, tt.error)
			}
			if servers, _ := h.st.Servers(context.Background()); len(servers) != 0 {
				t.Errorf("registered %v despite the mistake", servers)
			}
			if len(h.kc.snapshot()) != 0 {
				t.Error("stored a secret despite the mistake")
			}
		})
	}
}

func TestAddServerWithoutKeychain(t *testing.T) {
	h := newHarness(t, nil)
	h.kc.fail(errLocked)
	f := h.openServerForm()
	test.Type(f.name, "notes")
	test.Type(f.command, "notes-mcp")
	f.addCred("", false)
	test.Type(f.creds[0].key, "TOKEN")
	test.Type(f.creds[0].value, "s3cret")
	test.Tap(f.save)
	h.wait("the form says why", func() bool { return f.errPanel.Visible() })
	if got := f.errText.String(); !strings.Contains(got, "keychain") || !strings.Contains(got, "Nothing was saved") || !strings.Contains(got, "gnome-keyring") {
		t.Errorf("form says %q, want the keychain problem, that nothing was saved, and what to install", got)
	}
	if servers, _ := h.st.Servers(context.Background()); len(servers) != 0 {
		t.Errorf("registered %v without its credential", servers)
	}
}

func TestEditAndRemoveServer(t *testing.T) {
	h := newHarness(t, nil)
	ctx := context.Background()
	s := store.Server{Name: "notes", Transport: store.TransportStdio, Command: "notes-mcp",
		Env: map[string]string{"TOKEN": vault.Ref("notes.TOKEN"), "OLD": vault.Ref("notes.OLD")}}
	if err := h.st.AddServer(ctx, s); err != nil {
		t.Fatal(err)
	}
	h.kc.SetSecret("notes.TOKEN", "first")
	h.kc.SetSecret("notes.OLD", "gone-soon")
	h.tapRefresh()

	// Edit: the credentials show as kept; TOKEN keeps its value (left
	// empty), OLD is removed, a plain variable is added.
	h.ui.view.openForm(&s)
	f := h.ui.view.lastForm
	if f.name.Disabled() == false {
		t.Error("the name can be edited: it is in capability names and client configs")
	}
	if len(f.creds) != 2 {
		t.Fatalf("form shows %d credentials, want 2", len(f.creds))
	}
	for _, c := range f.creds {
		if c.value.Text != "" || !c.stored {
			t.Errorf("credential %s shows %q; want it kept in the keychain, not shown", c.key.Text, c.value.Text)
		}
		if c.key.Text == "OLD" {
			c.removed = true
		}
	}
	test.Type(f.env, "MODE=fast")
	test.Tap(f.save)
	h.wait("the edit is saved", func() bool {
		got, _ := h.st.Server(ctx, "notes")
		return got.Env["MODE"] == "fast"
	})
	got, _ := h.st.Server(ctx, "notes")
	if got.Env["TOKEN"] != vault.Ref("notes.TOKEN") || got.Env["OLD"] != "" {
		t.Errorf("env after edit = %v, want TOKEN kept and OLD gone", got.Env)
	}
	sec := h.kc.snapshot()
	if sec["notes.TOKEN"] != "first" {
		t.Errorf("notes.TOKEN = %q after an edit that left it empty, want it kept", sec["notes.TOKEN"])
	}
	if _, ok := sec["notes.OLD"]; ok {
		t.Error("the removed credential is still in the keychain")
	}

	// Remove: its credentials leave the keychain.
	h.locked(func() { h.ui.view.remove(got) })
	confirm := findButton(h.ui.win.Canvas().Overlays().Top(), "Remove")
	if confirm == nil {
		t.Fatalf("no confirmation:\n%s", h.screen())
	}
	test.Tap(confirm)
	h.wait("the server is removed", func() bool { _, err := h.st.Server(ctx, "notes"); return errors.Is(err, store.ErrNotFound) })
	if len(h.kc.snapshot()) != 0 {
		t.Errorf("keychain after remove = %v, want empty", h.kc.snapshot())
	}
}

func TestTestConnection(t *testing.T) {
	h := newHarness(t, nil)
	s := store.Server{Name: "notes", Transport: store.TransportStdio, Command: os.Args[0],
		Env: map[string]string{roleEnv: "server", "TOKEN": vault.Ref("notes.TOKEN")}}
	if err := h.st.AddServer(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	h.kc.SetSecret("notes.TOKEN", "tok-42")
	h.tapRefresh()
	test.Tap(h.ui.view.detail.testBtn)
	h.wait("the test's result", func() bool { return h.ui.view.health["notes"].at != (time.Time{}) })
	h.wait("the tools", func() bool { return len(h.ui.view.detail.tools) == 2 })
	page := h.page()
	assertShows(t, page, "Connected in", "2 tools (test-server 1.2", "read_notes", "delete_notes", "Critical risk", "Low risk", "not listed through a proxy yet")
	// The server got the credential from the keychain.
	if d := h.ui.view.detail.tools[1].Description; d != "started with token tok-42" {
		t.Errorf("read_notes says %q, want it started with the keychain's token", d)
	}

	// A server that cannot start says so, with what to check.
	s.Command = "/nonexistent/notes-mcp"
	h.st.UpdateServer(context.Background(), s)
	h.tapRefresh()
	test.Tap(h.ui.view.detail.testBtn)
	h.wait("the failure", func() bool { return h.ui.view.health["notes"].err != nil })
	assertShows(t, h.page(), "Could not connect:", "Check the command")
}

func TestToolsAndPins(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(10)
	h.tapRefresh()
	h.locked(func() { h.ui.view.selectServer("github") })
	h.wait("github's tools", func() bool {
		return slices.ContainsFunc(h.ui.view.detail.tools, func(t gate.ToolStatus) bool { return t.Name == "delete_branch" })
	})
	page := h.page()
	assertShows(t, page, "delete_branch", "Deny", "rule no-github-deletes", "create_issue", "✓ pinned", "Review change")
	// The changed tool shows what changed.
	for _, tl := range h.ui.view.detail.tools {
		if tl.Pin == gate.Changed {
			h.ui.view.detail.showChange(tl)
		}
	}
	assertShows(t, h.screen(), "What changed in delete_branch", "id_ed25519")
}

// --- Policy

func TestPolicyView(t *testing.T) {
	h := newHarness(t, nil, everything)
	h.ui.Open(pagePolicy)
	p := h.ui.policy
	h.wait("the policy", func() bool { return p.pol != nil })
	assertShows(t, objectText(p.content), "The built-in policy", "Defaults by risk", "0 rules")

	// A default changed saves a version, recorded in the evidence log.
	p.defaults[policy.Medium].SetSelected("Deny")
	h.wait("version 1", func() bool { return p.pol.Version == 1 })
	if p.pol.Defaults[policy.Medium] != policy.Deny {
		t.Errorf("medium default = %s, want DENY", p.pol.Defaults[policy.Medium])
	}
	l, _ := h.ui.core.evidence(context.Background())
	if page, _ := l.Search(context.Background(), receipts.Query{Kind: "policy"}); len(page.Hits) != 1 {
		t.Errorf("policy entries in the log = %d, want 1", len(page.Hits))
	}

	// A rule added in the editor.
	p.openRule(nil)
	dlg := h.ui.win.Canvas().Overlays().Top()
	var entries []*widget.Entry
	walkVisible(dlg, func(o fyne.CanvasObject) {
		if e, ok := o.(*widget.Entry); ok {
			entries = append(entries, e)
		}
	})
	test.Type(entries[0], "no-deletes")
	test.Type(entries[1], "mcp.everything.delete_*")
	var radio *widget.RadioGroup
	walkVisible(dlg, func(o fyne.CanvasObject) {
		if r, ok := o.(*widget.RadioGroup); ok {
			radio = r
		}
	})
	radio.SetSelected("Deny")
	test.Tap(findButton(dlg, "Save"))
	h.wait("the rule", func() bool { return p.pol.Rule("no-deletes") != nil })
	assertShows(t, objectText(p.content), "tools delete_* on everything", "1 rule", "Version 2")

	// Explain a sample call.
	p.exServer.SetText("everything")
	test.Type(p.exTool, "delete_all")
	test.Tap(findButton(p.content, "Explain"))
	assertShows(t, objectText(p.content), "Deny", "by rule no-deletes")
	p.exTool.SetText("")
	test.Type(p.exTool, "get_thing")
	test.Type(p.exArgs, `{"not json`)
	test.Tap(findButton(p.content, "Explain"))
	assertShows(t, objectText(p.content), "The arguments are not a JSON object")
}

func TestPolicyWithoutKeychain(t *testing.T) {
	h := newHarness(t, nil, everything)
	h.kc.fail(errLocked)
	h.ui.core.log.Store(nil) // as if the app started with the keychain locked
	h.ui.Open(pagePolicy)
	p := h.ui.policy
	h.wait("the policy", func() bool { return p.pol != nil }) // reading needs no keychain
	var saveErr error
	done := make(chan struct{})
	next := p.pol.Clone()
	next.Default = policy.Deny
	p.save(next, func(err error) { saveErr = err; close(done) })
	<-done
	if !errors.Is(saveErr, vault.ErrUnavailable) {
		t.Errorf("saving with the keychain locked = %v, want ErrUnavailable", saveErr)
	}
	if got := explain("save", saveErr); !strings.Contains(got.hint, "gnome-keyring") {
		t.Errorf("the hint = %q, want what to install or unlock", got.hint)
	}
	ps, _ := h.ui.core.policies(context.Background())
	if v, _ := ps.CurrentVersion(context.Background()); v != 0 {
		t.Errorf("version %d in force after a save that could not be recorded, want none", v)
	}
}

// --- History

// openHistory opens the history and waits for its first page.
func (h *harness) openHistory() *historyPage {
	h.t.Helper()
	p := h.ui.history
	searched := make(chan struct{}, 1)
	p.searched = h.signal(searched)
	h.ui.Open(pageHistory)
	select {
	case <-searched:
	case <-time.After(15 * time.Second):
		h.t.Fatalf("no history within 15s:\n%s", h.screen())
	}
	h.settle()
	return p
}

// search types s into the history's search box, lets the debounce pass,
// and waits for the result.
func (h *harness) search(p *historyPage, s string) {
	h.t.Helper()
	searched := make(chan struct{}, 1)
	p.searched = h.signal(searched)
	p.search.SetText("")
	test.Type(p.search, s)
	h.clock.Advance(searchDebounce)
	select {
	case <-searched:
	case <-time.After(15 * time.Second):
		h.t.Fatalf("no search result within 15s")
	}
	h.settle()
}

func TestHistory(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(120)
	h.useClock()
	p := h.openHistory()
	if len(p.hl.hits) != 120 || p.hl.more {
		t.Fatalf("the list holds %d calls (more: %v), want the 120 made", len(p.hl.hits), p.hl.more)
	}
	list := objectText(p.content)
	assertShows(t, list, "120 calls", "Allowed", "Denied", "✓ succeeded", "today", "claude-code")

	// Search as you type: nothing runs until the typing pauses.
	before := p.gen
	test.Type(p.search, "postg")
	if p.gen != before {
		t.Error("a search ran at each keystroke, before the typing paused")
	}
	h.search(p, "postgres")
	if len(p.hl.hits) == 0 || slices.ContainsFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Server != "postgres" }) {
		t.Errorf("search postgres: %d hits, some of another server", len(p.hl.hits))
	}
	// A word in the arguments, typed part way.
	h.search(p, "refund")
	for _, x := range p.hl.hits {
		s, _ := l.EntryByID(context.Background(), x.ID)
		if !strings.Contains(string(s.Payloads[0].Data), "refund") {
			t.Errorf("search refund found %s, whose arguments do not say it", x.ID)
		}
	}
	h.search(p, "zzzz-nothing")
	assertShows(t, objectText(p.content), "Nothing matches")
	h.search(p, "")

	// Filters.
	p.decision.SetSelected("Denied")
	h.wait("denied calls", func() bool {
		return len(p.hl.hits) > 0 && !slices.ContainsFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Decision != entry.Deny })
	})
	p.decision.SetSelected("Any decision")
	p.server.SetSelected("github")
	h.wait("github's calls", func() bool {
		return len(p.hl.hits) > 0 && !slices.ContainsFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Server != "github" })
	})
	p.server.SetSelected(allServers)
	p.all.SetChecked(true)
	h.wait("every entry", func() bool {
		return slices.ContainsFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Kind == entry.KindOutcome })
	})
	p.all.SetChecked(false)
	h.wait("calls again", func() bool { return len(p.hl.hits) == 120 })

	// The chart counts the calls of the period by decision.
	h.wait("the chart", func() bool { return len(p.chart.buckets) > 0 })
	var total int64
	for _, b := range p.chart.buckets {
		total += b.Calls()
	}
	if total != 120 {
		t.Errorf("the chart counts %d calls, want 120", total)
	}
	assertShows(t, objectText(p.content), "120 calls:")

	// The chart follows the filters and the search: it counts what the
	// list finds.
	chartTotal := func() (calls, denied int64) {
		for _, b := range p.chart.buckets {
			calls += b.Calls()
			denied += b.Denied
		}
		return calls, denied
	}
	p.decision.SetSelected("Denied")
	h.wait("the chart of denied calls", func() bool { c, d := chartTotal(); return c > 0 && c == d && !p.hl.more && int(c) == len(p.hl.hits) })
	assertShows(t, objectText(p.content), "Calls found per")
	p.decision.SetSelected("Any decision")
	h.search(p, "postgres")
	h.wait("the chart of postgres's calls", func() bool { c, _ := chartTotal(); return c > 0 && !p.hl.more && int(c) == len(p.hl.hits) })
	h.search(p, "")
	h.wait("the chart of every call", func() bool { c, _ := chartTotal(); return c == 120 })
}

func TestHistoryEntryDetail(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(40)
	h.useClock()
	p := h.openHistory()
	// A call that ran: verified, with its arguments and result.
	k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Status == entry.Succeeded && x.Server == "postgres" })
	if k < 0 {
		t.Fatal("no postgres call that succeeded in the seed")
	}
	p.list.Select(k)
	h.wait("the entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == p.hl.hits[k].ID })
	d := objectText(p.detail.content)
	assertShows(t, d, "Verified", "Signature valid", "In the log: its inclusion proof leads to the log's tree", "Payloads match",
		"Arguments (as stored, after redaction)", "Result (as stored, after redaction)", "SELECT", "Signed entry", "Erase…")

	// The erased call shows its tombstone, and still verifies.
	ctx := context.Background()
	l, _ := h.ui.core.evidence(ctx)
	page, _ := l.Search(ctx, receipts.Query{Kind: "erasure"})
	var ev entry.ErasureEvent
	s, _ := l.EntryByID(ctx, page.Hits[0].ID)
	e, _ := entry.Parse(s.Data)
	json.Unmarshal(e.Body, &ev)
	k = slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.ID == ev.Erased[0].Entry })
	p.list.Select(k)
	h.wait("the erased entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == ev.Erased[0].Entry })
	d = objectText(p.detail.content)
	assertShows(t, d, "Verified", "Erased: only its commitment remains", "GDPR request 42")
	assertHides(t, d, "Erase…")
}

// TestHistoryClickFirstRowAgain: once a search has taken away the entry
// shown, a click on the first row shows that row's entry, though the list
// had selected the first row before.
func TestHistoryClickFirstRowAgain(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(40)
	h.useClock()
	p := h.openHistory()
	first := p.hl.hits[0]
	p.list.Select(0)
	h.wait("the first entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == first.ID })
	other := "postgres"
	if first.Server == "postgres" {
		other = "github"
	}
	h.search(p, other)
	if p.hl.hits[0].ID == first.ID {
		t.Fatalf("search %s still lists %s first", other, first.ID)
	}
	h.locked(func() { test.Tap(rowAt(p.list, 0)) })
	h.wait("the first row's entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == p.hl.hits[0].ID })
}

// rowAt returns the list item that shows row id, as a click finds it.
func rowAt(l *widget.List, id int) fyne.Tappable {
	var found fyne.Tappable
	var rows []fyne.Tappable
	walkVisible(l, func(o fyne.CanvasObject) {
		if t, ok := o.(fyne.Tappable); ok && fmt.Sprintf("%T", o) == "*widget.listItem" {
			rows = append(rows, t)
		}
	})
	if id < len(rows) {
		found = rows[id]
	}
	return found
}

// TestHistoryEntryNotKept: arguments and a result over the log's payload
// cap show as not kept, with their size and the cap, and the entry still
// verifies.
func TestHistoryEntryNotKept(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(5)
	ctx := context.Background()
	big := []byte(`{"content":"` + strings.Repeat("x", receipts.MaxStoredPayload) + `"}`)
	r, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.write_file", Server: "files", Tool: "write_file",
		Decision: entry.Allow, Rule: "test", Client: entry.Client{Name: "cursor"}}, big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, big); err != nil {
		t.Fatal(err)
	}
	h.useClock()
	p := h.openHistory()
	k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.ID == r.ID })
	if k < 0 {
		t.Fatal("the call is not in the history")
	}
	p.list.Select(k)
	h.wait("the entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == r.ID })
	d := objectText(p.detail.content)
	assertShows(t, d, "Verified", "Not kept: too large to store",
		fmt.Sprintf("%d bytes, over the log's cap of %d bytes", len(big), receipts.MaxStoredPayload))
	if strings.Count(d, "Not kept: too large to store") != 2 {
		t.Errorf("the arguments and the result do not both show as not kept:\n%s", d)
	}
	assertHides(t, d, "xxxxxxxx")
}

func TestHistoryErase(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(30)
	h.useClock()
	p := h.openHistory()
	k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.Status == entry.Succeeded })
	id := p.hl.hits[k].ID
	p.list.Select(k)
	h.wait("the entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == id })
	test.Tap(findButton(p.detail.content, "Erase…"))
	dlg := h.ui.win.Canvas().Overlays().Top()
	var reason *widget.Entry
	walkVisible(dlg, func(o fyne.CanvasObject) {
		if e, ok := o.(*widget.Entry); ok {
			reason = e
		}
	})
	erase := findButton(dlg, "Erase")
	if !erase.Disabled() {
		t.Error("Erase can be pressed without a reason")
	}
	test.Type(reason, "GDPR request 7")
	test.Tap(erase)
	h.wait("the tombstone", func() bool {
		return p.detail.cur != nil && strings.Contains(objectText(p.detail.content), "Erased: only its commitment remains")
	})
	assertShows(t, objectText(p.detail.content), "GDPR request 7", "Verified")
	l, _ := h.ui.core.evidence(context.Background())
	s, _ := l.EntryByID(context.Background(), id)
	if !s.Payloads[0].Erased() {
		t.Error("the payload is still in the log")
	}
}

func TestHistoryPagesAndLiveUpdates(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(historyPageSize + 50)
	h.useClock()
	p := h.openHistory()
	if len(p.hl.hits) != historyPageSize || !p.hl.more {
		t.Fatalf("first page: %d hits, more %v; want %d and more", len(p.hl.hits), p.hl.more, historyPageSize)
	}
	if p.length() != historyPageSize+1 {
		t.Errorf("the list's length = %d, want the page and a row that loads more", p.length())
	}
	assertShows(t, objectText(p.content), "more load as you scroll")
	// Scrolling to the end loads the next page.
	h.locked(p.list.ScrollToBottom)
	h.wait("the second page", func() bool { return len(p.hl.hits) == historyPageSize+50 })
	if p.hl.more {
		t.Error("more after the last page")
	}

	// A call made now appears at the top, without a refresh.
	top := p.hl.hits[0].Index
	noApprover := func(context.Context, approval.Request, time.Duration, func(time.Duration)) (approval.Decision, error) {
		return approval.Decision{}, approval.ErrNoApprover
	}
	g, err := gate.New(context.Background(), gate.Config{Server: "memory", Log: l, Policies: mustPolicies(t, h), Pins: h.st, Trusted: true, Ask: noApprover})
	if err != nil {
		t.Fatal(err)
	}
	c := &gateway.Call{Server: "memory", Tool: "read_graph", Arguments: json.RawMessage(`{"live":"yes"}`), Client: gateway.Client{Name: "zed"},
		Definition: &gateway.Tool{Name: "read_graph", Raw: json.RawMessage(`{"name":"read_graph"}`)}}
	if _, err := g.Authorize(context.Background(), c, nil); err != nil {
		t.Fatal(err)
	}
	h.ui.pollOnce()
	h.wait("the new call", func() bool { return p.hl.hits[0].Index > top })
	if p.hl.hits[0].Client != "zed" || len(p.hl.hits) != historyPageSize+51 {
		t.Errorf("top of the list = %+v (%d in all), want the new call above the rest", p.hl.hits[0], len(p.hl.hits))
	}
}

// A log whose search index is being upgraded (as after an update of
// Gatehouse) is searched whole, the window says the upgrade is under way,
// and the app's background upgrade finishes it.
func TestHistoryDuringIndexUpgrade(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(60)
	h.useClock()
	ctx := context.Background()
	l, err := h.ui.core.evidence(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The log as the update leaves a large one: every entry still in the
	// retired index (schema step 4 of receipts, before UpgradeIndex).
	size, _ := l.Size(ctx)
	for _, stmt := range []string{
		`ALTER TABLE search_fts RENAME TO search_retired`,
		`CREATE VIRTUAL TABLE search_fts USING fts5 (server, tool, decision, client, text,
			content = 'search_source', content_rowid = 'idx', tokenize = 'unicode61 remove_diacritics 2', prefix = '3 4')`,
		fmt.Sprintf(`INSERT OR REPLACE INTO search_meta (key, value) VALUES ('reindex_from', %d), ('retired_to', %[1]d)`, size),
	} {
		if _, err := h.st.DB().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	h.ui.core.indexLeft.Store(1_940_072) // as a million calls would say
	p := h.openHistory()
	assertShows(t, objectText(p.content), "Upgrading the search index: 1,940,072 older entries to go")
	if got := h.ui.shell.content.MinSize(); got.Width > windowDefaultSize.Width || got.Height > windowDefaultSize.Height {
		t.Errorf("with the upgrade said the window needs %v, more than the %v it opens at", got, windowDefaultSize)
	}
	h.search(p, "refu")
	found := len(p.hl.hits)
	if found == 0 {
		t.Fatal("a word typed part way finds nothing in the retired index")
	}

	h.ui.core.upgradeIndex(l)
	if left, upgrading, err := l.IndexBacklog(ctx); err != nil || upgrading || left != 0 {
		t.Errorf("after the app's upgrade: %d entries left, upgrading %v, %v", left, upgrading, err)
	}
	h.search(p, "refun")
	h.search(p, "refu")
	if len(p.hl.hits) != found {
		t.Errorf("after the upgrade refu finds %d calls, before %d", len(p.hl.hits), found)
	}
	if strings.Contains(objectText(p.content), "Upgrading the search index") {
		t.Error("the window still says the index is being upgraded")
	}
}

func mustPolicies(t *testing.T, h *harness) gate.Policies {
	ps, err := h.ui.core.policies(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// History reads the log without the signing key: a locked keychain hides
// none of it.
func TestHistoryWithoutKeychain(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(10)
	h.ui.core.log.Store(nil) // as if the app just started
	h.ui.core.rd.Store(nil)
	h.kc.fail(errLocked)
	p := h.ui.history
	h.ui.Open(pageHistory)
	h.wait("the calls", func() bool { return len(p.hl.hits) == 10 })
	if p.banner.content.Visible() {
		t.Errorf("history shows a banner with the keychain locked: %s", objectText(p.banner.content))
	}
	if h.ui.core.openedLog() != nil {
		t.Error("reading history opened the log's writer")
	}
}

// --- Database locked

func TestDatabaseLockedForWrites(t *testing.T) {
	ctx := context.Background()
	a := test.NewTempApp(t)
	st, err := store.Open(ctx, t.TempDir(), &store.Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	h := &harness{t: t, app: a, st: st, refreshed: make(chan struct{}, 1), status: make(chan struct{}, 1), kc: newFakeKeychain()}
	h.ui = New(a, st, &Options{Keychain: h.kc, Poll: -1})
	h.ui.doFn = h.serialized
	t.Cleanup(h.ui.Close)
	h.ui.refreshed = h.signal(h.refreshed)
	h.ui.ShowMain()
	h.waitRefresh()

	// Another program holds the write lock (a long transaction).
	release := holdWriteLock(t, st.Dir())
	f := h.openServerForm()
	test.Type(f.name, "notes")
	test.Type(f.command, "notes-mcp")
	test.Tap(f.save)
	h.wait("the form says why", func() bool { return f.errPanel.Visible() })
	if got := f.errText.String(); !strings.Contains(got, "database is locked") {
		t.Errorf("form says %q, want that the database is locked", got)
	}
	s := h.ui.settings
	saved := make(chan error, 1)
	s.saved = func(err error) { saved <- err }
	h.ui.Open(pageSettings)
	h.wait("the settings", func() bool { return s.wait.Selected != "" })
	s.wait.SetSelected("30 seconds")
	if err := <-saved; !store.IsLocked(err) {
		t.Errorf("saving a setting while locked = %v, want the lock", err)
	}
	assertShows(t, objectText(s.content), "The Gatehouse database is locked", "Another program holds a lock")

	// Once the lock is gone, the same actions work: nothing was lost.
	release()
	test.Tap(f.save)
	h.wait("the server", func() bool { _, err := st.Server(ctx, "notes"); return err == nil })
	s.wait.SetSelected("55 seconds")
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	if got, _ := st.Settings(ctx); got.ApprovalWait != 55*time.Second {
		t.Errorf("approval wait = %v, want 55s", got.ApprovalWait)
	}
}

// holdWriteLock holds the write lock of the database of the home dir, as
// another process in a long transaction does, until release is called.
func holdWriteLock(t *testing.T, dir string) (release func()) {
	t.Helper()
	other, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := other.DB().BeginTx(context.Background(), nil) // IMMEDIATE
	if err != nil {
		t.Fatal(err)
	}
	done := false
	release = func() {
		if !done {
			done = true
			tx.Rollback()
			other.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// useClock gives the UI a clock the test moves.
func (h *harness) useClock() {
	h.clock = &fakeClock{now: time.Now()}
	h.ui.clock = h.clock
	for _, r := range []*retrier{&h.ui.view.retry, &h.ui.history.retry, &h.ui.policy.retry, &h.ui.settings.retry, &h.ui.agents.retry} {
		r.u = h.ui
	}
}

// --- Export

func TestExport(t *testing.T) {
	h := newHarness(t, nil)
	h.seeded(25)
	p := h.ui.export
	h.ui.Open(pageExport)
	h.settle()
	dir := t.TempDir()
	p.folder.SetText(dir)
	p.server.Options = append(p.server.Options, "github")
	p.server.SetSelected("github")
	done := make(chan struct{}, 1)
	p.exported = h.signal(done)
	test.Tap(p.run)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("no export within 30s")
	}
	h.settle()
	res := objectText(p.result)
	assertShows(t, res, "Exported and verified", "Verification, as an auditor runs it", "signatures", "inclusion", "payloads", "--pin-key")
	assertHides(t, res, "FAIL")
	files, _ := os.ReadDir(dir)
	if len(files) != 1 || !strings.HasPrefix(files[0].Name(), "gatehouse-evidence-") {
		t.Fatalf("the folder holds %v, want one bundle", files)
	}
	// The bundle holds github's calls only (and what they need to verify).
	data, err := os.ReadFile(filepath.Join(dir, files[0].Name(), "manifest.json"))
	if err != nil || !strings.Contains(string(data), `"servers":["github"]`) {
		t.Errorf("manifest = %s, %v; want the github filter", data, err)
	}

	// A folder that does not exist: nothing is written, and it says so.
	p.folder.SetText(filepath.Join(dir, "missing"))
	test.Tap(p.run)
	assertShows(t, objectText(p.result), "No such folder")
	// An earlier checkpoint this log did not sign: refused, nothing written.
	p.folder.SetText(dir)
	bad := filepath.Join(t.TempDir(), "checkpoint")
	os.WriteFile(bad, []byte("not a checkpoint\n"), 0o600)
	p.since.SetText(bad)
	test.Tap(p.run)
	h.wait("the refusal", func() bool {
		return strings.Contains(objectText(p.result), "This log does not extend the earlier export's")
	})
	assertShows(t, strings.Join(strings.Fields(objectText(p.result)), " "), "not signed by a key of this log", "Nothing was exported")
	if files, _ := os.ReadDir(dir); len(files) != 1 {
		t.Errorf("the folder holds %d entries after a refused export, want the first bundle only", len(files))
	}
}

// --- Settings

func TestSettings(t *testing.T) {
	h := newHarness(t, nil)
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	h.ui.exe = "/opt/gatehouse/gatehouse-app"
	s := h.ui.settings
	saved := make(chan error, 1)
	s.saved = func(err error) { saved <- err }
	h.ui.Open(pageSettings)
	h.wait("the settings", func() bool { return s.wait.Selected != "" && s.keys.Objects != nil && len(s.keys.Objects) > 0 })
	assertShows(t, objectText(s.content), "45 seconds (default)", "current: signs new entries", "the log's first key", h.st.Dir())

	// The approval wait and the log level go to the store, for the proxies.
	s.wait.SetSelected("2 minutes")
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	assertShows(t, objectText(s.content), "Claude Desktop cancels a call after about 60 seconds")
	s.level.SetSelected("Debug")
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	got, _ := h.st.Settings(context.Background())
	if got.ApprovalWait != 2*time.Minute || got.LogLevel == nil || got.LogLevel.String() != "DEBUG" {
		t.Errorf("settings = wait %v, level %v; want 2m and debug", got.ApprovalWait, got.LogLevel)
	}

	// Start at login writes the XDG autostart entry, and removes it.
	s.login.SetChecked(true)
	if err := <-saved; err != nil {
		t.Fatal(err)
	}
	entry := filepath.Join(cfg, "autostart", "dev.gatehouse.app.desktop")
	data, err := os.ReadFile(entry)
	if err != nil || !strings.Contains(string(data), "Exec=/opt/gatehouse/gatehouse-app --hidden --home "+h.st.Dir()) {
		t.Errorf("autostart entry = %q, %v; want it to start this app hidden on this home", data, err)
	}
	s.login.SetChecked(false)
	<-saved
	if _, err := os.Stat(entry); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the autostart entry is still there (stat: %v)", err)
	}

	// Rotating the key announces a new one, signed by the old.
	before, _ := h.ui.core.openedLog().Keys(context.Background())
	s.rotateKey()
	test.Tap(findButton(h.ui.win.Canvas().Overlays().Top(), "Yes"))
	h.wait("two keys", func() bool { return len(s.keys.Objects) == 2 })
	after, _ := h.ui.core.openedLog().Keys(context.Background())
	if len(after) != len(before)+1 || h.ui.core.openedLog().KeyID() != after[len(after)-1].ID {
		t.Errorf("keys after rotation = %v, want one more, the new one current", after)
	}
	if h.kc.key.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(after[0].Public) {
		t.Error("the keychain still holds the first key")
	}

	// The public keys, as a JWK Set an auditor pins.
	out := filepath.Join(t.TempDir(), "keys.jwks.json")
	n, err := writePublicKeys(context.Background(), h.ui.core, out)
	if err != nil || n != 2 {
		t.Fatalf("writePublicKeys = %d, %v", n, err)
	}
	data, _ = os.ReadFile(out)
	keys, err := verify.ParsePublicKeys(data)
	if err != nil || len(keys) != 2 {
		t.Errorf("the exported file holds %d keys (%v), want 2 a verifier reads", len(keys), err)
	}
}

// --- Pause

func TestPause(t *testing.T) {
	a := &trayApp{App: test.NewTempApp(t), quit: make(chan struct{}, 1)}
	h := newHarness(t, a, everything)
	test.Tap(h.ui.shell.pause)
	h.waitStatus()
	if paused, _, _ := gate.Paused(h.st.Dir()); !paused {
		t.Fatal("Pause did not pause the proxies")
	}
	assertShows(t, h.screen(), "Gatehouse is paused", "Every tool call is denied until you resume", "Resume")
	menuItem(t, a.menu, "Resume tool calls")
	if a.menu.Items[0].Label != "Paused: every tool call is denied" {
		t.Errorf("tray status = %q", a.menu.Items[0].Label)
	}
	// Resume from the tray.
	menuItem(t, a.menu, "Resume tool calls").Action()
	h.waitStatus()
	if paused, _, _ := gate.Paused(h.st.Dir()); paused {
		t.Fatal("Resume did not resume")
	}
	assertHides(t, h.screen(), "Gatehouse is paused")

	// A pause made elsewhere (gatehouse pause) shows at the next poll.
	gate.Pause(h.st.Dir())
	h.ui.pollOnce()
	h.waitStatus()
	assertShows(t, h.screen(), "Gatehouse is paused")
}

// --- Database removed

func TestDatabaseRemoved(t *testing.T) {
	h := newHarness(t, nil, everything)
	h.ui.pollOnce()
	h.wait("a poll", func() bool { return true })
	assertHides(t, h.screen(), "was removed or replaced")
	if err := os.Remove(h.st.DatabasePath()); err != nil {
		t.Fatal(err)
	}
	h.ui.pollOnce()
	h.wait("the banner", func() bool { return h.ui.shell.dbGone.Visible() })
	assertShows(t, h.screen(), "The Gatehouse database was removed or replaced", "start Gatehouse again", "Quit")
	// The window keeps working on what it has.
	assertShows(t, h.page(), "everything")
}

// TestWaitForStore starts while another program holds the database in
// exclusive mode: the window says so, and the app opens the store once the
// lock is gone.
func TestWaitForStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	release := lockExclusively(t, filepath.Join(dir, store.DatabaseFile))

	open := func(ctx context.Context) (*store.Store, error) {
		return store.Open(ctx, dir, &store.Options{BusyTimeout: 50 * time.Millisecond})
	}
	_, err = open(ctx)
	if !store.IsLocked(err) {
		t.Fatalf("open while locked = %v, want the lock", err)
	}
	a := test.NewTempApp(t)
	opened := make(chan *store.Store, 1)
	stop := WaitForStore(a, err, open, func(s *store.Store) { opened <- s })
	defer stop()
	var w fyne.Window
	for _, x := range a.Driver().AllWindows() {
		if x.Title() == WaitTitle {
			w = x
		}
	}
	if w == nil {
		t.Fatal("no window says the app waits")
	}
	assertShows(t, windowText(w), "The Gatehouse database is locked", "Trying again every 2 seconds", "Quit")
	select {
	case s := <-opened:
		s.Close()
		t.Fatal("opened while the lock was held")
	default:
	}
	release()
	select {
	case s := <-opened:
		defer s.Close()
		if _, err := s.Servers(ctx); err != nil {
			t.Errorf("the store opened after the wait does not read: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the store did not open within 20s of the lock's release")
	}
}

// lockExclusively holds the database at path as a program in exclusive
// locking mode does, from before anyone else opens it, until release.
func lockExclusively(t *testing.T, path string) (release func()) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=locking_mode(EXCLUSIVE)")
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"BEGIN EXCLUSIVE", "CREATE TABLE IF NOT EXISTS lock_test (x)", "COMMIT"} {
		if _, err := conn.ExecContext(context.Background(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	done := false
	release = func() {
		if !done {
			done = true
			conn.Close()
			db.Close()
		}
	}
	t.Cleanup(release)
	return release
}

// --- Protect my agents

func TestProtectMyAgents(t *testing.T) {
	h := newHarness(t, nil)
	home := t.TempDir()
	original := []byte(`{
  "numStartups": 12,
  "mcpServers": {
    "notes": {
      "type": "stdio",
      "command": "/bin/cat",
      "args": ["--notes"],
      "env": {"NOTES_TOKEN": "ghp_0123456789abcdef0123456789abcdef0123"}
    }
  }
}
`)
	claudeJSON := filepath.Join(home, ".claude.json")
	if err := os.WriteFile(claudeJSON, original, 0o600); err != nil {
		t.Fatal(err)
	}
	p := h.ui.agents
	p.env = &clients.Env{GOOS: "linux", Home: home, Cwd: home, Path: "/usr/bin:/bin",
		Running: func(clients.ID) (bool, time.Time, error) { return false, time.Time{}, nil },
		Tracked: func(string) bool { return false }}
	p.proxy = "/opt/gatehouse/gatehouse"
	done := make(chan struct{}, 1)
	p.done = h.signal(done)
	waitDone := func() {
		t.Helper()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			t.Fatalf("no scan within 20s:\n%s", h.screen())
		}
	}
	h.ui.Open(pageAgents)
	waitDone()
	view := objectText(p.content)
	assertShows(t, view, "Claude Code", "notes", "Not protected", "0 of 1 servers run through Gatehouse")
	assertHides(t, view, "ghp_0123456789")

	// Protect all: the plan says first, in words, which servers of which
	// agents, and what moves to the keychain (its name, not its value);
	// the diff is behind Details, secrets masked.
	test.Tap(p.govern)
	h.wait("the plan", func() bool { return findButton(h.ui.win.Canvas().Overlays().Top(), "Protect") != nil })
	dlg := h.ui.win.Canvas().Overlays().Top()
	plan := oneLine(objectText(dlg))
	assertShows(t, plan, "1 server will run through Gatehouse", "Claude Code: notes", "Moves to your keychain, out of the config files: NOTES_TOKEN of notes.")
	assertHides(t, plan, "ghp_0123456789abcdef", "/opt/gatehouse/gatehouse")
	var acc *widget.Accordion
	walkVisible(dlg, func(o fyne.CanvasObject) {
		if a, ok := o.(*widget.Accordion); ok {
			acc = a
		}
	})
	acc.Open(0)
	plan = objectText(dlg)
	assertShows(t, plan, ".claude.json", "/opt/gatehouse/gatehouse", "registers server notes")
	assertHides(t, plan, "ghp_0123456789abcdef")

	// A server left out: nothing to change, and Protect says so.
	var box *widget.Check
	walkVisible(dlg, func(o fyne.CanvasObject) {
		if c, ok := o.(*widget.Check); ok && c.Text == "notes in Claude Code" {
			box = c
		}
	})
	box.SetChecked(false)
	h.settle()
	if !findButton(dlg, "Protect").Disabled() {
		t.Error("Protect can be pressed with every server left out")
	}
	assertShows(t, objectText(dlg), "Nothing to change: tick a server.")
	box.SetChecked(true)
	h.wait("the plan again", func() bool { return !findButton(dlg, "Protect").Disabled() })
	if data, _ := os.ReadFile(claudeJSON); string(data) != string(original) {
		t.Fatal("the file changed before the person agreed")
	}
	test.Tap(findButton(dlg, "Protect"))
	waitDone()
	data, _ := os.ReadFile(claudeJSON)
	if !strings.Contains(string(data), "/opt/gatehouse/gatehouse") || strings.Contains(string(data), "ghp_0123456789") {
		t.Errorf("after Protect the file reads:\n%s\nwant the proxy in it and the token out of it", data)
	}
	assertShows(t, objectText(p.content), "Protected", "Restart your agents", "Every server of your 1 client runs through Gatehouse")
	if s, err := h.st.Server(context.Background(), "notes"); err != nil || s.Command != "/bin/cat" {
		t.Errorf("registered %+v, %v; want notes running /bin/cat", s, err)
	}

	// Undo all puts the file back, byte for byte.
	test.Tap(p.undo)
	h.wait("the undo plan", func() bool { return findButton(h.ui.win.Canvas().Overlays().Top(), "Undo") != nil })
	test.Tap(findButton(h.ui.win.Canvas().Overlays().Top(), "Undo"))
	waitDone()
	if data, _ := os.ReadFile(claudeJSON); string(data) != string(original) {
		t.Errorf("after Undo the file reads:\n%s\nwant it as it was:\n%s", data, original)
	}
}

// TestProtectWhileClaudeDesktopRuns: the plan for Claude Desktop's file
// cannot be applied while it runs, and says why.
func TestProtectWhileClaudeDesktopRuns(t *testing.T) {
	h := newHarness(t, nil)
	home := t.TempDir()
	cfg := filepath.Join(home, ".config", "Claude", "claude_desktop_config.json")
	os.MkdirAll(filepath.Dir(cfg), 0o700)
	if err := os.WriteFile(cfg, []byte(`{"mcpServers": {"notes": {"command": "/bin/cat"}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	p := h.ui.agents
	p.env = &clients.Env{GOOS: "linux", Home: home, Cwd: home, Path: "/usr/bin:/bin",
		Running: func(id clients.ID) (bool, time.Time, error) { return id == clients.ClaudeDesktop, time.Now(), nil },
		Tracked: func(string) bool { return false }}
	p.proxy = "/opt/gatehouse/gatehouse"
	done := make(chan struct{}, 1)
	p.done = h.signal(done)
	h.ui.Open(pageAgents)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no scan within 20s")
	}
	test.Tap(p.govern)
	h.wait("the plan", func() bool { return findButton(h.ui.win.Canvas().Overlays().Top(), "Protect") != nil })
	dlg := h.ui.win.Canvas().Overlays().Top()
	if !findButton(dlg, "Protect").Disabled() {
		t.Error("Protect can be pressed while Claude Desktop runs")
	}
	assertShows(t, oneLine(objectText(dlg)), "Claude Desktop: notes", "Quit Claude Desktop first")
}

func TestProtectMyAgentsWithoutProxy(t *testing.T) {
	h := newHarness(t, nil)
	p := h.ui.agents
	p.env = &clients.Env{GOOS: "linux", Home: t.TempDir(), Cwd: t.TempDir()}
	p.proxy = ""                  // the one beside the app, which is not there
	t.Setenv("PATH", t.TempDir()) // no gatehouse anywhere
	done := make(chan struct{}, 1)
	p.done = h.signal(done)
	h.ui.Open(pageAgents)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("no scan within 20s")
	}
	assertShows(t, objectText(p.content), "The gatehouse proxy is not installed beside the app")
	if !p.govern.Disabled() {
		t.Error("Protect all can be pressed without a proxy to point the configs at")
	}
}

// TestKeychainThatNeverAnswers: a Secret Service that never answers (a
// daemon waiting on an unlock prompt nobody sees) does not hold the window:
// the call is abandoned, and the history says the keychain is not
// available.
func TestKeychainThatNeverAnswers(t *testing.T) {
	h := newHarness(t, nil)
	h.ui.core.log.Store(nil)
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	h.ui.core.kc = timedKeychain{kc: hangingKeychain{h.kc, block}, wait: 50 * time.Millisecond}
	start := time.Now()
	_, err := h.ui.core.evidence(context.Background())
	if !errors.Is(err, vault.ErrUnavailable) || time.Since(start) > 5*time.Second {
		t.Fatalf("evidence() = %v after %v, want ErrUnavailable soon", err, time.Since(start))
	}
	if got := explain("read the evidence log", err); got.title != "The keychain is not available" {
		t.Errorf("explained as %q", got.title)
	}
	// Polling, which never opens the log, is not held by it.
	done := make(chan struct{})
	go func() { h.ui.core.openedLog(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("openedLog waits for a keychain call")
	}
}

// hangingKeychain never answers for the signing key.
type hangingKeychain struct {
	*fakeKeychain
	block chan struct{}
}

func (k hangingKeychain) SigningKey() (ed25519.PrivateKey, error) {
	<-k.block
	return nil, errors.New("unblocked")
}

// TestHistoryEntryApprover: an entry says how its approval came, and one
// written before receipts said it shows who answered alone.
func TestHistoryEntryApprover(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(5)
	ctx := context.Background()
	tests := []struct {
		name     string
		approver entry.Approver
		want     string
	}{
		{"piped", entry.Approver{Kind: "terminal", Scope: "once", Via: entry.ViaPiped}, "terminal: once (read from piped input: nobody is known to have seen it)"},
		{"automatic", entry.Approver{Kind: "terminal", Scope: "once", Via: entry.ViaAutomatic}, "terminal: once (answered automatically: nobody was asked)"},
		{"a grant", entry.Approver{Kind: "tray", Scope: "session", Via: entry.ViaGrant}, "tray: session (an earlier answer reused: nobody was asked about this call)"},
		{"before via", entry.Approver{Kind: "tray", Scope: "once"}, "tray: once"},
	}
	var ids []string
	for _, tt := range tests {
		r, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.write_file", Server: "files", Tool: "write_file",
			Decision: entry.Allow, Rule: "default:high", Approver: &tt.approver, Client: entry.Client{Name: "cursor"}}, []byte(`{}`))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	h.useClock()
	p := h.openHistory()
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.ID == ids[i] })
			if k < 0 {
				t.Fatal("the call is not in the history")
			}
			p.list.Select(k)
			h.wait("the entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == ids[i] })
			d := objectText(p.detail.content)
			assertShows(t, d, tt.want)
			if tt.approver.Via == "" {
				assertHides(t, d, tt.want+" (")
			}
		})
	}
}
