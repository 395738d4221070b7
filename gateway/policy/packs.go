package policy

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/BurntSushi/toml"
)

// A Pack is a capability pack: curated, versioned knowledge of one widely
// used MCP server. It names how to recognise the server (an npm or Python
// package, a container image, a remote URL), the risk class of each of its
// tools and why, rules worth adding for it, and how to confine it.
//
// A server that matches a pack when it is registered ([MatchPack]) has its
// tools classified by the pack instead of by their names ([Call.Pack]). A
// tool the pack does not name is classified by its name, as for any server:
// a pack never allows what it does not know.
//
// Packs are embedded in Gatehouse (packs/*.toml); [Packs] lists them.
type Pack struct {
	ID      string // "filesystem"
	Version int    // raised whenever a tool's class or a suggestion changes
	Name    string // for people: "Filesystem (MCP reference server)"
	Source  string // where the server's code lives
	Match   PackMatch
	Tools   map[string]PackTool // by tool name, exactly as the server lists it
	Rules   []PackRule          // suggested rules
	Confine PackConfine
}

// PackMatch says which registrations are the pack's server. A stdio
// registration matches when the program it runs is the package: the package
// an npm runner (npx, bunx, pnpm dlx, npm exec) or a Python runner (uvx,
// pipx run, uv tool run, python -m) is asked to run, a script inside the
// package's node_modules folder run by node, a container image run by
// docker or podman, or one of the package's installed programs. A remote one
// matches when its URL starts with one of URLs. Arguments that merely
// mention a package do not match.
type PackMatch struct {
	Npm      []string `toml:"npm"`      // "@modelcontextprotocol/server-filesystem"
	Python   []string `toml:"python"`   // "mcp-server-git"
	Docker   []string `toml:"docker"`   // "mcp/filesystem", "ghcr.io/github/github-mcp-server"
	Programs []string `toml:"programs"` // installed programs: "github-mcp-server"
	URLs     []string `toml:"urls"`     // "https://api.githubcopilot.com/mcp/"
}

// A PackTool is a tool's class in a pack.
type PackTool struct {
	Risk Risk
	Why  string // what the tool does, that makes it this class
}

// A PackRule is a rule a pack suggests for its server; [Pack.SuggestedRules]
// makes policy rules of them for one registration.
type PackRule struct {
	ID       string   // suffix of the rule id: "<server>-<id>"
	Tools    []string // tool names or globs
	Decision Decision
	Note     string
	// Under, when set, names the argument that holds a path: the rule is
	// made once per folder the server's command line names, holding the
	// argument under that folder (and not made when it names none).
	Under string
}

// PackConfine is how a pack's server is best confined: what it needs beyond
// its install, the system, a private temporary folder and the paths its
// command line names (which confinement always gives).
type PackConfine struct {
	// Net lists the TCP ports it connects to ("443"), or "*".
	Net []string
	// WriteEnv names environment variables whose value is a file or folder
	// it writes (memory's MEMORY_FILE_PATH).
	WriteEnv []string
	// Note says what the confinement leaves out, for people.
	Note string
}

// Ref is the pack's name and version, as registrations and receipts of
// risk reasons show it: "filesystem@1".
func (p *Pack) Ref() string { return fmt.Sprintf("%s@%d", p.ID, p.Version) }

//go:embed packs/*.toml
var packFiles embed.FS

var (
	packsOnce sync.Once
	packList  []*Pack
	packByID  map[string]*Pack
)

// Packs returns the embedded capability packs, sorted by id. It panics if
// one of them does not read: they are part of the program, and a test
// reads them all.
func Packs() []*Pack {
	packsOnce.Do(func() {
		packs, err := readPacks(packFiles)
		if err != nil {
			panic(err)
		}
		packList = packs
		packByID = make(map[string]*Pack, len(packs))
		for _, p := range packs {
			packByID[p.ID] = p
		}
	})
	return packList
}

// PackByRef returns the pack a registration recorded ("filesystem@1", or
// the id alone), or nil when this Gatehouse has no pack of that id. A
// recorded version older or newer than the embedded one gives the embedded
// one: the recorded reference says which server this is; the pack Gatehouse
// ships says what its tools do.
func PackByRef(ref string) *Pack {
	if ref == "" {
		return nil
	}
	Packs()
	id, _, _ := strings.Cut(ref, "@")
	return packByID[id]
}

