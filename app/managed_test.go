package app

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
)

// Protect my agents says when managed configuration takes a client's MCP
// servers over, and does not show its entries as protected.
func TestAgentsManagedNotice(t *testing.T) {
	h := newHarness(t, nil)
	home, root := t.TempDir(), t.TempDir()
	for path, body := range map[string]string{
		filepath.Join(home, ".claude.json"):                           `{"mcpServers": {"notes": {"command": "/bin/cat"}}}`,
		filepath.Join(root, "etc", "claude-code", "managed-mcp.json"): `{"mcpServers": {}}`,
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p := h.ui.agents
	p.env = &clients.Env{GOOS: "linux", Home: home, Cwd: home, Path: "/usr/bin:/bin", SystemRoot: root,
		Running: func(clients.ID) (bool, time.Time, error) { return false, time.Time{}, nil },
		Tracked: func(string) bool { return false }}
	p.proxy = "/opt/gatehouse/gatehouse"
	done := make(chan struct{}, 1)
	p.done = h.signal(done)
	h.ui.Open(pageAgents)
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("no scan within 20s:\n%s", h.screen())
	}
	view := objectText(p.content)
	assertShows(t, view, "Managed configuration", "managed-mcp.json is in force", "Claude Code runs only the servers of", "Off by your organisation")
	assertHides(t, view, "Protected", "Not protected", "Not supported")
}
