package clients

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// fakeKeychain keeps secrets in memory, as the OS keychain would.
type fakeKeychain struct {
	mu sync.Mutex
	m  map[string]string
}

func (k *fakeKeychain) Secret(id string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[id]
	if !ok {
		return "", fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
	}
	return v, nil
}

func (k *fakeKeychain) SetSecret(id, value string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.m == nil {
		k.m = map[string]string{}
	}
	k.m[id] = value
	return nil
}

func (k *fakeKeychain) DeleteSecret(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if _, ok := k.m[id]; !ok {
		return fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
	}
	delete(k.m, id)
	return nil
}

func (k *fakeKeychain) len() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.m)
}

const testExe = "/opt/gatehouse/bin/gatehouse"

// A machine is a user's home folder laid out as goos lays it out, with
// Gatehouse's store and a keychain.
type machine struct {
	t       *testing.T
	env     Env
	home    string
	st      *store.Store
	kc      *fakeKeychain
	m       *Manager
	running bool
}

// programs the fake PATH holds.
var programs = map[string]map[string]string{
	"linux": {
		"npx": "/usr/bin/npx", "node": "/usr/bin/node", "python": "/usr/bin/python",
		"uvx": "/home/dev/.local/bin/uvx", "warehouse-mcp": "/usr/local/bin/warehouse-mcp",
	},
	"darwin": {"npx": "/opt/homebrew/bin/npx", "node": "/opt/homebrew/bin/node"},
	"windows": {
		"npx": `C:\Program Files\nodejs\npx.cmd`, "node": `C:\Program Files\nodejs\node.exe`,
	},
}

var absPrograms = []string{"/usr/local/bin/tools-mcp", "/usr/local/bin/docs-mcp", `C:\Program Files\nodejs\node.exe`, "/opt/mcp/bin/server"}

func newMachine(t *testing.T, goos string) *machine {
	t.Helper()
	return newMachineTB(t, t, goos)
}

// newMachineB is a Linux machine for benchmarks.
func newMachineB(b *testing.B) *machine {
	b.Helper()
	return newMachineTB(b, nil, "linux")
}

func newMachineTB(tb testing.TB, t *testing.T, goos string) *machine {
	mc := &machine{t: t, home: tb.TempDir(), kc: &fakeKeychain{}}
	mc.env = Env{GOOS: goos, Home: mc.home, Cwd: mc.home, Path: "/usr/local/bin:/usr/bin:/bin", SystemRoot: tb.TempDir()}
	if goos == "windows" {
		mc.env.AppData = filepath.Join(mc.home, "AppData", "Roaming")
		mc.env.LocalAppData = filepath.Join(mc.home, "AppData", "Local")
		mc.env.Path = `C:\Program Files\nodejs;C:\Windows\system32`
		mc.env.ProgramFiles = filepath.Join(mc.env.SystemRoot, "Program Files")
	}
	mc.env.LookPath = func(file, path string) (string, error) {
		if isAbs(goos, file) {
			if slices.Contains(absPrograms, file) {
				return file, nil
			}
			return "", fmt.Errorf("%s: %w", file, errNoCommand)
		}
		if p, ok := programs[goos][file]; ok {
			return p, nil
		}
		return "", fmt.Errorf("%s: not on PATH: %w", file, errNoCommand)
	}
	mc.env.Running = func(ID) (bool, time.Time, error) { return mc.running, time.Time{}, nil }
	mc.env.Tracked = func(string) bool { return false }
	ctx := context.Background()
	st, err := store.Open(ctx, tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	mc.st = st
	mc.m, err = New(ctx, st, &Options{Env: &mc.env, Keychain: mc.kc, Executable: testExe})
	if err != nil {
		tb.Fatal(err)
	}
	return mc
}

// place copies a fixture to path in the machine's home and returns its bytes.
func (mc *machine) place(fixture, path string) []byte {
	mc.t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", fixture))
	if err != nil {
		mc.t.Fatal(err)
	}
	mc.write(path, data)
	return data
}

func (mc *machine) write(path string, data []byte) {
	mc.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		mc.t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o640); err != nil {
		mc.t.Fatal(err)
	}
}

func (mc *machine) read(path string) []byte {
	mc.t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		mc.t.Fatal(err)
	}
	return data
}

func (mc *machine) govern(sel Selection) *Plan {
	mc.t.Helper()
	ctx := context.Background()
	pl, err := mc.m.PlanGovern(ctx, sel)
	if err != nil {
		mc.t.Fatalf("PlanGovern: %v", err)
	}
	if err := mc.m.Apply(ctx, pl); err != nil {
		mc.t.Fatalf("Apply(govern): %v", err)
	}
	return pl
}

func (mc *machine) undo(sel Selection) *Plan {
	mc.t.Helper()
	ctx := context.Background()
	pl, err := mc.m.PlanUndo(ctx, sel)
	if err != nil {
		mc.t.Fatalf("PlanUndo: %v", err)
	}
	if err := mc.m.Apply(ctx, pl); err != nil {
		mc.t.Fatalf("Apply(undo): %v", err)
	}
	return pl
}

// entries returns the client's entries by name (file and scope prefixed
// when a name is in several places).
func (mc *machine) entries(id ID) map[string]Entry {
	mc.t.Helper()
	cs, err := mc.m.Scan(context.Background())
	if err != nil {
		mc.t.Fatal(err)
	}
	out := map[string]Entry{}
	for _, c := range cs {
		if c.ID != id {
			continue
		}
		for _, f := range c.Files {
			if f.Err != nil {
				mc.t.Fatalf("%s: %v", f.Path, f.Err)
			}
			for _, e := range f.Entries {
				out[e.Name] = e
			}
		}
	}
	return out
}

