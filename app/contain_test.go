package app

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// confined is a stdio server to be confined, in quarantine, that matched
// the filesystem pack.
var confined = store.Server{Name: "files", Transport: store.TransportStdio, Command: "npx",
	Args: []string{"-y", "@modelcontextprotocol/server-filesystem", "/srv/notes"}, Confine: true,
	AllowRead: []string{"/srv/shared"}, AllowNet: []string{"443"}, Quarantined: true, Pack: "filesystem@1"}

func TestServerConfinementShown(t *testing.T) {
	tests := []struct {
		name   string
		server store.Server
		abi    int
		want   []string
		hidden []string
	}{
		{"confined here", confined, 5,
			[]string{"confined: Landlock ABI 5", "Confined, also reads /srv/shared · connects to port 443", "pack filesystem@1"},
			[]string{"will not start", "not confined"}},
		{"no Landlock", confined, 0,
			[]string{"cannot be confined here: will not start"}, []string{"confined: Landlock"}},
		{"Landlock too old for ports", confined, 3,
			[]string{"cannot be confined here: will not start"}, []string{"confined: Landlock"}},
		{"too old, but any port", func() store.Server { s := confined; s.AllowNet = []string{"*"}; return s }(), 3,
			[]string{"confined: Landlock ABI 3", "connects to any port"}, nil},
		{"unconfined accepted", func() store.Server { s := confined; s.UnconfinedOK = true; return s }(), 0,
			[]string{"cannot be confined here: starts unconfined"}, []string{"will not start"}},
		{"not confined", memory, 5, []string{"not confined"}, []string{"pack ", "Confined, also", "In quarantine"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil, tt.server)
			h.ui.view.abi = tt.abi
			h.tapRefresh()
			page := oneLine(h.page())
			assertShows(t, page, tt.want...)
			assertHides(t, page, tt.hidden...)
		})
	}
}

func TestReviewEndsQuarantine(t *testing.T) {
	h := newHarness(t, nil, confined)
	ctx := context.Background()
	page := h.page()
	assertShows(t, page, "In quarantine: each call asks you", "quarantine")
	if !h.ui.view.detail.reviewBtn.Visible() {
		t.Fatal("no Review button beside the quarantine")
	}
	test.Tap(h.ui.view.detail.reviewBtn)
	h.wait("the review", func() bool {
		s, _ := h.st.Server(ctx, "files")
		return !s.Quarantined && !h.ui.view.detail.quarantine.Visible()
	})
	s, err := h.st.Server(ctx, "files")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Confine || s.Pack != "filesystem@1" || !slices.Equal(s.AllowRead, confined.AllowRead) {
		t.Errorf("after review the server is %+v, want only its quarantine ended", s)
	}
	assertHides(t, h.page(), "In quarantine", "quarantine")
}

func TestServerFormConfinement(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	h := newHarness(t, nil, confined)
	ctx := context.Background()
	h.ui.view.openForm(&confined)
	f := h.ui.view.lastForm
	if !f.confine.Checked || f.read.Text != "/srv/shared" || f.net.Text != "443" {
		t.Fatalf("form shows confine %v, read %q, net %q; want the server's", f.confine.Checked, f.read.Text, f.net.Text)
	}
	f.read.SetText("/srv/shared\n~/notes/\n")
	f.write.SetText("/tmp/out")
	f.net.SetText("443, 5432 443")
	test.Tap(f.save)
	h.wait("the edit is saved", func() bool { s, _ := h.st.Server(ctx, "files"); return len(s.AllowWrite) == 1 })
	s, _ := h.st.Server(ctx, "files")
	if want := []string{"/srv/shared", filepath.Join(home, "notes")}; !slices.Equal(s.AllowRead, want) {
		t.Errorf("allow-read = %q, want %q", s.AllowRead, want)
	}
	if want := []string{"443", "5432"}; !slices.Equal(s.AllowNet, want) {
		t.Errorf("allow-net = %q, want %q", s.AllowNet, want)
	}
	if !s.Confine || !s.Quarantined || s.Pack != "filesystem@1" {
		t.Errorf("after the edit confine %v, quarantined %v, pack %q; want all kept", s.Confine, s.Quarantined, s.Pack)
	}

	// Unchecked, the server starts unconfined; its lists are kept.
	h.ui.view.openForm(&s)
	f = h.ui.view.lastForm
	test.Tap(f.confine)
	if !f.read.Disabled() {
		t.Error("the allowed folders can be typed into for an unconfined server")
	}
	test.Tap(f.save)
	h.wait("the edit is saved", func() bool { s, _ := h.st.Server(ctx, "files"); return !s.Confine })
	h.settle()
	assertShows(t, h.page(), "not confined")
}

