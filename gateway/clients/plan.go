package clients

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/internal/tomltext"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// A Plan is what governing or undoing will do: the exact change to each
// file, and what becomes of each selected entry. Nothing is written until
// [Manager.Apply].
type Plan struct {
	Undo    bool
	Force   bool
	Files   []*FilePlan
	Results []*Result
}

// A FilePlan is the change to one config file.
type FilePlan struct {
	Client ID
	Path   string
	// Diff is the unified diff of the file, secret values masked.
	Diff string

	old, new []byte
	redacted []byte   // the backup: old, with the secret values governing moves replaced by references
	unmoved  []string // what looks like a secret in the file's entries: masked in backups
	entries  []*entryPlan
	// edits that are not one entry's: the local-scope entries added to
	// ~/.claude.json
	pendingEdits []edit
	// the entries of the files governing reads, by file: an entry added
	// later is drift
	seen map[string][][]string
}

// A Result is what becomes (or became) of one entry.
type Result struct {
	Client  ID
	File    string // the file the entry is in
	Scope   Scope
	Project string
	Name    string // the entry's name in the client's file
	Server  string // the Gatehouse server it runs (governing) or ran (undoing) through
	Done    bool   // after Apply: governed, or put back
	Skipped string // why it is left as it is
	// Secrets names the values governing moves from the entry into the
	// keychain ("LINEAR_API_KEY", "header Authorization"): names, never
	// the values.
	Secrets []string
	Notes   []string
	Err     error
}

func (r *Result) note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

type entryPlan struct {
	res     *Result
	rec     *record
	written []byte // govern: the entry as written, before it is known (overlays)
	// govern: the server registration to add or update; nil when the entry
	// shares one that is already there.
	reg      *store.Server
	regOld   *store.Server // the registration an update replaces
	secrets  []secretPut
	masks    []string // the secret values the entry held, masked in diffs
	kept     []jfield // the client's own settings the entry had, as written
	imported []string // the secret ids of the registration governing owns
	drop     bool     // undo: forget the record without writing (nothing to put back)
}

type secretPut struct{ id, value string }

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// checkClients returns an error for a client named in sel that is not
// installed here.
func checkClients(all []*scanned, sel *Selection) error {
	for _, s := range all {
		if len(sel.Clients) > 0 && !s.client.Installed {
			var where []string
			for _, f := range s.files {
				where = append(where, f.path)
			}
			return fmt.Errorf("%s is %w here (looked for %s)", s.spec.name, ErrNotInstalled, strings.Join(where, ", "))
		}
	}
	return nil
}