func (mc *machine) servers() []store.Server {
	mc.t.Helper()
	s, err := mc.st.Servers(context.Background())
	if err != nil {
		mc.t.Fatal(err)
	}
	return s
}

// rest is a config file's meaning without the named entries.
func rest(t *testing.T, sp *spec, data []byte, prefixes [][]string, drop []string) any {
	t.Helper()
	if sp.format == formatYAML && len(prefixes) == 0 { // a YAML file (a JSON one names where its servers are)
		var locs [][]string
		for _, d := range drop {
			locs = append(locs, []string{sp.top, d})
		}
		v, err := yamlRest(sp, data, locs)
		if err != nil {
			t.Fatalf("decode: %v", err)
		}
		return v
	}
	if sp.format == formatTOML {
		var v map[string]any
		if _, err := toml.Decode(string(data), &v); err != nil {
			t.Fatalf("decode: %v", err)
		}
		if s, ok := v["mcp_servers"].(map[string]any); ok {
			for _, d := range drop {
				delete(s, d)
			}
		}
		return v
	}
	n, err := parseJSON(data, sp.format == formatJSONC)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	v := n.plain(data)
	for _, prefix := range prefixes {
		obj := v.(map[string]any)
		for _, k := range prefix {
			next, ok := obj[k].(map[string]any)
			if !ok {
				obj = nil
				break
			}
			obj = next
		}
		for _, d := range drop {
			delete(obj, d)
		}
	}
	return v
}

type roundTrip struct {
	name     string
	goos     string
	client   ID
	fixture  string
	path     func(mc *machine) string
	prefix   [][]string               // where the servers are
	secrets  []string                 // values that must leave the file
	governed []string                 // entries governed
	skipped  map[string]string        // entry → part of the reason it is not
	cwd      func(mc *machine) string // where gatehouse runs, for a project's file
}

