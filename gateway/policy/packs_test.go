package policy

import (
	"slices"
	"strings"
	"testing"
)

func TestPacksRead(t *testing.T) {
	var ids []string
	for _, p := range Packs() {
		ids = append(ids, p.ID)
		if p.Name == "" || p.Source == "" {
			t.Errorf("pack %s: no name or source", p.ID)
		}
	}
	for _, want := range []string{"brave-search", "fetch", "filesystem", "git", "github", "memory", "playwright", "postgres", "puppeteer", "sentry", "slack", "sqlite"} {
		if !slices.Contains(ids, want) {
			t.Errorf("Packs() = %v, want %s among them", ids, want)
		}
	}
}

func TestMatchPack(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		command string
		args    []string
		url     string
		want    string // pack id, "" for none
	}{
		{"npx", "npx", []string{"-y", "@modelcontextprotocol/server-filesystem", "/home/me/projects"}, "", "filesystem"},
		{"npx versioned", "npx", []string{"-y", "@modelcontextprotocol/server-memory@2025.8.4"}, "", "memory"},
		{"windows npx", `C:\Program Files\nodejs\npx.cmd`, []string{"-y", "@playwright/mcp@latest"}, "", "playwright"},
		{"npm exec", "npm", []string{"exec", "--", "@sentry/mcp-server"}, "", "sentry"},
		{"node in node_modules", "node", []string{"/srv/app/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js", "/tmp"}, "", "filesystem"},
		{"uvx", "uvx", []string{"mcp-server-git", "--repository", "/home/me/repo"}, "", "git"},
		{"uvx pinned", "uvx", []string{"mcp-server-fetch==2025.4.7"}, "", "fetch"},
		{"python -m", "python3", []string{"-m", "mcp_server_sqlite", "--db-path", "/tmp/x.db"}, "", "sqlite"},
		{"installed script", "/usr/local/bin/mcp-server-fetch", nil, "", "fetch"},
		{"docker", "docker", []string{"run", "-i", "--rm", "-e", "GITHUB_PERSONAL_ACCESS_TOKEN", "ghcr.io/github/github-mcp-server:v0.9"}, "", "github"},
		{"docker hub", "docker", []string{"run", "-i", "--rm", "docker.io/mcp/fetch"}, "", "fetch"},
		{"program", "github-mcp-server", []string{"stdio"}, "", "github"},
		{"remote", "", nil, "https://api.githubcopilot.com/mcp/", "github"},
		{"remote path", "", nil, "https://mcp.sentry.dev/mcp/sse", "sentry"},
		{"remote other host", "", nil, "https://api.githubcopilot.com.evil.example/mcp/", ""},
		{"mentioned only", "npx", []string{"-y", "some-wrapper", "@modelcontextprotocol/server-filesystem"}, "", ""},
		{"env value", "node", []string{"server.js", "--like", "@modelcontextprotocol/server-github"}, "", ""},
		{"unknown", "my-server", nil, "", ""},
		{"npx of a look-alike", "npx", []string{"-y", "@modelcontextprotocol/server-filesystem-plus"}, "", ""},
	} {
		got := ""
		if p := MatchPack(tc.command, tc.args, tc.url); p != nil {
			got = p.ID
		}
		if got != tc.want {
			t.Errorf("%s: MatchPack(%q, %q, %q) = %q, want %q", tc.name, tc.command, tc.args, tc.url, got, tc.want)
		}
	}
}

