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
	formatYAML
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

	// The entry's own schema, where it differs from the usual
	// {"command", "args", "env", "cwd"}.
	envKey  string                   // the environment variables ("env" when empty)
	cwdKeys []string                 // the working folder, the first found ("cwd" when empty)
	cmdList bool                     // "command" is a list: the program, then its arguments (OpenCode)
	stdio   []string                 // the values of "type" that mean stdio ("stdio" when empty); the first is written
	servers func(p *parsed) []string // the keys to the servers object, when not just top

	// YAML files.
	yamlList   bool              // the servers are a list of entries named by "name" (Continue), not a mapping
	yamlRename map[string]string // the client's keys for the usual ones ("cmd" for "command")
	// yamlEntry looks at an entry before it is read, and may adjust it to
	// the usual keys; a state it returns leaves the entry as it is.
	yamlEntry func(m *jmember) (State, string)
	alwaysEnv bool // a governed entry has its env, even empty (Goose)
	// projectDir is a folder of a project whose YAML and JSON files each
	// hold servers (Continue's .continue/mcpServers).
	projectDir string
}

// formatOf is the format of the client's file at path: a client of YAML
// files also reads JSON ones (Continue's .continue/mcpServers/*.json).
func (sp *spec) formatOf(path string) fileFormat {
	if sp.format == formatYAML && strings.EqualFold(filepath.Ext(path), ".json") {
		return formatJSON
	}
	return sp.format
}

func (sp *spec) env() string {
	if sp.envKey != "" {
		return sp.envKey
	}
	return "env"
}

func (sp *spec) cwd() []string {
	if len(sp.cwdKeys) > 0 {
		return sp.cwdKeys
	}
	return []string{"cwd"}
}

// stdioType reports whether typ is one of the client's names for stdio.
func (sp *spec) stdioType(typ string) bool {
	if len(sp.stdio) == 0 {
		return typ == "stdio"
	}
	return slices.Contains(sp.stdio, typ)
}

// writtenType is the "type" a governed entry gets: the entry's own, when
// it names stdio, else the client's usual name for stdio.
func (sp *spec) writtenType(typ string) string {
	if sp.stdioType(typ) {
		return typ
	}
	if len(sp.stdio) > 0 {
		return sp.stdio[0]
	}
	return "stdio"
}

