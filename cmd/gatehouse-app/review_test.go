package main

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// pinOf reads the pin state of server's tool in home, as gatehouse tools
// does.
func pinOf(t *testing.T, home, server, tool string) gate.ToolStatus {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ts, err := gate.Tools(ctx, st, policy.Default(), server, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, x := range ts {
		if x.Name == tool {
			return x
		}
	}
	t.Fatalf("no tool %s of %s in %s", tool, server, home)
	return gate.ToolStatus{}
}

// TestAcceptChangedToolUnderXvfb: in the real app, the Servers view flags
// github, whose delete_branch changed to ask for an SSH key; its review
// shows the change and takes Accept, after which the tool is pinned with
// its new definition.
func TestAcceptChangedToolUnderXvfb(t *testing.T) {
	bus := needKeychain(t)
	var importCmd string
	if *screenshots != "" {
		importCmd = need(t, "import", "imagemagick")
	}
	userHome, home := seededHome(t, 20, 0)
	if got := pinOf(t, home, "github", "delete_branch"); got.Pin != gate.Changed {
		t.Fatalf("the seeded delete_branch is %s, want changed", got.Pin)
	}
	r := startApp(t, userHome, home, bus, "^Gatehouse$", "--open", "servers")
	shot := r.settled(r.id)
	r.click(r.id, 390, 250) // github, the second server
	shot = r.redrawn(r.id, shot)
	r.click(r.id, reviewX, reviewY) // delete_branch's Review change
	r.redrawn(r.id, shot)
	if *screenshots != "" {
		capture(t, importCmd, r.display, r.id, filepath.Join(*screenshots, "review-changed-tool.png"))
	}
	r.click(r.id, acceptX, acceptY) // Accept the new definition
	deadline := time.Now().Add(30 * time.Second)
	for pinOf(t, home, "github", "delete_branch").Pin != gate.Pinned {
		if time.Now().After(deadline) {
			t.Fatalf("delete_branch is not pinned 30s after a click on Accept\nstderr:\n%s", r.stderr)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.stop()
}

// Where the review's buttons are, in the 1120x720 window.
const (
	reviewX, reviewY = 680, 663
	acceptX, acceptY = 800, 600
)
