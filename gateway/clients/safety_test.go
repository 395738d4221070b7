package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// A malformed file is refused with its line and column; nothing is written
// to it, registered, or stored.
func TestMalformedFile(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, client, rel, text, want string
	}{
		{"json", "claude-desktop", ".config/Claude/claude_desktop_config.json",
			"{\n  \"mcpServers\": {\n    \"a\": {\"command\": \"x\",}\n  }\n}\n", "line 3, column 25: comma after the last member"},
		{"json comment", "claude-code", ".claude.json",
			"{\n  // no comments in strict JSON\n  \"mcpServers\": {}\n}\n", "line 2, column 3: unexpected '/'"},
		{"jsonc", "zed", ".config/zed/settings.json",
			"{\n  \"context_servers\": {\n    \"a\": {\"command\": \"x\" \"args\": []}\n  }\n}\n", "line 3, column 26: unexpected '\"': want , or }"},
		{"toml", "codex", ".codex/config.toml",
			"[mcp_servers.a]\ncommand = \"x\"\nargs = [\"y\"\n", "line 3, column 12"},
		{"duplicate", "cursor", ".cursor/mcp.json",
			"{\"mcpServers\": {\"a\": {\"command\": \"x\"}, \"a\": {\"command\": \"y\"}}}", "line 1, column 40: \"a\" is given twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMachine(t, "linux")
			path := filepath.Join(mc.home, filepath.FromSlash(tc.rel))
			mc.write(path, []byte(tc.text))
			id, _ := ParseID(tc.client)
			pl, err := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{id}})
			if err != nil {
				t.Fatal(err)
			}
			var ferr error
			for _, r := range pl.Results {
				if r.File == path && r.Err != nil {
					ferr = r.Err
				}
			}
			var se *SyntaxError
			if !errors.As(ferr, &se) || !strings.Contains(ferr.Error(), tc.want) || se.File != path {
				t.Errorf("error %v, want a SyntaxError in %s with %q", ferr, path, tc.want)
			}
			if len(pl.Files) != 0 {
				t.Errorf("a plan to write %s", pl.Files[0].Path)
			}
			if err := mc.m.Apply(context.Background(), pl); err != nil {
				t.Fatal(err)
			}
			if got := string(mc.read(path)); got != tc.text {
				t.Errorf("file changed to:\n%s", got)
			}
			cs, _ := mc.m.Scan(context.Background())
			for _, c := range cs {
				for _, f := range c.Files {
					if f.Path == path && f.Err == nil {
						t.Errorf("Scan shows %s without its error", path)
					}
				}
			}
		})
	}
}

// A file that changes between reading and writing is not overwritten, and
// nothing governing did for it stays behind.
func TestFileChangedDuringWrite(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".claude.json")
	mc.place("claude.json", path)
	// Claude Code writes the file just as Gatehouse is about to.
	theirs := []byte(strings.Replace(string(mc.read(path)), `"numStartups": 184`, `"numStartups": 185`, 1))
	mc.m.beforeRename = func(p string) {
		if err := os.WriteFile(p, theirs, 0o640); err != nil {
			t.Error(err)
		}
	}
	ctx := context.Background()
	pl, err := mc.m.PlanGovern(ctx, Selection{Clients: []ID{ClaudeCode}})
	if err != nil {
		t.Fatal(err)
	}
	err = mc.m.Apply(ctx, pl)
	if !errors.Is(err, ErrChanged) {
		t.Fatalf("Apply: %v, want ErrChanged", err)
	}
	if got := mc.read(path); !bytes.Equal(got, theirs) {
		t.Error("the other writer's change was lost")
	}
	for _, r := range pl.Results {
		if r.Done {
			t.Errorf("%s reported governed", r.Name)
		}
	}
	if s := mc.servers(); len(s) != 0 {
		t.Errorf("servers registered: %v", s)
	}
	if n := mc.kc.len(); n != 0 {
		t.Errorf("%d secrets left in the keychain", n)
	}
	if recs, _ := mc.m.records(ctx); len(recs) != 0 {
		t.Errorf("%d records left", len(recs))
	}
	if ids, _ := mc.st.SecretIDs(ctx); len(ids) != 0 {
		t.Errorf("secret ids left: %v", ids)
	}
	for name, e := range mc.entries(ClaudeCode) {
		if e.State == Governed || e.Drift() {
			t.Errorf("%s: %s", name, e.State)
		}
	}
	// Run again: it goes through.
	mc.m.beforeRename = nil
	mc.govern(Selection{Clients: []ID{ClaudeCode}})
	if e := mc.entries(ClaudeCode)["github"]; e.State != Governed {
		t.Errorf("github: %s after the second try", e.State)
	}
}