// prefix returns the keys from the file's root to its servers object.
func (sp *spec) prefix(p *parsed) []string {
	if sp.servers != nil && p != nil {
		return sp.servers(p)
	}
	return []string{sp.top}
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
	// Cline keeps its servers in the storage of its editor extension
	// (VS Code, or a fork it is installed in), and Cline's CLI in
	// ~/.cline. Entries: command, args, env, or url with type "sse" or
	// "streamableHttp"; its own disabled, autoApprove and timeout (seconds).
	// Written by Cline with JSON.parse and JSON.stringify: strict JSON.
	Cline: {
		id: Cline, name: "Cline", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			files, marks := extensionFiles(e, "saoudrizwan.claude-dev", "cline_mcp_settings.json")
			dir := filepath.Join(e.Home, ".cline")
			return append(files, filepath.Join(dir, "data", "settings", "cline_mcp_settings.json")), append(marks, dir)
		},
		keep:    []string{"disabled", "autoApprove", "timeout"},
		remote:  []string{"url"},
		expands: dollarBrace,
	},
	// Roo Code: the extension's mcp_settings.json, and a project's
	// .roo/mcp.json (which wins over it for the same name). Entries:
	// command, args, env, cwd, or url with type "streamable-http" or "sse"
	// and headers; its own disabled, alwaysAllow, disabledTools, timeout and
	// watchPaths. ${env:VAR} is expanded by Roo.
	RooCode: {
		id: RooCode, name: "Roo Code", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			return extensionFiles(e, "rooveterinaryinc.roo-cline", "mcp_settings.json")
		},
		projectFile: filepath.Join(".roo", "mcp.json"),
		keep:        []string{"disabled", "alwaysAllow", "disabledTools", "timeout", "watchPaths"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	// Kilo Code, a fork of Roo Code with its schema: the extension's
	// mcp_settings.json, the CLI's ~/.kilocode/cli/global/settings, and a
	// project's .kilocode/mcp.json.
	KiloCode: {
		id: KiloCode, name: "Kilo Code", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			files, marks := extensionFiles(e, "kilocode.kilo-code", "mcp_settings.json")
			dir := filepath.Join(e.Home, ".kilocode")
			return append(files, filepath.Join(dir, "cli", "global", "settings", "mcp_settings.json")), append(marks, dir)
		},
		projectFile: filepath.Join(".kilocode", "mcp.json"),
		keep:        []string{"disabled", "alwaysAllow", "disabledTools", "timeout", "watchPaths"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	// LM Studio (0.3.17 and later) follows Cursor's mcp.json: command,
	// args, env, or url and headers. The file is in its home folder,
	// ~/.lmstudio (%USERPROFILE%\.lmstudio on Windows); older installs kept
	// their home in ~/.cache/lm-studio.
	LMStudio: {
		id: LMStudio, name: "LM Studio", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir, old := filepath.Join(e.Home, ".lmstudio"), filepath.Join(e.Home, ".cache", "lm-studio")
			return []string{filepath.Join(dir, "mcp.json"), filepath.Join(old, "mcp.json")}, []string{dir, old}
		},
		remote:  []string{"url"},
		expands: dollarBrace,
	},
	// Kiro (the IDE and its CLI): ~/.kiro/settings/mcp.json, and a
	// workspace's .kiro/settings/mcp.json, merged with the workspace's
	// winning. Entries: command, args, env, or url and headers (oauth for
	// servers that sign in); its own disabled, autoApprove and
	// disabledTools. ${VAR} is expanded by Kiro.
	Kiro: {
		id: Kiro, name: "Kiro", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".kiro")
			return []string{filepath.Join(dir, "settings", "mcp.json")}, []string{dir}
		},
		projectFile: filepath.Join(".kiro", "settings", "mcp.json"),
		keep:        []string{"disabled", "autoApprove", "disabledTools"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	// Amazon Q Developer: the CLI's global ~/.aws/amazonq/mcp.json (read by
	// its default agent), the IDE plugins' default agent
	// ~/.aws/amazonq/agents/default.json, the CLI's own agents in
	// ~/.aws/amazonq/cli-agents, and a workspace's .amazonq/mcp.json.
	// Entries: command, args, env, or type "http" with url and headers;
	// its own timeout (ms) and disabled.
	AmazonQ: {
		id: AmazonQ, name: "Amazon Q Developer", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".aws", "amazonq")
			files := []string{filepath.Join(dir, "mcp.json"), filepath.Join(dir, "agents", "default.json")}
			agents, _ := filepath.Glob(filepath.Join(dir, "cli-agents", "*.json"))
			sort.Strings(agents)
			return append(files, agents...), []string{dir}
		},
		projectFile: filepath.Join(".amazonq", "mcp.json"),
		keep:        []string{"timeout", "disabled"},
		remote:      []string{"url"},
		expands:     dollarBrace,
	},
	// Junie (JetBrains' coding agent): ~/.junie/mcp/mcp.json, and a
	// project's .junie/mcp/mcp.json. Junie runs stdio servers only:
	// command, args, env.
	Junie: {
		id: Junie, name: "Junie", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".junie")
			return []string{filepath.Join(dir, "mcp", "mcp.json")}, []string{dir}
		},
		projectFile: filepath.Join(".junie", "mcp", "mcp.json"),
		expands:     dollarBrace,
	},
	// OpenCode: ~/.config/opencode/opencode.json (or .jsonc; on every
	// system, under $XDG_CONFIG_HOME when set), and a project's
	// opencode.json. Servers are under "mcp" (OpenCode 2: "mcp.servers").
	// An entry is {"type": "local", "command": [program, args...],
	// "environment": {...}} or {"type": "remote", "url", "headers"}; its
	// own enabled (disabled in OpenCode 2) and timeout. {env:VAR} and
	// {file:path} are expanded by OpenCode. The file is JSON with comments.
	OpenCode: {
		id: OpenCode, name: "OpenCode", format: formatJSONC, top: "mcp",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(xdgConfig(e), "opencode")
			return []string{filepath.Join(dir, "opencode.json"), filepath.Join(dir, "opencode.jsonc")}, []string{dir}
		},
		projectFile: "opencode.json",
		keep:        []string{"enabled", "disabled", "timeout"},
		remote:      []string{"url"},
		expands:     func(v string) bool { return strings.Contains(v, "{env:") || strings.Contains(v, "{file:") },
		envKey:      "environment",
		cmdList:     true,
		stdio:       []string{"local"},
		servers:     openCodeServers,
	},
	// GitHub Copilot CLI: ~/.copilot/mcp-config.json. Entries: type
	// "local" or "stdio" with command, args, env; or "http" (or "sse")
	// with url and headers; its own tools (the tools Copilot may call) and
	// timeout. ${VAR} is expanded by Copilot.
	CopilotCLI: {
		id: CopilotCLI, name: "GitHub Copilot CLI", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".copilot")
			return []string{filepath.Join(dir, "mcp-config.json")}, []string{dir}
		},
		keep:    []string{"tools", "timeout"},
		remote:  []string{"url"},
		expands: dollarBrace,
		stdio:   []string{"stdio", "local"},
	},
	// Warp: the servers it runs from files, ~/.warp/.mcp.json and a
	// repository's .warp/.mcp.json (servers added in Warp's settings live in
	// Warp Drive, not in a file). Entries: command, args, env,
	// working_directory, or url and headers.
	Warp: {
		id: Warp, name: "Warp", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".warp")
			return []string{filepath.Join(dir, ".mcp.json")}, []string{dir}
		},
		projectFile: filepath.Join(".warp", ".mcp.json"),
		remote:      []string{"url"},
		expands:     dollarBrace,
		cwdKeys:     []string{"working_directory", "cwd"},
	},
	// Augment's CLI, Auggie: ~/.augment/settings.json, whose mcpServers
	// holds command, args, env, or type "http" with url and headers.
	Augment: {
		id: Augment, name: "Augment (Auggie CLI)", format: formatJSON, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".augment")
			return []string{filepath.Join(dir, "settings.json")}, []string{dir}
		},
		remote:  []string{"url"},
		expands: dollarBrace,
	},
	// Qwen Code, a fork of Gemini CLI with its schema: ~/.qwen/settings.json
	// and a project's .qwen/settings.json.
	QwenCode: {
		id: QwenCode, name: "Qwen Code", format: formatJSONC, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".qwen")
			return []string{filepath.Join(dir, "settings.json")}, []string{dir}
		},
		projectFile: filepath.Join(".qwen", "settings.json"),
		keep:        []string{"timeout", "trust", "includeTools", "excludeTools", "description"},
		remote:      []string{"httpUrl", "url"},
		expands:     dollarName,
	},
	// Continue: ~/.continue/config.yaml, whose mcpServers is a list of
	// entries named by "name": command, args, env, cwd (type "stdio"), or
	// type "sse" or "streamable-http" with url and requestOptions.headers;
	// its own connectionTimeout. A workspace's .continue/mcpServers holds
	// blocks (YAML files with name, version, schema and mcpServers) and
	// JSON files in Claude Desktop's form. ${{ secrets.NAME }} and
	// ${{ inputs.NAME }} are expanded by Continue.
	Continue: {
		id: Continue, name: "Continue", format: formatYAML, top: "mcpServers",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(e.Home, ".continue")
			return []string{filepath.Join(dir, "config.yaml")}, []string{dir}
		},
		projectDir: filepath.Join(".continue", "mcpServers"),
		keep:       []string{"name", "connectionTimeout", "faviconUrl"},
		remote:     []string{"url"},
		expands:    func(v string) bool { return strings.Contains(v, "${{") },
		yamlList:   true,
		yamlEntry:  continueEntry,
	},
	// Goose: ~/.config/goose/config.yaml (%APPDATA%\Block\goose\config on
	// Windows), whose extensions maps an id to {type, name, cmd, args,
	// envs, env_keys, cwd, enabled, timeout, description, ...}; type stdio,
	// streamable_http (uri, headers) or the older sse; builtin and platform
	// extensions run inside Goose. The values of env_keys are in Goose's
	// own keyring, which it passes to the process it starts.
	Goose: {
		id: Goose, name: "Goose", format: formatYAML, top: "extensions",
		userFiles: func(e *Env) ([]string, []string) {
			dir := filepath.Join(xdgConfig(e), "goose")
			if e.GOOS == "windows" {
				dir = filepath.Join(e.AppData, "Block", "goose", "config")
			}
			return []string{filepath.Join(dir, "config.yaml")}, []string{dir}
		},
		keep: []string{"name", "display_name", "description", "enabled", "bundled", "timeout",
			"available_tools", "env_keys"},
		remote:     []string{"url"},
		expands:    func(string) bool { return false },
		envKey:     "envs",
		yamlRename: map[string]string{"cmd": "command", "uri": "url"},
		yamlEntry:  gooseEntry,
		alwaysEnv:  true,
	},
}