func readPacks(fsys fs.FS) ([]*Pack, error) {
	names, err := fs.Glob(fsys, "packs/*.toml")
	if err != nil {
		return nil, err
	}
	var out []*Pack
	seen := map[string]string{}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		p, err := ParsePack(data)
		if err != nil {
			return nil, fmt.Errorf("pack %s: %w", name, err)
		}
		if want := strings.TrimSuffix(path.Base(name), ".toml"); p.ID != want {
			return nil, fmt.Errorf("pack %s: id %q, want %q (the file's name)", name, p.ID, want)
		}
		if other, dup := seen[p.ID]; dup {
			return nil, fmt.Errorf("pack %s: id %q is also %s's", name, p.ID, other)
		}
		seen[p.ID] = name
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b *Pack) int { return strings.Compare(a.ID, b.ID) })
	return out, nil
}

// packDoc is a pack's text as TOML decodes it.
type packDoc struct {
	ID      string    `toml:"id"`
	Version int       `toml:"version"`
	Name    string    `toml:"name"`
	Source  string    `toml:"source"`
	Match   PackMatch `toml:"match"`
	Tool    []struct {
		Name string `toml:"name"`
		Risk string `toml:"risk"`
		Why  string `toml:"why"`
	} `toml:"tool"`
	Rule []struct {
		ID       string   `toml:"id"`
		Tools    []string `toml:"tools"`
		Decision string   `toml:"decision"`
		Note     string   `toml:"note"`
		Under    string   `toml:"under"`
	} `toml:"rule"`
	Confine struct {
		Net      []string `toml:"net"`
		WriteEnv []string `toml:"write_env"`
		Note     string   `toml:"note"`
	} `toml:"confine"`
}

var packIDRE = regexp.MustCompile(`^[a-z0-9][a-z0-9-]{0,31}$`)

// ParsePack reads a pack's text strictly: every key known, every tool
// named once with a valid risk class and a reason, every rule valid.
func ParsePack(data []byte) (*Pack, error) {
	var doc packDoc
	md, err := toml.NewDecoder(bytes.NewReader(data)).Decode(&doc)
	if err != nil {
		return nil, err
	}
	if undec := md.Undecoded(); len(undec) > 0 {
		return nil, fmt.Errorf("unknown key %s", undec[0])
	}
	if !packIDRE.MatchString(doc.ID) {
		return nil, fmt.Errorf("invalid id %q", doc.ID)
	}
	if doc.Version < 1 {
		return nil, fmt.Errorf("%s: version %d: want 1 or more", doc.ID, doc.Version)
	}
	m := doc.Match
	if len(m.Npm)+len(m.Python)+len(m.Docker)+len(m.Programs)+len(m.URLs) == 0 {
		return nil, fmt.Errorf("%s: [match] names no package, image, program or URL", doc.ID)
	}
	for _, u := range m.URLs {
		if pu, err := url.Parse(u); err != nil || pu.Scheme != "https" || pu.Host == "" {
			return nil, fmt.Errorf("%s: match url %q: want an https URL", doc.ID, u)
		}
	}
	p := &Pack{ID: doc.ID, Version: doc.Version, Name: doc.Name, Source: doc.Source, Match: m,
		Tools: make(map[string]PackTool, len(doc.Tool))}
	for _, t := range doc.Tool {
		if t.Name == "" || strings.ContainsAny(t.Name, " *") {
			return nil, fmt.Errorf("%s: tool %q: want the tool's exact name", doc.ID, t.Name)
		}
		if _, dup := p.Tools[t.Name]; dup {
			return nil, fmt.Errorf("%s: tool %s is given twice", doc.ID, t.Name)
		}
		r, err := ParseRisk(t.Risk)
		if err != nil || Risk(t.Risk) != r {
			return nil, fmt.Errorf("%s: tool %s: risk %q: want low, medium, high or critical", doc.ID, t.Name, t.Risk)
		}
		if strings.TrimSpace(t.Why) == "" {
			return nil, fmt.Errorf("%s: tool %s: no why", doc.ID, t.Name)
		}
		p.Tools[t.Name] = PackTool{Risk: r, Why: t.Why}
	}
	if len(p.Tools) == 0 {
		return nil, fmt.Errorf("%s: no tools", doc.ID)
	}
	ids := map[string]bool{}
	for _, r := range doc.Rule {
		d, err := ParseDecision(r.Decision)
		if err != nil {
			return nil, fmt.Errorf("%s: rule %s: %v", doc.ID, r.ID, err)
		}
		if ids[r.ID] {
			return nil, fmt.Errorf("%s: rule %s is given twice", doc.ID, r.ID)
		}
		ids[r.ID] = true
		if d == Allow && r.Under == "" {
			return nil, fmt.Errorf("%s: rule %s: a suggested rule allows only under the folders the server is given", doc.ID, r.ID)
		}
		pr := PackRule{ID: r.ID, Tools: r.Tools, Decision: d, Note: r.Note, Under: r.Under}
		// Check the rule as it would be made for a server.
		for _, rule := range pr.rules("srv", []string{"/folder"}) {
			if err := (&Policy{Rules: []Rule{rule}, Default: ApprovalRequired}).Validate(); err != nil {
				return nil, fmt.Errorf("%s: rule %s: %v", doc.ID, r.ID, err)
			}
		}
		p.Rules = append(p.Rules, pr)
	}
	for _, n := range doc.Confine.Net {
		if n != "*" && !regexp.MustCompile(`^[1-9][0-9]{0,4}$`).MatchString(n) {
			return nil, fmt.Errorf("%s: confine net %q: want a TCP port or *", doc.ID, n)
		}
	}
	p.Confine = PackConfine{Net: doc.Confine.Net, WriteEnv: doc.Confine.WriteEnv, Note: doc.Confine.Note}
	return p, nil
}

