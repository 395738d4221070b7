package policy

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// MustParse parses a policy or fails the test.
func MustParse(tb testing.TB, text string) *Policy {
	tb.Helper()
	p, err := Parse([]byte(text))
	if err != nil {
		tb.Fatalf("Parse: %v\n%s", err, text)
	}
	return p
}

func TestDecide(t *testing.T) {
	t.Parallel()
	ladder := MustParse(t, `
default = "DENY"
[defaults]
low = "ALLOW"
high = "APPROVAL_REQUIRED"

[[rule]]
id = "gh-server"
capability = "mcp.github.*"
decision = "ALLOW"

[[rule]]
id = "gh-deletes"
capability = "mcp.github.delete_*"
decision = "DENY"

[[rule]]
id = "gh-delete-branches"
capability = "mcp.github.delete_branch*"
decision = "APPROVAL_REQUIRED"

[[rule]]
id = "gh-delete-scratch"
capability = "mcp.github.delete_branch"
decision = "ALLOW"

[[rule]]
id = "any-server-drop"
capability = "mcp.*.drop_table"
decision = "APPROVAL_REQUIRED"

[[rule]]
id = "db-drop"
capability = "mcp.db.drop_table"
decision = "DENY"
`)
	clients := MustParse(t, `
[[rule]]
id = "fs-any"
capability = "mcp.fs.write_file"
decision = "APPROVAL_REQUIRED"

[[rule]]
id = "fs-claude"
capability = "mcp.fs.write_file"
client = "claude-code"
decision = "ALLOW"

[[rule]]
id = "fs-cursors"
capability = "mcp.fs.write_file"
client = "cursor*"
decision = "DENY"

[[rule]]
id = "fs-server-ci"
capability = "mcp.fs.*"
client = "ci-bot"
decision = "ALLOW"
`)
	paths := MustParse(t, `
[defaults]
low = "ALLOW"

[[rule]]
id = "fs-write"
capability = "mcp.fs.write_file"
decision = "APPROVAL_REQUIRED"

[[rule]]
id = "fs-projects"
capability = "mcp.fs.write_file"
decision = "ALLOW"
args = [ { arg = "path", under = "/home/me/projects" } ]

[[rule]]
id = "fs-ssh"
capability = "mcp.fs.*"
decision = "DENY"
args = [ { arg = "path", under = "/home/me/.ssh" } ]

[[rule]]
id = "fs-ssh-read"
capability = "mcp.fs.read_file"
decision = "DENY"
args = [ { arg = "path", under = "/home/me/.ssh" } ]

[[rule]]
id = "fs-read"
capability = "mcp.fs.read_file"
decision = "ALLOW"

[[rule]]
id = "git-main"
capability = "mcp.git.push"
decision = "DENY"
args = [ { arg = "/options/branch", equals = "main" } ]

[[rule]]
id = "git-push"
capability = "mcp.git.push"
decision = "ALLOW"
args = [ { arg = "/options/branch", matches = "feature/[a-z0-9-]+" } ]
`)
	ties := MustParse(t, `
[[rule]]
id = "a-allow"
capability = "mcp.s.*_x"
decision = "ALLOW"

[[rule]]
id = "b-deny"
capability = "mcp.s.y_*"
decision = "DENY"

[[rule]]
id = "c-ask"
capability = "mcp.s.tool"
decision = "APPROVAL_REQUIRED"

[[rule]]
id = "d-allow"
capability = "mcp.s.tool"
decision = "ALLOW"

[[rule]]
id = "e-risk-ci"
risk = "critical"
client = "ci-bot"
decision = "DENY"
`)
	tests := []struct {
		name     string
		p        *Policy
		call     Call
		want     Decision
		wantRule string
	}{
		// The ladder: exact tool > tool glob (more literals first) > server-wide > risk default > global default.
		{"server-wide", ladder, Call{Server: "github", Tool: "create_issue", Known: true}, Allow, "gh-server"},
		{"tool glob beats server-wide", ladder, Call{Server: "github", Tool: "delete_repo", Known: true}, Deny, "gh-deletes"},
		{"longer tool glob wins", ladder, Call{Server: "github", Tool: "delete_branches", Known: true}, ApprovalRequired, "gh-delete-branches"},
		{"exact tool wins", ladder, Call{Server: "github", Tool: "delete_branch", Known: true}, Allow, "gh-delete-scratch"},
		{"exact server beats server glob", ladder, Call{Server: "db", Tool: "drop_table", Known: true}, Deny, "db-drop"},
		{"server glob", ladder, Call{Server: "pg", Tool: "drop_table", Known: true}, ApprovalRequired, "any-server-drop"},
		{"risk default", ladder, Call{Server: "fs", Tool: "read_file", Known: true}, Allow, "default:low"},
		{"risk default high", ladder, Call{Server: "fs", Tool: "write_file", Known: true}, ApprovalRequired, "default:high"},
		{"global default", ladder, Call{Server: "fs", Tool: "frobnicate", Known: true}, Deny, "default"},
		{"deny matches any case", ladder, Call{Server: "github", Tool: "DELETE_repo", Known: true}, Deny, "gh-deletes"},
		{"allow needs the exact case", ladder, Call{Server: "github", Tool: "Delete_Branch", Known: true}, ApprovalRequired, "gh-delete-branches"},

		// Unknown tools are never allowed by a glob or a default.
		{"unknown, risk default would allow", ladder, Call{Server: "fs", Tool: "read_file"}, ApprovalRequired, "default:low"},
		{"unknown, server-wide would allow", ladder, Call{Server: "github", Tool: "get_secret_thing"}, ApprovalRequired, "gh-server"},
		{"unknown, exact rule allows", ladder, Call{Server: "github", Tool: "delete_branch"}, Allow, "gh-delete-scratch"},
		{"unknown, deny stays", ladder, Call{Server: "github", Tool: "delete_repo"}, Deny, "gh-deletes"},
		{"unknown, global default deny", ladder, Call{Server: "fs", Tool: "frobnicate"}, Deny, "default"},
		{"unknown, built-in default", Default(), Call{Server: "fs", Tool: "get_file"}, ApprovalRequired, "default:low"},
		{"known, built-in default", Default(), Call{Server: "fs", Tool: "get_file", Known: true}, Allow, "default:low"},

		// Clients.
		{"client rule beats any-client", clients, Call{Server: "fs", Tool: "write_file", Client: "claude-code", Known: true}, Allow, "fs-claude"},
		{"other client", clients, Call{Server: "fs", Tool: "write_file", Client: "vscode", Known: true}, ApprovalRequired, "fs-any"},
		{"no client name", clients, Call{Server: "fs", Tool: "write_file", Known: true}, ApprovalRequired, "fs-any"},
		{"client glob", clients, Call{Server: "fs", Tool: "write_file", Client: "cursor-nightly", Known: true}, Deny, "fs-cursors"},
		{"client rule is still less specific than the tool", clients, Call{Server: "fs", Tool: "write_file", Client: "ci-bot", Known: true}, ApprovalRequired, "fs-any"},
		{"client server-wide", clients, Call{Server: "fs", Tool: "read_file", Client: "ci-bot", Known: true}, Allow, "fs-server-ci"},

		// Argument constraints.
		{"under the folder", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/a/b.txt"}`), Known: true}, Allow, "fs-projects"},
		{"the folder itself", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/"}`), Known: true}, Allow, "fs-projects"},
		{"dot elements are fine", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/./a//b"}`), Known: true}, Allow, "fs-projects"},
		// A value that cannot be checked never satisfies a rule that allows...
		{"dot-dot escape", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/../.ssh/authorized_keys"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"dot-dot that stays inside", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/a/../b"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"backslash dot-dot", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects\\..\\.ssh\\x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"backslash: a file beside the folder", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects\\evil"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"another case", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/Projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"percent-encoded dot-dot", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/%2e%2e/.ssh/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"prefix trick", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects-evil/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"relative path", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"tilde", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"~/projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"file URI", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"file:///home/me/projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"missing argument", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"file":"/home/me/projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"no arguments", paths, Call{Server: "fs", Tool: "write_file", Known: true}, ApprovalRequired, "fs-write"},
		{"not a string", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":["/home/me/projects/x"]}`), Known: true}, ApprovalRequired, "fs-write"},
		{"duplicate keys", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/.ssh/x","path":"/home/me/projects/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"key in another case", paths, Call{Server: "fs", Tool: "write_file", Args: []byte(`{"path":"/home/me/projects/x","PATH":"/home/me/.ssh/x"}`), Known: true}, ApprovalRequired, "fs-write"},
		{"server-wide deny under a folder", paths, Call{Server: "fs", Tool: "edit_file", Args: []byte(`{"path":"/home/me/.ssh/config"}`), Known: true}, Deny, "fs-ssh"},
		{"server-wide deny, elsewhere", paths, Call{Server: "fs", Tool: "edit_file", Args: []byte(`{"path":"/home/me/notes"}`), Known: true}, ApprovalRequired, "default"},
		// ... and makes a rule that denies apply.
		{"deny, dot-dot", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/home/me/projects/../.ssh/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, not a string", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":{"p":"/home/me/.ssh/id"}}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, duplicate keys", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/etc/hosts","path":"/home/me/.ssh/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, key in another case", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"Path":"/home/me/.ssh/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, invalid JSON", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, invalid UTF-8", paths, Call{Server: "fs", Tool: "read_file", Args: []byte("{\"path\":\"/home/me/\xff\"}"), Known: true}, Deny, "fs-ssh-read"},
		{"deny, backslash", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/home/me/.ssh\\id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, another case", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/home/me/.SSH/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, network path", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"//home/me/.ssh/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, the folder itself", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/home/me/.ssh"}`), Known: true}, Deny, "fs-ssh-read"},
		{"deny, missing argument does not apply", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{}`), Known: true}, Allow, "fs-read"},
		{"deny under a folder", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/home/me/.ssh/id_ed25519"}`), Known: true}, Deny, "fs-ssh-read"},
		{"read elsewhere", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/etc/hosts"}`), Known: true}, Allow, "fs-read"},
		{"read, dot-dot into the denied folder", paths, Call{Server: "fs", Tool: "read_file", Args: []byte(`{"path":"/tmp/../home/me/.ssh/id"}`), Known: true}, Deny, "fs-ssh-read"},
		{"pointer equals", paths, Call{Server: "git", Tool: "push", Args: []byte(`{"options":{"branch":"main"}}`), Known: true}, Deny, "git-main"},
		{"pointer matches", paths, Call{Server: "git", Tool: "push", Args: []byte(`{"options":{"branch":"feature/x-1"}}`), Known: true}, Allow, "git-push"},
		{"matches is anchored", paths, Call{Server: "git", Tool: "push", Args: []byte(`{"options":{"branch":"feature/x; main"}}`), Known: true}, ApprovalRequired, "default"},
		{"pointer missing", paths, Call{Server: "git", Tool: "push", Args: []byte(`{"branch":"main"}`), Known: true}, ApprovalRequired, "default"},

		// Ties go to the safer decision; risk-only rules rank with risk defaults.
		{"tie: deny beats allow", ties, Call{Server: "s", Tool: "y_x", Known: true}, Deny, "b-deny"},
		{"tie: ask beats allow", ties, Call{Server: "s", Tool: "tool", Known: true}, ApprovalRequired, "c-ask"},
		{"risk rule for a client", ties, Call{Server: "s", Tool: "run_it", Client: "ci-bot", Known: true}, Deny, "e-risk-ci"},
		{"risk rule, other client", ties, Call{Server: "s", Tool: "run_it", Client: "me", Known: true}, ApprovalRequired, "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.p == paths && windowsPaths {
				t.Skip("Unix paths; TestUnder covers Windows ones")
			}
			got := tt.p.Decide(tt.call)
			if got.Decision != tt.want || got.Rule != tt.wantRule {
				t.Errorf("Decide(%s %s) = %s by %s, want %s by %s\n%s", tt.call.Capability(), tt.call.Args,
					got.Decision, got.Rule, tt.want, tt.wantRule, strings.Join(got.Explanation, "\n"))
			}
		})
	}
}

