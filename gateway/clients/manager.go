package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// A Keychain holds secret values by id. *vault.Vault is one.
type Keychain interface {
	Secret(id string) (string, error)
	SetSecret(id, value string) error
	DeleteSecret(id string) error
}

var _ Keychain = (*vault.Vault)(nil)

// signIns is a keychain that also holds OAuth sign-ins: undoing removes
// the sign-in to a server governing registered with the server.
type signIns interface {
	DeleteOAuthGrant(server string) error
}

var _ signIns = (*vault.Vault)(nil)

// Options configure [New].
type Options struct {
	// Env is the machine to look at; nil means [SystemEnv].
	Env *Env
	// Keychain keeps the secrets governing moves out of config files.
	// Required.
	Keychain Keychain
	// Executable is the absolute path of the gatehouse program that
	// governed entries run. Required.
	Executable string
	// Home is the Gatehouse home folder governed entries pass to the proxy
	// with --home; empty when the proxy finds it by default.
	Home string
	// BackupDir is where the files are copied before they are written;
	// empty means "backups" in the home folder.
	BackupDir string
}

// A Manager finds, governs and restores the MCP clients' config files, and
// keeps what it needs to undo in the Gatehouse store.
type Manager struct {
	st      *store.Store
	env     Env
	kc      Keychain
	exe     string
	home    string
	backups string
	now     func() time.Time
	// beforeRename runs between writing a file's replacement and putting
	// it in place: tests change the file there.
	beforeRename func(path string)
}

// New returns a Manager over the store st, creating its tables on first use.
func New(ctx context.Context, st *store.Store, opts *Options) (*Manager, error) {
	if opts == nil || opts.Keychain == nil {
		return nil, errors.New("clients: no keychain")
	}
	if !filepath.IsAbs(opts.Executable) {
		return nil, fmt.Errorf("clients: the gatehouse program's path %q is not absolute", opts.Executable)
	}
	if err := st.Migrate(ctx, "clients", migrations); err != nil {
		return nil, err
	}
	env := SystemEnv()
	if opts.Env != nil {
		env = *opts.Env
	}
	backups := opts.BackupDir
	if backups == "" {
		backups = filepath.Join(st.Dir(), "backups")
	}
	return &Manager{st: st, env: env, kc: opts.Keychain, exe: opts.Executable, home: opts.Home,
		backups: backups, now: time.Now}, nil
}

// A scanned client, with what Plan needs beyond the public view.
type scanned struct {
	client  Client
	spec    *spec
	files   []*scannedFile
	running bool
	started time.Time
	runErr  error
	managed *managed
}

type scannedFile struct {
	path   string
	data   []byte
	parsed *parsed
	err    error
	exists bool
	groups []*group
}

// A group is the servers object of one scope in a file.
type group struct {
	scope   Scope
	project string
	prefix  []string // JSON keys to the servers object
	sources []*source
	entries []Entry           // the public view, one per source, then the missing ones
	state   map[*source]Entry // each source's view
}

// Scan lists every client Gatehouse knows, installed or not, with its files
// and the state of each entry.
func (m *Manager) Scan(ctx context.Context) ([]Client, error) {
	all, _, err := m.scan(ctx, nil)
	if err != nil {
		return nil, err
	}
	out := make([]Client, len(all))
	for i, s := range all {
		out[i] = s.client
	}
	return out, nil
}

func (m *Manager) scan(ctx context.Context, ids []ID) ([]*scanned, map[string]*record, error) {
	recs, err := m.records(ctx)
	if err != nil {
		return nil, nil, err
	}
	seen, err := m.seen(ctx)
	if err != nil {
		return nil, nil, err
	}
	servers, err := m.st.Servers(ctx)
	if err != nil {
		return nil, nil, err
	}
	registered := map[string]bool{}
	for _, s := range servers {
		registered[s.Name] = true
	}
	if len(ids) == 0 {
		ids = IDs()
	}
	var out []*scanned
	for _, id := range ids {
		sp := specs[id]
		if sp == nil {
			return nil, nil, fmt.Errorf("%w %q", ErrUnknownClient, id)
		}
		s := m.scanClient(sp, recs, seen)
		// A governed entry whose server was removed cannot start.
		for i := range s.client.Files {
			for j := range s.client.Files[i].Entries {
				e := &s.client.Files[i].Entries[j]
				if e.State == Governed && e.Server != "" && !registered[e.Server] {
					e.Detail = fmt.Sprintf("its Gatehouse server %s is not registered any more, so it cannot start: run gatehouse clients undo, then govern it again", e.Server)
				}
			}
		}
		out = append(out, s)
	}
	return out, recs, nil
}