// SuggestedRules returns the pack's suggested rules made for a server
// registered as server, whose command line is args: ids "<server>-<id>",
// capabilities mcp.<server>.<tool>, and a rule that holds a path under a
// folder made once per absolute folder args names.
func (p *Pack) SuggestedRules(server string, args []string) []Rule {
	var folders []string
	for _, a := range args {
		if dir, err := cleanUnder(a); err == nil && strings.HasPrefix(a, "/") && !slices.Contains(folders, dir) {
			folders = append(folders, dir)
		}
	}
	var out []Rule
	for _, r := range p.Rules {
		out = append(out, r.rules(server, folders)...)
	}
	return out
}

func (r *PackRule) rules(server string, folders []string) []Rule {
	var out []Rule
	for _, tool := range r.Tools {
		id := server + "-" + r.ID
		if len(r.Tools) > 1 {
			id += "-" + strings.NewReplacer("*", "any").Replace(tool)
		}
		base := Rule{ID: id, Capability: Capability(server, tool), Decision: r.Decision, Note: r.Note}
		if r.Under == "" {
			out = append(out, base)
			continue
		}
		for i, dir := range folders {
			rule := base
			if len(folders) > 1 {
				rule.ID = fmt.Sprintf("%s-%d", id, i+1)
			}
			rule.Args = []ArgConstraint{{Arg: r.Under, Under: dir}}
			out = append(out, rule)
		}
	}
	return out
}

// Tool returns what the pack says of a tool; ok is false when it does not
// name it (or p is nil).
func (p *Pack) Tool(name string) (t PackTool, ok bool) {
	if p == nil {
		return PackTool{}, false
	}
	t, ok = p.Tools[name]
	return t, ok
}

// classify gives the risk class of a tool the pack names; ok is false for
// a tool it does not.
func (p *Pack) classify(tool string) (Risk, string, bool) {
	t, ok := p.Tools[tool]
	if !ok {
		return "", "", false
	}
	return t.Risk, fmt.Sprintf("pack %s: %s: %s", p.Ref(), t.Why, t.Risk), true
}

// MatchPack returns the pack whose server a registration runs, or nil. For
// a stdio server, command and args are its command line; for a remote one,
// rawURL is its address (empty otherwise). See [PackMatch] for what
// matches.
func MatchPack(command string, args []string, rawURL string) *Pack {
	for _, p := range Packs() {
		if p.matches(command, args, rawURL) {
			return p
		}
	}
	return nil
}