// PlanGovern works out what governing the entries sel selects would write.
// Entries that cannot be governed are in the plan's results with the
// reason; a malformed file is an error in its results, and nothing in it is
// touched.
func (m *Manager) PlanGovern(ctx context.Context, sel Selection) (*Plan, error) {
	all, recs, err := m.scan(ctx, sel.Clients)
	if err != nil {
		return nil, err
	}
	if err := checkClients(all, &sel); err != nil {
		return nil, err
	}
	servers, err := m.st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	imported, err := m.imported(ctx)
	if err != nil {
		return nil, err
	}
	settings, err := m.st.Settings(ctx)
	if err != nil {
		return nil, err
	}
	n := &namer{m: m, ctx: ctx, regs: map[string]store.Server{}, imported: imported, recs: recs, pending: map[string]*candidate{},
		quarantineNew: settings.QuarantineNewServers}
	for _, s := range servers {
		n.regs[s.Name] = s
	}
	pl := &Plan{Force: sel.Force}
	files := map[string]*FilePlan{}
	filePlan := func(id ID, f *scannedFile) *FilePlan {
		fp := files[f.path]
		if fp == nil {
			fp = &FilePlan{Client: id, Path: f.path, old: f.data, seen: map[string][][]string{}, unmoved: unmovedSecrets(f.groups)}
			files[f.path] = fp
			pl.Files = append(pl.Files, fp)
		}
		fp.seen[f.path] = locators(f)
		return fp
	}
	found := map[string]bool{}
	for _, s := range all {
		var claudeFile *scannedFile
		for _, f := range s.files {
			if s.spec.id == ClaudeCode && f.path == claudeCodeFile(&m.env) {
				claudeFile = f
			}
		}
		overlays := map[string][]*entryPlan{} // project key → entries to add
		projectSeen := map[string][][]string{}
		for _, f := range s.files {
			if f.err != nil {
				pl.Results = append(pl.Results, &Result{Client: s.spec.id, File: f.path, Err: f.err,
					Skipped: "the file cannot be read; nothing in it was changed"})
				continue
			}
			for _, g := range f.groups {
				for _, src := range g.sources {
					if !sel.hasServer(src.name) {
						continue
					}
					found[src.name] = true
					e, ok := g.state[src]
					if !ok {
						continue // a local entry standing in for a project's: governed with it
					}
					res := &Result{Client: s.spec.id, File: f.path, Scope: g.scope, Project: g.project, Name: src.name, Server: e.Server}
					pl.Results = append(pl.Results, res)
					switch e.State {
					case NotGoverned, Added, Changed:
					case Governed:
						res.Skipped = "already governed"
						continue
					default:
						res.Skipped = e.Detail
						if res.Skipped == "" {
							res.Skipped = string(e.State)
						}
						continue
					}
					if g.scope == ScopeProject && s.spec.id != ClaudeCode && m.env.tracked(f.path) {
						res.Skipped = "the project file is tracked by version control: governing it would commit this machine's paths for everyone; add the server to your own " + s.spec.name + " config instead, and govern that"
						continue
					}
					ep, err := n.prepare(s.spec, f, g, src, res, &sel)
					if err != nil {
						return nil, err
					}
					if ep == nil {
						continue
					}
					if g.scope == ScopeProject && s.spec.id == ClaudeCode {
						if claudeFile == nil || claudeFile.parsed == nil || claudeFile.parsed.json == nil {
							res.Skipped = "Claude Code's " + claudeCodeFile(&m.env) + " is missing or unreadable: run claude once, then govern again"
							n.forget(ep)
							continue
						}
						key := projectKey(m.env.GOOS, g.project)
						overlays[key] = append(overlays[key], ep)
						projectSeen[f.path] = locators(f)
						continue
					}
					fp := filePlan(s.spec.id, f)
					if err := m.renderReplacement(s.spec, f.parsed, src, ep); err != nil {
						return nil, err
					}
					fp.entries = append(fp.entries, ep)
				}
			}
		}
		if len(overlays) > 0 {
			fp := filePlan(ClaudeCode, claudeFile)
			maps.Copy(fp.seen, projectSeen)
			for _, key := range slices.Sorted(maps.Keys(overlays)) {
				if err := m.renderOverlays(claudeFile.parsed, key, overlays[key], fp); err != nil {
					return nil, err
				}
			}
		}
	}
	unreadable := slices.ContainsFunc(pl.Results, func(r *Result) bool { return r.Name == "" && r.Err != nil })
	for _, name := range sel.Servers {
		if !found[name] && !unreadable { // it may be in the file that cannot be read
			return nil, fmt.Errorf("%w: %q is in none of the selected clients' files", ErrNoEntry, name)
		}
	}
	// The edits of each file, checked, hashed and diffed.
	for _, fp := range pl.Files {
		if err := m.finishGovern(fp); err != nil {
			return nil, err
		}
	}
	pl.Files = slices.DeleteFunc(pl.Files, func(fp *FilePlan) bool { return len(fp.entries) == 0 })
	return pl, nil
}

// locators lists the entries of a file.
func locators(f *scannedFile) [][]string {
	var out [][]string
	for _, g := range f.groups {
		for _, s := range g.sources {
			out = append(out, s.locator)
		}
	}
	return out
}

// A candidate is a server registration as governing would make it, with
// the actual values of its secrets.
type candidate struct {
	srv     store.Server // every value in place, secrets too
	secrets []slot       // the values that move to the keychain, in the order found
	ids     map[slot]string
}

// A slot is where a registration holds a value that may be a secret: an
// environment variable, a header, an argument, or the URL.
type slot struct {
	kind string // "env", "header", "arg" or "url"
	key  string // the variable or header; the argument's index from 0; "" for the URL
}

// slots returns every slot srv fills, in a fixed order.
func slots(srv *store.Server) []slot {
	var out []slot
	for _, k := range slices.Sorted(maps.Keys(srv.Env)) {
		out = append(out, slot{"env", k})
	}
	for _, k := range slices.Sorted(maps.Keys(srv.Headers)) {
		out = append(out, slot{"header", k})
	}
	for i := range srv.Args {
		out = append(out, slot{"arg", strconv.Itoa(i)})
	}
	if srv.URL != "" {
		out = append(out, slot{"url", ""})
	}
	return out
}

func (s slot) index() int {
	i, _ := strconv.Atoi(s.key)
	return i
}

// get returns the value srv has at s.
func (s slot) get(srv *store.Server) (string, bool) {
	switch s.kind {
	case "env":
		v, ok := srv.Env[s.key]
		return v, ok
	case "header":
		v, ok := srv.Headers[s.key]
		return v, ok
	case "arg":
		if i := s.index(); i < len(srv.Args) {
			return srv.Args[i], true
		}
		return "", false
	default:
		return srv.URL, srv.URL != ""
	}
}

// set puts v at s in srv, whose maps and argument list are its own.
func (s slot) set(srv *store.Server, v string) {
	switch s.kind {
	case "env":
		srv.Env[s.key] = v
	case "header":
		srv.Headers[s.key] = v
	case "arg":
		srv.Args[s.index()] = v
	default:
		srv.URL = v
	}
}

// name is the part of the slot's keychain item after the server's name.
func (s slot) name() string {
	switch s.kind {
	case "arg":
		return "arg" + strconv.Itoa(s.index()+1)
	case "url":
		return "url"
	}
	return s.key
}

