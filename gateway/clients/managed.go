package clients

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// This file reads the managed (enterprise) configuration that decides
// whether a client runs the entries of its own files at all: Claude Code's
// managed-mcp.json and managed settings, and VS Code's chat.mcp.access
// policy and setting. An entry such configuration ignores is not
// protected by governing it, and an entry it would refuse once rewritten
// must not be rewritten: [Overridden] and [Forbidden] say so.

// A mcpRule is one entry of Claude Code's allowedMcpServers or
// deniedMcpServers: a server name, an exact command line, or a URL
// pattern (* matches anything).
type mcpRule struct {
	name    string
	command []string
	url     string
}

// A managed is the managed configuration one client reads.
type managed struct {
	notes []string // for people: what is in force, and where
	// exclusive: the client runs only the servers of this file; every
	// entry of the files Gatehouse edits is ignored.
	exclusive string
	// Claude Code's allowlist and denylist: nil allow means no allowlist.
	allow, deny []mcpRule
	allowSet    bool
	listFile    string // where the lists are
	// VS Code: "none" (MCP off) or "registry" (registry servers only), and
	// where that is set.
	access, accessFile string
}

// readManaged reads the managed configuration of client sp.
func (m *Manager) readManaged(sp *spec) *managed {
	e := &m.env
	mc := &managed{}
	switch sp.id {
	case ClaudeCode:
		dir := claudeManagedDir(e)
		if dir == "" {
			return mc
		}
		mcp := filepath.Join(dir, "managed-mcp.json")
		if _, err := os.Stat(mcp); err == nil {
			mc.exclusive = mcp
			mc.notes = append(mc.notes, fmt.Sprintf("%s is in force: Claude Code runs only its servers, and ignores those of every other file", mcp))
		}
		settings := filepath.Join(dir, "managed-settings.json")
		p := readJSONC(settings)
		if p == nil {
			if exists(settings) {
				mc.notes = append(mc.notes, settings+" cannot be read here: what it allows is not known")
			}
			return mc
		}
		only := false
		if root := p.json; root != nil {
			if mb, _ := root.member(p.data, "allowManagedMcpServersOnly"); mb != nil && mb.val.kind == jsonBool && p.data[mb.val.start] == 't' {
				only = true
			}
		}
		mc.readLists(p, settings)
		// The user's own lists: the denylist always counts, the allowlist
		// unless managed settings allow only their own.
		user := filepath.Join(e.Home, ".claude", "settings.json")
		if e.ClaudeConfigDir != "" {
			user = filepath.Join(e.ClaudeConfigDir, "settings.json")
		}
		if up := readJSONC(user); up != nil && up.json != nil {
			u := &managed{}
			u.readLists(up, user)
			mc.deny = append(mc.deny, u.deny...)
			if !only && u.allowSet {
				mc.allow, mc.allowSet = append(mc.allow, u.allow...), true
			}
		}
		if mc.allowSet || len(mc.deny) > 0 {
			what := "deniedMcpServers"
			if mc.allowSet {
				what = "allowedMcpServers"
				if len(mc.deny) > 0 {
					what += " and deniedMcpServers"
				}
			}
			mc.notes = append(mc.notes, fmt.Sprintf("%s sets %s: Claude Code runs only the servers they allow", settings, what))
		}
	case VSCode:
		switch e.GOOS {
		case "linux":
			path := filepath.Join(e.root(), "etc", "vscode", "policy.json")
			if p := readJSONC(path); p != nil && p.json != nil {
				if mb, _ := p.json.member(p.data, "ChatMCP"); mb != nil {
					mc.setAccess(p, mb.val, path)
				}
			} else if exists(path) {
				mc.notes = append(mc.notes, path+" cannot be read here: whether VS Code's policy allows MCP servers is not known")
			}
		case "darwin":
			path := filepath.Join(e.root(), "Library", "Managed Preferences", "com.microsoft.VSCode.plist")
			if exists(path) {
				mc.notes = append(mc.notes, path+" (VS Code's policies) cannot be read here: if it sets chat.mcp.access, VS Code may ignore or refuse governed servers")
			}
		case "windows":
			mc.notes = append(mc.notes, "VS Code's policies are in the Windows registry, which cannot be read here: if your organisation sets chat.mcp.access, VS Code may ignore or refuse governed servers")
		}
		if mc.access == "" {
			path := filepath.Join(appConfigDir(e, "Code"), "User", "settings.json")
			if p := readJSONC(path); p != nil && p.json != nil {
				if mb, _ := p.json.member(p.data, "chat.mcp.access"); mb != nil {
					mc.setAccess(p, mb.val, path)
				} else if mb, _ := p.json.member(p.data, "chat.mcp.enabled"); mb != nil {
					mc.setAccess(p, mb.val, path)
				}
			}
		}
	}
	return mc
}