func TestDecideExplains(t *testing.T) {
	t.Parallel()
	p := MustParse(t, `
[[rule]]
id = "gh-server"
capability = "mcp.github.*"
decision = "ALLOW"

[[rule]]
id = "gh-deletes"
capability = "mcp.github.delete_*"
decision = "DENY"

[[rule]]
id = "fs"
capability = "mcp.fs.*"
decision = "ALLOW"
`)
	got := p.Decide(Call{Server: "github", Tool: "delete_repo", Client: "claude-code", Known: true})
	text := strings.Join(got.Explanation, "\n")
	for _, want := range []string{
		`call mcp.github.delete_repo from client "claude-code"`,
		`risk critical: "delete" deletes: critical`,
		"rule gh-server (mcp.github.* → ALLOW): applies, as a server-wide rule",
		"rule gh-deletes (mcp.github.delete_* → DENY): applies, as a tool glob with 7 literal characters",
		"rule fs (mcp.fs.* → ALLOW): does not apply: another capability",
		"gh-deletes wins over gh-server: a tool glob beats a server-wide rule",
		"decision: DENY",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("explanation lacks %q:\n%s", want, text)
		}
	}
}

// A policy built in code may hold anything; Decide still never allows
// by mistake.
func TestDecideInvalidDecision(t *testing.T) {
	t.Parallel()
	p := &Policy{Rules: []Rule{{ID: "x", Capability: "mcp.s.t", Decision: "YES"}}}
	if got := p.Decide(Call{Server: "s", Tool: "t", Known: true}); got.Decision != ApprovalRequired {
		t.Errorf("Decide with decision YES = %s, want APPROVAL_REQUIRED", got.Decision)
	}
	if got := (&Policy{}).Decide(Call{Server: "s", Tool: "get_x", Known: true}); got.Decision != ApprovalRequired {
		t.Errorf("Decide with an empty policy = %s, want APPROVAL_REQUIRED", got.Decision)
	}
}