func (p *Pack) matches(command string, args []string, rawURL string) bool {
	if rawURL != "" {
		u := normalURL(rawURL)
		for _, m := range p.Match.URLs {
			m = normalURL(m)
			if u == m || strings.HasPrefix(u, strings.TrimSuffix(m, "/")+"/") {
				return true
			}
		}
		return false
	}
	prog := programName(command)
	if slices.Contains(p.Match.Programs, prog) {
		return true
	}
	for _, pkg := range p.Match.Python {
		if prog == pkg {
			return true // an installed console script bears the package's name
		}
	}
	kind, target := runTarget(prog, args)
	switch kind {
	case "npm":
		return slices.Contains(p.Match.Npm, npmName(target))
	case "python":
		return slices.Contains(p.Match.Python, pythonName(target))
	case "module":
		for _, pkg := range p.Match.Python {
			if target == strings.ReplaceAll(pkg, "-", "_") {
				return true
			}
		}
	case "script":
		s := strings.ReplaceAll(target, `\`, "/")
		for _, pkg := range p.Match.Npm {
			if strings.Contains(s, "/node_modules/"+pkg+"/") {
				return true
			}
		}
	case "docker":
		return slices.Contains(p.Match.Docker, imageName(target))
	}
	return false
}

// programName is the base name of a command, without a Windows suffix.
func programName(command string) string {
	base := path.Base(strings.ReplaceAll(command, `\`, "/"))
	for _, ext := range []string{".exe", ".cmd", ".bat", ".ps1"} {
		if s, ok := strings.CutSuffix(strings.ToLower(base), ext); ok {
			return s
		}
	}
	return base
}

// runTarget finds what a command line runs: a package an npm or Python
// runner fetches, a Python module, a node script, or a container image.
func runTarget(prog string, args []string) (kind, target string) {
	first := func(args []string, valued ...string) string {
		for i := 0; i < len(args); i++ {
			a := args[i]
			switch {
			case a == "--":
				if i+1 < len(args) {
					return args[i+1]
				}
				return ""
			case strings.HasPrefix(a, "-"):
				if !strings.Contains(a, "=") && slices.Contains(valued, a) {
					i++
				}
			default:
				return a
			}
		}
		return ""
	}
	sub := func(words ...string) ([]string, bool) {
		if len(args) > 0 && slices.Contains(words, args[0]) {
			return args[1:], true
		}
		return nil, false
	}
	switch prog {
	case "npx", "bunx", "pnpx":
		return "npm", first(args, "--cache", "--registry", "--userconfig")
	case "npm", "pnpm", "yarn", "bun":
		if rest, ok := sub("exec", "dlx", "x"); ok {
			return "npm", first(rest, "--cache", "--registry")
		}
	case "node", "nodejs", "deno":
		return "script", first(args)
	case "uvx":
		return "python", first(args, "--python", "-p", "--with", "--index-url", "--from")
	case "uv":
		if rest, ok := sub("tool"); ok && len(rest) > 0 && rest[0] == "run" {
			return "python", first(rest[1:], "--python", "-p", "--with", "--from")
		}
	case "pipx":
		if rest, ok := sub("run"); ok {
			return "python", first(rest, "--python", "--spec")
		}
	case "docker", "podman":
		if rest, ok := sub("run"); ok {
			return "docker", first(rest, "-e", "--env", "-v", "--volume", "--name", "-p", "--publish", "--mount",
				"--network", "--net", "-w", "--workdir", "-u", "--user", "--env-file", "--entrypoint", "-l", "--label",
				"--platform", "--pull", "--memory", "-m", "--cpus", "--add-host", "--hostname", "-h", "--cap-add",
				"--cap-drop", "--security-opt", "--tmpfs", "--ulimit", "--device", "--restart", "--log-driver")
		}
	}
	if strings.HasPrefix(prog, "python") {
		for i, a := range args {
			if a == "-m" && i+1 < len(args) {
				return "module", args[i+1]
			}
			if !strings.HasPrefix(a, "-") {
				break
			}
		}
	}
	return "", ""
}

// npmName is a package spec without its version: "@scope/name@1.2" is
// "@scope/name".
func npmName(spec string) string {
	if i := strings.LastIndex(spec, "@"); i > 0 {
		return spec[:i]
	}
	return spec
}

// pythonName is a requirement without its version or extras, normalized as
// PyPI normalizes names (lower case, runs of "-", "_", "." as "-").
func pythonName(spec string) string {
	if i := strings.IndexAny(spec, "=<>~!@[; "); i >= 0 {
		spec = spec[:i]
	}
	return strings.ToLower(regexp.MustCompile(`[-_.]+`).ReplaceAllString(spec, "-"))
}

// imageName is a container image without its tag or digest, and without
// docker.io/ or docker.io/library/.
func imageName(ref string) string {
	if i := strings.Index(ref, "@"); i >= 0 {
		ref = ref[:i]
	}
	if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
		ref = ref[:i]
	}
	ref = strings.TrimPrefix(ref, "docker.io/")
	return strings.TrimPrefix(ref, "library/")
}

// normalURL is a URL with its scheme and host in lower case, and no query
// or fragment.
func normalURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return raw
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	u.RawQuery, u.Fragment = "", ""
	return u.String()
}