// setAccess reads chat.mcp.access (or the older boolean chat.mcp.enabled).
func (mc *managed) setAccess(p *parsed, n *jnode, path string) {
	switch {
	case n.kind == jsonBool && p.data[n.start] == 'f', n.kind == jsonString && n.str == "none":
		mc.access = "none"
	case n.kind == jsonString && n.str == "registry":
		mc.access = "registry"
	default:
		return
	}
	mc.accessFile = path
	mc.notes = append(mc.notes, fmt.Sprintf("%s sets chat.mcp.access to %s", path, mc.access))
}

// readLists reads allowedMcpServers and deniedMcpServers.
func (mc *managed) readLists(p *parsed, path string) {
	if p.json == nil {
		return
	}
	read := func(key string) ([]mcpRule, bool) {
		mb, _ := p.json.member(p.data, key)
		if mb == nil || mb.val.kind != jsonArray {
			return nil, false
		}
		var out []mcpRule
		for _, el := range mb.val.elems {
			if el.kind != jsonObject {
				continue
			}
			var r mcpRule
			for _, f := range el.members {
				switch {
				case f.key == "serverName" && f.val.kind == jsonString:
					r.name = f.val.str
				case f.key == "serverUrl" && f.val.kind == jsonString:
					r.url = f.val.str
				case f.key == "serverCommand" && f.val.kind == jsonArray:
					r.command = []string{}
					for _, a := range f.val.elems {
						r.command = append(r.command, a.str)
					}
				}
			}
			out = append(out, r)
		}
		return out, true
	}
	mc.allow, mc.allowSet = read("allowedMcpServers")
	mc.deny, _ = read("deniedMcpServers")
	mc.listFile = path
}

// allowed says whether Claude Code's lists let a server run: by its
// name, and its command line (stdio) or URL (remote); and if not, why.
func (mc *managed) allowed(name string, command []string, url string) (bool, string) {
	for _, r := range mc.deny {
		if r.matches(name, command, url) {
			return false, "deniedMcpServers in " + mc.listFile + " names it"
		}
	}
	if !mc.allowSet {
		return true, ""
	}
	byCommand := slices.ContainsFunc(mc.allow, func(r mcpRule) bool { return r.command != nil })
	byURL := slices.ContainsFunc(mc.allow, func(r mcpRule) bool { return r.url != "" })
	for _, r := range mc.allow {
		switch {
		case command != nil && byCommand:
			if r.command != nil && slices.Equal(r.command, command) {
				return true, ""
			}
		case command == nil && byURL:
			if r.url != "" && urlMatch(r.url, url) {
				return true, ""
			}
		default:
			if r.name != "" && r.name == name {
				return true, ""
			}
		}
	}
	switch {
	case command != nil && byCommand:
		return false, "allowedMcpServers in " + mc.listFile + " allows stdio servers by their exact command line, and not this one"
	case command == nil && byURL:
		return false, "allowedMcpServers in " + mc.listFile + " allows remote servers by URL, and not this one"
	}
	return false, "allowedMcpServers in " + mc.listFile + " does not name it"
}