// A read-only file is named in a clear error and left alone.
func TestReadOnlyFile(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".cursor", "mcp.json")
	orig := mc.place("cursor_mcp.json", path)
	if err := os.Chmod(path, 0o444); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pl, err := mc.m.PlanGovern(ctx, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	err = mc.m.Apply(ctx, pl)
	if !errors.Is(err, ErrReadOnly) || !strings.Contains(err.Error(), path) {
		t.Fatalf("Apply: %v, want ErrReadOnly naming %s", err, path)
	}
	if !bytes.Equal(mc.read(path), orig) {
		t.Error("the read-only file changed")
	}
	if s := mc.servers(); len(s) != 0 || mc.kc.len() != 0 {
		t.Errorf("servers %v, %d secrets after a refused write", s, mc.kc.len())
	}
}

// A client named explicitly that is not installed is an error; one not
// named is listed as not installed.
func TestMissingClient(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	_, err := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{Cursor}})
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), filepath.Join(mc.home, ".cursor", "mcp.json")) {
		t.Errorf("PlanGovern(cursor): %v, want ErrNotInstalled naming where it looked", err)
	}
	_, err = mc.m.PlanUndo(context.Background(), Selection{Clients: []ID{Cursor}})
	if !errors.Is(err, ErrNotInstalled) {
		t.Errorf("PlanUndo(cursor): %v, want ErrNotInstalled", err)
	}
	if _, err := ParseID("claude"); !errors.Is(err, ErrUnknownClient) || !strings.Contains(err.Error(), "claude-code") {
		t.Errorf("ParseID(claude): %v", err)
	}
	cs, err := mc.m.Scan(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != len(IDs()) {
		t.Fatalf("Scan lists %d clients, want %d", len(cs), len(IDs()))
	}
	for _, c := range cs {
		if c.Installed {
			t.Errorf("%s installed in an empty home", c.ID)
		}
	}
	// Installed without a config file: nothing to govern, no error.
	os.MkdirAll(filepath.Join(mc.home, ".cursor"), 0o755)
	pl, err := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{Cursor}})
	if err != nil || len(pl.Files) != 0 {
		t.Errorf("PlanGovern(cursor without mcp.json) = %v, %v", pl, err)
	}
	if _, err := mc.m.PlanGovern(context.Background(), Selection{Servers: []string{"nope"}}); !errors.Is(err, ErrNoEntry) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("PlanGovern(--server nope): %v", err)
	}
}

// An entry whose command does not exist is reported, and the others are
// governed.
func TestMissingCommand(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".codeium", "windsurf", "mcp_config.json")
	mc.write(path, []byte(`{"mcpServers": {
  "ok": {"command": "npx", "args": ["-y", "ok-mcp"]},
  "gone": {"command": "/opt/nowhere/mcp", "args": []},
  "typo": {"command": "nxp", "args": []}
}}`))
	pl := mc.govern(Selection{})
	got := map[string]*Result{}
	for _, r := range pl.Results {
		got[r.Name] = r
	}
	if !got["ok"].Done {
		t.Errorf("ok: %+v", got["ok"])
	}
	for _, name := range []string{"gone", "typo"} {
		r := got[name]
		if r.Done || !errors.Is(r.Err, errNoCommand) || !strings.Contains(r.Skipped, "not found") {
			t.Errorf("%s: %+v", name, r)
		}
	}
	if e := mc.entries(Windsurf); e["gone"].State != NotGoverned || e["ok"].State != Governed {
		t.Errorf("states %+v", e)
	}
}