// String says the slot in words, for notes.
func (s slot) String() string {
	switch s.kind {
	case "header":
		return "header " + s.key
	case "arg":
		return "argument " + strconv.Itoa(s.index()+1)
	case "url":
		return "its URL"
	}
	return s.key
}

// span returns the token of the slot's value in src's file.
func (s slot) span(src *source) ([2]int, bool) {
	switch s.kind {
	case "env", "header":
		list := src.env
		if s.kind == "header" {
			list = src.headers
		}
		for _, v := range list {
			if v.k == s.key {
				return v.span, true
			}
		}
	case "arg":
		if i := s.index(); i < len(src.argSpans) {
			return src.argSpans[i], true
		}
	case "url":
		return src.urlSpan, src.urlSpan != [2]int{}
	}
	return [2]int{}, false
}

type namer struct {
	m    *Manager
	ctx  context.Context
	regs map[string]store.Server
	// quarantineNew says a server governing registers is quarantined
	// until reviewed, unless a capability pack knows it (the home's
	// setting).
	quarantineNew bool
	imported      map[string][]string
	recs          map[string]*record
	pending       map[string]*candidate // registrations this plan makes
}

func (n *namer) forget(ep *entryPlan) {
	if ep.reg != nil {
		delete(n.pending, ep.reg.Name)
	}
}