// continueEntry: a remote entry's headers are in requestOptions.headers;
// other request options (timeouts, TLS, a proxy) and apiKey are the
// client's, which the proxy does not take over.
func continueEntry(m *jmember) (State, string) {
	obj := m.val
	for i := 0; i < len(obj.members); i++ {
		mb := &obj.members[i]
		switch mb.key {
		case "apiKey":
			return Unsupported, "it signs in with apiKey, which the proxy does not take over (an Authorization header in requestOptions.headers is)"
		case "requestOptions":
			if mb.val.kind != jsonObject {
				return Unsupported, "requestOptions is not a mapping"
			}
			var headers *jnode
			for _, o := range mb.val.members {
				if o.key != "headers" {
					return Unsupported, "requestOptions." + o.key + " is a request setting of Continue's that the proxy does not take over"
				}
				headers = o.val
			}
			if headers != nil {
				obj.members[i] = jmember{key: "headers", keyStart: mb.keyStart, keyEnd: mb.keyEnd, val: headers}
			}
		}
	}
	return "", ""
}

// gooseEntry: built-in and platform extensions run inside Goose.
func gooseEntry(m *jmember) (State, string) {
	for _, mb := range m.val.members {
		if mb.key != "type" || mb.val.kind != jsonString {
			continue
		}
		switch t := mb.val.str; t {
		case "stdio", "sse", "streamable_http":
		case "builtin", "platform", "frontend", "inline_python":
			return Extension, "a Goose extension of type " + t + ", which runs inside Goose rather than as a server Gatehouse can put its proxy in front of"
		default:
			return Unsupported, "its type " + t + " is not one Gatehouse proxies"
		}
	}
	return "", ""
}

