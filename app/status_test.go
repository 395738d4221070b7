package app

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
)

// TestStatusTellsTheTruth: servers registered in Gatehouse are not
// protected until an agent's config runs them through gatehouse proxy and
// a proxy has run them. The sidebar, the tray menu and the tray icon say
// the same, step by step, and a waiting approval changes the icon.
func TestStatusTellsTheTruth(t *testing.T) {
	a := &trayApp{App: test.NewTempApp(t), quit: make(chan struct{}, 2)}
	h := newHarness(t, a)
	l := h.seeded(0) // registers servers, none of them in an agent's config
	ctx := context.Background()

	// Claude Code runs two servers of its own, directly.
	claude := `{"mcpServers": {
  "notes": {"type": "stdio", "command": "/bin/cat", "args": ["--notes"]},
  "docs": {"type": "stdio", "command": "/bin/cat", "args": ["--docs"]}
}}`
	if err := os.WriteFile(filepath.Join(h.agentsHome, ".claude.json"), []byte(claude), 0o600); err != nil {
		t.Fatal(err)
	}
	refresh := func() {
		t.Helper()
		h.locked(h.ui.refreshStatus)
		h.waitStatus()
		h.settle()
	}
	check := func(step, title, why, tray string, icon trayLook) {
		t.Helper()
		var sidebar string
		var line string
		var got fyne.Resource
		h.locked(func() {
			sidebar = objectText(h.ui.shell.stateTitle) + " / " + objectText(h.ui.shell.stateText)
			line = a.menu.Items[0].Label
			got = a.icon
		})
		assertShows(t, sidebar, title, why)
		if line != tray {
			t.Errorf("%s: the tray menu says %q, want %q", step, line, tray)
		}
		if got != trayIcon(icon) {
			t.Errorf("%s: the tray icon is %v, want %v", step, got.Name(), trayIcon(icon).Name())
		}
	}

	refresh()
	check("registered, no agent runs them", "Not protecting", "0 of 2 servers run through Gatehouse",
		"Not protecting: 0 of 2 servers run through Gatehouse", lookBad)
	if it := menuItem(t, a.menu, "Protect my agents…"); it.Disabled {
		t.Error("the tray's Protect my agents… cannot be clicked")
	}

	// notes is governed: the config runs gatehouse proxy, but no proxy has
	// run it yet (the agent was not restarted).
	m, err := h.ui.agents.manager(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := m.PlanGovern(ctx, clients.Selection{Servers: []string{"notes"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, pl); err != nil {
		t.Fatal(err)
	}
	refresh()
	check("governed, not seen", "Not protecting yet", "1 server is not seen running through Gatehouse yet: restart your agents",
		"Not protecting yet: restart your agents", lookWarn)

	// A proxy ran notes: it listed its tools, which pinned them.
	noAsk := func(context.Context, approval.Request, time.Duration, func(time.Duration)) (approval.Decision, error) {
		return approval.Decision{}, approval.ErrNoApprover
	}
	g, err := gate.New(ctx, gate.Config{Server: "notes", Log: l, Policies: mustPolicies(t, h), Pins: h.st, Ask: noAsk})
	if err != nil {
		t.Fatal(err)
	}
	g.ToolsListed(ctx, []*gateway.Tool{{Name: "read_note", Raw: json.RawMessage(`{"name":"read_note"}`)}})
	refresh()
	check("governed and seen", "Protecting 1 of 2 servers", "1 of 2 servers run through Gatehouse",
		"Protecting 1 of 2 servers: 1 is not", lookWarn)

	// Both.
	pl, err = m.PlanGovern(ctx, clients.Selection{Servers: []string{"docs"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Apply(ctx, pl); err != nil {
		t.Fatal(err)
	}
	g, err = gate.New(ctx, gate.Config{Server: "docs", Log: l, Policies: mustPolicies(t, h), Pins: h.st, Ask: noAsk})
	if err != nil {
		t.Fatal(err)
	}
	g.ToolsListed(ctx, []*gateway.Tool{{Name: "find_doc", Raw: json.RawMessage(`{"name":"find_doc"}`)}})
	refresh()
	check("all governed and seen", "Protecting 2 servers", "", "Protecting 2 servers", lookPlain)

	// An approval waits: the icon says so until it is answered.
	h.locked(func() { h.ui.approvals.add(deleteBranch); h.ui.approvalsChanged() })
	check("an approval waits", "Protecting 2 servers", "1 approval waiting", "Protecting 2 servers", lookWaiting)
	h.locked(func() { h.ui.approvals.queue = nil; h.ui.approvalsChanged() })
	check("answered", "Protecting 2 servers", "", "Protecting 2 servers", lookPlain)
}

// TestTrayIconsDiffer: each look of the tray icon is its own picture.
func TestTrayIconsDiffer(t *testing.T) {
	seen := map[string]trayLook{}
	for _, l := range []trayLook{lookPlain, lookWarn, lookBad, lookWaiting} {
		c := string(trayIcon(l).Content())
		if other, ok := seen[c]; ok {
			t.Errorf("tray icons %d and %d are the same picture", other, l)
		}
		seen[c] = l
	}
}