// Claude Desktop rewrites its file while it runs: Gatehouse does not write
// it then (unless forced), and tells when its change did not survive.
func TestClaudeDesktopRunning(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "darwin")
	path := filepath.Join(mc.home, "Library", "Application Support", "Claude", "claude_desktop_config.json")
	orig := mc.place("claude_desktop_config.json", path)
	mc.running = true
	ctx := context.Background()
	pl, err := mc.m.PlanGovern(ctx, Selection{Clients: []ID{ClaudeDesktop}})
	if err != nil {
		t.Fatal(err)
	}
	err = mc.m.Apply(ctx, pl)
	if !errors.Is(err, ErrRunning) || !strings.Contains(err.Error(), "quit Claude Desktop first") {
		t.Fatalf("Apply while running: %v", err)
	}
	if !bytes.Equal(mc.read(path), orig) || len(mc.servers()) != 0 || mc.kc.len() != 0 {
		t.Fatal("something was written while Claude Desktop runs")
	}

	mc.running = false
	mc.govern(Selection{Clients: []ID{ClaudeDesktop}})
	if e := mc.entries(ClaudeDesktop)["filesystem"]; e.State != Governed || !strings.Contains(e.Detail, "loads it when it starts") {
		t.Errorf("filesystem: %s (%s)", e.State, e.Detail)
	}
	// It starts, and keeps the change.
	mc.env.Running = func(ID) (bool, time.Time, error) { return true, time.Now().Add(time.Hour), nil }
	mc.m.env = mc.env
	if e := mc.entries(ClaudeDesktop)["filesystem"]; e.State != Governed || !strings.Contains(e.Detail, "kept it") {
		t.Errorf("filesystem after a restart: %s (%s)", e.State, e.Detail)
	}
	// It was running after all, and wrote its own copy back.
	mc.write(path, orig)
	e := mc.entries(ClaudeDesktop)["filesystem"]
	if e.State != Changed || !strings.Contains(e.Detail, "quit Claude Desktop") {
		t.Errorf("filesystem overwritten: %s (%s)", e.State, e.Detail)
	}
	// Governing again takes it back, under the same server name.
	mc.running = false
	mc.env.Running = func(ID) (bool, time.Time, error) { return false, time.Time{}, nil }
	mc.m.env = mc.env
	mc.govern(Selection{Clients: []ID{ClaudeDesktop}})
	if e := mc.entries(ClaudeDesktop)["filesystem"]; e.State != Governed || e.Server != "filesystem" {
		t.Errorf("filesystem re-governed: %s as %s", e.State, e.Server)
	}
	if n := len(mc.servers()); n != 2 {
		t.Errorf("%d servers after governing twice, want 2: %v", n, mc.servers())
	}
	mc.undo(Selection{})
	if !bytes.Equal(mc.read(path), orig) {
		t.Error("undo after re-governing did not give back the original")
	}
}

// A server added after governing is drift; govern takes it, and undo puts
// back everything.
func TestDrift(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".cursor", "mcp.json")
	orig := mc.place("cursor_mcp.json", path)
	mc.govern(Selection{})
	governed := mc.read(path)
	// The user adds a server by hand.
	added := bytes.Replace(governed, []byte(`"mcpServers": {`), []byte(`"mcpServers": {
    "newcomer": {
      "command": "node",
      "args": ["/opt/new/server.js"]
    },`), 1)
	mc.write(path, added)
	es := mc.entries(Cursor)
	if es["newcomer"].State != Added || !es["newcomer"].Drift() {
		t.Errorf("newcomer: %s", es["newcomer"].State)
	}
	if es["borrower"].State != Unsupported {
		t.Errorf("borrower (there before, not governable): %s", es["borrower"].State)
	}
	if es["stripe"].State != Governed {
		t.Errorf("stripe: %s", es["stripe"].State)
	}
	mc.govern(Selection{Clients: []ID{Cursor}})
	if e := mc.entries(Cursor)["newcomer"]; e.State != Governed {
		t.Errorf("newcomer after govern: %s", e.State)
	}
	mc.undo(Selection{})
	want := bytes.Replace(orig, []byte(`"mcpServers": {`), []byte(`"mcpServers": {
    "newcomer": {
      "command": "node",
      "args": ["/opt/new/server.js"]
    },`), 1)
	if got := mc.read(path); !bytes.Equal(got, want) {
		t.Errorf("after undo:\n%s\nwant:\n%s", got, want)
	}
}