// prepare works out how one entry is imported: the registration, the
// secrets, the record (without the written bytes). It returns nil when the
// entry is skipped (the result says why).
func (n *namer) prepare(sp *spec, f *scannedFile, g *group, src *source, res *Result, sel *Selection) (*entryPlan, error) {
	m := n.m
	e := &m.env
	c := &candidate{srv: store.Server{Transport: src.transport}}
	var keepEnv []kv
	switch src.transport {
	case "stdio":
		path := e.Path
		for _, v := range src.env {
			if strings.EqualFold(v.k, "PATH") && !sp.expands(v.v) {
				path = v.v
			}
		}
		cmd, err := e.lookPath(src.command, path)
		if err != nil {
			res.Skipped = fmt.Sprintf("its command %q is not found (%v): fix the entry, or install the program, and govern again", src.command, err)
			res.Err = err
			return nil, nil
		}
		c.srv.Command, c.srv.Args = cmd, slices.Clone(src.args)
		sure := secretArgs(src.args)
		for i, a := range src.args {
			switch {
			case sp.expands(a):
				// The client expands it: the entry's env passes it to the
				// proxy, which puts it in this argument's place.
				name := fmt.Sprintf("GATEHOUSE_ARG_%d", i+1)
				c.srv.Args[i] = store.ClientEnvRef(name)
				keepEnv = append(keepEnv, kv{k: name, v: a})
				res.note("argument %d (%s) is expanded by %s, and passed to the proxy as %s", i+1, varIn(a), sp.name, name)
			case slices.Contains(sure, i) || slices.Contains(sel.Secrets, "arg:"+strconv.Itoa(i+1)):
				c.secrets = append(c.secrets, slot{"arg", strconv.Itoa(i)})
			case maybeSecret(a):
				res.note("argument %d may be a secret (%d characters that look random); to keep it in the keychain, govern again with --secret arg:%d", i+1, len(a), i+1)
			}
		}
		if cmd != src.command {
			res.note("command %s resolved to %s", src.command, cmd)
		}
		if src.cwd != "" && sp.expands(src.cwd) {
			c.srv.Cwd = store.ClientEnvRef("GATEHOUSE_CWD")
			keepEnv = append(keepEnv, kv{k: "GATEHOUSE_CWD", v: src.cwd})
			res.note("its folder (%s) is expanded by %s, and passed to the proxy as GATEHOUSE_CWD", varIn(src.cwd), sp.name)
		} else if src.cwd != "" {
			cwd := src.cwd
			if !isAbs(e.GOOS, cwd) {
				if g.scope != ScopeProject {
					res.Skipped = fmt.Sprintf("its cwd %q is relative", src.cwd)
					return nil, nil
				}
				cwd = filepath.Join(g.project, cwd)
			}
			c.srv.Cwd = cwd
		}
		c.srv.Env = map[string]string{}
		for _, v := range src.env {
			if sp.expands(v.v) || sp.id == ClaudeDesktop && v.k == "PATH" && strings.Contains(v.v, "${PATH}") {
				keepEnv = append(keepEnv, v) // the client expands it: it stays in the entry
				continue
			}
			c.srv.Env[v.k] = v.v
			if looksSecret(v.k, v.v, sel.Secrets) {
				c.secrets = append(c.secrets, slot{"env", v.k})
			}
		}
		if _, ok := c.srv.Env["PATH"]; !ok && !slices.ContainsFunc(keepEnv, func(v kv) bool { return v.k == "PATH" }) {
			// A program outside the system folders may need its own
			// folder on PATH (#!/usr/bin/env node) when a GUI app, with
			// its short PATH, starts it.
			dir := filepath.Dir(cmd)
			if e.GOOS == "windows" {
				dir = cmd[:max(strings.LastIndexAny(cmd, `\/`), 0)]
			}
			if !systemDirs[dir] && e.Path != "" {
				sep := ":"
				if e.GOOS == "windows" {
					sep = ";"
				}
				list := []string{dir}
				for _, d := range strings.Split(e.Path, sep) {
					if d != "" && d != dir {
						list = append(list, d)
					}
				}
				c.srv.Env["PATH"] = strings.Join(list, sep)
				res.note("PATH set to %s's folder and yours, so that it starts from apps with a short PATH", filepath.Base(cmd))
			}
		}
	case "http":
		c.srv.URL = src.url
		if src.sse {
			c.srv.Transport = store.TransportSSE
		}
		expanded := false
		switch {
		case sp.expands(src.url):
			c.srv.URL = store.ClientEnvRef("GATEHOUSE_URL")
			keepEnv = append(keepEnv, kv{k: "GATEHOUSE_URL", v: src.url})
			res.note("its URL (%s) is expanded by %s, and passed to the proxy as GATEHOUSE_URL", varIn(src.url), sp.name)
		case urlSecret(src.url) || slices.Contains(sel.Secrets, "url"):
			c.secrets = append(c.secrets, slot{"url", ""})
		}
		c.srv.Headers = map[string]string{}
		for i, h := range src.headers {
			if src.wrapper == "" && sp.expands(h.v) {
				name := fmt.Sprintf("GATEHOUSE_HEADER_%d", i+1)
				c.srv.Headers[h.k] = store.ClientEnvRef(name)
				keepEnv = append(keepEnv, kv{k: name, v: h.v})
				res.note("header %s (%s) is expanded by %s, and passed to the proxy as %s", h.k, varIn(h.v), sp.name, name)
				expanded = true
				continue
			}
			c.srv.Headers[h.k] = h.v
			if looksSecret(h.k, h.v, sel.Secrets) {
				c.secrets = append(c.secrets, slot{"header", h.k})
			}
		}
		// Without a credential of its own, the entry signs in with OAuth
		// when the server asks (the client did that itself, or needed
		// nothing): the proxy then does the same.
		if len(c.secrets) == 0 && !expanded || src.oauthClientID != "" {
			c.srv.Auth, c.srv.OAuthClientID, c.srv.OAuthScopes = store.AuthOAuth, src.oauthClientID, src.oauthScopes
		}
		if src.wrapper != "" {
			res.note("reached directly rather than through %s", src.wrapper)
		}
	}
	key := recordKey(f.path, src.locator)
	var prev *record
	if r := n.recs[key]; r != nil {
		prev = r
	}
	if g.scope == ScopeProject && sp.id == ClaudeCode {
		locator := []string{"projects", projectKey(e.GOOS, g.project), "mcpServers", src.name}
		prev = n.recs[recordKey(claudeCodeFile(e), locator)]
	}
	ep := &entryPlan{res: res}
	name, mode, err := n.assign(src.name, c, prev)
	if err != nil {
		return nil, err
	}
	res.Server = name
	if c.srv.Auth == store.AuthOAuth {
		res.note("signs in with OAuth if the server asks for it: then run gatehouse server login %s", name)
	}
	// Secret ids and the registration as stored.
	reg := c.srv
	reg.Name = name
	reg.Env, reg.Headers, reg.Args = maps.Clone(c.srv.Env), maps.Clone(c.srv.Headers), slices.Clone(c.srv.Args)
	if c.ids == nil {
		c.ids = map[slot]string{}
		used := map[string]bool{}
		for _, sl := range c.secrets {
			c.ids[sl] = secretID(name, sl.name(), used)
		}
	}
	for _, sl := range c.secrets {
		id := c.ids[sl]
		v, _ := sl.get(&c.srv)
		sl.set(&reg, vault.Ref(id))
		ep.secrets = append(ep.secrets, secretPut{id, v})
		ep.masks = append(ep.masks, v)
		res.Secrets = append(res.Secrets, sl.String())
		res.note("%s moved to the keychain as %s", sl, id)
	}
	if reg.Transport == store.TransportStdio && len(reg.Headers) == 0 {
		reg.Headers = nil
	}
	switch mode {
	case assignNew, assignUpdate:
		if err := reg.Validate(); err != nil {
			res.Skipped = fmt.Sprintf("cannot register it: %v", err)
			delete(n.pending, name)
			return nil, nil
		}
		// The capability pack is matched whenever governing writes the
		// registration: its command may have changed.
		reg.Pack = ""
		if p := policy.MatchPack(reg.Command, reg.Args, reg.URL); p != nil {
			reg.Pack = p.Ref()
		}
		if mode == assignUpdate {
			// What the user decided about the server stays.
			old := n.regs[name]
			reg.Trusted, reg.Quarantined = old.Trusted, old.Quarantined
			reg.Confine, reg.AllowRead, reg.AllowWrite, reg.AllowNet, reg.UnconfinedOK = old.Confine, old.AllowRead, old.AllowWrite, old.AllowNet, old.UnconfinedOK
		} else {
			reg.Quarantined = n.quarantineNew && reg.Pack == ""
		}
		ep.reg = &reg
		for _, s := range ep.secrets {
			ep.imported = append(ep.imported, s.id)
		}
		if mode == assignUpdate {
			old := n.regs[name]
			ep.regOld = &old
			res.note("updates server %s, which governing registered before", name)
		} else {
			res.note("registers server %s", name)
		}
	case assignShare:
		res.note("shares server %s, registered the same way", name)
		ep.secrets = nil // already in the keychain, same values
	}
	// The record: the original entry with its secret values replaced by
	// references.
	var spans []secretSpan
	for _, sl := range c.secrets {
		if span, ok := sl.span(src); ok {
			v, _ := sl.get(&c.srv)
			spans = append(spans, secretSpan{span, c.ids[sl], v})
		}
	}
	rec := &record{File: f.path, Locator: src.locator, Client: sp.id, Scope: g.scope, Project: g.project,
		Source: f.path, Name: src.name, Server: name, GovernedAt: m.now()}
	if src.keyAt > 0 || f.parsed.format == formatTOML || f.parsed.format == formatYAML {
		rec.Indent = lineIndent(f.data, max(src.keyAt, src.span[0]))
	}
	tmpl, holes, raws := template(f.data, src.span, spans, f.parsed.format, sum([]byte(recordKey(f.path, src.locator)))[:8])
	rec.Original, rec.Holes = tmpl, holes
	if g.scope == ScopeProject && sp.id == ClaudeCode {
		rec.Holes = nil // the shared file is not edited: nothing goes back into it
		if len(spans) > 0 {
			res.note("the shared file %s still holds the secret values; remove them there (and rotate them if it is committed)", f.path)
		}
	} else {
		// Kept for this entry's undo alone; undo deletes them.
		ep.secrets = append(ep.secrets, raws...)
	}
	ep.rec = rec
	rec.keepEnv = keepEnv
	rec.src = src
	for _, k := range src.keep {
		ep.kept = append(ep.kept, jfield{key: k.key, raw: f.data[k.span[0]:k.span[1]]})
	}
	return ep, nil
}

