// Package clients finds the MCP clients on this machine (Claude Desktop,
// Claude Code, Cursor, VS Code, Windsurf, Gemini CLI, Codex CLI, Zed, Cline,
// Roo Code, Kilo Code, LM Studio, Kiro, Amazon Q Developer, Junie, OpenCode,
// GitHub Copilot CLI, Warp, Augment's Auggie CLI, Qwen Code, Continue and
// Goose: [IDs]),
// reads the servers in their config files, and rewrites those files so that
// each server is launched through `gatehouse proxy`, with an exact way back.
// Each client's files, entry schema and quirks are in its spec (detect.go),
// from the client's own documentation.
//
// # Looking
//
// [Manager.Scan] lists each client, the config files it reads (user files,
// Claude Code's local scopes, project files), every server entry in them,
// and the entry's [State]: governed, not governed, drifted since governing
// (added or changed), owned by an extension, or not something Gatehouse can
// govern (with the reason).
//
// # Governing
//
// [Manager.PlanGovern] works out, without writing anything, what governing
// the selected entries does: each entry's server is registered with
// Gatehouse (a stdio command resolved to an absolute path, so that GUI apps
// with a short PATH find it; a remote server by its URL and headers), the
// values of its secret-looking environment variables and headers move to the
// OS keychain, and the entry in the client's file is replaced by one that
// runs `gatehouse proxy --client CLIENT SERVER`. The entry keeps its name, so
// the client's own permission rules keep matching. The [Plan] holds the
// exact unified diff of each file, secrets masked. [Manager.Apply] carries
// it out: backup first, the file replaced atomically with its mode kept, and
// nothing written when the file changed since it was read.
//
// Edits are surgical: only the bytes of the governed entries change; every
// other key, comment, blank line and indentation stays as it was. A project
// .mcp.json, which is shared through version control, is never edited:
// Claude Code's private local scope gets a same-name entry that takes
// precedence.
//
// # Undoing
//
// [Manager.PlanUndo] puts each governed entry back exactly as it was, secret
// values read back from the keychain: where nothing else in the file changed
// since governing, the file is byte for byte what it was.
//
// Claude Desktop rewrites its config file from memory while it runs, so
// Gatehouse refuses to write it then, and [Manager.Scan] tells whether a
// governed entry survived its next start.
package clients

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// An ID names an MCP client.
type ID string

// The clients Gatehouse knows.
const (
	ClaudeDesktop ID = "claude-desktop"
	ClaudeCode    ID = "claude-code"
	Cursor        ID = "cursor"
	VSCode        ID = "vscode"
	Windsurf      ID = "windsurf"
	GeminiCLI     ID = "gemini-cli"
	Codex         ID = "codex"
	Zed           ID = "zed"
	Cline         ID = "cline"
	RooCode       ID = "roo-code"
	KiloCode      ID = "kilo-code"
	LMStudio      ID = "lm-studio"
	Kiro          ID = "kiro"
	AmazonQ       ID = "amazon-q"
	Junie         ID = "junie"
	OpenCode      ID = "opencode"
	CopilotCLI    ID = "copilot-cli"
	Warp          ID = "warp"
	Augment       ID = "augment"
	QwenCode      ID = "qwen-code"
	Continue      ID = "continue"
	Goose         ID = "goose"
)

// IDs returns every client Gatehouse knows, in the order it lists them.
func IDs() []ID {
	return []ID{ClaudeDesktop, ClaudeCode, Cursor, VSCode, Windsurf, GeminiCLI, Codex, Zed,
		Cline, RooCode, KiloCode, LMStudio, Kiro, AmazonQ, Junie, OpenCode, CopilotCLI, Warp, Augment, QwenCode, Continue, Goose}
}

// Name returns the client's product name.
func (id ID) Name() string {
	if s := specs[id]; s != nil {
		return s.name
	}
	return string(id)
}

// ParseID returns the client called s (its id, case-insensitively), or an
// error wrapping [ErrUnknownClient].
func ParseID(s string) (ID, error) {
	for _, id := range IDs() {
		if strings.EqualFold(string(id), s) {
			return id, nil
		}
	}
	names := make([]string, 0, len(IDs()))
	for _, id := range IDs() {
		names = append(names, string(id))
	}
	return "", fmt.Errorf("%w %q: choose one of %s", ErrUnknownClient, s, strings.Join(names, ", "))
}