var roundTrips = []roundTrip{
	{
		name: "continue", goos: "linux", client: Continue, fixture: "continue_config.yaml",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".continue", "config.yaml") },
		secrets:  []string{"ghp_contNOTrealTOKEN000000000000000000a1", "contNOTrealBEARER0123456789"},
		governed: []string{"SQLite MCP", "GitHub", "Docs", "Events"},
	},
	{
		name: "continue, a workspace's block, messy: CRLF, comments, quoted and plain scalars, block scalars, anchors, flow style",
		goos: "linux", client: Continue, fixture: "continue_messy.yaml",
		cwd: func(mc *machine) string { return filepath.Join(mc.home, "src", "app") },
		path: func(mc *machine) string {
			return filepath.Join(mc.home, "src", "app", ".continue", "mcpServers", "work.yaml")
		},
		secrets:  []string{"BSAcontNOTreal"},
		governed: []string{"brave search", "templated"},
		skipped: map[string]string{
			"anchored": "anchor",
			"flowing":  "flow style",
			"shell":    "not found",
		},
	},
	{
		name: "continue, a workspace's JSON file", goos: "darwin", client: Continue, fixture: "continue_mcp.json",
		cwd: func(mc *machine) string { return filepath.Join(mc.home, "src", "app") },
		path: func(mc *machine) string {
			return filepath.Join(mc.home, "src", "app", ".continue", "mcpServers", "desktop.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAcontJSONnotREAL0123456789"},
		governed: []string{"filesystem", "brave-search"},
	},
	{
		name: "goose", goos: "linux", client: Goose, fixture: "goose_config.yaml",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".config", "goose", "config.yaml") },
		secrets:  []string{"ghp_gooseNOTrealTOKEN00000000000000000a1", "gooseNOTrealKEY-0123456789abcdef"},
		governed: []string{"filesystem", "github", "remote-tools"},
		skipped:  map[string]string{"developer": "inside Goose"},
	},
	{
		name: "goose, windows, messy: CRLF, four spaces, quoted id, env_keys, anchors, aliases, tags",
		goos: "windows", client: Goose, fixture: "goose_messy.yaml",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, "AppData", "Roaming", "Block", "goose", "config", "config.yaml")
		},
		governed: []string{"slack"},
		skipped: map[string]string{
			"memory": "inside Goose",
			"legacy": "anchor",
			"copy":   "alias",
			"odd":    "inside Goose",
			"tagged": "tag",
		},
	},
	{
		name: "claude code, sign-in with OAuth and mcp-remote", goos: "linux", client: ClaudeCode, fixture: "claude_oauth.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".claude.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"wrapNOTrealTOKEN0123456789abcdef"},
		governed: []string{"notion", "figma", "asana", "wrapped-token", "legacy", "wrapped-sse"},
		skipped: map[string]string{
			"helper":      "headersHelper",
			"wrapped-odd": "--static-oauth-client-info",
		},
	},
	{
		name: "claude code", goos: "linux", client: ClaudeCode, fixture: "claude.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".claude.json") },
		prefix:   [][]string{{"mcpServers"}, {"projects", "/home/dev/src/webapp", "mcpServers"}},
		secrets:  []string{"ghp_testTOKENnotREAL0000000000000000a1", "sntrys_testNOTREAL_abcdefghijklmnop"},
		governed: []string{"github", "sentry", "shell-env", "postgres", "données", "linear"},
		skipped: map[string]string{
			"missing": "not found",
		},
	},
	{
		name: "claude desktop, linux", goos: "linux", client: ClaudeDesktop, fixture: "claude_desktop_config.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, ".config", "Claude", "claude_desktop_config.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAtestNOTrealKEY0123456789"},
		governed: []string{"filesystem", "brave-search"},
		skipped: map[string]string{
			"ant.dir.gh.anthropic.pdf-tools": "extension",
			"remote-notes":                   "does not read remote servers",
		},
	},
	{
		name: "claude desktop, macOS", goos: "darwin", client: ClaudeDesktop, fixture: "claude_desktop_config.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, "Library", "Application Support", "Claude", "claude_desktop_config.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAtestNOTrealKEY0123456789"},
		governed: []string{"filesystem", "brave-search"},
	},
	{
		name: "claude desktop, windows", goos: "windows", client: ClaudeDesktop, fixture: "claude_desktop_windows.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.env.AppData, "Claude", "claude_desktop_config.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"github_pat_testNOTREAL_0123456789abcdefABCDEF"},
		governed: []string{"filesystem", "git hub (work)"},
	},
	{
		name: "claude desktop, windows store", goos: "windows", client: ClaudeDesktop, fixture: "claude_desktop_windows.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.env.LocalAppData, "Packages", "Claude_pzs8sxrjxfjjc", "LocalCache", "Roaming", "Claude", "claude_desktop_config.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"github_pat_testNOTREAL_0123456789abcdefABCDEF"},
		governed: []string{"filesystem", "git hub (work)"},
	},
	{
		name: "zed", goos: "linux", client: Zed, fixture: "zed_settings.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".config", "zed", "settings.json") },
		prefix:   [][]string{{"context_servers"}},
		secrets:  []string{"sk-testNOTreal0123456789abcdef"},
		governed: []string{"mcp-server-tools", "legacy-server"},
		skipped:  map[string]string{"postgres-context-server": "Zed extension"},
	},
	{
		name: "codex", goos: "linux", client: Codex, fixture: "codex_config.toml",
		path: func(mc *machine) string { return filepath.Join(mc.home, ".codex", "config.toml") },
		secrets: []string{"ghp_testTOKENnotREAL0000000000000000c3", "xoxb-testNOTreal-0123456789", "figd_testNOTreal0123456789",
			"tomlNOTreal-09", "qryNOTreal0123456789abc"},
		governed: []string{"github", "docs server", "figma", "warehouse", "search"},
		skipped:  map[string]string{"notion": "bearer_token_env_var"},
	},
	{
		name: "vscode", goos: "linux", client: VSCode, fixture: "vscode_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".config", "Code", "User", "mcp.json") },
		prefix:   [][]string{{"servers"}},
		secrets:  []string{"ghp_testTOKENnotREAL0000000000000000d4", "vscNOTreal-0123"},
		governed: []string{"Perplexity", "fetch", "github-remote", "search-remote", "workspace-files"},
	},
	{
		name: "vscode, windows", goos: "windows", client: VSCode, fixture: "vscode_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.env.AppData, "Code", "User", "mcp.json") },
		prefix:   [][]string{{"servers"}},
		secrets:  []string{"ghp_testTOKENnotREAL0000000000000000d4", "vscNOTreal-0123"},
		governed: []string{"Perplexity", "github-remote", "search-remote", "workspace-files"},
		skipped:  map[string]string{"fetch": "uvx"},
	},
	{
		name: "cursor", goos: "linux", client: Cursor, fixture: "cursor_mcp.json",
		path:   func(mc *machine) string { return filepath.Join(mc.home, ".cursor", "mcp.json") },
		prefix: [][]string{{"mcpServers"}},
		secrets: []string{"sk_test_testNOTreal0123456789abcdef", "ctx7sk-testNOTreal-0123456789",
			"sk-testNOTreal0123456789abcdef", "pgNOTreal-0123", "whNOTreal-0123"},
		governed: []string{"stripe", "context7", "leaky", "postgres", "warehouse"},
		skipped:  map[string]string{"borrower": "names a Gatehouse keychain secret"},
	},
	{
		name: "windsurf", goos: "linux", client: Windsurf, fixture: "windsurf_mcp_config.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".codeium", "windsurf", "mcp_config.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"xoxb-testNOTreal-0123456789-abcdef"},
		governed: []string{"slack", "deepwiki"},
	},
	{
		name: "gemini", goos: "linux", client: GeminiCLI, fixture: "gemini_settings.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".gemini", "settings.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"AIzaTestNOTreal0123456789abcdefghijk", "testNOTreal-0123456789"},
		governed: []string{"pythonTools", "httpServer", "sseServer"},
	},
	{
		name: "cline", goos: "linux", client: Cline, fixture: "cline_mcp_settings.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, ".config", "Code", "User", "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"clineNOTreal-0123456789", "clineNOTrealTOKEN0123456789"},
		governed: []string{"local-server", "remote-server", "legacy-sse"},
	},
	{
		name: "cline, messy: CRLF, tabs, unknown keys, escapes, other servers", goos: "linux", client: Cline, fixture: "cline_messy.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, ".config", "Cursor", "User", "globalStorage", "saoudrizwan.claude-dev", "settings", "cline_mcp_settings.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAclineNOTreal", "donNOTreal-0123456789abcdef"},
		governed: []string{"brave search (work)", "données", "events"},
		skipped:  map[string]string{"shell": "not found"},
	},
	{
		name: "cline cli, macOS", goos: "darwin", client: Cline, fixture: "cline_mcp_settings.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, ".cline", "data", "settings", "cline_mcp_settings.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"clineNOTreal-0123456789", "clineNOTrealTOKEN0123456789"},
		governed: []string{"local-server", "remote-server", "legacy-sse"},
	},
	{
		name: "roo code, windows", goos: "windows", client: RooCode, fixture: "roo_mcp_settings.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.env.AppData, "Code", "User", "globalStorage", "rooveterinaryinc.roo-cline", "settings", "mcp_settings.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"rooNOTrealHEADER-0123456789"},
		governed: []string{"remote-server", "sse-server", "workspace-server"},
		skipped:  map[string]string{"local-server": "relative"},
	},
	{
		name: "roo code, project", goos: "linux", client: RooCode, fixture: "roo_mcp_settings.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, "src", "app", ".roo", "mcp.json") },
		cwd:      func(mc *machine) string { return filepath.Join(mc.home, "src", "app", "web") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"rooNOTreal-0123456789", "rooNOTrealHEADER-0123456789"},
		governed: []string{"local-server", "remote-server", "sse-server", "workspace-server"},
	},
	{
		name: "kilo code cli", goos: "linux", client: KiloCode, fixture: "kilo_mcp_settings.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, ".kilocode", "cli", "global", "settings", "mcp_settings.json")
		},
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"kiloNOTreal-0123456789", "kiloNOTrealTOKEN0123456789"},
		governed: []string{"server-name", "remote-server"},
	},
	{
		name: "lm studio, windows", goos: "windows", client: LMStudio, fixture: "lmstudio_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".lmstudio", "mcp.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"hf_testNOTreal0123456789abcdef"},
		governed: []string{"hf-mcp-server", "memory"},
	},
	{
		name: "kiro", goos: "darwin", client: Kiro, fixture: "kiro_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".kiro", "settings", "mcp.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAkiroNOTrealKEY0123456789", "kiroNOTrealHEADER-0123456789"},
		governed: []string{"web-search", "docs", "api-server"},
	},
	{
		name: "kiro, workspace", goos: "linux", client: Kiro, fixture: "kiro_mcp.json",
		path: func(mc *machine) string {
			return filepath.Join(mc.home, "work", "shop", ".kiro", "settings", "mcp.json")
		},
		cwd:      func(mc *machine) string { return filepath.Join(mc.home, "work", "shop") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"BSAkiroNOTrealKEY0123456789", "kiroNOTrealHEADER-0123456789"},
		governed: []string{"web-search", "docs", "api-server"},
	},
	{
		name: "amazon q", goos: "linux", client: AmazonQ, fixture: "amazonq_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".aws", "amazonq", "mcp.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"qNOTreal-secret", "qNOTrealTOKEN0123456789abcdef"},
		governed: []string{"postgres", "awslabs.core-mcp-server", "remote-tools"},
	},
	{
		name: "amazon q, an agent's file", goos: "darwin", client: AmazonQ, fixture: "amazonq_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".aws", "amazonq", "cli-agents", "dev.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"qNOTrealTOKEN0123456789abcdef"},
		governed: []string{"postgres", "remote-tools"},
		skipped:  map[string]string{"awslabs.core-mcp-server": "not found"},
	},
	{
		name: "junie", goos: "linux", client: Junie, fixture: "junie_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".junie", "mcp", "mcp.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"ghp_testTOKENnotREAL0000000000000000j5"},
		governed: []string{"filesystem", "github"},
		skipped:  map[string]string{"remote": "local (stdio) servers only"},
	},
	{
		name: "opencode", goos: "linux", client: OpenCode, fixture: "opencode.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".config", "opencode", "opencode.json") },
		prefix:   [][]string{{"mcp"}},
		secrets:  []string{"ocNOTreal-0123456789abc", "ocNOTrealTOKEN0123456789"},
		governed: []string{"my-local-mcp-server", "my-remote-mcp", "context7"},
	},
	{
		name: "opencode 2, messy: comments, trailing commas, CRLF", goos: "windows", client: OpenCode, fixture: "opencode_messy.jsonc",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".config", "opencode", "opencode.jsonc") },
		prefix:   [][]string{{"mcp", "servers"}},
		secrets:  []string{"ocNOTrealARG0123456789abcdef", "ocNOTrealENV0123456789", "ocNOTrealQUERY0123456789"},
		governed: []string{"search", "notes", "docs"},
	},
	{
		name: "copilot cli", goos: "darwin", client: CopilotCLI, fixture: "copilot_mcp_config.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".copilot", "mcp-config.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"github_pat_testNOTREAL_copilot0123456789"},
		governed: []string{"playwright", "github", "legacy-events"},
	},
	{
		name: "copilot cli, messy: CRLF, four spaces, unknown keys, one-line entries", goos: "linux", client: CopilotCLI, fixture: "copilot_messy.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".copilot", "mcp-config.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"cpNOTreal-pass", "cpNOTrealTOKEN-0123456789", "cpNOTrealHEADER-0123456789"},
		governed: []string{"warehouse", "search", "oauth-server"},
	},
	{
		name: "warp", goos: "linux", client: Warp, fixture: "warp_mcp.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".warp", ".mcp.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"ghp_testTOKENnotREAL0000000000000000w7", "lin_api_testNOTreal0123456789"},
		governed: []string{"github", "linear"},
	},
	{
		name: "augment", goos: "darwin", client: Augment, fixture: "augment_settings.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".augment", "settings.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"ctx7sk-testNOTreal-augment0123", "augNOTrealTOKEN0123456789"},
		governed: []string{"context7", "weather"},
	},
	{
		name: "qwen code", goos: "linux", client: QwenCode, fixture: "qwen_settings.json",
		path:     func(mc *machine) string { return filepath.Join(mc.home, ".qwen", "settings.json") },
		prefix:   [][]string{{"mcpServers"}},
		secrets:  []string{"qwenNOTreal-0123456789", "qwenNOTrealTOKEN0123456789"},
		governed: []string{"pythonTools", "httpServer", "sseServer"},
	},
}