type secretSpan struct {
	span  [2]int
	id    string
	value string
}

// template returns the bytes of span with each secret's token replaced by
// its vault reference, where the references are, and the keychain items
// that keep tokens that writing the value again would not reproduce.
func template(data []byte, span [2]int, secrets []secretSpan, format fileFormat, tag string) ([]byte, []hole, []secretPut) {
	slices.SortFunc(secrets, func(a, b secretSpan) int { return a.span[0] - b.span[0] })
	var out bytes.Buffer
	var holes []hole
	var raws []secretPut
	pos := span[0]
	for _, s := range secrets {
		if s.span[0] < pos || s.span[1] > span[1] {
			continue
		}
		out.Write(data[pos:s.span[0]])
		token := string(data[s.span[0]:s.span[1]])
		quote := `"`
		if format == formatTOML {
			quote = `toml"`
			if strings.HasPrefix(token, "'") {
				quote = `toml'`
			}
		}
		placeholder := encodeValue(vault.Ref(s.id), quote)
		h := hole{Offset: out.Len(), Len: len(placeholder), Secret: s.id, Quote: quote}
		if encodeValue(s.value, quote) != token {
			h.Raw = s.id + ".raw." + tag
			raws = append(raws, secretPut{h.Raw, token})
		}
		holes = append(holes, h)
		out.WriteString(placeholder)
		pos = s.span[1]
	}
	out.Write(data[pos:span[1]])
	return out.Bytes(), holes, raws
}

// encodeValue writes a string the way a hole's quote says.
func encodeValue(v, quote string) string {
	switch quote {
	case `toml"`:
		return tomltext.Quote(v)
	case `toml'`:
		if strings.ContainsAny(v, "'\n\r") {
			return tomltext.Quote(v)
		}
		return "'" + v + "'"
	default:
		return jsonQuote(v)
	}
}

const (
	assignNew = iota
	assignShare
	assignUpdate
)

// assign chooses the Gatehouse server an entry runs through: the one an
// earlier governing of it registered, one registered the same way, or a
// new one named after the entry.
func (n *namer) assign(entry string, c *candidate, prev *record) (string, int, error) {
	var names []string
	if prev != nil {
		names = append(names, prev.Server)
	}
	base := serverName(entry)
	names = append(names, base)
	for i := 2; i < 1000; i++ {
		names = append(names, fmt.Sprintf("%s-%d", base[:min(len(base), 60)], i))
	}
	for _, name := range names {
		if p := n.pending[name]; p != nil {
			if sameCandidate(p, c) {
				c.ids = p.ids
				return name, assignShare, nil
			}
			continue
		}
		reg, exists := n.regs[name]
		if !exists {
			n.pending[name] = c
			return name, assignNew, nil
		}
		same, ids, err := n.sameRegistration(reg, c)
		if err != nil {
			return "", 0, err
		}
		if same {
			c.ids = ids
			return name, assignShare, nil
		}
		if prev != nil && name == prev.Server && n.ownedBy(name, prev) {
			n.pending[name] = c
			return name, assignUpdate, nil
		}
	}
	return "", 0, fmt.Errorf("no free server name for %q", entry)
}

