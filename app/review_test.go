package app

import (
	"context"
	"slices"
	"testing"

	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// reviewHarness opens github's changed tool (the seed's delete_branch,
// which now asks for an SSH key) in the Servers view, and its review.
func reviewHarness(t *testing.T) (*harness, gate.ToolStatus) {
	t.Helper()
	h := newHarness(t, nil)
	h.seeded(10)
	h.tapRefresh()
	// The list flags the server with a held tool.
	h.wait("github flagged", func() bool { return h.ui.view.held["github"] == 1 })
	assertShows(t, objectText(h.ui.view.list), "1 changed tool")
	h.locked(func() { h.ui.view.selectServer("github") })
	var changed gate.ToolStatus
	h.wait("github's changed tool", func() bool {
		k := slices.IndexFunc(h.ui.view.detail.tools, func(t gate.ToolStatus) bool { return t.Pin == gate.Changed })
		if k >= 0 {
			changed = h.ui.view.detail.tools[k]
		}
		return k >= 0
	})
	h.locked(func() { h.ui.view.detail.showChange(changed) })
	return h, changed
}

// toolOf reads tool of server as Tools sees it now.
func toolOf(t *testing.T, h *harness, server, tool string) gate.ToolStatus {
	t.Helper()
	ctx := context.Background()
	ps, _ := h.ui.core.policies(ctx)
	pol, err := ps.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := h.st.Server(ctx, server)
	ts, err := gate.Tools(ctx, h.st, pol, server, s.Trusted, policy.PackByRef(s.Pack))
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Name == tool {
			return x
		}
	}
	t.Fatalf("no tool %s of %s", tool, server)
	return gate.ToolStatus{}
}

// TestReviewChangedTool: a changed tool's review says what it newly asks
// for, and takes Accept, Reject or Block; each does what it says.
func TestReviewChangedTool(t *testing.T) {
	tests := []struct {
		label string
		check func(t *testing.T, h *harness, was gate.ToolStatus)
	}{
		{labelAccept, func(t *testing.T, h *harness, was gate.ToolStatus) {
			if got := toolOf(t, h, "github", was.Name); got.Pin != gate.Pinned {
				t.Errorf("after Accept, %s is %s, want pinned", was.Name, got.Pin)
			}
			h.wait("the flag gone", func() bool { return h.ui.view.held["github"] == 0 })
		}},
		{labelReject, func(t *testing.T, h *harness, was gate.ToolStatus) {
			if got := toolOf(t, h, "github", was.Name); got.Pin != gate.Changed || !got.Rejected {
				t.Errorf("after Reject, %s is %s (rejected %v), want changed and rejected", was.Name, got.Pin, got.Rejected)
			}
		}},
		{labelBlock, func(t *testing.T, h *harness, was gate.ToolStatus) {
			ps, _ := h.ui.core.policies(context.Background())
			pol, _ := ps.Current(context.Background())
			res := pol.Decide(policy.Call{Server: "github", Tool: was.Name, Known: true})
			if res.Decision != policy.Deny || res.Rule != "block-github-"+was.Name {
				t.Errorf("after Block, a call of %s is %s by %s, want denied by block-github-%s", was.Name, res.Decision, res.Rule, was.Name)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.label, func(t *testing.T) {
			h, changed := reviewHarness(t)
			dlg := h.ui.win.Canvas().Overlays().Top()
			assertShows(t, objectText(dlg), "What changed in delete_branch", "id_ed25519",
				"It now mentions SSH keys (.ssh), which it did not before", labelAccept, labelReject, labelBlock, "Close")
			test.Tap(findButton(dlg, tt.label))
			h.wait("the review closes", func() bool { return h.ui.win.Canvas().Overlays().Top() == nil })
			tt.check(t, h, changed)
		})
	}
}

// TestAgentsFlagHeldTools: Protect my agents flags a governed server with a
// tool held for review.
func TestAgentsFlagHeldTools(t *testing.T) {
	held := map[string]int{"github": 1}
	row := objectText(entryRow(clientsEntry("github"), held["github"]))
	assertShows(t, row, "1 changed tool held for review in Servers")
	assertHides(t, objectText(entryRow(clientsEntry("memory"), held["memory"])), "changed tool")
}

func clientsEntry(server string) clients.Entry {
	return clients.Entry{Name: server, State: clients.Governed, Server: server, Target: "gatehouse proxy " + server}
}