var (
	// ErrUnknownClient is returned for a client id Gatehouse does not know.
	ErrUnknownClient = errors.New("unknown client")
	// ErrNoEntry is returned when a server entry named in a selection is
	// not in the selected clients' files.
	ErrNoEntry = errors.New("no such server entry")
	// ErrNotInstalled is returned when a client named explicitly is not on
	// this machine.
	ErrNotInstalled = errors.New("not installed")
	// ErrChanged is returned when a config file changed between the moment
	// Gatehouse read it and the moment it would have replaced it: nothing
	// was written.
	ErrChanged = errors.New("changed while Gatehouse was writing it")
	// ErrReadOnly is returned for a config file Gatehouse may not write.
	ErrReadOnly = errors.New("read-only")
	// ErrRunning is returned when Claude Desktop runs: it would overwrite
	// the change with its own copy.
	ErrRunning = errors.New("is running")
)

// A Scope says which of a client's files an entry is in.
type Scope string

const (
	ScopeUser    Scope = "user"    // the user's own file
	ScopeLocal   Scope = "local"   // Claude Code: one project, private to the user (in ~/.claude.json)
	ScopeProject Scope = "project" // a file in a project folder, often shared through version control
)

// A State is what Gatehouse makes of a server entry.
type State string

const (
	// Governed: the entry runs gatehouse proxy.
	Governed State = "governed"
	// NotGoverned: the entry starts its server directly.
	NotGoverned State = "not governed"
	// Added: not governed, in a file Gatehouse governed before: drift.
	Added State = "added since governing"
	// Changed: Gatehouse governed the entry, and it was changed since (by
	// the client or by hand): drift.
	Changed State = "changed since governing"
	// Missing: Gatehouse governed the entry, and it is no longer in the file.
	Missing State = "missing"
	// Extension: the entry belongs to an extension or plugin of the
	// client, which manages it; Gatehouse leaves it alone.
	Extension State = "extension"
	// Unsupported: Gatehouse cannot govern this entry; Entry.Detail says why.
	Unsupported State = "unsupported"
	// Shadowed: a server in a project's .mcp.json that Claude Code does not
	// run, because the project's local scope has one of the same name.
	Shadowed State = "shadowed"
	// Overridden: managed configuration makes the client ignore the entry
	// (Claude Code's managed-mcp.json, VS Code's chat.mcp.access "none"):
	// governed or not, it does not run, and is not protected by governing.
	Overridden State = "overridden by managed settings"
	// Forbidden: managed configuration refuses the entry as it is, or as
	// governing would write it (an allowlist of commands that does not
	// name gatehouse); Gatehouse leaves it as it is.
	Forbidden State = "forbidden by managed settings"
)

// A Client is an MCP client and what Gatehouse found of it.
type Client struct {
	ID        ID
	Name      string
	Installed bool      // its folder or config file exists
	Running   bool      // its app is running now (Claude Desktop only)
	StartedAt time.Time // when the running app started, when known
	Files     []File
	// Managed says what managed (enterprise) configuration the client
	// reads, and where; or that it cannot be read here.
	Managed []string
}

// A File is one config file a client reads.
type File struct {
	Client  ID
	Path    string
	Scope   Scope
	Project string // the project folder, for ScopeLocal and ScopeProject
	Exists  bool
	Err     error // the file cannot be read or is malformed: nothing in it is governed
	Entries []Entry
}

// An Entry is one server in a client's config file.
type Entry struct {
	Client    ID
	File      string
	Scope     Scope
	Project   string
	Name      string // as the client's file names it
	State     State
	Detail    string // for people: why it is not governed, or what drifted
	Server    string // the Gatehouse server it runs through (when governed)
	Transport string // "stdio" or "http" (a remote server)
	Target    string // its command line or URL as the file has it (environment and headers left out)
	Via       string // governed through an entry in this other file (a project .mcp.json through ~/.claude.json)
	// Bypass: the client runs this [Forbidden] entry as written, without
	// Gatehouse (governing it would make the client refuse it).
	Bypass bool
}