// Governing then undoing gives back the original bytes; governing twice
// changes nothing the second time; no other key moves; no secret of a
// governed entry stays in the file.
func TestRoundTrip(t *testing.T) {
	for _, tc := range roundTrips {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			mc := newMachine(t, tc.goos)
			if tc.cwd != nil {
				mc.m.env.Cwd = tc.cwd(mc)
				_, marks := specs[tc.client].userFiles(&mc.m.env)
				if err := os.MkdirAll(marks[0], 0o755); err != nil { // installed
					t.Fatal(err)
				}
			}
			path := tc.path(mc)
			orig := mc.place(tc.fixture, path)
			sp := specs[tc.client]

			before := mc.entries(tc.client)
			for name, why := range tc.skipped {
				if e, ok := before[name]; !ok {
					t.Errorf("entry %s not found", name)
				} else if e.State != Unsupported && e.State != Extension && e.State != NotGoverned {
					t.Errorf("%s: state %s before governing", name, e.State)
				}
				_ = why
			}

			pl := mc.govern(Selection{Clients: []ID{tc.client}})
			if len(pl.Files) != 1 {
				t.Fatalf("plan has %d files, want 1", len(pl.Files))
			}
			for _, s := range tc.secrets {
				if strings.Contains(pl.Files[0].Diff, s) {
					t.Errorf("the diff shows secret %s", s)
				}
			}
			if !strings.Contains(pl.Files[0].Diff, "+") || !strings.Contains(pl.Files[0].Diff, "proxy") {
				t.Errorf("diff:\n%s", pl.Files[0].Diff)
			}
			governed := mc.read(path)
			if bytes.Equal(governed, orig) {
				t.Fatal("govern wrote nothing")
			}
			for _, s := range tc.secrets {
				if bytes.Contains(governed, []byte(s)) {
					t.Errorf("secret %s is still in the file:\n%s", s, governed)
				}
				if bytes.Contains(mc.read(filepath.Join(mc.st.Dir(), DatabaseFileForTest)), []byte(s)) {
					t.Errorf("secret %s is in Gatehouse's database", s)
				}
			}
			fi, err := os.Stat(path)
			if err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode after govern: %v, %v; want 0640", fi.Mode(), err)
			}
			after := mc.entries(tc.client)
			for _, name := range tc.governed {
				e := after[name]
				if e.State != Governed || e.Server == "" {
					t.Errorf("%s: state %q server %q detail %q, want governed", name, e.State, e.Server, e.Detail)
				}
			}
			for name, why := range tc.skipped {
				e := after[name]
				if e.State == Governed {
					t.Errorf("%s governed, want left alone", name)
				}
				var reason string
				for _, r := range pl.Results {
					if r.Name == name {
						reason = r.Skipped
					}
				}
				if !strings.Contains(reason, why) {
					t.Errorf("%s: skipped because %q, want it to mention %q", name, reason, why)
				}
			}
			// No other key moved.
			names := tc.governed
			if a, b := rest(t, sp, orig, tc.prefix, names), rest(t, sp, governed, tc.prefix, names); !reflect.DeepEqual(a, b) {
				t.Errorf("the rest of the file changed:\nbefore: %v\nafter:  %v", a, b)
			}
			// The secrets went to the keychain, and the servers are registered
			// with absolute commands.
			for _, s := range tc.secrets {
				found := false
				for _, v := range mc.kc.m {
					if strings.Contains(v, s) {
						found = true
					}
				}
				if !found {
					t.Errorf("secret %s is not in the keychain", s)
				}
			}
			for _, srv := range mc.servers() {
				if srv.Transport == store.TransportStdio && !isAbs(tc.goos, srv.Command) {
					t.Errorf("server %s: command %q is not absolute", srv.Name, srv.Command)
				}
			}

			// Twice: nothing more to do, nothing written.
			pl2, err := mc.m.PlanGovern(context.Background(), Selection{Clients: []ID{tc.client}})
			if err != nil {
				t.Fatal(err)
			}
			if len(pl2.Files) != 0 {
				t.Errorf("governing twice plans changes:\n%s", pl2.Files[0].Diff)
			}
			if err := mc.m.Apply(context.Background(), pl2); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(mc.read(path), governed) {
				t.Error("governing twice changed the file")
			}

			// Undo: the original bytes, nothing left behind.
			upl := mc.undo(Selection{Clients: []ID{tc.client}})
			if got := mc.read(path); !bytes.Equal(got, orig) {
				t.Errorf("after undo the file differs:\n%s", unifiedDiff(path, orig, got, []edit{wholeChange(orig, got)}, nil))
			}
			if len(upl.Files) != 1 || !strings.Contains(upl.Files[0].Diff, "-") {
				t.Errorf("undo plan: %+v", upl.Files)
			}
			for _, s := range tc.secrets {
				if strings.Contains(upl.Files[0].Diff, s) {
					t.Errorf("the undo diff shows secret %s", s)
				}
			}
			if s := mc.servers(); len(s) != 0 {
				t.Errorf("servers left after undo: %v", s)
			}
			if n := mc.kc.len(); n != 0 {
				t.Errorf("%d secrets left in the keychain after undo", n)
			}
			for name, e := range mc.entries(tc.client) {
				if e.State == Governed || e.Drift() {
					t.Errorf("%s: %s after undo", name, e.State)
				}
			}
		})
	}
}