func TestGlob(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern, s string
		want       bool
	}{
		{"*", "", true},
		{"*", "files.read", true},
		{"delete_*", "delete_repo", true},
		{"delete_*", "delete_", true},
		{"delete_*", "delete", false},
		{"*_x", "a_b_x", true},
		{"a*b*c", "aXbYc", true},
		{"a*b*c", "aXbY", false},
		{"get", "get", true},
		{"get", "gets", false},
		{"é*", "été", true},
	}
	for _, tt := range tests {
		if got := glob(tt.pattern, tt.s, false); got != tt.want {
			t.Errorf("glob(%q, %q) = %v, want %v", tt.pattern, tt.s, got, tt.want)
		}
	}
}

// The proxy decides every call: this is its price with a policy of a few
// dozen rules.
func BenchmarkDecide(b *testing.B) {
	p := Default()
	for i := range 40 {
		p.Rules = append(p.Rules, Rule{ID: "r" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Capability: "mcp.s" + string(rune('a'+i%5)) + ".*_x", Decision: Allow,
			Args: []ArgConstraint{{Arg: "path", Under: "/home/me/projects"}}})
	}
	c := Call{Server: "sa", Tool: "write_x", Client: "claude-code", Args: []byte(`{"path":"/home/me/projects/a.txt","content":"hello"}`), Known: true}
	for b.Loop() {
		p.Decide(c)
	}
}