// Drift reports whether the entry drifted from what governing left.
func (e Entry) Drift() bool { return e.State == Added || e.State == Changed || e.State == Missing }

// Open reports whether the client runs the entry's server without the
// gate: an entry not governed, drifted from what governing left, or one
// managed settings keep from being governed while the client runs it.
func (e Entry) Open() bool {
	switch e.State {
	case NotGoverned, Added, Changed:
		return true
	case Forbidden:
		return e.Bypass
	}
	return false
}

// An Env is the machine as Gatehouse sees it: where the user's folders are
// and how to look for programs. [SystemEnv] is this machine; tests build
// their own to look at another system's layout.
type Env struct {
	GOOS            string // "linux", "darwin", "windows"
	Home            string // the user's home folder
	AppData         string // Windows: %APPDATA%
	LocalAppData    string // Windows: %LOCALAPPDATA%
	XDGConfigHome   string // Linux: $XDG_CONFIG_HOME; empty means Home/.config
	ClaudeConfigDir string // $CLAUDE_CONFIG_DIR: where Claude Code keeps .claude.json instead of Home
	CodexHome       string // $CODEX_HOME: where Codex keeps config.toml instead of Home/.codex
	Cwd             string // where to look for project files (and up from there)
	Path            string // the user's PATH, for finding commands
	PathExt         string // Windows: %PATHEXT%
	ProgramFiles    string // Windows: %ProgramFiles%, where Claude Code's managed files are
	// SystemRoot is the folder system-wide files (/etc, /Library) are
	// under; empty means the file system's root. Tests point it at a
	// folder of their own.
	SystemRoot string

	// LookPath finds file on the list of folders path (as in PATH), or
	// checks that an absolute file exists; nil means on this file system.
	LookPath func(file, path string) (string, error)
	// Running reports whether the client's app runs now, and since when
	// (zero when unknown); nil means ask the operating system.
	Running func(ID) (bool, time.Time, error)
	// Tracked reports whether a version control system tracks path; nil
	// means ask git.
	Tracked func(path string) bool
}

// SystemEnv returns this machine's Env.
func SystemEnv() Env {
	home, _ := os.UserHomeDir()
	cwd, _ := os.Getwd()
	return Env{
		GOOS:            runtime.GOOS,
		Home:            home,
		AppData:         os.Getenv("APPDATA"),
		LocalAppData:    os.Getenv("LOCALAPPDATA"),
		XDGConfigHome:   os.Getenv("XDG_CONFIG_HOME"),
		ClaudeConfigDir: os.Getenv("CLAUDE_CONFIG_DIR"),
		CodexHome:       os.Getenv("CODEX_HOME"),
		Cwd:             cwd,
		Path:            os.Getenv("PATH"),
		PathExt:         os.Getenv("PATHEXT"),
		ProgramFiles:    os.Getenv("ProgramFiles"),
	}
}

func (e *Env) lookPath(file, path string) (string, error) {
	if e.LookPath != nil {
		return e.LookPath(file, path)
	}
	return lookPath(e.GOOS, file, path, e.PathExt)
}

func (e *Env) running(id ID) (bool, time.Time, error) {
	if e.Running != nil {
		return e.Running(id)
	}
	if id != ClaudeDesktop {
		return false, time.Time{}, nil
	}
	return claudeDesktopRunning()
}

func (e *Env) tracked(path string) bool {
	if e.Tracked != nil {
		return e.Tracked(path)
	}
	return gitTracked(path)
}

// A Selection says which entries an operation takes.
type Selection struct {
	Clients []ID     // empty: every client
	Servers []string // entry names, as the clients' files have them; empty: every entry
	Secrets []string // environment variables and headers to keep in the keychain besides those that look secret
	// Force writes Claude Desktop's file while it runs, and undoes entries
	// that changed since they were governed (the change is lost).
	Force bool
}

func (s *Selection) hasClient(id ID) bool {
	return len(s.Clients) == 0 || slices.Contains(s.Clients, id)
}

func (s *Selection) hasServer(name string) bool {
	return len(s.Servers) == 0 || slices.Contains(s.Servers, name)
}