func TestClassifyInPack(t *testing.T) {
	t.Parallel()
	fs := PackByRef("filesystem@1")
	gh := PackByRef("github")
	for _, tc := range []struct {
		pack *Pack
		tool string
		want Risk
		why  string
	}{
		{fs, "read_text_file", Low, "pack filesystem@1"},
		{fs, "move_file", High, "pack filesystem@1"},
		{gh, "merge_pull_request", Critical, "pack github@1"},
		// By their names, these would be low ("get", "search"): the pack
		// knows better, or the same.
		{gh, "get_me", Low, "pack github@1"},
		// A tool the pack does not name is classified by its name, never
		// allowed for being in a pack.
		{fs, "delete_everything", Critical, "does not name this tool"},
		{fs, "frobnicate", Medium, "does not name this tool"},
	} {
		r, why := ClassifyIn(tc.pack, tc.tool, nil, false)
		if r != tc.want || !strings.Contains(strings.Join(why, "; "), tc.why) {
			t.Errorf("ClassifyIn(%s, %s) = %s, %q; want %s, with %q", tc.pack.ID, tc.tool, r, why, tc.want, tc.why)
		}
	}
	// Annotations still raise a pack's class.
	yes := true
	if r, _ := ClassifyIn(fs, "read_text_file", &Annotations{Destructive: &yes}, false); r != High {
		t.Errorf("ClassifyIn(filesystem, read_text_file, destructiveHint) = %s, want high", r)
	}
}

func TestSuggestedRules(t *testing.T) {
	t.Parallel()
	rules := PackByRef("filesystem").SuggestedRules("files", []string{"/home/me/projects", "/tmp/scratch", "--flag"})
	p := Default()
	p.Rules = rules
	if err := p.Validate(); err != nil {
		t.Fatalf("suggested rules do not validate: %v", err)
	}
	res := p.Decide(Call{Server: "files", Tool: "read_text_file", Known: true, Args: []byte(`{"path":"/tmp/scratch/a"}`), Pack: PackByRef("filesystem")})
	if res.Decision != Allow {
		t.Errorf("read under a given folder = %s (%s), want ALLOW", res.Decision, res.Rule)
	}
	res = p.Decide(Call{Server: "files", Tool: "write_file", Known: true, Args: []byte(`{"path":"/tmp/scratch/a"}`), Pack: PackByRef("filesystem")})
	if res.Decision != ApprovalRequired || !strings.HasPrefix(res.Rule, "files-writes") {
		t.Errorf("write = %s (%s), want APPROVAL_REQUIRED by files-writes", res.Decision, res.Rule)
	}
	gh := PackByRef("github").SuggestedRules("gh", nil)
	p.Rules = gh
	if res := p.Decide(Call{Server: "gh", Tool: "delete_workflow_run_logs", Known: true}); res.Decision != Deny {
		t.Errorf("delete_workflow_run_logs = %s, want DENY", res.Decision)
	}
}

func TestParsePackRejects(t *testing.T) {
	t.Parallel()
	base := "id = \"x\"\nversion = 1\n[match]\nnpm = [\"x\"]\n[[tool]]\nname = \"t\"\nrisk = \"low\"\nwhy = \"reads\"\n"
	if _, err := ParsePack([]byte(base)); err != nil {
		t.Fatalf("ParsePack(base) = %v", err)
	}
	for name, text := range map[string]string{
		"unknown key":  base + "colour = \"red\"\n",
		"bad risk":     strings.Replace(base, `"low"`, `"LOW"`, 1),
		"no why":       strings.Replace(base, `why = "reads"`, "", 1),
		"dup tool":     base + "[[tool]]\nname = \"t\"\nrisk = \"low\"\nwhy = \"again\"\n",
		"glob tool":    strings.Replace(base, `name = "t"`, `name = "t*"`, 1),
		"no version":   strings.Replace(base, "version = 1", "", 1),
		"bare allow":   base + "[[rule]]\nid = \"r\"\ntools = [\"t\"]\ndecision = \"ALLOW\"\n",
		"no match":     strings.Replace(base, "npm = [\"x\"]", "", 1),
		"bad confine":  base + "[confine]\nnet = [\"http\"]\n",
		"bad decision": base + "[[rule]]\nid = \"r\"\ntools = [\"t\"]\ndecision = \"MAYBE\"\n",
		"invalid id":   strings.Replace(base, `id = "x"`, `id = "X Y"`, 1),
		"insecure url": strings.Replace(base, "npm = [\"x\"]", "urls = [\"http://example.com/mcp\"]", 1),
	} {
		if _, err := ParsePack([]byte(text)); err == nil {
			t.Errorf("%s: ParsePack accepted it", name)
		}
	}
}