const DatabaseFileForTest = store.DatabaseFile

func TestGovernedEntries(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".claude.json")
	mc.place("claude.json", path)
	mc.govern(Selection{Clients: []ID{ClaudeCode}})
	p, err := parseFile(specs[ClaudeCode], path, mc.read(path))
	if err != nil {
		t.Fatal(err)
	}
	get := func(loc ...string) string {
		src, err := locate(p, loc)
		if err != nil || src == nil {
			t.Fatalf("%v: %v", loc, err)
		}
		return string(p.data[src.span[0]:src.span[1]])
	}
	// Claude Code's own layout (JSON.stringify, two spaces), the type
	// kept, the server's name kept, the client named.
	want := `{
      "type": "stdio",
      "command": "/opt/gatehouse/bin/gatehouse",
      "args": [
        "proxy",
        "--client",
        "claude-code",
        "github"
      ]
    }`
	if got := get("mcpServers", "github"); got != want {
		t.Errorf("github entry:\n%s\nwant:\n%s", got, want)
	}
	// Variables Claude Code expands stay with it.
	if got := get("mcpServers", "shell-env"); !strings.Contains(got, `"API_TOKEN": "${MY_API_TOKEN}"`) || strings.Contains(got, "LOG_LEVEL") {
		t.Errorf("shell-env entry:\n%s", got)
	}
	// A remote server becomes a stdio entry of the same shape.
	if got := get("mcpServers", "sentry"); !strings.Contains(got, `"type": "stdio"`) || strings.Contains(got, "url") {
		t.Errorf("sentry entry:\n%s", got)
	}
	// A Unicode name keeps its name in the file, and gets a valid server name.
	if got := get("projects", "/home/dev/src/webapp", "mcpServers", "données"); !strings.Contains(got, `"donnees"`) {
		t.Errorf("données entry:\n%s", got)
	}
	ctx := context.Background()
	gh, err := mc.st.Server(ctx, "github")
	if err != nil {
		t.Fatal(err)
	}
	if gh.Command != "/usr/bin/npx" || !slices.Equal(gh.Args, []string{"-y", "@modelcontextprotocol/server-github"}) ||
		gh.Env["GITHUB_PERSONAL_ACCESS_TOKEN"] != "vault://secret/github.GITHUB_PERSONAL_ACCESS_TOKEN" {
		t.Errorf("github registered as %+v", gh)
	}
	if v, _ := mc.kc.Secret("github.GITHUB_PERSONAL_ACCESS_TOKEN"); v != "ghp_testTOKENnotREAL0000000000000000a1" {
		t.Errorf("keychain holds %q", v)
	}
	ids, _ := mc.st.SecretIDs(ctx)
	if len(ids) == 0 {
		t.Error("the store does not list the secrets it moved (gatehouse secret list would not show them)")
	}
	sentry, err := mc.st.Server(ctx, "sentry")
	if err != nil {
		t.Fatal(err)
	}
	if sentry.Transport != store.TransportHTTP || sentry.URL != "https://mcp.sentry.dev/mcp" ||
		sentry.Headers["Authorization"] != "vault://secret/sentry.Authorization" {
		t.Errorf("sentry registered as %+v", sentry)
	}
	shell, _ := mc.st.Server(ctx, "shell-env")
	if _, ok := shell.Env["API_TOKEN"]; ok || shell.Env["LOG_LEVEL"] != "debug" {
		t.Errorf("shell-env registered with env %v", shell.Env)
	}
	// uvx lives outside the system folders: its folder goes on PATH.
	donnees, _ := mc.st.Server(ctx, "donnees")
	if !strings.HasPrefix(donnees.Env["PATH"], "/home/dev/.local/bin:") {
		t.Errorf("donnees PATH = %q", donnees.Env["PATH"])
	}
}

