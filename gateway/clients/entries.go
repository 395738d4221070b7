package clients

import (
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"

	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
	"github.com/gatehouse-dev/gatehouse/internal/tomltext"
)

// A kv is a name and its value as a file holds it, with the span of the
// value's token (quotes included) in the file.
type kv struct {
	k, v string
	span [2]int
}

// A source is one server entry as read from a client's file.
type source struct {
	name    string
	locator []string // keys from the file's root to the entry
	span    [2]int   // the entry's bytes: a JSON value, or a TOML table and its subtables
	keyAt   int      // JSON: where the member's key starts
	keyEnd  int      // JSON: where it ends
	mainAt  int      // JSON: where the "command" or URL member starts
	node    *jnode   // JSON: the entry's value
	state   State    // Extension or Unsupported, or "" when it can be governed
	reason  string   // why, for Extension and Unsupported
	byHand  string   // the Gatehouse server of an entry already running gatehouse proxy
	// What it runs.
	transport string // "stdio" or "http"
	command   string
	args      []string
	argSpans  [][2]int // each argument's token in the file
	env       []kv
	cwd       string
	url       string
	urlSpan   [2]int // the URL's token in the file
	headers   []kv
	// A remote entry signs in with OAuth where the server asks: the
	// client's own sign-in ("oauth"), or no credential in the entry.
	oauthClientID string   // the client id the entry names, if any
	oauthScopes   []string // the scopes it names, if any
	sse           bool     // the 2024-11-05 HTTP+SSE transport
	wrapper       string   // the program that reached the remote server ("mcp-remote"), if any
	// How it is written.
	hasType   bool
	typ       string // the "type" it has
	legacyZed bool   // Zed's older "command": {"path", "args", "env"}
	keep      []kept
	// TOML: the lines of the table's header.
	tomlHeader []byte
	tomlSubs   [][2]int // subtables kept as they are
	// YAML: where the entry's lines are.
	yaml *yamlEntry
}

// A kept member or key/value is copied into the governed entry as it is.
type kept struct {
	key  string
	span [2]int // JSON: the value; TOML: the whole key/value line(s), without the newline
}

// target is the entry's command line or URL for people to read, with
// anything that looks like a credential masked.
func (s *source) target() string {
	if s.transport == "http" || s.url != "" {
		return maskURL(s.url)
	}
	parts := []string{shellwords.Quote(s.command)}
	secret := secretArgs(s.args)
	for i, a := range s.args {
		if slices.Contains(secret, i) {
			// The mask is not quoted: it is no word to paste.
			if k, _, ok := strings.Cut(a, "="); ok {
				parts = append(parts, shellwords.Quote(k)+"=********")
			} else {
				parts = append(parts, "********")
			}
			continue
		}
		parts = append(parts, shellwords.Quote(a))
	}
	return strings.Join(parts, " ")
}

// checkReferences marks an entry that names a keychain secret itself: a
// value of the file that reads as a Gatehouse secret reference
// (vault://...). References in a registration are made by Gatehouse alone,
// for the secrets governing moves; one copied from a file (a project's
// .mcp.json, say) would hand any secret in the keychain to whatever the
// entry runs.
func (s *source) checkReferences() *source {
	if s.state != "" || s.byHand != "" {
		return s
	}
	values := append([]string{s.command, s.cwd, s.url}, s.args...)
	for _, v := range append(slices.Clone(s.env), s.headers...) {
		values = append(values, v.k, v.v)
	}
	for _, v := range values {
		if strings.Contains(strings.ToLower(v), "client-env://") {
			return s.unsupported("it names a value the proxy takes from its client (client-env://...), which only Gatehouse may put in a registration")
		}
		if strings.Contains(strings.ToLower(v), "vault://") {
			return s.unsupported("it names a Gatehouse keychain secret (vault://...), which only Gatehouse may put in a registration: give the value itself, and governing moves it to the keychain")
		}
	}
	return s
}