// editors are the folders of VS Code and the forks an extension may be
// installed in, the first VS Code's own.
var editors = []string{"Code", "Code - Insiders", "VSCodium", "Cursor", "Windsurf"}

// extensionFiles returns the settings file an editor extension keeps in its
// global storage, in each editor, and those folders.
func extensionFiles(e *Env, ext, name string) ([]string, []string) {
	var files, marks []string
	for _, ed := range editors {
		dir := filepath.Join(appConfigDir(e, ed), "User", "globalStorage", ext)
		files = append(files, filepath.Join(dir, "settings", name))
		marks = append(marks, dir)
	}
	return files, marks
}

// openCodeServers: OpenCode 2 keeps its servers in "mcp.servers"; OpenCode 1
// right in "mcp", where a server called "servers" has a "type".
func openCodeServers(p *parsed) []string {
	if obj, _ := p.object([]string{"mcp", "servers"}); obj != nil {
		if m, _ := obj.member(p.data, "type"); m == nil {
			return []string{"mcp", "servers"}
		}
	}
	return []string{"mcp"}
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

// A projectFile is a client's file in a project folder.
type projectFile struct{ path, project string }

// projects returns the client's project files for the folders dirs: its
// projectFile, or each YAML and JSON file in its projectDir.
func (sp *spec) projects(e *Env, dirs []string) []projectFile {
	up := func(path, rel string) string {
		for range strings.Count(filepath.ToSlash(rel), "/") + 1 {
			path = filepath.Dir(path)
		}
		return path
	}
	var out []projectFile
	if sp.projectFile != "" {
		for _, path := range projectFiles(e, sp.projectFile, dirs) {
			out = append(out, projectFile{path, up(path, sp.projectFile)})
		}
	}
	if sp.projectDir != "" {
		for _, dir := range projectFiles(e, sp.projectDir, dirs) {
			var files []string
			for _, pat := range []string{"*.yaml", "*.yml", "*.json"} {
				m, _ := filepath.Glob(filepath.Join(dir, pat))
				files = append(files, m...)
			}
			sort.Strings(files)
			for _, path := range files {
				out = append(out, projectFile{path, up(dir, sp.projectDir)})
			}
		}
	}
	return out
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