func TestHomeArgument(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "linux")
	m, err := New(context.Background(), mc.st, &Options{Env: &mc.env, Keychain: mc.kc, Executable: testExe, Home: "/tmp/gh home"})
	if err != nil {
		t.Fatal(err)
	}
	mc.m = m
	path := filepath.Join(mc.home, ".cursor", "mcp.json")
	mc.place("cursor_mcp.json", path)
	mc.govern(Selection{Clients: []ID{Cursor}, Servers: []string{"stripe"}})
	if got := string(mc.read(path)); !strings.Contains(got, `"args": ["--home", "/tmp/gh home", "proxy", "--client", "cursor", "stripe"]`) {
		t.Errorf("governed file:\n%s", got)
	}
	// Only the named entry.
	if e := mc.entries(Cursor); e["context7"].State != NotGoverned || e["stripe"].State != Governed {
		t.Errorf("states: %+v", e)
	}
}

func TestWindowsEntry(t *testing.T) {
	t.Parallel()
	mc := newMachine(t, "windows")
	path := filepath.Join(mc.env.AppData, "Claude", "claude_desktop_config.json")
	mc.place("claude_desktop_windows.json", path)
	mc.govern(Selection{})
	got := string(mc.read(path))
	// CRLF kept, four-space indentation kept, the name with spaces kept.
	for _, want := range []string{
		"        \"git hub (work)\": {\r\n            \"command\": \"/opt/gatehouse/bin/gatehouse\",\r\n",
		"\"git-hub-work\"",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("governed file lacks %q:\n%s", want, got)
		}
	}
	fs, err := mc.st.Server(context.Background(), "filesystem")
	if err != nil {
		t.Fatal(err)
	}
	if fs.Command != `C:\Program Files\nodejs\npx.cmd` || fs.Args[3] != `D:\Projekte\Übersicht` {
		t.Errorf("filesystem registered as %+v", fs)
	}
	if fs.Env["PATH"] != `C:\Program Files\nodejs;C:\Windows\system32` {
		t.Errorf("PATH = %q", fs.Env["PATH"])
	}
}