// An entry changed since governing is not undone over the change unless
// forced; one the client rewrote in another layout is still put back.
func TestUndoAfterChanges(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".claude.json")
	orig := mc.place("claude.json", path)
	mc.govern(Selection{Clients: []ID{ClaudeCode}})
	governed := string(mc.read(path))

	// Claude Code rewrites the file: another key changes, the layout of
	// the governed entries with it (four spaces).
	rewritten := strings.Replace(governed, `"numStartups": 184`, `"numStartups": 185`, 1)
	rewritten = strings.ReplaceAll(rewritten, "\n      \"command\": \"/opt/gatehouse/bin/gatehouse\"", "\n      \"command\":\"/opt/gatehouse/bin/gatehouse\"")
	// The user points postgres somewhere else by hand.
	rewritten = strings.Replace(rewritten, `"postgres"
          ]`, `"postgres",
            "--read-only"
          ]`, 1)
	mc.write(path, []byte(rewritten))
	es := mc.entries(ClaudeCode)
	if es["github"].State != Governed {
		t.Errorf("github after a rewrite: %s", es["github"].State)
	}
	if es["postgres"].State != Changed {
		t.Errorf("postgres changed by hand: %s", es["postgres"].State)
	}
	ctx := context.Background()
	pl, err := mc.m.PlanUndo(ctx, Selection{Clients: []ID{ClaudeCode}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.m.Apply(ctx, pl); err != nil {
		t.Fatal(err)
	}
	for _, r := range pl.Results {
		switch r.Name {
		case "postgres":
			if r.Done || !strings.Contains(r.Skipped, "--force") {
				t.Errorf("postgres: %+v", r)
			}
		default:
			if !r.Done {
				t.Errorf("%s not undone: %+v", r.Name, r)
			}
		}
	}
	got := string(mc.read(path))
	if !strings.Contains(got, `"numStartups": 185`) || !strings.Contains(got, "ghp_testTOKENnotREAL0000000000000000a1") ||
		!strings.Contains(got, "--read-only") {
		t.Errorf("after undo:\n%s", got)
	}
	// Forced, postgres goes back too; everything but numStartups is as it was.
	mc.undo(Selection{Force: true})
	want := strings.Replace(string(orig), `"numStartups": 184`, `"numStartups": 185`, 1)
	if got := string(mc.read(path)); got != want {
		t.Errorf("after undo --force:\n%s", unifiedDiff(path, []byte(want), []byte(got), []edit{wholeChange([]byte(want), []byte(got))}, nil))
	}
	if n := len(mc.servers()); n != 0 {
		t.Errorf("%d servers left", n)
	}
}

// A secret the user removed from the keychain cannot be put back: undo
// says which, and writes nothing for that entry.
func TestUndoWithoutSecret(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".codeium", "windsurf", "mcp_config.json")
	mc.place("windsurf_mcp_config.json", path)
	mc.govern(Selection{})
	governed := mc.read(path)
	mc.kc.DeleteSecret("slack.SLACK_BOT_TOKEN")
	ctx := context.Background()
	pl, err := mc.m.PlanUndo(ctx, Selection{Servers: []string{"slack"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := mc.m.Apply(ctx, pl); err != nil {
		t.Fatal(err)
	}
	if r := pl.Results[0]; r.Done || !strings.Contains(r.Skipped, "gatehouse secret set slack.SLACK_BOT_TOKEN") {
		t.Errorf("result %+v", r)
	}
	if !bytes.Equal(mc.read(path), governed) {
		t.Error("the file changed")
	}
}

// The same server in two clients shares one registration; different ones
// under one name get their own.
func TestSharedRegistration(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	cursor := filepath.Join(mc.home, ".cursor", "mcp.json")
	windsurf := filepath.Join(mc.home, ".codeium", "windsurf", "mcp_config.json")
	entry := `{"mcpServers": {"github": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-github"], "env": {"GITHUB_TOKEN": "ghp_testTOKENnotREAL0000000000000000e5"}}}}`
	mc.write(cursor, []byte(entry))
	mc.write(windsurf, []byte(entry))
	gem := filepath.Join(mc.home, ".gemini", "settings.json")
	mc.write(gem, []byte(`{"mcpServers": {"github": {"command": "npx", "args": ["-y", "other-github-mcp"]}}}`))
	mc.govern(Selection{Clients: []ID{Cursor}})
	mc.govern(Selection{})
	if e := mc.entries(Windsurf)["github"]; e.Server != "github" {
		t.Errorf("windsurf github runs %s, want the shared github", e.Server)
	}
	if e := mc.entries(GeminiCLI)["github"]; e.Server != "github-2" {
		t.Errorf("gemini github runs %s, want github-2", e.Server)
	}
	if n := len(mc.servers()); n != 2 {
		t.Errorf("%d servers: %v", n, mc.servers())
	}
	// Undoing one client keeps the shared server for the other.
	mc.undo(Selection{Clients: []ID{Cursor}})
	if _, err := mc.st.Server(context.Background(), "github"); err != nil {
		t.Errorf("github gone while windsurf still runs through it: %v", err)
	}
	if v, err := mc.kc.Secret("github.GITHUB_TOKEN"); err != nil || v != "ghp_testTOKENnotREAL0000000000000000e5" {
		t.Errorf("shared secret: %q, %v", v, err)
	}
	mc.undo(Selection{})
	if n := len(mc.servers()); n != 0 || mc.kc.len() != 0 {
		t.Errorf("%d servers, %d secrets left", n, mc.kc.len())
	}
	if got := string(mc.read(cursor)); got != entry {
		t.Errorf("cursor after undo: %s", got)
	}
}

// A project's .mcp.json is shared through version control: it is never
// edited; a same-name local-scope entry in ~/.claude.json stands in front
// of it, and undo takes that out again byte for byte.
func TestProjectMCPJSON(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		project string // the project's entry in ~/.claude.json, or "" for none
	}{
		{"existing project", `{
      "allowedTools": [],
      "mcpServers": {
        "local-one": {
          "type": "stdio",
          "command": "node",
          "args": []
        }
      },
      "enabledMcpjsonServers": ["team-docs"],
      "hasTrustDialogAccepted": true
    }`},
		{"empty servers", `{
      "mcpServers": {},
      "enabledMcpjsonServers": ["team-docs"]
    }`},
		{"no servers key", `{
      "enabledMcpjsonServers": ["team-docs"]
    }`},
		{"no project", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mc := newMachine(t, "linux")
			proj := filepath.Join(mc.home, "src", "app")
			mcpJSON := filepath.Join(proj, ".mcp.json")
			shared := mc.place("mcp.json", mcpJSON)
			mc.env.Cwd = filepath.Join(proj, "internal")
			mc.m.env = mc.env
			os.MkdirAll(mc.env.Cwd, 0o755)
			claudeJSON := filepath.Join(mc.home, ".claude.json")
			var text string
			if tc.project == "" {
				text = "{\n  \"numStartups\": 3,\n  \"projects\": {}\n}\n"
				// Approved in the project's settings instead.
				mc.write(filepath.Join(proj, ".claude", "settings.local.json"), []byte(`{"enabledMcpjsonServers": ["team-docs"]}`))
			} else {
				text = fmt.Sprintf("{\n  \"numStartups\": 3,\n  \"projects\": {\n    %q: %s\n  },\n  \"userID\": \"x\"\n}\n", proj, tc.project)
			}
			mc.write(claudeJSON, []byte(text))

			es := mc.entries(ClaudeCode)
			if es["team-docs"].State != NotGoverned || es["team-docs"].Scope != ScopeProject {
				t.Fatalf("team-docs before: %+v", es["team-docs"])
			}
			if es["unapproved"].State != Unsupported || !strings.Contains(es["unapproved"].Detail, "not approved") {
				t.Errorf("unapproved: %+v", es["unapproved"])
			}
			pl := mc.govern(Selection{Clients: []ID{ClaudeCode}})
			if !bytes.Equal(mc.read(mcpJSON), shared) {
				t.Error("the shared .mcp.json was edited")
			}
			if len(pl.Files) != 1 || pl.Files[0].Path != claudeJSON {
				t.Fatalf("plan writes %v", pl.Files)
			}
			governed := mc.read(claudeJSON)
			p, err := parseFile(specs[ClaudeCode], claudeJSON, governed)
			if err != nil {
				t.Fatalf("governed file does not parse: %v\n%s", err, governed)
			}
			src, _ := locate(p, []string{"projects", proj, "mcpServers", "team-docs"})
			if src == nil || src.command != testExe || !strings.Contains(string(governed), `"DOCS_TOKEN": "${DOCS_TOKEN}"`) ||
				!strings.Contains(string(governed), `"timeout": 20000`) {
				t.Fatalf("no local entry for team-docs:\n%s", governed)
			}
			es = mc.entries(ClaudeCode)
			if e := es["team-docs"]; e.State != Governed || e.Via != claudeJSON {
				t.Errorf("team-docs after: %+v", e)
			}
			if tc.name == "existing project" && es["local-one"].State != Governed {
				t.Errorf("local-one: %+v", es["local-one"])
			}
			// Twice: nothing.
			if pl2, _ := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{ClaudeCode}}); len(pl2.Files) != 0 {
				t.Errorf("twice: %s", pl2.Files[0].Diff)
			}
			mc.undo(Selection{})
			if got := string(mc.read(claudeJSON)); got != text {
				t.Errorf("after undo:\n%s\nwant:\n%s", got, text)
			}
		})
	}
}

