package clients

import (
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

type fileFormat uint8

const (
	formatJSON  fileFormat = iota + 1 // strict JSON
	formatJSONC                       // JSON with comments and trailing commas
	formatTOML
)

// A spec is what Gatehouse knows of one client: its files and their schema.
type spec struct {
	id     ID
	name   string
	format fileFormat
	top    string // the key (or TOML table) holding the servers
	// userFiles returns the client's own config files and the folders whose
	// existence shows the client is installed.
	userFiles func(e *Env) (files []string, marks []string)
	// projectFile is the file a project folder holds, relative to it ("" when
	// the client has none).
	projectFile string
	// keep lists the keys of an entry that a governed entry keeps as they
	// were: settings of the client's own that neither start the server nor
	// hold its secrets.
	keep []string
	// remote lists the keys that hold a remote server's URL.
	remote []string
	// expands reports whether value uses the client's own variable syntax,
	// which only the client can expand.
	expands func(value string) bool
}

var specs = map[ID]*spec{
	ClaudeDesktop: {
		id: ClaudeDesktop, name: "Claude Desktop", format: formatJSON, top: "mcpServers",
		userFiles: claudeDesktopFiles,
		remote:    []string{"url"},
		expands:   func(string) bool { return false },
	},
	ClaudeCode: {
		id: ClaudeCode, name: "Claude Code", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			f := claudeCodeFile(e)
			return []string{f}, []string{f, filepath.Join(e.Home, ".claude")}
		},
		projectFile: ".mcp.json",
		keep:        []string{"timeout"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	Cursor: {
		id: Cursor, name: "Cursor", format: formatJSONC, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".cursor")
			return []string{filepath.Join(dir, "mcp.json")}, []string{dir}
		},
		projectFile: filepath.Join(".cursor", "mcp.json"),
		keep:        []string{"envFile"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	VSCode: {
		id: VSCode, name: "VS Code", format: formatJSONC, top: "servers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(appConfigDir(e, "Code"), "User")
			return []string{filepath.Join(dir, "mcp.json")}, []string{dir}
		},
		projectFile: filepath.Join(".vscode", "mcp.json"),
		keep:        []string{"envFile", "dev"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	Windsurf: {
		id: Windsurf, name: "Windsurf", format: formatJSONC, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".codeium", "windsurf")
			return []string{filepath.Join(dir, "mcp_config.json")}, []string{dir}
		},
		keep:    []string{"disabled", "disabledTools"},
		remote:  []string{"serverUrl", "url"},
		expands: dollarBrace,
	},
	GeminiCLI: {
		id: GeminiCLI, name: "Gemini CLI", format: formatJSONC, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".gemini")
			return []string{filepath.Join(dir, "settings.json")}, []string{dir}
		},
		projectFile: filepath.Join(".gemini", "settings.json"),
		keep:        []string{"timeout", "trust", "includeTools", "excludeTools", "description"},
		remote:      []string{"httpUrl", "url"},
		expands:     dollarName,
	},
	Codex: {
		id: Codex, name: "Codex CLI", format: formatTOML, top: "mcp_servers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := e.CodexHome
			if dir == "" {
				dir = filepath.Join(e.Home, ".codex")
			}
			return []string{filepath.Join(dir, "config.toml")}, []string{dir}
		},
		keep: []string{"enabled", "required", "startup_timeout_sec", "startup_timeout_ms", "tool_timeout_sec",
			"enabled_tools", "disabled_tools", "env_vars"},
		remote:  []string{"url"},
		expands: func(string) bool { return false },
	},
	Zed: {
		id: Zed, name: "Zed", format: formatJSONC, top: "context_servers",
		userFiles: func(e *Env) ([]string, []string) {
			var dir string
			switch e.GOOS {
			case "windows":
				dir = filepath.Join(e.AppData, "Zed")
			case "linux":
				dir = filepath.Join(xdgConfig(e), "zed")
			default:
				dir = filepath.Join(e.Home, ".config", "zed")
			}
			return []string{filepath.Join(dir, "settings.json")}, []string{dir}
		},
		keep:    []string{"source", "settings"},
		remote:  []string{"url"},
		expands: func(string) bool { return false },
	},
}

// dollarBrace: ${VAR}, ${env:VAR}, ${input:id}, ${workspaceFolder}, ...
func dollarBrace(v string) bool { return strings.Contains(v, "${") }

// dollarName: Gemini CLI also expands $VAR.
func dollarName(v string) bool {
	for i := 0; i+1 < len(v); i++ {
		if v[i] == '$' && (v[i+1] == '{' || v[i+1] == '_' || v[i+1] >= 'A' && v[i+1] <= 'Z' || v[i+1] >= 'a' && v[i+1] <= 'z') {
			return true
		}
	}
	return false
}

func xdgConfig(e *Env) string {
	if e.XDGConfigHome != "" {
		return e.XDGConfigHome
	}
	return filepath.Join(e.Home, ".config")
}

// appConfigDir is where an Electron app called name keeps its settings.
func appConfigDir(e *Env, name string) string {
	switch e.GOOS {
	case "darwin":
		return filepath.Join(e.Home, "Library", "Application Support", name)
	case "windows":
		return filepath.Join(e.AppData, name)
	default:
		return filepath.Join(xdgConfig(e), name)
	}
}

// claudeDesktopFiles: on Windows, the app from the Microsoft Store (and the
// current installer, which is the same MSIX package) reads its file inside
// its package folder; a file in %APPDATA%\Claude is invisible to it.
func claudeDesktopFiles(e *Env) ([]string, []string) {
	const name = "claude_desktop_config.json"
	dir := appConfigDir(e, "Claude")
	files, marks := []string{filepath.Join(dir, name)}, []string{dir}
	if e.GOOS == "windows" && e.LocalAppData != "" {
		pkgs, _ := filepath.Glob(filepath.Join(e.LocalAppData, "Packages", "Claude_*"))
		sort.Strings(pkgs)
		for _, p := range pkgs {
			d := filepath.Join(p, "LocalCache", "Roaming", "Claude")
			files = append(files, filepath.Join(d, name))
			marks = append(marks, p)
		}
	}
	return files, marks
}

// claudeCodeFile is ~/.claude.json, or .claude.json in $CLAUDE_CONFIG_DIR.
func claudeCodeFile(e *Env) string {
	if e.ClaudeConfigDir != "" {
		return filepath.Join(e.ClaudeConfigDir, ".claude.json")
	}
	return filepath.Join(e.Home, ".claude.json")
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// projectFiles returns the project files of a client: the nearest one at
// or above each of the folders dirs (not the user's home folder, whose
// files are the user's own).
func projectFiles(e *Env, rel string, dirs []string) []string {
	var out []string
	home := filepath.Clean(e.Home)
	for _, dir := range dirs {
		if dir == "" {
			continue
		}
		for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
			if d == home {
				break
			}
			if p := filepath.Join(d, rel); exists(p) {
				if !slices.Contains(out, p) {
					out = append(out, p)
				}
				break
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	return out
}