func readFile(sp *spec, path string) *scannedFile {
	f := &scannedFile{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return f
	}
	f.exists = true
	if err != nil {
		f.err = fmt.Errorf("read %s: %w", path, err)
		return f
	}
	f.data = data
	f.parsed, f.err = parseFile(sp, path, data)
	return f
}

func (m *Manager) scanClient(sp *spec, recs map[string]*record, seen map[string]map[string]bool) *scanned {
	e := &m.env
	s := &scanned{spec: sp, client: Client{ID: sp.id, Name: sp.name}}
	userFiles, marks := sp.userFiles(e)
	for _, mk := range marks {
		if exists(mk) {
			s.client.Installed = true
		}
	}
	if sp.id == ClaudeDesktop {
		s.running, s.started, s.runErr = e.running(sp.id)
		s.client.Running, s.client.StartedAt = s.running, s.started
	}
	var projectDirs []string
	for _, path := range userFiles {
		f := readFile(sp, path)
		if !f.exists && path != userFiles[0] {
			continue // a client's other places count only when they hold a file
		}
		s.files = append(s.files, f)
		if f.parsed == nil {
			f.groups = []*group{{scope: ScopeUser}}
			continue
		}
		switch f.parsed.format {
		case formatTOML:
			f.groups = []*group{{scope: ScopeUser, prefix: []string{sp.top}, sources: f.parsed.tomlEntries()}}
			continue
		case formatYAML:
			g := &group{scope: ScopeUser, prefix: []string{sp.top}}
			if g.sources, f.err = f.parsed.yamlEntries(); f.err != nil {
				setFile(f.err, f.path)
			}
			f.groups = []*group{g}
			continue
		}
		f.groups = m.jsonGroups(sp, f)
		if sp.id == ClaudeCode {
			if projects, _ := f.parsed.object([]string{"projects"}); projects != nil {
				for _, mb := range projects.members {
					projectDirs = append(projectDirs, filepath.FromSlash(mb.key))
				}
			}
		}
	}
	for _, pf := range sp.projects(e, append(projectDirs, e.Cwd)) {
		path := pf.path
		if slices.Contains(userFiles, path) {
			continue
		}
		f := readFile(sp, path)
		g := &group{scope: ScopeProject, project: pf.project, prefix: sp.prefix(f.parsed)}
		switch {
		case f.err != nil || f.parsed == nil:
		case f.parsed.json != nil:
			var err error
			if g.sources, err = f.parsed.jsonEntries(g.prefix); err != nil {
				f.err = err
			}
		case f.parsed.yaml != nil:
			g.prefix = []string{sp.top}
			var err error
			if g.sources, err = f.parsed.yamlEntries(); err != nil {
				setFile(err, path)
				f.err = err
			}
		}
		f.groups = []*group{g}
		s.files = append(s.files, f)
	}
	s.managed = m.readManaged(sp)
	s.client.Managed = s.managed.notes
	m.states(s, recs, seen)
	return s
}

// jsonGroups returns the servers objects of a user file: Claude Code's
// ~/.claude.json has the user's own and one per project (local scope).
func (m *Manager) jsonGroups(sp *spec, f *scannedFile) []*group {
	g := &group{scope: ScopeUser, prefix: sp.prefix(f.parsed)}
	var err error
	if g.sources, err = f.parsed.jsonEntries(g.prefix); err != nil {
		f.err = err
		return []*group{{scope: ScopeUser}}
	}
	groups := []*group{g}
	if sp.id != ClaudeCode {
		return groups
	}
	projects, err := f.parsed.object([]string{"projects"})
	if err != nil {
		f.err = err
		return groups
	}
	if projects == nil {
		return groups
	}
	for _, mb := range projects.members {
		lg := &group{scope: ScopeLocal, project: filepath.FromSlash(mb.key), prefix: []string{"projects", mb.key, sp.top}}
		if lg.sources, err = f.parsed.jsonEntries(lg.prefix); err != nil {
			f.err = err
			return groups
		}
		if len(lg.sources) > 0 {
			groups = append(groups, lg)
		}
	}
	return groups
}