// ownedBy reports whether server name was registered by governing and no
// other governed entry than rec runs through it.
func (n *namer) ownedBy(name string, rec *record) bool {
	if _, ok := n.imported[name]; !ok {
		return false
	}
	for _, r := range n.recs {
		if r.Server == name && (r.File != rec.File || !slices.Equal(r.Locator, rec.Locator)) {
			return false
		}
	}
	return true
}

func sameCandidate(a, b *candidate) bool {
	bySlot := func(x, y slot) int { return strings.Compare(x.kind+"\x00"+x.key, y.kind+"\x00"+y.key) }
	return a.srv.Transport == b.srv.Transport && a.srv.Command == b.srv.Command && slices.Equal(a.srv.Args, b.srv.Args) &&
		a.srv.Auth == b.srv.Auth && a.srv.OAuthClientID == b.srv.OAuthClientID && slices.Equal(a.srv.OAuthScopes, b.srv.OAuthScopes) &&
		a.srv.Cwd == b.srv.Cwd && a.srv.URL == b.srv.URL && maps.Equal(a.srv.Env, b.srv.Env) &&
		maps.Equal(nilMap(a.srv.Headers), nilMap(b.srv.Headers)) &&
		slices.Equal(slices.SortedFunc(slices.Values(a.secrets), bySlot), slices.SortedFunc(slices.Values(b.secrets), bySlot))
}

func nilMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// sameRegistration reports whether reg runs what c would, secrets read
// from the keychain; and the ids of its secrets.
func (n *namer) sameRegistration(reg store.Server, c *candidate) (bool, map[slot]string, error) {
	if reg.Transport != c.srv.Transport || reg.Command != c.srv.Command || len(reg.Args) != len(c.srv.Args) ||
		reg.Auth != c.srv.Auth || reg.OAuthClientID != c.srv.OAuthClientID || !slices.Equal(reg.OAuthScopes, c.srv.OAuthScopes) ||
		reg.Cwd != c.srv.Cwd || len(reg.Env) != len(c.srv.Env) || len(reg.Headers) != len(c.srv.Headers) {
		return false, nil, nil
	}
	ids := map[slot]string{}
	for _, sl := range slots(&c.srv) {
		want, _ := sl.get(&c.srv)
		have, ok := sl.get(&reg)
		if !ok {
			return false, nil, nil
		}
		id, isRef := vault.ParseRef(have)
		if slices.Contains(c.secrets, sl) != isRef {
			return false, nil, nil
		}
		if !isRef {
			if have != want {
				return false, nil, nil
			}
			continue
		}
		v, err := n.m.kc.Secret(id)
		if errors.Is(err, vault.ErrNotFound) {
			return false, nil, nil
		}
		if err != nil {
			return false, nil, err
		}
		if v != want {
			return false, nil, nil
		}
		ids[sl] = id
	}
	return true, ids, nil
}

// serverName derives a Gatehouse server name from an entry's name: "my
// server.v2" becomes "my-server-v2", "café" becomes "cafe".
func serverName(entry string) string {
	var b strings.Builder
	dash := false
	for _, r := range norm.NFD.String(entry) {
		switch {
		case unicode.Is(unicode.Mn, r):
			// accents, once split from their letters
		case r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-'):
			b.WriteRune(r)
			dash = r == '-'
		default:
			if !dash && b.Len() > 0 {
				b.WriteByte('-')
				dash = true
			}
		}
	}
	s := strings.Trim(b.String(), "-_")
	if len(s) > 60 {
		s = strings.Trim(s[:60], "-_")
	}
	if s == "" {
		s = "server"
	}
	return s
}

// secretID names the keychain item of a server's variable or header.
func secretID(server, key string, used map[string]bool) string {
	var b strings.Builder
	for _, r := range key {
		if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' || r == '.') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
	}
	k := b.String()
	if len(k) > 60 {
		k = k[:60]
	}
	id := server + "." + k
	for i := 2; used[id]; i++ {
		id = fmt.Sprintf("%s.%s-%d", server, k, i)
	}
	used[id] = true
	return id
}

// proxyArgs are the arguments of a governed entry.
func (m *Manager) proxyArgs(id ID, server string) []string {
	var a []string
	if m.home != "" {
		a = append(a, "--home", m.home)
	}
	return append(a, "proxy", "--client", string(id), server)
}

