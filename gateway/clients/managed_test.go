package clients

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// Managed configuration that makes a client ignore or refuse an entry is
// said for the entry, governing leaves such entries alone, and a governed
// entry it overrides is not shown as governed.
func TestManagedConfiguration(t *testing.T) {
	claudeDir := func(mc *machine) string {
		switch mc.env.GOOS {
		case "darwin":
			return filepath.Join(mc.env.SystemRoot, "Library", "Application Support", "ClaudeCode")
		case "windows":
			return filepath.Join(mc.env.ProgramFiles, "ClaudeCode")
		}
		return filepath.Join(mc.env.SystemRoot, "etc", "claude-code")
	}
	claude := func(mc *machine) string { return filepath.Join(mc.home, ".claude.json") }
	vscode := func(mc *machine) string { return filepath.Join(mc.home, ".config", "Code", "User", "mcp.json") }
	for _, tc := range []struct {
		name      string
		goos      string
		client    ID
		fixture   string
		path      func(*machine) string
		govern    bool // govern first, then the managed files appear
		files     map[string]string
		want      map[string]State
		detail    map[string]string // part of the entry's detail
		open      map[string]bool   // whether the client runs it without the gate
		note      string            // part of a client's managed notes
		unchanged bool              // governing writes nothing
	}{
		{
			name: "claude code, managed-mcp.json takes over a governed file", goos: "linux", client: ClaudeCode,
			fixture: "claude.json", path: claude, govern: true,
			files:  map[string]string{"managed-mcp.json": `{"mcpServers": {"approved": {"command": "approved-mcp"}}}`},
			want:   map[string]State{"github": Overridden, "sentry": Overridden},
			detail: map[string]string{"github": "managed-mcp.json"},
			note:   "runs only its servers",
		},
		{
			name: "claude code, macOS, an allowlist of commands refuses what governing would write", goos: "darwin", client: ClaudeCode,
			fixture: "claude.json", path: claude,
			files: map[string]string{"managed-settings.json": `{"allowedMcpServers": [
				{"serverCommand": ["npx", "-y", "@modelcontextprotocol/server-github"]},
				{"serverUrl": "https://mcp.sentry.dev/*"}]}`},
			want:      map[string]State{"github": Forbidden, "shell-env": Forbidden},
			detail:    map[string]string{"github": "governing it would make Claude Code refuse it", "shell-env": "Governing it would hide it"},
			open:      map[string]bool{"github": true, "shell-env": false},
			note:      "allowedMcpServers",
			unchanged: true,
		},
		{
			name: "claude code, windows, a denylist by name and a governed entry it now refuses", goos: "windows", client: ClaudeCode,
			fixture: "claude.json", path: claude, govern: true,
			files:  map[string]string{"managed-settings.json": `{"deniedMcpServers": [{"serverName": "github"}]}`},
			want:   map[string]State{"github": Forbidden, "sentry": Governed},
			detail: map[string]string{"github": "deniedMcpServers"},
			open:   map[string]bool{"github": false, "sentry": false},
		},
		{
			name: "vs code, policy turns MCP off", goos: "linux", client: VSCode,
			fixture: "vscode_mcp.json", path: vscode, govern: true,
			files:  map[string]string{"/etc/vscode/policy.json": `{"ChatMCP": "none"}`},
			want:   map[string]State{"Perplexity": Overridden},
			detail: map[string]string{"Perplexity": "chat.mcp.access"},
			note:   "policy.json sets chat.mcp.access to none",
		},
		{
			name: "vs code, registry only", goos: "linux", client: VSCode,
			fixture: "vscode_mcp.json", path: vscode,
			files:     map[string]string{"/etc/vscode/policy.json": `{"ChatMCP": "registry"}`},
			want:      map[string]State{"Perplexity": Forbidden},
			detail:    map[string]string{"Perplexity": "registry"},
			unchanged: true,
		},
		{
			name: "vs code, the user turned MCP off", goos: "linux", client: VSCode,
			fixture: "vscode_mcp.json", path: vscode,
			files: map[string]string{"~/.config/Code/User/settings.json": `{
				// off for now
				"chat.mcp.enabled": false,
			}`},
			want:      map[string]State{"Perplexity": Overridden},
			unchanged: true,
		},
		{
			name: "vs code, windows: the registry is not read", goos: "windows", client: VSCode,
			fixture: "vscode_mcp.json", path: func(mc *machine) string { return filepath.Join(mc.env.AppData, "Code", "User", "mcp.json") },
			want: map[string]State{"Perplexity": NotGoverned},
			note: "cannot be read here",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mc := newMachine(t, tc.goos)
			path := tc.path(mc)
			mc.place(tc.fixture, path)
			if tc.govern {
				mc.govern(Selection{Clients: []ID{tc.client}})
			}
			for name, body := range tc.files {
				switch {
				case strings.HasPrefix(name, "~/"):
					name = filepath.Join(mc.home, name[2:])
				case strings.HasPrefix(name, "/"):
					name = filepath.Join(mc.env.SystemRoot, name)
				default:
					name = filepath.Join(claudeDir(mc), name)
				}
				mc.write(name, []byte(body))
			}
			before := mc.read(path)
			got := mc.entries(tc.client)
			for name, want := range tc.want {
				if e := got[name]; e.State != want {
					t.Errorf("%s: state %q (%s), want %q", name, e.State, e.Detail, want)
				}
			}
			for name, want := range tc.open {
				if e := got[name]; e.Open() != want {
					t.Errorf("%s (%s): runs without the gate = %v, want %v", name, e.State, e.Open(), want)
				}
			}
			for name, part := range tc.detail {
				if !strings.Contains(got[name].Detail, part) {
					t.Errorf("%s: detail %q, want it to mention %q", name, got[name].Detail, part)
				}
			}
			cs, err := mc.m.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			var notes []string
			for _, c := range cs {
				if c.ID == tc.client {
					notes = c.Managed
				}
			}
			if tc.note != "" && !strings.Contains(strings.Join(notes, "\n"), tc.note) {
				t.Errorf("managed notes %q, want one to mention %q", notes, tc.note)
			}
			pl, err := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{tc.client}})
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range pl.Results {
				if want, ok := tc.want[r.Name]; ok && (want == Overridden || want == Forbidden) && r.Skipped == "" {
					t.Errorf("%s: governing takes it, want it left alone", r.Name)
				}
			}
			if err := mc.m.Apply(context.Background(), pl); err != nil {
				t.Fatal(err)
			}
			if tc.unchanged && !bytes.Equal(mc.read(path), before) {
				t.Errorf("governing changed %s", path)
			}
		})
	}
}