func TestServerFormConfinementBadInput(t *testing.T) {
	tests := []struct {
		name  string
		fill  func(f *serverForm)
		error string
	}{
		{"relative folder", func(f *serverForm) { f.read.SetText("notes") }, `May also read: "notes" is not an absolute path`},
		{"relative write", func(f *serverForm) { f.write.SetText("/ok\nout") }, `May also write: "out" is not an absolute path`},
		{"host for a port", func(f *serverForm) { f.net.SetText("example.com") }, "is not a TCP port (1-65535) or *"},
		{"port zero", func(f *serverForm) { f.net.SetText("0") }, "is not a TCP port"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, nil)
			f := h.openServerForm()
			test.Type(f.name, "notes")
			test.Type(f.command, "notes-mcp")
			test.Tap(f.confine)
			tt.fill(f)
			test.Tap(f.save)
			if got := f.errText.String(); !strings.Contains(got, tt.error) || !f.errPanel.Visible() {
				t.Errorf("form says %q, want %q", got, tt.error)
			}
			if servers, _ := h.st.Servers(context.Background()); len(servers) != 0 {
				t.Errorf("registered %v despite the mistake", servers)
			}
		})
	}
}

// A server added in the window is quarantined as one added with gatehouse
// server add is: unless a capability pack knows it.
func TestAddServerQuarantine(t *testing.T) {
	tests := []struct {
		command    string
		quarantine bool
		pack       string
	}{
		{"notes-mcp", true, ""},
		{"npx -y @modelcontextprotocol/server-filesystem /srv", false, "filesystem@1"},
	}
	for _, tt := range tests {
		t.Run(tt.command, func(t *testing.T) {
			h := newHarness(t, nil)
			f := h.openServerForm()
			test.Type(f.name, "notes")
			test.Type(f.command, tt.command)
			test.Tap(f.save)
			var s store.Server
			h.wait("the server is added", func() bool { var err error; s, err = h.st.Server(context.Background(), "notes"); return err == nil })
			if s.Quarantined != tt.quarantine || s.Pack != tt.pack {
				t.Errorf("added with quarantined %v, pack %q; want %v, %q", s.Quarantined, s.Pack, tt.quarantine, tt.pack)
			}
		})
	}
}

func TestToolRiskSource(t *testing.T) {
	pol := policy.Default()
	tools := mergeProbed(nil, []gateway.ToolInfo{{Name: "read_file"}, {Name: "frobnicate"}}, pol, confined)
	want := map[string]string{"read_file": "pack filesystem@1", "frobnicate": "by name"}
	for _, tl := range tools {
		r := newToolRow(func(gate.ToolStatus) {})
		test.WidgetRenderer(r)
		r.set(tl)
		if got := objectText(r); !strings.Contains(got, want[tl.Name]) {
			t.Errorf("tool %s shows %q, want %q beside its risk", tl.Name, got, want[tl.Name])
		}
	}
}