// A large ~/.claude.json (hundreds of projects, long histories) governs
// and undoes exactly, and the diff shows only the entries.
func TestLargeClaudeJSON(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	orig := largeClaudeJSON(400, 20, 50)
	path := filepath.Join(mc.home, ".claude.json")
	mc.write(path, orig)
	pl := mc.govern(Selection{})
	if n := strings.Count(pl.Files[0].Diff, "@@ -"); n != 8 {
		t.Errorf("diff has %d hunks, want 8 (one per governed entry)", n)
	}
	if strings.Contains(string(mc.read(path)), "sk-testNOTreal") {
		t.Error("a secret is still in the file")
	}
	mc.undo(Selection{})
	if !bytes.Equal(mc.read(path), orig) {
		t.Error("undo did not give back the original bytes")
	}
}

// The backup holds the file as it was, except that the secret values
// governing moved are references: no plain-text secret lands in the home.
func TestBackup(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".gemini", "settings.json")
	orig := mc.place("gemini_settings.json", path)
	pl := mc.govern(Selection{})
	var backup string
	recs, _ := mc.m.records(context.Background())
	for _, r := range recs {
		backup = r.Backup
	}
	data, err := os.ReadFile(backup)
	if err != nil {
		t.Fatalf("backup %q: %v", backup, err)
	}
	fi, _ := os.Stat(backup)
	if fi.Mode().Perm() != 0o600 || !strings.HasPrefix(backup, filepath.Join(mc.st.Dir(), "backups", "gemini-cli")) {
		t.Errorf("backup %s mode %v", backup, fi.Mode())
	}
	if len(pl.Files) != 1 || bytes.Contains(data, []byte("AIzaTestNOTreal")) || bytes.Contains(data, []byte("testNOTreal-0123456789")) {
		t.Errorf("backup holds a secret:\n%s", data)
	}
	// Everything else is the original.
	back := bytes.ReplaceAll(data, []byte(`"vault://secret/pythonTools.API_KEY"`), []byte(`"AIzaTestNOTreal0123456789abcdefghijk"`))
	back = bytes.ReplaceAll(back, []byte(`"vault://secret/httpServer.X-Api-Key"`), []byte(`"testNOTreal-0123456789"`))
	if !bytes.Equal(back, orig) {
		t.Errorf("backup is not the original file:\n%s", data)
	}
}