// states works out each entry's state against the records, and fills the
// public view.
func (m *Manager) states(s *scanned, recs map[string]*record, seen map[string]map[string]bool) {
	sp := s.spec
	claudeJSON := claudeCodeFile(&m.env)
	var claudeFile *scannedFile
	if sp.id == ClaudeCode {
		for _, f := range s.files {
			if f.path == claudeJSON {
				claudeFile = f
			}
		}
	}
	for _, f := range s.files {
		listed := map[string]bool{}
		for _, g := range f.groups {
			for _, src := range g.sources {
				e := Entry{Client: sp.id, File: f.path, Scope: g.scope, Project: g.project, Name: src.name,
					Transport: src.transport, Target: src.target()}
				if g.scope == ScopeProject && sp.id == ClaudeCode {
					known, governedHere := seen[f.path]
					m.projectState(&e, src, f, g, claudeFile, recs, governedHere && !known[recordKey(f.path, src.locator)])
				} else {
					key := recordKey(f.path, src.locator)
					listed[key] = true
					r := recs[key]
					if r != nil && r.Inserted != nil {
						continue // shown with the project entry it stands in for
					}
					known, governedHere := seen[f.path]
					m.entryState(&e, src, f, r, governedHere && !known[key])
				}
				if sp.id == ClaudeDesktop {
					m.desktopDetail(&e, s, recs[recordKey(f.path, src.locator)])
				}
				s.managed.apply(m, sp, &e, src)
				if g.state == nil {
					g.state = map[*source]Entry{}
				}
				g.state[src] = e
				g.entries = append(g.entries, e)
			}
		}
		// Governed entries no longer in the file.
		for key, r := range recs {
			if r.File != f.path || listed[key] || r.Inserted != nil || f.parsed == nil {
				continue
			}
			for _, g := range f.groups {
				if slices.Equal(r.Locator[:len(r.Locator)-1], g.prefix) {
					g.entries = append(g.entries, Entry{Client: sp.id, File: f.path, Scope: g.scope, Project: g.project,
						Name: r.Name, State: Missing, Server: r.Server,
						Detail: "governed, and no longer in the file (removed since)"})
					break
				}
			}
		}
		for _, g := range f.groups {
			s.client.Files = append(s.client.Files, File{Client: sp.id, Path: f.path, Scope: g.scope, Project: g.project,
				Exists: f.exists, Err: f.err, Entries: g.entries})
		}
	}
}

func (m *Manager) entryState(e *Entry, src *source, f *scannedFile, r *record, added bool) {
	switch {
	case r != nil && sameEntry(f.parsed, src, r.Written):
		e.State, e.Server = Governed, r.Server
	case r != nil:
		e.State, e.Server = Changed, r.Server
		e.Detail = "governed, then changed (by the client or by hand); govern takes it again"
	case src.byHand != "":
		e.State, e.Server = Governed, src.byHand
		e.Detail = "runs gatehouse proxy already (written by hand: undo has nothing to put back)"
	case src.state != "":
		e.State, e.Detail = src.state, src.reason
	case added:
		e.State, e.Detail = Added, "added after the file was governed; govern takes it"
	default:
		e.State = NotGoverned
	}
}

// projectState: a server in a project's .mcp.json is governed through a
// same-name entry in the project's local scope in ~/.claude.json.
func (m *Manager) projectState(e *Entry, src *source, f *scannedFile, g *group, claudeFile *scannedFile, recs map[string]*record, added bool) {
	claudeJSON := claudeCodeFile(&m.env)
	key := projectKey(m.env.GOOS, g.project)
	locator := []string{"projects", key, "mcpServers", src.name}
	r := recs[recordKey(claudeJSON, locator)]
	var local *source
	if claudeFile != nil {
		for _, lg := range claudeFile.groups {
			if lg.scope == ScopeLocal && slices.Equal(lg.prefix, locator[:3]) {
				for _, ls := range lg.sources {
					if ls.name == src.name {
						local = ls
					}
				}
			}
		}
	}
	e.Via = claudeJSON
	switch {
	case r != nil && local != nil && sameEntry(claudeFile.parsed, local, r.Written):
		e.State, e.Server = Governed, r.Server
		e.Detail = "through a same-name entry in the project's local scope in " + claudeJSON
	case r != nil:
		e.State, e.Server = Changed, r.Server
		e.Detail = "its local-scope entry in " + claudeJSON + " was changed or removed; govern takes it again"
	case local != nil:
		e.State = Shadowed
		e.Detail = "Claude Code runs the local-scope entry of the same name in " + claudeJSON + " instead"
		e.Via = ""
	case src.byHand != "":
		e.State, e.Server, e.Via = Governed, src.byHand, ""
		e.Detail = "runs gatehouse proxy already (written by hand)"
	case src.state != "":
		e.State, e.Detail, e.Via = src.state, src.reason, ""
	default:
		e.Via = ""
		switch approval(&m.env, claudeFile, g.project, key, src.name) {
		case approvalDisabled:
			e.State, e.Detail = Unsupported, "disabled in Claude Code for this project"
		case approvalPending:
			e.State, e.Detail = Unsupported, "not approved in Claude Code yet (run claude in "+g.project+" and approve it)"
		default:
			e.State = NotGoverned
			if added {
				e.State, e.Detail = Added, "added after the file was governed; govern takes it"
			}
		}
	}
}