func TestHistoryObserved(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(5)
	ctx := context.Background()
	observed, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.delete_file", Server: "files", Tool: "delete_file",
		Decision: entry.Allow, Rule: "default:low", Observed: &entry.Observed{Decision: entry.Deny, Rule: "no-deletes"},
		Client: entry.Client{Name: "cursor"}}, []byte(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.read_file", Server: "files", Tool: "read_file",
		Decision: entry.Allow, Rule: "default:low", Client: entry.Client{Name: "cursor"}}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	h.useClock()
	h.ui.win.Resize(windowMinSize) // the note fits the smallest window
	p := h.openHistory()
	const mark = "observe mode: no-deletes would deny"
	if got := strings.Count(objectText(p.list), mark); got != 1 {
		t.Errorf("the list marks %d calls %q, want the one call decided in observe mode:\n%s", got, mark, objectText(p.list))
	}
	k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.ID == observed.ID })
	if k < 0 {
		t.Fatal("the call is not in the history")
	}
	p.list.Select(k)
	h.wait("the entry", func() bool { return p.detail.cur != nil && p.detail.cur.e.ID == observed.ID })
	assertShows(t, oneLine(objectText(p.detail.content)), "Would have been DENIED by rule no-deletes — observe mode",
		"the call was decided without it, by rule default:low")
}

func TestPolicyMarksObserveRules(t *testing.T) {
	h := newHarness(t, nil, everything)
	ctx := context.Background()
	ps, err := h.ui.core.policies(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pol, err := ps.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := pol.Clone()
	next.Rules = append(next.Rules,
		policy.Rule{ID: "no-deletes", Capability: "mcp.everything.delete_*", Decision: policy.Deny, Mode: policy.Observe},
		policy.Rule{ID: "reads", Capability: "mcp.everything.get_*", Decision: policy.Allow})
	if _, err := ps.Save(ctx, next); err != nil {
		t.Fatal(err)
	}
	h.ui.Open(pagePolicy)
	p := h.ui.policy
	h.wait("the rules", func() bool { return len(p.rules) == 2 })
	h.ui.policy.list.Refresh()
	screen := objectText(p.content)
	assertShows(t, screen, "OBSERVE MODE: recorded, not applied · no-deletes")
	if n := strings.Count(screen, "OBSERVE MODE"); n != 1 {
		t.Errorf("%d rules marked observe mode, want only no-deletes:\n%s", n, screen)
	}
}

// TestHistoryAnsweredOnRetry: a call held for approval that nobody answered
// in time, then answered and retried by the agent, no longer shows as
// awaiting; one retried with other arguments, or in another session, does.
func TestHistoryAnsweredOnRetry(t *testing.T) {
	h := newHarness(t, nil)
	l := h.seeded(5)
	ctx := context.Background()
	call := func(decision, session, args string, answered bool) *entry.Entry {
		t.Helper()
		r := entry.Receipt{Capability: "mcp.files.delete_file", Server: "files", Tool: "delete_file",
			Decision: decision, Rule: "default:critical", Client: entry.Client{Name: "cursor"}, Session: session}
		if answered {
			r.Approver = &entry.Approver{Kind: "tray", Scope: "once", Via: entry.ViaGrant}
		}
		e, err := l.AppendReceipt(ctx, r, []byte(args))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	held := call(entry.ApprovalRequired, "s1", `{"path":"/tmp/a"}`, false)
	other := call(entry.ApprovalRequired, "s1", `{"path":"/tmp/b"}`, false)
	call(entry.Allow, "s1", `{"path":"/tmp/a"}`, true) // the retry of held
	call(entry.Allow, "s2", `{"path":"/tmp/b"}`, true) // another session's
	h.useClock()
	p := h.openHistory()
	chipOf := func(id string) string {
		k := slices.IndexFunc(p.hl.hits, func(x receipts.Hit) bool { return x.ID == id })
		if k < 0 {
			t.Fatalf("%s is not in the history", id)
		}
		var got string
		h.locked(func() {
			r := newHistoryRow()
			test.NewTempWindow(t, r)
			p.updateRow(k, r)
			got = r.chip.label.Text + " · " + r.outcome.String()
		})
		return got
	}
	if got, want := chipOf(held.ID), "Allowed · answered on retry"; got != want {
		t.Errorf("the call answered on retry shows %q, want %q", got, want)
	}
	if got := chipOf(other.ID); !strings.HasPrefix(got, "Awaiting") {
		t.Errorf("the call retried only in another session shows %q, want Awaiting", got)
	}
}