// TestUnder checks paths as Linux and macOS read them (windows false) and
// as Windows does, on any OS. A form the server may read as another path
// than the string names cannot be checked: unsure, never holds.
func TestUnder(t *testing.T) {
	t.Parallel()
	const (
		unix = false
		win  = true
	)
	tests := []struct {
		name, value, dir string
		windows          bool
		want             verdict
		why              string // in the reason
	}{
		{"inside", "/home/me/projects/a", "/home/me/projects", unix, holds, "is under"},
		{"the folder itself", "/home/me/projects", "/home/me/projects", unix, holds, "is under"},
		{"a sibling with the same start", "/home/me/projects-evil", "/home/me/projects", unix, fails, "is not under"},
		{"root", "/anything", "/", unix, holds, "is under"},
		{"dot elements and double slashes", "/home/me/projects/./a//b/", "/home/me/projects", unix, holds, "is under"},
		{"a name starting with dots", "/home/me/projects/..hidden", "/home/me/projects", unix, holds, "is under"},
		{"dot-dot out", "/home/me/projects/../.ssh", "/home/me/projects", unix, unsure, `".." element`},
		{"dot-dot at the end", "/home/me/projects/..", "/home/me", unix, unsure, `".." element`},
		{"a NUL byte", "/home/me/\x00/a", "/home/me", unix, unsure, "NUL byte"},
		{"tilde", "~/projects/a", "/home/me/projects", unix, unsure, "starts with ~"},
		{"network path", "//server/share/a", "/", unix, unsure, "network or device path"},
		{"relative", "projects/a", "/home/me/projects", unix, unsure, "not an absolute path"},
		{"a drive path is relative here", "C:/home/me/projects/a", "/home/me/projects", unix, unsure, "not an absolute path"},
		{"file URI", "file:///home/me/projects/a", "/home/me/projects", unix, unsure, "not an absolute path"},
		{"percent-encoded dot-dot", "/home/me/projects/%2e%2e/.ssh/id", "/home/me/projects", unix, unsure, `reads as "."`},
		{"percent-encoded slash", "/home/me/projects%2F..%2F.ssh", "/home/me/projects", unix, unsure, `reads as "/"`},
		{"percent-encoded backslash", "/home/me/projects/a%5c..%5cb", "/home/me/projects", unix, unsure, `reads as "\\"`},
		{"a percent sign alone", "/home/me/projects/100%.txt", "/home/me/projects", unix, holds, "is under"},

		// A backslash is part of a name to Linux and macOS: "proj\evil" is a
		// file beside proj, not in it. A server that reads Windows paths
		// reads it as a separator.
		{"backslash: a name beside the folder", "/home/u/proj\\evil", "/home/u/proj", unix, unsure, "holds a backslash"},
		{"backslash: inside either way", "/home/u/proj/a\\b", "/home/u/proj", unix, unsure, "holds a backslash"},
		{"backslash: outside either way", "/etc\\passwd", "/home/u/proj", unix, unsure, "holds a backslash"},
		{"backslash dot-dot", "/home/u/proj\\..\\.ssh", "/home/u/proj", unix, unsure, "holds a backslash"},
		{"mixed separators", "/home/u/proj\\a/b", "/home/u/proj", unix, unsure, "holds a backslash"},

		// Case and normalization: one name on some file systems (macOS's and
		// Windows' by default, Linux folders that ignore case), two on
		// others.
		{"another case", "/home/me/Projects/a", "/home/me/projects", unix, unsure, "only if case and Unicode normalization are ignored"},
		{"another case, elsewhere", "/home/me/Other/a", "/home/me/projects", unix, fails, "is not under"},
		{"decomposed é (macOS reads it as é)", "/Users/me/Cafe\u0301/a", "/Users/me/Café", unix, unsure, "only if case"},
		{"decomposed é below the folder", "/Users/me/Café/cafe\u0301", "/Users/me/Café", unix, holds, "is under"},
		{"dotless i (Windows reads it as I)", "C:/W\u0131ndows/System32", "C:/Windows", win, unsure, "only if case"},
		{"long s (Windows reads it as S)", "/home/me/\u017fecrets/a", "/home/me/secrets", unix, unsure, "only if case"},
		{"sharp s (full case folding reads it as ss)", "/home/me/STRASSE/a", "/home/me/straße", unix, unsure, "only if case"},
		{"final sigma", "/home/me/οδος/a", "/home/me/ΟΔΟΣ", unix, unsure, "only if case"},
		{"Kelvin sign", "/home/me/\u212aeys/a", "/home/me/keys", unix, unsure, "only if case"},

		// Windows: both slashes separate, drive letters in any case.
		{"windows: inside", "C:\\Users\\me\\projects\\a", "C:/Users/me/projects", win, holds, "is under"},
		{"windows: mixed separators", "C:\\Users/me\\projects/a", "C:/Users/me/projects", win, holds, "is under"},
		{"windows: the drive letter in another case", "c:/Users/me/projects/a", "C:/Users/me/projects", win, holds, "is under"},
		{"windows: a folder in another case", "C:/users/ME/projects/a", "C:/Users/me/projects", win, unsure, "only if case"},
		{"windows: a sibling", "C:/Users/me/projects2", "C:/Users/me/projects", win, fails, "is not under"},
		{"windows: another drive", "D:/Users/me/projects/a", "C:/Users/me/projects", win, fails, "is not under"},
		{"windows: the current drive's root", "/Users/me/projects/a", "C:/Users/me/projects", win, unsure, "not an absolute path"},
		{"windows: drive-relative", "C:projects", "C:/Users", win, unsure, "not an absolute path"},
		{"windows: UNC path", "\\\\server\\share\\x", "C:/Users", win, unsure, "network or device path"},
		{"windows: long path prefix", "\\\\?\\C:\\Users\\me\\projects\\a", "C:/Users/me/projects", win, unsure, "network or device path"},
		{"windows: device namespace", "\\\\.\\C:\\Users\\me\\projects\\a", "C:/Users/me/projects", win, unsure, "network or device path"},
		{"windows: NT object path", "\\??\\C:\\Users\\me\\projects\\a", "C:/Users/me/projects", win, unsure, "not an absolute path"},
		{"windows: backslash dot-dot", "C:\\Users\\me\\projects\\..\\x", "C:/Users/me/projects", win, unsure, `".." element`},
		{"windows: trailing dot", "C:/Windows./System32/x", "C:/Windows", win, unsure, "ends in a dot or a space"},
		{"windows: trailing dots", "C:/Users/me/projects/a...", "C:/Users/me/projects", win, unsure, "ends in a dot or a space"},
		{"windows: trailing space", "C:/Windows /System32/x", "C:/Windows", win, unsure, "ends in a dot or a space"},
		{"windows: a stream of the folder", "C:/Windows::$INDEX_ALLOCATION/System32/x", "C:/Windows", win, unsure, "holds a colon"},
		{"windows: a stream of a file", "C:/Users/me/projects/a.txt:hidden", "C:/Users/me/projects", win, unsure, "holds a colon"},
		{"windows: a short name", "C:/PROGRA~1/Secrets/x", "C:/Program Files/Secrets", win, unsure, "short name"},
		{"windows: a device", "C:/Users/me/projects/NUL", "C:/Users/me/projects", win, unsure, "names a device"},
		{"windows: a device with an extension", "C:/Users/me/projects/com1.txt", "C:/Users/me/projects", win, unsure, "names a device"},
		{"windows: a device with a space", "C:/Users/me/projects/CON .log", "C:/Users/me/projects", win, unsure, "names a device"},
		{"windows: a name that starts like a device", "C:/Users/me/projects/console.txt", "C:/Users/me/projects", win, holds, "is under"},
		{"windows: full-width solidus", "C:/Users/me/projects\uff0f..\uff0fx", "C:/Users/me/projects", win, unsure, "separator"},
		{"windows: full-width reverse solidus", "C:/Users/me/projects\uff3c..\uff3cx", "C:/Users/me/projects", win, unsure, "separator"},
		{"windows: full-width full stops", "C:/Users/me/projects/\uff0e\uff0e/x", "C:/Users/me/projects", win, unsure, "separator"},
		{"windows: division slash", "C:/Users/me/projects\u2215x", "C:/Users/me/projects", win, unsure, "separator"},
		{"windows: yen sign", "C:/Users/me/projects\u00a5..\u00a5x", "C:/Users/me/projects", win, unsure, "separator"},
		{"windows: other letters are fine", "C:/Users/me/projects/été/日本", "C:/Users/me/projects", win, holds, "is under"},
		{"unix: a trailing dot is a name", "/home/me/projects./a", "/home/me/projects", unix, fails, "is not under"},
		{"unix: a colon is a name", "/home/me/projects/a.txt:2", "/home/me/projects", unix, holds, "is under"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := underOn(tt.value, tt.dir, tt.windows)
			if got != tt.want || !strings.Contains(why, tt.why) {
				t.Errorf("underOn(%q, %q, windows=%v) = %v (%s), want %v (%s)", tt.value, tt.dir, tt.windows, got, why, tt.want, tt.why)
			}
		})
	}
}