func (m *Manager) desktopDetail(e *Entry, s *scanned, r *record) {
	switch {
	case e.State == Governed && r != nil && s.running && !s.started.IsZero() && s.started.After(r.GovernedAt):
		e.Detail = "Claude Desktop restarted since, and kept it"
	case e.State == Governed && r != nil && s.running && s.started.IsZero():
		e.Detail = "Claude Desktop loads it at its next start (restart it if it has not been since governing)"
	case e.State == Governed && r != nil && s.running:
		e.Detail = "restart Claude Desktop to load it"
	case e.State == Governed && r != nil:
		e.Detail = "Claude Desktop loads it when it starts"
	case e.State == Changed:
		e.Detail = "Claude Desktop (or someone) wrote over it since governing: quit Claude Desktop, then govern again"
	}
}

// sameEntry reports whether the entry src in p means what written means.
func sameEntry(p *parsed, src *source, written []byte) bool {
	if p == nil {
		return false
	}
	cur := p.data[src.span[0]:src.span[1]]
	if bytes.Equal(cur, written) {
		return true
	}
	if p.format == formatYAML {
		return sameYAML(cur, written)
	}
	if p.format == formatTOML {
		var a, b map[string]any
		if _, err := toml.Decode(string(cur), &a); err != nil {
			return false
		}
		if _, err := toml.Decode(string(written), &b); err != nil {
			return false
		}
		return reflect.DeepEqual(a, b)
	}
	a, err := parseJSON(cur, true)
	if err != nil {
		return false
	}
	b, err := parseJSON(written, true)
	if err != nil {
		return false
	}
	return reflect.DeepEqual(a.plain(cur), b.plain(written))
}

type approvalState int

const (
	approvalPending approvalState = iota
	approvalEnabled
	approvalDisabled
)

// approval reads whether the user approved a project's .mcp.json server in
// Claude Code: in ~/.claude.json's project, or in the settings files.
func approval(e *Env, claudeFile *scannedFile, dir, key, name string) approvalState {
	state := approvalPending
	check := func(p *parsed, prefix []string) {
		if p == nil || p.json == nil {
			return
		}
		obj, _ := p.object(prefix)
		if obj == nil {
			return
		}
		for _, mb := range obj.members {
			switch {
			case mb.key == "enableAllProjectMcpServers" && mb.val.kind == jsonBool && p.data[mb.val.start] == 't':
				if state != approvalDisabled {
					state = approvalEnabled
				}
			case mb.key == "enabledMcpjsonServers" && mb.val.kind == jsonArray:
				for _, el := range mb.val.elems {
					if el.kind == jsonString && el.str == name && state != approvalDisabled {
						state = approvalEnabled
					}
				}
			case mb.key == "disabledMcpjsonServers" && mb.val.kind == jsonArray:
				for _, el := range mb.val.elems {
					if el.kind == jsonString && el.str == name {
						state = approvalDisabled
					}
				}
			}
		}
	}
	if claudeFile != nil {
		check(claudeFile.parsed, []string{"projects", key})
	}
	settings := []string{
		filepath.Join(e.Home, ".claude", "settings.json"),
		filepath.Join(dir, ".claude", "settings.json"),
		filepath.Join(dir, ".claude", "settings.local.json"),
	}
	if e.ClaudeConfigDir != "" {
		settings[0] = filepath.Join(e.ClaudeConfigDir, "settings.json")
	}
	if dir := claudeManagedDir(e); dir != "" {
		// Managed settings come last: they win.
		settings = append(settings, filepath.Join(dir, "managed-settings.json"))
	}
	for _, path := range settings {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		p, err := parseFile(&spec{format: formatJSONC}, path, data)
		if err == nil {
			check(p, nil)
		}
	}
	return state
}