// Each client's files are found where its documentation puts them, on each
// system, and a file in any of them makes the client installed.
func TestDetectPaths(t *testing.T) {
	t.Parallel()
	cases := []struct {
		goos   string
		client ID
		rel    string // under the home folder
	}{
		{"linux", Cline, ".config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"},
		{"darwin", Cline, "Library/Application Support/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"},
		{"windows", Cline, "AppData/Roaming/Code/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"},
		{"linux", Cline, ".config/Code - Insiders/User/globalStorage/saoudrizwan.claude-dev/settings/cline_mcp_settings.json"},
		{"windows", Cline, ".cline/data/settings/cline_mcp_settings.json"},
		{"linux", RooCode, ".config/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"},
		{"darwin", RooCode, "Library/Application Support/Cursor/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"},
		{"windows", RooCode, "AppData/Roaming/VSCodium/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"},
		{"darwin", KiloCode, "Library/Application Support/Code/User/globalStorage/kilocode.kilo-code/settings/mcp_settings.json"},
		{"linux", KiloCode, ".kilocode/cli/global/settings/mcp_settings.json"},
		{"linux", LMStudio, ".lmstudio/mcp.json"},
		{"darwin", LMStudio, ".cache/lm-studio/mcp.json"},
		{"windows", LMStudio, ".lmstudio/mcp.json"},
		{"linux", Kiro, ".kiro/settings/mcp.json"},
		{"windows", Kiro, ".kiro/settings/mcp.json"},
		{"linux", AmazonQ, ".aws/amazonq/mcp.json"},
		{"darwin", AmazonQ, ".aws/amazonq/agents/default.json"},
		{"windows", AmazonQ, ".aws/amazonq/cli-agents/review.json"},
		{"darwin", Junie, ".junie/mcp/mcp.json"},
		{"windows", Junie, ".junie/mcp/mcp.json"},
		{"linux", OpenCode, ".config/opencode/opencode.json"},
		{"darwin", OpenCode, ".config/opencode/opencode.jsonc"},
		{"windows", OpenCode, ".config/opencode/opencode.json"},
		{"linux", CopilotCLI, ".copilot/mcp-config.json"},
		{"windows", CopilotCLI, ".copilot/mcp-config.json"},
		{"darwin", Warp, ".warp/.mcp.json"},
		{"linux", Augment, ".augment/settings.json"},
		{"windows", QwenCode, ".qwen/settings.json"},
	}
	for _, tc := range cases {
		t.Run(tc.goos+" "+string(tc.client)+" "+tc.rel, func(t *testing.T) {
			t.Parallel()
			mc := newMachine(t, tc.goos)
			path := filepath.Join(mc.home, filepath.FromSlash(tc.rel))
			mc.write(path, []byte(`{"mcpServers": {}, "mcp": {}}`))
			cs, err := mc.m.Scan(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.ID != tc.client {
					// An extension's storage is in its editor's folder.
					if c.Installed && !(c.ID == VSCode && strings.Contains(tc.rel, "/Code/User/")) {
						t.Errorf("%s installed too", c.ID)
					}
					continue
				}
				if !c.Installed {
					t.Errorf("%s not installed", c.ID)
				}
				found := false
				for _, f := range c.Files {
					found = found || f.Path == path && f.Exists && f.Err == nil
				}
				if !found {
					t.Errorf("%s's files %+v, want %s among them", c.ID, c.Files, path)
				}
			}
		})
	}
}