// A path under the folder that leads out of it through a symbolic link is
// not under it, where the call says how to follow links.
func TestUnderFollowsLinks(t *testing.T) {
	p := &Policy{Default: Deny, Rules: []Rule{{ID: "projects", Capability: "mcp.fs.write_file", Decision: Allow,
		Args: []ArgConstraint{{Arg: "path", Under: "/home/me/projects"}}}}}
	links := map[string]string{"/home/me/projects/out/x": "/etc/x", "/home/me/projects/in/x": "/home/me/projects/real/x",
		// Where it leads is checked as strictly as the path given.
		"/home/me/projects/odd/x": "/home/me/projects\\x", "/home/me/projects/case/x": "/home/me/PROJECTS/x"}
	resolve := func(p string) (string, error) {
		if r, ok := links[p]; ok {
			return r, nil
		}
		if p == "/home/me/projects/loop" {
			return "", errors.New("too many symbolic links")
		}
		return p, nil
	}
	tests := []struct {
		path    string
		resolve bool
		want    Decision
	}{
		{"/home/me/projects/a.txt", true, Allow},
		{"/home/me/projects/in/x", true, Allow},
		{"/home/me/projects/out/x", true, Deny},
		{"/home/me/projects/loop", true, Deny},
		{"/home/me/projects/odd/x", true, Deny},
		{"/home/me/projects/case/x", true, Deny},
		{"/home/me/projects/out/x", false, Allow}, // a remote server: the string alone
	}
	for _, tt := range tests {
		c := Call{Server: "fs", Tool: "write_file", Known: true, Args: json.RawMessage(`{"path":"` + tt.path + `"}`)}
		if tt.resolve {
			c.ResolvePath = resolve
		}
		if got := p.Decide(c); got.Decision != tt.want {
			t.Errorf("%s (links followed: %v) = %s by %s, want %s\n%s", tt.path, tt.resolve, got.Decision, got.Rule, tt.want, strings.Join(got.Explanation, "\n"))
		}
	}
}
