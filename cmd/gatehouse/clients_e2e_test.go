package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The real Claude Code CLI, offline in a scratch HOME: servers added with
// claude mcp add-json in the user, local and project scopes are governed
// by gatehouse clients govern, claude mcp list connects to each through
// gatehouse proxy, and after gatehouse clients undo it runs the original
// commands again from a ~/.claude.json that is byte for byte as it was.
func TestClaudeCodeGovernAndUndo(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	nm := npmPeers(t)
	home := t.TempDir()
	userHome := t.TempDir()
	proj := filepath.Join(userHome, "src", "app")
	if err := os.MkdirAll(proj, 0o755); err != nil {
		t.Fatal(err)
	}
	claude := filepath.Join(nm, ".bin", "claude")
	env := append(os.Environ(), "HOME="+userHome, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1")
	run := func(name string, args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Env = env
		cmd.Dir = proj
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	entry := func(v map[string]any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	const secret = "sk-live-e2e-0123456789abcdef"
	run(claude, "mcp", "add-json", "-s", "user", "everything", entry(map[string]any{
		"type": "stdio", "command": "node", "args": serverCmd(nm, "server-everything")[1:],
		"env": map[string]string{"API_TOKEN": secret},
	}))
	run(claude, "mcp", "add-json", "memory", entry(map[string]any{
		"type": "stdio", "command": "node", "args": serverCmd(nm, "server-memory")[1:],
		"env": map[string]string{"MEMORY_FILE_PATH": filepath.Join(t.TempDir(), "memory.jsonl")},
	}))
	run(claude, "mcp", "add-json", "-s", "project", "files", entry(map[string]any{
		"command": "node", "args": serverCmd(nm, "server-filesystem", proj)[1:],
	}))
	// The user trusts the project and approves its servers.
	claudeJSON := filepath.Join(userHome, ".claude.json")
	approveProject(t, claudeJSON, proj)
	os.MkdirAll(filepath.Join(userHome, ".claude"), 0o755)
	os.WriteFile(filepath.Join(userHome, ".claude", "settings.json"), []byte(`{"enableAllProjectMcpServers": true}`), 0o600)

	direct := run(claude, "mcp", "list")
	for _, name := range []string{"everything", "memory", "files"} {
		if !regexp.MustCompile(`(?m)^` + name + `: node .* - ✔ Connected$`).MatchString(direct) {
			t.Fatalf("claude mcp list before governing:\n%s\nwant %s ✔ Connected", direct, name)
		}
	}
	before, err := os.ReadFile(claudeJSON)
	if err != nil {
		t.Fatal(err)
	}
	mcpJSON, err := os.ReadFile(filepath.Join(proj, ".mcp.json"))
	if err != nil {
		t.Fatal(err)
	}

	out := run(gatehouseBin, "--home", home, "clients", "govern", "claude-code")
	for _, name := range []string{"everything", "memory", "files"} {
		if !strings.Contains(out, "claude-code "+name+" ") || !strings.Contains(out, "governed through server "+name) {
			t.Errorf("gatehouse clients govern:\n%s\nwant %s governed", out, name)
		}
	}
	governed, _ := os.ReadFile(claudeJSON)
	if bytes.Contains(governed, []byte(secret)) {
		t.Errorf("the secret is still in ~/.claude.json:\n%s", governed)
	}
	if now, _ := os.ReadFile(filepath.Join(proj, ".mcp.json")); !bytes.Equal(now, mcpJSON) {
		t.Errorf("the shared .mcp.json was edited:\n%s", now)
	}
	if out, _ := exec.Command("grep", "-r", "-l", secret, home).Output(); len(out) > 0 {
		t.Errorf("the secret is in Gatehouse's home: %s", out)
	}

	proxied := run(claude, "mcp", "list")
	t.Logf("claude mcp list, governed:\n%s", proxied)
	for _, name := range []string{"everything", "memory", "files"} {
		re := regexp.MustCompile(`(?m)^` + name + `: \S*gatehouse --home \S+ proxy --client claude-code ` + name + ` - ✔ Connected$`)
		if !re.MatchString(proxied) {
			t.Errorf("claude mcp list after governing:\n%s\nwant %s ✔ Connected through gatehouse proxy", proxied, name)
		}
	}
	status := run(gatehouseBin, "--home", home, "clients")
	for _, name := range []string{"everything", "memory", "files"} {
		if !regexp.MustCompile(`(?m)^claude-code .* ` + name + ` +governed \(` + name + `\)`).MatchString(status) {
			t.Errorf("gatehouse clients:\n%s\nwant %s governed", status, name)
		}
	}

	run(gatehouseBin, "--home", home, "clients", "undo", "claude-code")
	if after, _ := os.ReadFile(claudeJSON); !bytes.Equal(after, before) {
		t.Errorf("~/.claude.json after undo differs from before governing:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if again := run(claude, "mcp", "list"); again != direct {
		t.Errorf("claude mcp list after undo:\n%s\nwant as before governing:\n%s", again, direct)
	}
	if s := run(gatehouseBin, "--home", home, "server", "list"); strings.Contains(s, "everything") {
		t.Errorf("servers left after undo:\n%s", s)
	}
}

// approveProject marks proj trusted in ~/.claude.json, as Claude Code does
// when the user accepts its trust dialog.
func approveProject(t *testing.T, path, proj string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	projects, _ := v["projects"].(map[string]any)
	if projects == nil {
		projects = map[string]any{}
		v["projects"] = projects
	}
	p, _ := projects[proj].(map[string]any)
	if p == nil {
		p = map[string]any{}
		projects[proj] = p
	}
	p["hasTrustDialogAccepted"] = true
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, bytes.TrimSuffix(b.Bytes(), []byte("\n")), 0o600); err != nil {
		t.Fatal(err)
	}
}