func (r mcpRule) matches(name string, command []string, url string) bool {
	return r.name != "" && r.name == name || r.command != nil && command != nil && slices.Equal(r.command, command) ||
		r.url != "" && url != "" && urlMatch(r.url, url)
}

// urlMatch matches a URL against a pattern where * matches anything.
func urlMatch(pattern, url string) bool {
	re, err := regexp.Compile("^" + strings.ReplaceAll(regexp.QuoteMeta(pattern), `\*`, ".*") + "$")
	return err == nil && re.MatchString(url)
}

// apply sets the state of entry e (read from src) where managed
// configuration ignores it, or refuses it as it is or as governing would
// write it.
func (mc *managed) apply(m *Manager, sp *spec, e *Entry, src *source) {
	switch e.State {
	case Governed, NotGoverned, Added, Changed, Shadowed:
	default:
		return
	}
	governed := e.State == Governed
	was := ""
	if governed && e.Server != "" {
		was = " It runs through Gatehouse server " + e.Server + ", and is not protected while this holds."
	}
	switch {
	case mc.exclusive != "":
		e.State = Overridden
		e.Detail = "Claude Code runs only the servers of " + mc.exclusive + " (managed configuration): it ignores this entry." + was
		return
	case mc.access == "none":
		e.State = Overridden
		e.Detail = mc.accessFile + " turns MCP servers off in VS Code (chat.mcp.access): it ignores this entry." + was
		return
	case mc.access == "registry" && e.State != Shadowed:
		e.State = Forbidden
		if governed {
			e.Detail = mc.accessFile + " lets VS Code run only servers from the organisation's MCP registry (chat.mcp.access): it refuses this entry, which runs gatehouse proxy." + was
		} else {
			e.Detail = mc.accessFile + " lets VS Code run only servers from the organisation's MCP registry (chat.mcp.access): an entry that runs gatehouse proxy is not one, so governing it would stop it"
		}
		return
	}
	if sp.id != ClaudeCode || (!mc.allowSet && len(mc.deny) == 0) || e.State == Shadowed {
		return
	}
	// Claude Code's lists: the entry as it is, and as governing writes it
	// (a stdio entry running gatehouse proxy under the same name).
	var cmd []string
	if src.transport == "stdio" && src.wrapper == "" {
		cmd = append([]string{src.command}, src.args...)
	}
	if ok, why := mc.allowed(e.Name, cmd, src.url); !ok {
		e.State = Forbidden
		e.Detail = "Claude Code's managed settings refuse it: " + why + "." + was
		if !governed {
			e.Detail += " Governing it would hide it from that rule, so Gatehouse leaves it as it is"
		}
		return
	}
	if governed {
		return
	}
	server := serverName(e.Name)
	if ok, why := mc.allowed(e.Name, append([]string{m.exe}, m.proxyArgs(sp.id, server)...), ""); !ok {
		e.State = Forbidden
		e.Bypass = true
		e.Detail = "governing it would make Claude Code refuse it: " + why + " (a governed entry runs " + m.exe + ")"
	}
}

// readJSONC reads a JSON settings file (comments allowed), or nil.
func readJSONC(path string) *parsed {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	p, err := parseFile(&spec{format: formatJSONC}, path, data)
	if err != nil {
		return nil
	}
	return p
}

// claudeManagedDir is where Claude Code's managed files are.
func claudeManagedDir(e *Env) string {
	switch e.GOOS {
	case "darwin":
		return filepath.Join(e.root(), "Library", "Application Support", "ClaudeCode")
	case "linux":
		return filepath.Join(e.root(), "etc", "claude-code")
	case "windows":
		if e.ProgramFiles == "" {
			return ""
		}
		return filepath.Join(e.ProgramFiles, "ClaudeCode")
	}
	return ""
}

// root is the folder system-wide paths are under: / unless a test says.
func (e *Env) root() string {
	if e.SystemRoot != "" {
		return e.SystemRoot
	}
	return string(filepath.Separator)
}