// What Gatehouse shows of an entry never holds a secret.
func TestTargetMasksSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    source
		want string
	}{
		{source{command: "npx", args: []string{"-y", "some-mcp", "--api-key=sk-testNOTreal0123456789abcdef"}}, "npx -y some-mcp --api-key=********"},
		{source{command: "mcp", args: []string{"--token", "ghp_testTOKENnotREAL0000000000000000f6"}}, "mcp --token ********"},
		{source{transport: "http", url: "https://u:pw123456@example.com/mcp?api_key=abcdef123456&x=1"}, "https://u:********@example.com/mcp?api_key=********&x=1"},
		{source{command: "npx", args: []string{"-y", "@modelcontextprotocol/server-postgres", "postgresql://app:hunter2pw@db.internal/app"}}, "npx -y @modelcontextprotocol/server-postgres ********"},
		{source{command: "redis-mcp", args: []string{"--url", "redis://:s3cretpw@localhost:6379"}}, "redis-mcp --url ********"},
		{source{command: "db-mcp", args: []string{"--password", "correct horse battery", "--host", "db"}}, "db-mcp --password ******** --host db"},
		{source{command: "db-mcp", args: []string{"--db-password", "pw-0123456", "--verbose"}}, "db-mcp --db-password ******** --verbose"},
		{source{command: "mcp", args: []string{"--token-file", "/run/secrets/token", "--max-tokens", "4096"}}, "mcp --token-file /run/secrets/token --max-tokens 4096"},
		{source{command: "psql-mcp", args: []string{"postgresql://app@db.internal/app"}}, "psql-mcp postgresql://app@db.internal/app"},
	} {
		if got := tc.s.target(); got != tc.want {
			t.Errorf("target() = %q, want %q", got, tc.want)
		}
	}
}

// A diff never shows a secret, moved or not.
func TestDiffMasksSecrets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ line, want string }{
		{`      "args": ["-y", "some-mcp", "--api-key=sk-testNOTreal0123456789abcdef"]`, `      "args": ["-y", "some-mcp", "--api-key=********"]`},
		{`        "SLACK_BOT_TOKEN": "not-shaped-like-a-token-123"`, `        "SLACK_BOT_TOKEN": "********"`},
		{`GITHUB_PERSONAL_ACCESS_TOKEN = 'abcdef123456'`, `GITHUB_PERSONAL_ACCESS_TOKEN = '********'`},
		{`  "DEBUG": "1", "model": "ghp_testTOKENnotREAL0000000000000000g7"`, `  "DEBUG": "1", "model": "********"`},
		{`  "LOG_LEVEL": "debug"`, `  "LOG_LEVEL": "debug"`},
	} {
		if got := mask(tc.line, nil); got != tc.want {
			t.Errorf("mask(%s) = %s, want %s", tc.line, got, tc.want)
		}
	}
}

// A project file that version control tracks is shared: it is not given
// this machine's paths.
func TestTrackedProjectFile(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	proj := filepath.Join(mc.home, "src", "app")
	path := filepath.Join(proj, ".cursor", "mcp.json")
	orig := mc.place("cursor_mcp.json", path)
	os.MkdirAll(filepath.Join(mc.home, ".cursor"), 0o755)
	mc.env.Cwd = proj
	mc.env.Tracked = func(p string) bool { return p == path }
	mc.m.env = mc.env
	pl := mc.govern(Selection{})
	if len(pl.Files) != 0 || !bytes.Equal(mc.read(path), orig) {
		t.Fatal("a tracked project file was edited")
	}
	for _, r := range pl.Results {
		if r.Name == "stripe" && !strings.Contains(r.Skipped, "tracked by version control") {
			t.Errorf("stripe: %+v", r)
		}
	}
	// Untracked, it is the user's own: governed.
	mc.env.Tracked = func(string) bool { return false }
	mc.m.env = mc.env
	mc.govern(Selection{})
	if e := mc.entries(Cursor)["stripe"]; e.State != Governed || e.Scope != ScopeProject {
		t.Errorf("stripe in an untracked project file: %+v", e)
	}
}