// renderReplacement renders the governed entry that replaces src in its
// file.
func (m *Manager) renderReplacement(sp *spec, p *parsed, src *source, ep *entryPlan) error {
	switch p.format {
	case formatTOML:
		ep.written = m.renderTOML(p, src, ep.rec.Server)
		ep.rec.Written = ep.written
		return nil
	case formatYAML:
		ep.written = renderYAML(p, src, m.jsonFields(sp, p, src, ep.rec.Server, ep.rec.keepEnv))
		ep.rec.Written = ep.written
		return nil
	}
	st := styleOf(p.data, src.node, src.keyAt, src.keyEnd)
	ep.written = []byte(st.object(m.jsonFields(sp, p, src, ep.rec.Server, ep.rec.keepEnv), 0))
	ep.rec.Written = ep.written
	return nil
}

// jsonFields are the members of a governed JSON entry.
func (m *Manager) jsonFields(sp *spec, p *parsed, src *source, server string, keepEnv []kv) []jfield {
	var before, after []jfield
	for _, k := range src.keep {
		f := jfield{key: k.key, raw: p.data[k.span[0]:k.span[1]]}
		if k.span[0] < src.mainAt {
			before = append(before, f)
		} else {
			after = append(after, f)
		}
	}
	var fields []jfield
	if src.hasType {
		fields = append(fields, strField("type", sp.writtenType(src.typ)))
	}
	fields = append(fields, before...)
	args := m.proxyArgs(sp.id, server)
	env := jfield{key: sp.env(), obj: keepEnv}
	switch {
	case sp.cmdList:
		fields = append(fields, jfield{key: "command", list: append([]string{m.exe}, args...)})
		if len(keepEnv) > 0 {
			fields = append(fields, env)
		}
	case src.legacyZed:
		sub := []jfield{strField("path", m.exe), {key: "args", list: args}}
		if len(keepEnv) > 0 {
			sub = append(sub, env)
		}
		fields = append(fields, jfield{key: "command", sub: sub})
	default:
		fields = append(fields, strField("command", m.exe), jfield{key: "args", list: args})
		if len(keepEnv) > 0 || sp.alwaysEnv {
			fields = append(fields, env)
		}
	}
	return append(fields, after...)
}

// renderTOML renders the governed [mcp_servers.NAME] table of Codex.
func (m *Manager) renderTOML(p *parsed, src *source, server string) []byte {
	nl := newline(p.data)
	var b strings.Builder
	b.Write(src.tomlHeader)
	if !strings.HasSuffix(string(src.tomlHeader), "\n") {
		b.WriteString(nl)
	}
	b.WriteString("command = " + tomltext.Quote(m.exe) + nl)
	args := m.proxyArgs(Codex, server)
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = tomltext.Quote(a)
	}
	b.WriteString("args = [" + strings.Join(q, ", ") + "]" + nl)
	for _, k := range src.keep {
		b.Write(p.data[k.span[0]:k.span[1]])
		b.WriteString(nl)
	}
	for _, sub := range src.tomlSubs {
		b.WriteString(nl)
		t := string(p.data[sub[0]:sub[1]])
		b.WriteString(t)
		if !strings.HasSuffix(t, "\n") {
			b.WriteString(nl)
		}
	}
	out := b.String()
	if !bytes.HasSuffix(p.data[src.span[0]:src.span[1]], []byte("\n")) {
		out = strings.TrimSuffix(strings.TrimSuffix(out, "\n"), "\r")
	}
	return []byte(out)
}

// renderOverlays adds the local-scope entries that stand in for a
// project's .mcp.json servers to ~/.claude.json.
func (m *Manager) renderOverlays(p *parsed, key string, eps []*entryPlan, fp *FilePlan) error {
	locator := []string{"projects", key, "mcpServers"}
	// The deepest object of the path that exists.
	depth := 0
	obj := p.json
	for depth < len(locator) {
		next, err := p.object(locator[:depth+1])
		if err != nil {
			return err
		}
		if next == nil {
			break
		}
		obj = next
		depth++
	}
	if depth < len(locator) {
		// Something on the path that is not an object: do not guess.
		if mb, _ := obj.member(p.data, locator[depth]); mb != nil {
			for _, ep := range eps {
				ep.res.Skipped = fmt.Sprintf("%s holds %s, which is not an object", p.path, strings.Join(locator[:depth+1], "."))
			}
			return nil
		}
	}
	created := len(locator) - depth + 1
	byName := map[string]*entryPlan{}
	var names []string
	for _, ep := range eps {
		byName[ep.res.Name] = ep
		names = append(names, ep.res.Name)
	}
	entryFields := func(ep *entryPlan) []jfield {
		fields := []jfield{strField("type", "stdio"), strField("command", m.exe),
			{key: "args", list: m.proxyArgs(ClaudeCode, ep.rec.Server)}}
		if len(ep.rec.keepEnv) > 0 {
			fields = append(fields, jfield{key: "env", obj: ep.rec.keepEnv})
		}
		return append(fields, ep.kept...)
	}
	// build returns the members of the object at locator[:level]: the
	// entries at the end of the path, else the next object down.
	var build func(level int) []jfield
	build = func(level int) []jfield {
		if level == len(locator) {
			var fs []jfield
			for _, name := range names {
				fs = append(fs, jfield{key: name, sub: entryFields(byName[name])})
			}
			return fs
		}
		return []jfield{{key: locator[level], sub: build(level + 1)}}
	}
	keys := names
	if created > 1 {
		keys = []string{locator[depth]}
	}
	ed, interior := insertMembers(p.data, obj, keys, func(st jsonStyle, k string) string {
		if created == 1 {
			return st.object(entryFields(byName[k]), 0)
		}
		return st.object(build(depth+1), 0)
	})
	for _, ep := range eps {
		ep.rec.File = p.path
		ep.rec.Locator = append(slices.Clone(locator), ep.res.Name)
		ep.rec.Inserted = &insertion{Created: created, Interior: interior}
	}
	fp.entries = append(fp.entries, eps...)
	fp.pendingEdits = append(fp.pendingEdits, ed)
	return nil
}