func (s *source) unsupported(format string, args ...any) *source {
	s.state, s.reason = Unsupported, fmt.Sprintf(format, args...)
	return s
}

// gatehouseProxy returns the server an entry's command line proxies, when
// it already runs gatehouse proxy.
func gatehouseProxy(command string, args []string) (string, bool) {
	base := strings.ToLower(command[strings.LastIndexAny(command, `/\`)+1:])
	if base != "gatehouse" && base != "gatehouse.exe" {
		return "", false
	}
	i := slices.Index(args, "proxy")
	if i < 0 {
		return "", false
	}
	// The server is the first argument after "proxy" that is not a flag
	// or a flag's value.
	for j := i + 1; j < len(args); j++ {
		a := args[j]
		switch {
		case a == "--client" || a == "-client" || a == "--home" || a == "-home" ||
			a == "--approval-wait" || a == "--max-message-bytes" || a == "--log-level":
			j++
		case strings.HasPrefix(a, "-"):
		default:
			return a, true
		}
	}
	return "", true
}

// A parsed is a config file read and parsed.
type parsed struct {
	spec   *spec
	path   string
	data   []byte
	format fileFormat
	json   *jnode   // JSON files
	toml   *tomlDoc // TOML files
	yaml   *yamlDoc // YAML files
}

// parse parses a client's file; malformed files are a *SyntaxError with the
// file's path, line and column.
func parseFile(sp *spec, path string, data []byte) (*parsed, error) {
	p := &parsed{spec: sp, path: path, data: data, format: sp.formatOf(path)}
	if p.format == formatYAML {
		doc, err := parseYAML(data)
		if err != nil {
			setFile(err, path)
			return nil, err
		}
		p.yaml = doc
		return p, nil
	}
	if p.format == formatTOML {
		var v map[string]any
		if _, err := toml.Decode(string(data), &v); err != nil {
			var perr toml.ParseError
			if ok := asTOMLError(err, &perr); ok {
				return nil, &SyntaxError{File: path, Line: perr.Position.Line, Column: perr.Position.Col,
					Offset: perr.Position.Start, Msg: perr.Message}
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		doc, err := scanTOML(data)
		if err != nil {
			setFile(err, path)
			return nil, err
		}
		p.toml = doc
		return p, nil
	}
	if isBlank(data, p.format == formatJSONC) {
		return p, nil // an empty settings file holds no servers
	}
	root, err := parseJSON(data, p.format == formatJSONC)
	if err != nil {
		setFile(err, path)
		return nil, err
	}
	if root.kind != jsonObject {
		line, col := position(data, root.start)
		return nil, &SyntaxError{File: path, Line: line, Column: col, Offset: root.start, Msg: "want a JSON object at the top"}
	}
	p.json = root
	return p, nil
}

func asTOMLError(err error, perr *toml.ParseError) bool {
	switch e := err.(type) {
	case toml.ParseError:
		*perr = e
		return true
	case *toml.ParseError:
		*perr = *e
		return true
	}
	return false
}

func setFile(err error, path string) {
	if se, ok := err.(*SyntaxError); ok {
		se.File = path
	}
}

// isBlank reports whether data holds nothing but whitespace (and, in
// JSONC, comments).
func isBlank(data []byte, jsonc bool) bool {
	s := &jsonScanner{data: data, jsonc: jsonc}
	if len(data) >= 3 && string(data[:3]) == "\xef\xbb\xbf" {
		s.pos = 3
	}
	return s.space() == nil && s.pos == len(data)
}

// object returns the JSON object at the keys path, nil when some key is
// missing or does not hold an object.
func (p *parsed) object(path []string) (*jnode, error) {
	n := p.json
	for _, k := range path {
		if n == nil || n.kind != jsonObject {
			return nil, nil
		}
		m, err := n.member(p.data, k)
		if err != nil {
			setFile(err, p.path)
			return nil, err
		}
		if m == nil {
			return nil, nil
		}
		n = m.val
	}
	if n == nil || n.kind != jsonObject {
		return nil, nil
	}
	return n, nil
}

// jsonEntries returns the entries of the servers object at prefix.
func (p *parsed) jsonEntries(prefix []string) ([]*source, error) {
	obj, err := p.object(prefix)
	if err != nil || obj == nil {
		return nil, err
	}
	var out []*source
	for i := range obj.members {
		m := &obj.members[i]
		if _, err := obj.member(p.data, m.key); err != nil {
			setFile(err, p.path)
			return nil, err
		}
		out = append(out, p.jsonEntry(m, append(slices.Clone(prefix), m.key)).checkReferences())
	}
	return out, nil
}

func (p *parsed) str(n *jnode) (string, bool) {
	if n == nil || n.kind != jsonString {
		return "", false
	}
	return n.str, true
}

// jsonEntry reads one entry of a JSON file.
func (p *parsed) jsonEntry(m *jmember, locator []string) *source {
	sp := p.spec
	s := &source{name: m.key, locator: locator, span: [2]int{m.val.start, m.val.end}, keyAt: m.keyStart, keyEnd: m.keyEnd, node: m.val}
	if m.val.kind != jsonObject {
		return s.unsupported("the entry is not a JSON object")
	}
	get := func(k string) *jnode {
		mb, _ := m.val.member(p.data, k)
		if mb == nil {
			return nil
		}
		return mb.val
	}
	at := func(k string) int {
		if mb, _ := m.val.member(p.data, k); mb != nil {
			return mb.keyStart
		}
		return m.val.end
	}
	for i := range m.val.members {
		if _, err := m.val.member(p.data, m.val.members[i].key); err != nil {
			return s.unsupported("%v", err)
		}
	}
	// Entries that belong to an extension.
	if sp.id == ClaudeDesktop && get("extensionId") != nil {
		s.state, s.reason = Extension, "installed by a Claude Desktop extension, which manages it"
		return s
	}
	if sp.id == Zed {
		if src, _ := p.str(get("source")); src == "extension" || get("command") == nil && get("url") == nil {
			s.state, s.reason = Extension, "provided by a Zed extension, which manages it"
			return s
		}
	}
	typ, hasType := p.str(get("type"))
	if n := get("type"); n != nil && !hasType {
		return s.unsupported(`"type" is not a string`)
	}
	s.hasType, s.typ = hasType, typ
	for _, k := range sp.keep {
		if n := get(k); n != nil {
			s.keep = append(s.keep, kept{key: k, span: [2]int{n.start, n.end}})
		}
	}
	slices.SortFunc(s.keep, func(a, b kept) int { return a.span[0] - b.span[0] }) // in the file's order

	cmdNode := get("command")
	envNode := get(sp.env())
	argsNode := get("args")
	if sp.cmdList && cmdNode != nil {
		// OpenCode: "command": [program, args...].
		if cmdNode.kind != jsonArray || len(cmdNode.elems) == 0 {
			return s.unsupported(`"command" is not a list that starts with the program`)
		}
		if argsNode != nil {
			return s.unsupported(`it has "args", which %s does not read`, sp.name)
		}
		argsNode = &jnode{kind: jsonArray, elems: cmdNode.elems[1:]}
		cmdNode = cmdNode.elems[0]
	}
	if sp.id == Zed && cmdNode != nil && cmdNode.kind == jsonObject {
		// Zed's older form: "command": {"path": ..., "args": [...], "env": {...}}.
		s.legacyZed = true
		var path *jnode
		for _, mb := range cmdNode.members {
			switch mb.key {
			case "path":
				path = mb.val
			case "args":
				argsNode = mb.val
			case "env":
				envNode = mb.val
			}
		}
		cmdNode = path
		if cmdNode == nil {
			return s.unsupported(`"command" has no "path"`)
		}
	}
	var urlKey string
	var urlNode *jnode
	for _, k := range sp.remote {
		if n := get(k); n != nil {
			urlKey, urlNode = k, n
			break
		}
	}

	switch {
	case cmdNode != nil:
		s.transport, s.mainAt = "stdio", at("command")
		cmd, ok := p.str(cmdNode)
		if !ok || cmd == "" {
			return s.unsupported(`"command" is not a non-empty string`)
		}
		s.command = cmd
		if hasType && !sp.stdioType(typ) {
			return s.unsupported(`it has a "command" but "type" is %q`, typ)
		}
		if argsNode != nil {
			if argsNode.kind != jsonArray {
				return s.unsupported(`"args" is not a list`)
			}
			for _, e := range argsNode.elems {
				a, ok := p.str(e)
				if !ok {
					return s.unsupported(`"args" holds something other than strings`)
				}
				s.args = append(s.args, a)
				s.argSpans = append(s.argSpans, [2]int{e.start, e.end})
			}
		}
		for _, k := range sp.cwd() {
			if n := get(k); n != nil {
				if s.cwd, ok = p.str(n); !ok {
					return s.unsupported("%q is not a string", k)
				}
				break
			}
		}
		if envNode != nil {
			env, err := p.stringMap(envNode, sp.env())
			if err != nil {
				return s.unsupported("%v", err)
			}
			s.env = env
		}
		if who, ok := gatehouseProxy(s.command, s.args); ok {
			s.byHand = who
			return s
		}
		if i, ok := mcpRemoteAt(s.command, s.args); ok {
			return s.fromMCPRemote(sp, i)
		}
		// Arguments and the folder the client expands are passed to the
		// proxy through the entry's env; the program is the registration's.
		if sp.expands(s.command) {
			return s.unsupported("its command uses %s, which only %s expands: the proxy runs the program registered, never one the client names", varIn(s.command), sp.name)
		}
	case urlNode != nil:
		s.transport, s.mainAt = "http", at(urlKey)
		u, ok := p.str(urlNode)
		if !ok || u == "" {
			return s.unsupported("%q is not a non-empty string", urlKey)
		}
		s.url, s.urlSpan = u, [2]int{urlNode.start, urlNode.end}
		switch {
		case sp.id == ClaudeDesktop:
			return s.unsupported("Claude Desktop does not read remote servers from this file (add them as connectors in the app)")
		case (sp.id == GeminiCLI || sp.id == QwenCode) && urlKey == "url", hasType && typ == "sse":
			s.sse = true // the HTTP+SSE transport of 2024-11-05
		case hasType && typ != "http" && typ != "streamable-http" && typ != "streamableHttp" && typ != "streamable_http" && !(sp.id == OpenCode && typ == "remote"):
			return s.unsupported("its type %q is not one Gatehouse proxies", typ)
		}
		if n := get("headersHelper"); n != nil {
			return s.unsupported("its headers come from a command the client runs (headersHelper), which the proxy does not run")
		}
		if n := get("authProviderType"); n != nil {
			if v, _ := p.str(n); v != "dynamic_discovery" {
				return s.unsupported("it signs in with %s's own credentials (authProviderType), which the proxy does not hold", sp.name)
			}
		}
		if n := get("oauth"); n != nil {
			if err := p.oauthSettings(n, s); err != nil {
				return s.unsupported("%v", err)
			}
		}
		if n := get("headers"); n != nil {
			h, err := p.stringMap(n, "headers")
			if err != nil {
				return s.unsupported("%v", err)
			}
			s.headers = h
		}
	case len(sp.remote) == 0 && get("url") != nil:
		return s.unsupported("it is a remote server, and %s runs local (stdio) servers only", sp.name)
	default:
		return s.unsupported("it has neither a command nor a URL")
	}
	return s
}

// mcpRemoteAt reports whether a command line runs mcp-remote (the npm
// package that reaches a remote server for a client that runs stdio
// servers only), and the index of its first argument of its own.
func mcpRemoteAt(command string, args []string) (int, bool) {
	base := strings.ToLower(command[strings.LastIndexAny(command, `/\`)+1:])
	base = strings.TrimSuffix(strings.TrimSuffix(base, ".cmd"), ".exe")
	isPkg := func(a string) bool { return a == "mcp-remote" || strings.HasPrefix(a, "mcp-remote@") }
	switch base {
	case "mcp-remote":
		return 0, true
	case "npx", "bunx", "pnpx":
		for i, a := range args {
			switch {
			case a == "-y" || a == "--yes" || a == "-q" || a == "--quiet":
			case isPkg(a):
				return i + 1, true
			default:
				return 0, false
			}
		}
	}
	return 0, false
}

// fromMCPRemote reads an mcp-remote command line from its argument i:
// the server's URL, an optional callback port, --header "Name: value"
// (with ${VAR} from the entry's env, as mcp-remote expands it),
// --transport, and options that change nothing for the proxy. The entry
// becomes a remote one; anything else leaves it not governed.
func (s *source) fromMCPRemote(sp *spec, i int) *source {
	args, spans := s.args[i:], s.argSpans[i:]
	env := map[string]kv{}
	for _, v := range s.env {
		env[v.k] = v
	}
	transport := ""
	for j := 0; j < len(args); j++ {
		a := args[j]
		value := func() (string, [2]int, bool) {
			if j+1 >= len(args) {
				return "", [2]int{}, false
			}
			j++
			return args[j], spans[j], true
		}
		switch {
		case !strings.HasPrefix(a, "-") && s.url == "":
			s.url, s.urlSpan = a, spans[j]
		case !strings.HasPrefix(a, "-") && isPort(a):
			// The port mcp-remote listens on for its own sign-in.
		case a == "--header":
			h, span, ok := value()
			name, v, found := strings.Cut(h, ":")
			if !ok || !found || strings.TrimSpace(name) == "" {
				return s.unsupported("mcp-remote's --header %q is not Name:value", h)
			}
			v = strings.TrimSpace(v)
			// mcp-remote expands ${VAR} from its environment, which is
			// the entry's env: the value is taken from there.
			var missing string
			expanded := dollarBraceRE.ReplaceAllStringFunc(v, func(ref string) string {
				e, ok := env[ref[2:len(ref)-1]]
				if !ok {
					missing = ref
					return ""
				}
				span = e.span
				return e.v
			})
			if missing != "" {
				return s.unsupported("mcp-remote's header %s uses %s, which is not in the entry's env", strings.TrimSpace(name), missing)
			}
			if sp.expands(expanded) {
				return s.unsupported("mcp-remote's header %s uses %s, which only %s expands", strings.TrimSpace(name), varIn(expanded), sp.name)
			}
			s.headers = append(s.headers, kv{k: strings.TrimSpace(name), v: expanded, span: span})
		case a == "--transport":
			t, _, ok := value()
			if !ok {
				return s.unsupported("mcp-remote's --transport has no value")
			}
			transport = t
		case a == "--allow-http", a == "--debug", a == "--silent":
		default:
			return s.unsupported("it runs mcp-remote with %s, an option Gatehouse does not take over", a)
		}
	}
	if s.url == "" {
		return s.unsupported("it runs mcp-remote without a URL")
	}
	if sp.expands(s.url) {
		return s.unsupported("its URL uses %s, which only %s expands", varIn(s.url), sp.name)
	}
	switch transport {
	case "sse-only", "sse-first":
		s.sse = true
	case "", "http-first":
		// mcp-remote tries streamable HTTP first, and falls back to SSE:
		// an address that ends in /sse is an SSE server's.
		if u, err := url.Parse(s.url); err == nil && strings.HasSuffix(strings.TrimRight(u.Path, "/"), "/sse") {
			s.sse = true
		}
	case "http-only":
	default:
		return s.unsupported("it runs mcp-remote with --transport %q", transport)
	}
	s.transport, s.wrapper, s.command = "http", "mcp-remote", ""
	return s
}

func isPort(a string) bool {
	n, err := strconv.Atoi(a)
	return err == nil && n > 0 && n < 65536
}

// dollarBraceRE is ${NAME}, as mcp-remote expands it in a header.
var dollarBraceRE = regexp.MustCompile(`\$\{[A-Za-z_][A-Za-z0-9_]*\}`)

// oauthSettings reads a remote entry's "oauth" member (Claude Code's
// clientId and callbackPort, Gemini's and Kiro's enabled, clientId and
// scopes, OpenCode's clientId and scope, or false): the proxy signs in
// itself, with the client id the entry names. A client secret stays with
// the client: such an entry is not governed.
func (p *parsed) oauthSettings(n *jnode, s *source) error {
	switch n.kind {
	case jsonBool:
		return nil // true: sign in when asked, as without it; false: OpenCode's "no sign-in", the same to the proxy
	case jsonObject:
	default:
		return errors.New(`"oauth" is not an object`)
	}
	for _, mb := range n.members {
		switch mb.key {
		case "clientId", "client_id":
			v, ok := p.str(mb.val)
			if !ok {
				return fmt.Errorf("oauth.%s is not a string", mb.key)
			}
			s.oauthClientID = v
		case "scopes":
			if mb.val.kind != jsonArray {
				return errors.New("oauth.scopes is not a list")
			}
			for _, e := range mb.val.elems {
				v, ok := p.str(e)
				if !ok {
					return errors.New("oauth.scopes holds something other than strings")
				}
				s.oauthScopes = append(s.oauthScopes, v)
			}
		case "scope":
			v, ok := p.str(mb.val)
			if !ok {
				return errors.New("oauth.scope is not a string")
			}
			s.oauthScopes = strings.Fields(v)
		case "clientSecret", "client_secret":
			return errors.New("it signs in with an OAuth client secret the client holds, which the proxy does not")
		case "enabled":
			if mb.val.kind == jsonBool && p.data[mb.val.start] == 'f' {
				s.oauthClientID, s.oauthScopes = "", nil
				return nil
			}
		case "callbackPort", "redirectUri":
			// The proxy listens for the browser on a port of its own.
		default:
			return fmt.Errorf("oauth.%s is a sign-in setting the proxy does not know", mb.key)
		}
	}
	return nil
}

// varIn returns the first ${...} (or $NAME) in v, for messages.
func varIn(v string) string {
	i := strings.IndexByte(v, '$')
	if i < 0 {
		return v
	}
	if j := strings.IndexByte(v[i:], '}'); j > 0 && strings.HasPrefix(v[i:], "${") {
		return v[i : i+j+1]
	}
	j := i + 1
	for j < len(v) && (isBareKeyByte(v[j]) && v[j] != '-') {
		j++
	}
	return v[i:j]
}

// stringMap reads an object of strings, in file order.
func (p *parsed) stringMap(n *jnode, what string) ([]kv, error) {
	if n.kind != jsonObject {
		return nil, fmt.Errorf("%q is not an object", what)
	}
	var out []kv
	for _, mb := range n.members {
		v, ok := p.str(mb.val)
		if !ok {
			return nil, fmt.Errorf("%s %s is not a string", what, mb.key)
		}
		out = append(out, kv{k: mb.key, v: v, span: [2]int{mb.val.start, mb.val.end}})
	}
	return out, nil
}

// tomlEntries returns the servers of Codex's config.toml.
func (p *parsed) tomlEntries() []*source {
	if p.toml == nil {
		return nil
	}
	top := p.spec.top
	var out []*source
	byName := map[string]*source{}
	var order []string
	// Servers written as dotted keys or inline tables: found, not edited.
	for _, t := range p.toml.tables {
		var inline []tomlKV
		switch {
		case len(t.path) == 0:
			for _, kv := range t.kvs {
				if kv.key[0] == top {
					inline = append(inline, tomlKV{key: kv.key[1:], val: kv.val})
				}
			}
		case len(t.path) == 1 && t.path[0] == top:
			inline = t.kvs
		}
		for _, kv := range inline {
			if len(kv.key) == 0 {
				continue
			}
			name := kv.key[0]
			if _, ok := byName[name]; !ok {
				s := &source{name: name, locator: []string{top, name}}
				s.unsupported("written as keys of [%s] rather than a [%s.%s] table", top, top, tomlKey(name))
				byName[name] = s
				order = append(order, name)
			}
		}
	}
	// [mcp_servers.NAME] tables and their subtables.
	type group struct {
		tables []int
	}
	groups := map[string]*group{}
	for i, t := range p.toml.tables {
		if len(t.path) < 2 || t.path[0] != top {
			continue
		}
		name := t.path[1]
		if s, ok := byName[name]; ok && groups[name] == nil {
			_ = s // already reported as an inline form
			continue
		}
		g := groups[name]
		if g == nil {
			g = &group{}
			groups[name] = g
			order = append(order, name)
		}
		g.tables = append(g.tables, i)
	}
	for _, name := range order {
		if s, ok := byName[name]; ok {
			out = append(out, s)
			continue
		}
		out = append(out, p.tomlEntry(name, groups[name].tables).checkReferences())
	}
	return out
}

func tomlKey(k string) string {
	for i := 0; i < len(k); i++ {
		if !isBareKeyByte(k[i]) {
			return tomltext.Quote(k)
		}
	}
	if k == "" {
		return `""`
	}
	return k
}

// tomlEntry reads one [mcp_servers.NAME] entry made of the tables at idx.
func (p *parsed) tomlEntry(name string, idx []int) *source {
	sp := p.spec
	tables := p.toml.tables
	s := &source{name: name, locator: []string{sp.top, name}}
	for i := 1; i < len(idx); i++ {
		if idx[i] != idx[i-1]+1 {
			return s.unsupported("its tables are not together in the file")
		}
	}
	first, last := tables[idx[0]], tables[idx[len(idx)-1]]
	s.span = [2]int{first.start, last.end}
	// Flatten: "command", "args", "env.NAME", ...
	vals := map[string]*tomlValue{}
	var envOrder, headerOrder []string
	var main *tomlTable
	var twice string
	add := func(key []string, v *tomlValue) {
		k := strings.Join(key, "\x00")
		if vals[k] != nil {
			twice = strings.Join(key, ".")
		}
		vals[k] = v
		if len(key) == 2 && key[0] == "env" {
			envOrder = append(envOrder, key[1])
		}
		if len(key) == 2 && key[0] == "http_headers" {
			headerOrder = append(headerOrder, key[1])
		}
	}
	var walk func(prefix []string, kvs []tomlKV)
	walk = func(prefix []string, kvs []tomlKV) {
		for _, kv := range kvs {
			key := append(slices.Clone(prefix), kv.key...)
			if kv.val.kind == tomlInline {
				walk(key, kv.val.kvs)
				continue
			}
			add(key, kv.val)
		}
	}
	for _, i := range idx {
		t := tables[i]
		if t.array {
			return s.unsupported("it is written as an array of tables")
		}
		rel := t.path[2:]
		if len(rel) == 0 {
			main = t
			s.tomlHeader = p.data[t.start:t.headerEnd]
			for _, kv := range t.kvs {
				if len(kv.key) == 1 && slices.Contains(sp.keep, kv.key[0]) {
					end := kv.end
					for end > kv.start && (p.data[end-1] == '\n' || p.data[end-1] == '\r') {
						end--
					}
					s.keep = append(s.keep, kept{key: kv.key[0], span: [2]int{kv.start, end}})
				}
			}
		} else if rel[0] != "env" && rel[0] != "http_headers" && rel[0] != "env_http_headers" {
			s.tomlSubs = append(s.tomlSubs, [2]int{t.start, t.end})
		}
		walk(rel, t.kvs)
	}
	if main == nil {
		return s.unsupported("it has no [%s.%s] table of its own", sp.top, tomlKey(name))
	}
	if twice != "" {
		return s.unsupported("%s is set twice", twice)
	}
	str := func(key string) (string, bool, error) {
		v := vals[key]
		if v == nil {
			return "", false, nil
		}
		if v.kind != tomlString {
			return "", true, fmt.Errorf("%s is not a string", strings.ReplaceAll(key, "\x00", "."))
		}
		return v.str, true, nil
	}
	command, hasCmd, err := str("command")
	if err != nil {
		return s.unsupported("%v", err)
	}
	url, hasURL, err := str("url")
	if err != nil {
		return s.unsupported("%v", err)
	}
	for k, v := range vals {
		if v.kind == tomlString || v.kind == tomlArray {
			continue
		}
		if strings.HasPrefix(k, "env\x00") || strings.HasPrefix(k, "http_headers\x00") {
			return s.unsupported("%s is not a string", strings.ReplaceAll(k, "\x00", "."))
		}
	}
	for _, k := range envOrder {
		v := vals["env\x00"+k]
		if v.kind != tomlString {
			return s.unsupported("env.%s is not a string", k)
		}
		s.env = append(s.env, kv{k: k, v: v.str, span: [2]int{v.start, v.end}})
	}
	switch {
	case hasCmd:
		s.transport, s.command = "stdio", command
		if command == "" {
			return s.unsupported("its command is empty")
		}
		if v := vals["args"]; v != nil {
			if v.kind != tomlArray {
				return s.unsupported("args is not a list")
			}
			for _, e := range v.elems {
				if e.kind != tomlString {
					return s.unsupported("args holds something other than strings")
				}
				s.args = append(s.args, e.str)
				s.argSpans = append(s.argSpans, [2]int{e.start, e.end})
			}
		}
		if s.cwd, _, err = str("cwd"); err != nil {
			return s.unsupported("%v", err)
		}
		if who, ok := gatehouseProxy(s.command, s.args); ok {
			s.byHand = who
		}
	case hasURL:
		s.transport, s.url, s.urlSpan = "http", url, [2]int{vals["url"].start, vals["url"].end}
		if url == "" {
			return s.unsupported("its url is empty")
		}
		if vals["bearer_token_env_var"] != nil {
			return s.unsupported("its token comes from Codex's environment (bearer_token_env_var), which the proxy does not see")
		}
		if hasPrefixKey(vals, "env_http_headers") {
			return s.unsupported("some headers come from Codex's environment (env_http_headers), which the proxy does not see")
		}
		for _, k := range headerOrder {
			v := vals["http_headers\x00"+k]
			if v.kind != tomlString {
				return s.unsupported("http_headers.%s is not a string", k)
			}
			s.headers = append(s.headers, kv{k: k, v: v.str, span: [2]int{v.start, v.end}})
		}
	default:
		return s.unsupported("it has neither a command nor a url")
	}
	return s
}

func hasPrefixKey(vals map[string]*tomlValue, prefix string) bool {
	for k := range vals {
		if k == prefix || strings.HasPrefix(k, prefix+"\x00") {
			return true
		}
	}
	return false
}

// projectKey is how Claude Code names a project folder in ~/.claude.json:
// its absolute path, with forward slashes on Windows.
func projectKey(goos, dir string) string {
	if goos == "windows" {
		return strings.ReplaceAll(dir, `\`, "/")
	}
	return filepath.Clean(dir)
}