// A governed entry whose Gatehouse server was removed says so.
func TestServerRemovedBehindEntry(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	mc.place("cursor_mcp.json", filepath.Join(mc.home, ".cursor", "mcp.json"))
	mc.govern(Selection{})
	if err := mc.st.RemoveServer(context.Background(), "stripe"); err != nil {
		t.Fatal(err)
	}
	if e := mc.entries(Cursor)["stripe"]; !strings.Contains(e.Detail, "not registered any more") {
		t.Errorf("stripe: %s (%s)", e.State, e.Detail)
	}
}

// A secret written with escapes comes back with the same escapes, and the
// keychain item that keeps that spelling goes with undo.
func TestEscapedSecret(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".cursor", "mcp.json")
	orig := []byte(`{"mcpServers": {"a": {"command": "npx", "env": {"API_TOKEN": "s\u0065cret\/value-0123"}}}}`)
	mc.write(path, orig)
	mc.govern(Selection{})
	if v, _ := mc.kc.Secret("a.API_TOKEN"); v != "secret/value-0123" {
		t.Errorf("keychain holds %q, want the decoded value", v)
	}
	if got := mc.read(path); bytes.Contains(got, []byte("cret")) {
		t.Errorf("secret left in the file: %s", got)
	}
	mc.undo(Selection{})
	if got := mc.read(path); !bytes.Equal(got, orig) {
		t.Errorf("after undo: %s\nwant: %s", got, orig)
	}
	if n := mc.kc.len(); n != 0 {
		t.Errorf("%d keychain items left: %v", n, mc.kc.m)
	}
}

// largeClaudeJSON is a ~/.claude.json with projects, each with a history of
// prompts; every step-th project has a server with a secret.
func largeClaudeJSON(projects, history, step int) []byte {
	var b strings.Builder
	b.WriteString("{\n  \"numStartups\": 912,\n  \"projects\": {\n")
	for i := range projects {
		if i > 0 {
			b.WriteString(",\n")
		}
		fmt.Fprintf(&b, "    \"/home/dev/src/p%03d\": {\n      \"allowedTools\": [],\n      \"history\": [\n", i)
		for j := range history {
			if j > 0 {
				b.WriteString(",\n")
			}
			fmt.Fprintf(&b, "        {\n          \"display\": \"step %d of project %d: \\\"quote\\\" ✓\",\n          \"pastedContents\": {}\n        }", j, i)
		}
		b.WriteString("\n      ],\n      \"mcpServers\": {")
		if i%step == 7 {
			fmt.Fprintf(&b, "\n        \"tool-%d\": {\n          \"type\": \"stdio\",\n          \"command\": \"npx\",\n          \"args\": [\n            \"-y\",\n            \"tool-%d\"\n          ],\n          \"env\": {\n            \"TOOL_API_KEY\": \"sk-testNOTreal%020d\"\n          }\n        }\n      ", i, i, i)
		}
		b.WriteString("},\n      \"hasTrustDialogAccepted\": true\n    }")
	}
	b.WriteString("\n  },\n  \"userID\": \"abc\"\n}\n")
	return []byte(b.String())
}