// finishGovern makes the file's new bytes, checks that each governed
// entry reads back as written, and diffs.
func (m *Manager) finishGovern(fp *FilePlan) error {
	if len(fp.entries) == 0 {
		return nil
	}
	edits := slices.Clone(fp.pendingEdits)
	var masks []string
	for _, ep := range fp.entries {
		if ep.rec.Inserted == nil {
			edits = append(edits, edit{start: ep.rec.src.span[0], end: ep.rec.src.span[1], text: ep.written})
		}
		for _, v := range ep.masks {
			masks = append(masks, v, jsonQuote(v), tomltext.Quote(v))
		}
	}
	nb, err := applyEdits(fp.old, edits)
	if err != nil {
		return fmt.Errorf("govern %s: %w", fp.Path, err)
	}
	fp.new = nb
	// Read the result back: every governed entry must be where it was
	// meant to be, as written, and the file must still parse.
	sp := specs[fp.Client]
	p, err := parseFile(sp, fp.Path, nb)
	if err != nil {
		return fmt.Errorf("govern %s: the edited file would not parse (%v); nothing written", fp.Path, err)
	}
	for _, ep := range fp.entries {
		src, err := locate(p, ep.rec.Locator)
		if err != nil || src == nil {
			return fmt.Errorf("govern %s: entry %s not found after editing; nothing written", fp.Path, ep.res.Name)
		}
		written := p.data[src.span[0]:src.span[1]]
		if ep.rec.Inserted != nil {
			ep.rec.Written = slices.Clone(written)
		} else if !bytes.Equal(written, ep.rec.Written) {
			return fmt.Errorf("govern %s: entry %s reads back differently; nothing written", fp.Path, ep.res.Name)
		}
	}
	if p.format == formatYAML {
		// The lines of each entry were found by their indentation: check
		// that nothing else in the file means anything new.
		var locs [][]string
		for _, ep := range fp.entries {
			locs = append(locs, ep.rec.Locator)
		}
		a, aerr := yamlRest(sp, fp.old, locs)
		b, berr := yamlRest(sp, nb, locs)
		if aerr != nil || berr != nil || !reflect.DeepEqual(a, b) {
			return fmt.Errorf("govern %s: the edit would change more than the governed entries; nothing written", fp.Path)
		}
	}
	before, after := sum(fp.old), sum(nb)
	for _, ep := range fp.entries {
		ep.rec.BeforeHash, ep.rec.FileHash = before, after
	}
	fp.redacted = redact(fp.old, fp.entries, fp.unmoved)
	fp.Diff = unifiedDiff(fp.Path, fp.old, nb, edits, masks)
	return nil
}

// redact returns data with the secret values governing moves replaced by
// their references, and anything else that looks like a credential (in
// entries it does not govern) masked: what the backup holds.
func redact(data []byte, eps []*entryPlan, unmoved []string) []byte {
	return maskValues(withReferences(data, eps), unmoved)
}

// withReferences returns data with the secret values governing moves
// replaced by their references.
func withReferences(data []byte, eps []*entryPlan) []byte {
	var edits []edit
	for _, ep := range eps {
		if ep.rec.Inserted != nil || ep.rec.src == nil {
			continue
		}
		edits = append(edits, edit{start: ep.rec.src.span[0], end: ep.rec.src.span[1], text: ep.rec.Original})
	}
	out, err := applyEdits(data, edits)
	if err != nil {
		return data
	}
	return out
}

// locate finds the entry at locator in a parsed file.
func locate(p *parsed, locator []string) (*source, error) {
	if p.format == formatYAML {
		srcs, err := p.yamlEntries()
		if err != nil {
			return nil, err
		}
		for _, s := range srcs {
			if slices.Equal(s.locator, locator) {
				return s, nil
			}
		}
		return nil, nil
	}
	if p.format == formatTOML {
		for _, s := range p.tomlEntries() {
			if slices.Equal(s.locator, locator) {
				return s, nil
			}
		}
		return nil, nil
	}
	srcs, err := p.jsonEntries(locator[:len(locator)-1])
	if err != nil {
		return nil, err
	}
	for _, s := range srcs {
		if s.name == locator[len(locator)-1] {
			return s, nil
		}
	}
	return nil, nil
}