// A governed entry is written in its client's own schema.
func TestGovernedShapes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		client   ID
		fixture  string
		rel      string
		locator  []string
		want     []string // in the governed entry
		wantNot  []string
		server   string // its registration
		cwd, env string // the registration's working folder, and an environment variable it holds
	}{
		{OpenCode, "opencode.json", ".config/opencode/opencode.json", []string{"mcp", "my-local-mcp-server"},
			[]string{`"type": "local"`, `"command": ["/opt/gatehouse/bin/gatehouse", "proxy", "--client", "opencode", "my-local-mcp-server"]`, `"enabled": true`},
			[]string{`"args"`, `"environment"`}, "my-local-mcp-server", "", "MY_API_KEY"},
		{CopilotCLI, "copilot_mcp_config.json", ".copilot/mcp-config.json", []string{"mcpServers", "playwright"},
			[]string{`"type": "local"`, `"tools": ["*"]`}, []string{`"env"`}, "playwright", "", ""},
		{Warp, "warp_mcp.json", ".warp/.mcp.json", []string{"mcpServers", "github"},
			[]string{`"command": "/opt/gatehouse/bin/gatehouse"`}, []string{"working_directory"}, "github", "/home/dev/src", "GITHUB_PERSONAL_ACCESS_TOKEN"},
		{Kiro, "kiro_mcp.json", ".kiro/settings/mcp.json", []string{"mcpServers", "web-search"},
			[]string{`"disabled": false`, `"autoApprove": ["brave_web_search"]`, `"disabledTools": ["brave_local_search"]`}, []string{"BRAVE"}, "web-search", "", "BRAVE_API_KEY"},
		{Junie, "junie_mcp.json", ".junie/mcp/mcp.json", []string{"mcpServers", "remote"},
			[]string{`"url": "https://mcp.example.com/mcp"`}, []string{"gatehouse"}, "", "", ""},
	}
	for _, tc := range cases {
		t.Run(string(tc.client), func(t *testing.T) {
			t.Parallel()
			mc := newMachine(t, "linux")
			path := filepath.Join(mc.home, filepath.FromSlash(tc.rel))
			mc.place(tc.fixture, path)
			mc.govern(Selection{Clients: []ID{tc.client}})
			p, err := parseFile(specs[tc.client], path, mc.read(path))
			if err != nil {
				t.Fatal(err)
			}
			src, err := locate(p, tc.locator)
			if err != nil || src == nil {
				t.Fatalf("%v: %v", tc.locator, err)
			}
			got := string(p.data[src.span[0]:src.span[1]])
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("entry lacks %s:\n%s", w, got)
				}
			}
			for _, w := range tc.wantNot {
				if strings.Contains(got, w) {
					t.Errorf("entry holds %s:\n%s", w, got)
				}
			}
			if tc.server == "" {
				return
			}
			srv, err := mc.st.Server(context.Background(), tc.server)
			if err != nil {
				t.Fatal(err)
			}
			if srv.Cwd != tc.cwd {
				t.Errorf("server %s: cwd %q, want %q", tc.server, srv.Cwd, tc.cwd)
			}
			if v := srv.Env[tc.env]; tc.env != "" && !strings.HasPrefix(v, "vault://secret/") {
				t.Errorf("server %s: %s = %q, want a keychain reference", tc.server, tc.env, v)
			}
		})
	}
}

func (k *fakeKeychain) DeleteOAuthGrant(server string) error {
	return k.DeleteSecret("oauth:" + server)
}

// Remote entries without a credential of their own, and mcp-remote
// wrappers, become remote servers that sign in with OAuth when the server
// asks; a wrapper's header from the entry's env becomes a header whose
// secret is in the keychain; undo takes the sign-in away with the server.
func TestGovernSignInWithOAuth(t *testing.T) {
	mc := newMachine(t, "linux")
	path := filepath.Join(mc.home, ".claude.json")
	mc.place("claude_oauth.json", path)
	pl := mc.govern(Selection{Clients: []ID{ClaudeCode}})
	byName := map[string]store.Server{}
	for _, s := range mc.servers() {
		byName[s.Name] = s
	}
	for _, tc := range []struct {
		name, transport, url, auth, clientID string
		headers                              int
	}{
		{"notion", store.TransportHTTP, "https://mcp.notion.com/mcp", store.AuthOAuth, "", 0},
		{"figma", store.TransportHTTP, "https://mcp.figma.com/mcp", store.AuthOAuth, "figma-client-123", 0},
		{"asana", store.TransportHTTP, "https://mcp.asana.com/mcp", store.AuthOAuth, "", 0},
		{"wrapped-token", store.TransportHTTP, "https://mcp.internal.example/mcp", store.AuthNone, "", 1},
		{"legacy", store.TransportSSE, "https://mcp.legacy.example/sse", store.AuthOAuth, "", 0},
		{"wrapped-sse", store.TransportSSE, "https://mcp.linear.app/sse", store.AuthOAuth, "", 0},
	} {
		s, ok := byName[tc.name]
		if !ok {
			t.Errorf("server %s not registered", tc.name)
			continue
		}
		if s.Transport != tc.transport || s.URL != tc.url || s.Auth != tc.auth || s.OAuthClientID != tc.clientID || len(s.Headers) != tc.headers {
			t.Errorf("server %s = %+v, want %s at %s, auth %q, client id %q, %d headers", tc.name, s, tc.transport, tc.url, tc.auth, tc.clientID, tc.headers)
		}
	}
	if h := byName["wrapped-token"].Headers["Authorization"]; !strings.HasPrefix(h, "vault://secret/") {
		t.Errorf("wrapped-token's Authorization = %q, want a keychain reference", h)
	}
	var notes []string
	for _, r := range pl.Results {
		if r.Name == "notion" {
			notes = r.Notes
		}
	}
	if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "gatehouse server login notion") }) {
		t.Errorf("notion's notes = %q, want the sign-in command", notes)
	}
	if got := string(mc.read(path)); !strings.Contains(got, `"timeout": 30000`) {
		t.Errorf("figma's timeout is not kept:\n%s", got)
	}
	mc.kc.SetSecret("oauth:notion", `{"access_token":"x"}`)
	mc.undo(Selection{Clients: []ID{ClaudeCode}})
	if _, err := mc.kc.Secret("oauth:notion"); err == nil {
		t.Error("the sign-in to notion is still in the keychain after undo")
	}
}