// Planning govern and undo over a ~/.claude.json of 2,000 projects
// (about 4 MB) with 40 servers.
func BenchmarkPlanLargeClaudeJSON(b *testing.B) {
	data := largeClaudeJSON(2000, 20, 50)
	for _, undo := range []bool{false, true} {
		name := "govern"
		if undo {
			name = "undo"
		}
		b.Run(name, func(b *testing.B) {
			mc := newMachineB(b)
			path := filepath.Join(mc.home, ".claude.json")
			if err := os.WriteFile(path, data, 0o600); err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			if undo {
				pl, err := mc.m.PlanGovern(ctx, Selection{})
				if err != nil {
					b.Fatal(err)
				}
				if err := mc.m.Apply(ctx, pl); err != nil {
					b.Fatal(err)
				}
			}
			b.SetBytes(int64(len(data)))
			b.ResetTimer()
			for b.Loop() {
				var err error
				if undo {
					_, err = mc.m.PlanUndo(ctx, Selection{})
				} else {
					_, err = mc.m.PlanGovern(ctx, Selection{})
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// An entry with a password in its command line (a connection string, a
// --password flag, --api-key=...) is governed: the argument moves to the
// keychain, the registration refers to it, and the server gets it back in
// its command line when the proxy starts it. No copy lands in Gatehouse's
// home folder, before or after undo, and undo gives back every byte.
func TestSecretsInArgumentsMoveToTheKeychain(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".cursor", "mcp.json")
	orig := mc.place("cursor_mcp.json", path)
	secrets := []string{"pgNOTreal-0123", "whNOTreal-0123", "sk-testNOTreal0123456789abcdef"}
	noSecretInHome := func(when string) {
		for _, secret := range secrets {
			filepath.WalkDir(mc.st.Dir(), func(p string, d fs.DirEntry, err error) error {
				if err == nil && !d.IsDir() && bytes.Contains(mc.read(p), []byte(secret)) {
					t.Errorf("%s: %s holds the secret %s", when, p, secret)
				}
				return nil
			})
		}
	}
	pl := mc.govern(Selection{Clients: []ID{Cursor}})
	noSecretInHome("after govern")
	for _, r := range pl.Results {
		for _, n := range r.Notes {
			for _, secret := range secrets {
				if strings.Contains(n, secret) {
					t.Errorf("%s: a note shows the secret: %s", r.Name, n)
				}
			}
		}
	}
	want := map[string]struct {
		args []string // as the server gets them
		ref  int      // the argument that is a reference in the registration
	}{
		"postgres":  {[]string{"-y", "@modelcontextprotocol/server-postgres", "postgresql://app:pgNOTreal-0123@db.internal/app"}, 2},
		"warehouse": {[]string{"--host", "db.internal", "--password", "whNOTreal-0123"}, 3},
		"leaky":     {[]string{"-y", "some-mcp", "--api-key=sk-testNOTreal0123456789abcdef"}, 2},
	}
	regs := map[string]store.Server{}
	for _, s := range mc.servers() {
		regs[s.Name] = s
	}
	for name, w := range want {
		reg, ok := regs[name]
		if !ok {
			t.Errorf("%s: not registered", name)
			continue
		}
		if id, ok := vault.ParseRef(reg.Args[w.ref]); !ok || id != name+".arg"+strconv.Itoa(w.ref+1) {
			t.Errorf("%s: registered argument %d = %q, want a reference to %s.arg%d", name, w.ref+1, reg.Args[w.ref], name, w.ref+1)
		}
		cmd, values, err := downstream.Command(reg, mc.kc)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !slices.Equal(cmd.Args, w.args) {
			t.Errorf("%s: the server starts with %q, want %q", name, cmd.Args, w.args)
		}
		if len(values) != 1 {
			t.Errorf("%s: resolved %d values, want 1 (for redaction)", name, len(values))
		}
		if e := mc.entries(Cursor)[name]; e.State != Governed || strings.Contains(e.Target, "NOTreal") {
			t.Errorf("%s: state %s, target %q; want governed, masked", name, e.State, e.Target)
		}
	}
	mc.undo(Selection{})
	noSecretInHome("after undo")
	if got := mc.read(path); !bytes.Equal(got, orig) {
		t.Errorf("undo gave back\n%s\nwant\n%s", got, orig)
	}
	if mc.kc.len() != 0 {
		t.Errorf("the keychain keeps %d items after undo, want none", mc.kc.len())
	}
}

// A value in a client's file that names a keychain secret (vault://...)
// is refused: otherwise a project's .mcp.json could hand any secret the
// keychain holds to whatever its entry runs.
func TestReferencesFromFilesAreRefused(t *testing.T) {
	t.Parallel()
	for _, entry := range []string{
		`{"command": "npx", "args": ["-y", "x"], "env": {"REGION": "vault://secret/github.GITHUB_TOKEN"}}`,
		`{"command": "npx", "args": ["-y", "x", "vault://secret/github.GITHUB_TOKEN"]}`,
		`{"command": "vault://secret/github.GITHUB_TOKEN"}`,
		`{"command": "npx", "args": ["--token=VAULT://secret/github.GITHUB_TOKEN"]}`,
		`{"url": "https://example.com/mcp", "headers": {"X-Region": "vault://secret/github.GITHUB_TOKEN"}}`,
		`{"url": "vault://secret/github.GITHUB_TOKEN"}`,
	} {
		mc := newMachine(t, "linux")
		mc.kc.SetSecret("github.GITHUB_TOKEN", "ghp_testTOKENnotREAL0000000000000000z9")
		path := filepath.Join(mc.home, ".cursor", "mcp.json")
		mc.write(path, []byte(`{"mcpServers": {"borrower": `+entry+`}}`))
		pl := mc.govern(Selection{Clients: []ID{Cursor}})
		if len(pl.Results) != 1 || !strings.Contains(pl.Results[0].Skipped, "names a Gatehouse keychain secret") {
			t.Errorf("%s: results %+v, want the entry skipped for naming a keychain secret", entry, pl.Results)
		}
		if len(mc.servers()) != 0 {
			t.Errorf("%s: registered %+v, want nothing", entry, mc.servers())
		}
	}
}
