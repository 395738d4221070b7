// Package policy decides whether an MCP tool call may run: ALLOW, DENY, or
// APPROVAL_REQUIRED (ask a person).
//
// A call names a capability, mcp.<server>.<tool>. [Classify] gives the tool a
// [Risk] class from its name and its MCP annotations; a [Policy] then picks
// the most specific of its rules that matches the call, falling back to a
// default for the risk class and then to a global default. [Policy.Decide]
// returns the decision, the rule that made it, and a step-by-step explanation
// a person can read.
//
// The package is pure logic: it knows nothing of MCP sessions, approvers or
// the evidence log. [Store] keeps the versions of a policy in the shared
// database.
//
// # Rules
//
// A [Rule] names a capability with a glob ("mcp.github.delete_*"), and may
// narrow it to one client, to tools of one risk class, and to calls whose
// arguments satisfy constraints ([ArgConstraint]: a path under a folder, an
// exact value, a regular expression). The most specific matching rule wins:
//
//  1. a rule naming the exact tool (mcp.github.delete_repo);
//  2. a rule with a tool glob (mcp.github.delete_*), more literal characters first;
//  3. a server-wide rule (mcp.github.*);
//  4. the default for the call's risk class ([Policy.Defaults]), or a rule
//     that names only a risk class (for one client, say);
//  5. the global default ([Policy.Default]).
//
// Within a step, in this order: more literal characters in the tool glob; an
// exact server over a server glob (then more literal characters in it); a
// rule naming the calling client over a client glob over any client; more
// constraints (each argument constraint, and a risk class, count one).
// Between rules that are still equal, the safer decision wins: DENY, then
// APPROVAL_REQUIRED, then ALLOW. [Result.Explanation] says which step
// decided.
//
// Two more rules keep mistakes on the safe side:
//
//   - A tool the server never listed (an unknown tool) is never allowed by a
//     glob, a server-wide rule or a default: what would allow it asks instead.
//     Only a rule naming the exact tool can allow it.
//   - A rule that denies or asks matches tool names regardless of case, and
//     applies when an argument it constrains cannot be checked (not a string,
//     a path with "..", a relative path, a path in a form the server may read
//     as another path: see [ArgConstraint.Under]); a rule that allows needs
//     the exact name and a checkable value. A value that cannot be checked
//     never makes a rule allow: the call falls to the next rule that
//     applies.
//
// # Text format
//
// People edit policies as TOML ([Parse], [Policy.Format]):
//
//	default = "APPROVAL_REQUIRED"
//
//	[defaults]
//	low = "ALLOW"
//	medium = "APPROVAL_REQUIRED"
//	high = "APPROVAL_REQUIRED"
//	critical = "APPROVAL_REQUIRED"
//
//	[[rule]]
//	id = "no-github-deletes"
//	capability = "mcp.github.delete_*"
//	decision = "DENY"
//	note = "repositories are deleted by hand"
//
//	[[rule]]
//	id = "fs-projects"
//	capability = "mcp.fs.write_file"
//	client = "claude-code"
//	decision = "ALLOW"
//	args = [
//	  { arg = "path", under = "/home/me/projects" },
//	]
//
// TOML because people write it by hand: it has comments, no quoting of keys,
// no trailing-comma traps, and its errors carry line numbers. The canonical
// form ([Policy.Format]) is what [Policy.Hash] covers; comments are not part
// of it.
package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// A Decision is what the gate does with a call.
type Decision string

// Decisions.
const (
	Allow            Decision = "ALLOW"
	Deny             Decision = "DENY"
	ApprovalRequired Decision = "APPROVAL_REQUIRED" // ask a person
)

// Valid reports whether d is one of the three decisions.
func (d Decision) Valid() bool { return d == Allow || d == Deny || d == ApprovalRequired }

// safety orders decisions from least to most safe; invalid ones rank with
// ApprovalRequired, which is what they are treated as.
func (d Decision) safety() int {
	switch d {
	case Allow:
		return 1
	case Deny:
		return 3
	}
	return 2
}

// ParseDecision reads a decision, in any case ("deny", "Approval_Required").
func ParseDecision(s string) (Decision, error) {
	d := Decision(strings.ToUpper(strings.TrimSpace(s)))
	if !d.Valid() {
		return "", fmt.Errorf("unknown decision %q (want ALLOW, DENY or APPROVAL_REQUIRED)", s)
	}
	return d, nil
}

// A Risk is the class of harm a tool can do.
type Risk string

// Risk classes, from least to most harmful.
const (
	Low      Risk = "low"      // reads
	Medium   Risk = "medium"   // unknown, or reaches the outside world
	High     Risk = "high"     // creates, changes, sends
	Critical Risk = "critical" // deletes, or runs code or commands
)

// Risks lists the risk classes from least to most harmful.
var Risks = []Risk{Low, Medium, High, Critical}

// Valid reports whether r is one of the risk classes.
func (r Risk) Valid() bool { return r.rank() > 0 }

func (r Risk) rank() int {
	switch r {
	case Low:
		return 1
	case Medium:
		return 2
	case High:
		return 3
	case Critical:
		return 4
	}
	return 0
}

// ParseRisk reads a risk class, in any case.
func ParseRisk(s string) (Risk, error) {
	r := Risk(strings.ToLower(strings.TrimSpace(s)))
	if !r.Valid() {
		return "", fmt.Errorf("unknown risk %q (want low, medium, high or critical)", s)
	}
	return r, nil
}

// Annotations are a tool's MCP annotations: hints from the server, which
// Gatehouse does not trust unless the user trusts the server. A nil field is
// a hint the server did not give; MCP's defaults for absent hints are
// readOnlyHint false, destructiveHint true, openWorldHint true.
type Annotations struct {
	ReadOnly    *bool `json:"readOnlyHint,omitempty"`
	Destructive *bool `json:"destructiveHint,omitempty"`
	Idempotent  *bool `json:"idempotentHint,omitempty"`
	OpenWorld   *bool `json:"openWorldHint,omitempty"`
}

// A Call is one tools/call, as the policy sees it.
type Call struct {
	Server      string
	Tool        string
	Client      string          // the MCP client's name, from initialize
	Args        json.RawMessage // the call's arguments, a JSON object (or nil)
	Annotations *Annotations    // as the server listed them; nil when it gave none
	Known       bool            // the tool was in the server's tools/list
	Trusted     bool            // the user marked the server trusted
	// Pack is the capability pack the server matched when it was
	// registered (nil: none): the tools it names are classified by it.
	Pack *Pack
	// ResolvePath, when set, follows symbolic links in a path argument
	// (the real path of its longest existing part, with the rest
	// appended): an Under constraint then holds only when both the path as
	// given and where it leads are inside the folder. Set it when the
	// server runs on this machine and reads its file system.
	ResolvePath func(path string) (string, error)
}

// Capability returns the call's capability name, mcp.<server>.<tool>.
func (c *Call) Capability() string { return Capability(c.Server, c.Tool) }

// Capability returns the capability name of a server's tool:
// mcp.<server>.<tool>. Server names hold no dots; tool names may.
func Capability(server, tool string) string { return "mcp." + server + "." + tool }

// SplitCapability splits mcp.<server>.<tool> into its server and tool. The
// server ends at the first dot after "mcp."; the tool is the rest.
func SplitCapability(capability string) (server, tool string, ok bool) {
	rest, ok := strings.CutPrefix(capability, "mcp.")
	if !ok {
		return "", "", false
	}
	server, tool, ok = strings.Cut(rest, ".")
	if !ok || server == "" || tool == "" {
		return "", "", false
	}
	return server, tool, true
}

// A Rule decides the calls it matches.
type Rule struct {
	// ID names the rule in results, receipts and the command line.
	ID string
	// Capability is a glob over mcp.<server>.<tool>: "*" matches any run of
	// characters within the server name or within the tool name (tool names
	// may hold dots: "mcp.fs.*" covers "files.read"). Empty only in a rule
	// that names a risk class.
	Capability string
	// Client is a glob over the client's name; empty matches any client.
	Client string
	// Risk, when set, limits the rule to tools of that class; a rule with a
	// risk class and no capability is a default for that class (for one
	// client, or for some arguments).
	Risk Risk
	// Args must all hold for the rule to apply.
	Args     []ArgConstraint
	Decision Decision
	Note     string // why, for people
	// Mode is Enforce (empty), or Observe: the rule's decision is
	// recorded, not applied (see [Policy.Decide]).
	Mode Mode
	// Secrets are the ids of vault secrets this rule binds to the calls it
	// allows: an agent may pass vault://secret/<id> in their arguments, and
	// the proxy resolves it just before the call. ALLOW rules only.
	Secrets []string
}

// An ArgConstraint is a condition on one string argument of a call. Every
// condition given must hold; a missing argument satisfies none.
type ArgConstraint struct {
	// Arg names the argument: a top-level name ("path"), or a JSON pointer
	// ("/options/target", RFC 6901).
	Arg string
	// Under holds when the value is an absolute path inside this folder (or
	// the folder itself). The folder is absolute ("/..." or "C:/...") and
	// has no ".."; a backslash in it is a separator on every OS, so that a
	// policy reads the same everywhere.
	//
	// The check is on the string, read as this machine's OS reads paths. It
	// holds only when the value, once cleaned, names a path inside the
	// folder byte for byte (a drive letter in either case), and it fails
	// only when the value is outside however it is read. A form that a file
	// system or the server may read as another path than the string names
	// cannot be checked: a ".." element, a leading "~", a relative path, a
	// network or device path, a NUL byte, a percent escape of ".", "/" or
	// "\"; on Linux and macOS a backslash (a separator to Windows-style
	// parsers and to a server on Windows, part of a name here); on Windows
	// a name ending in a dot or a space, a stream ("name:stream"), a short
	// name ("PROGRA~1"), a device name ("NUL", "COM1.txt") and characters
	// that become a separator through a code page ("／", "¥"); and, on
	// every OS, a value inside the folder only if case or Unicode
	// normalization is ignored (one folder on some file systems, two on
	// others). A value that cannot be checked satisfies a rule that denies
	// or asks, and never one that allows.
	//
	// Where the call's ResolvePath is set (a server on this machine),
	// symbolic links are followed too, as they are when the policy decides,
	// and a link out of the folder fails the check. A server that resolves
	// the path later, after links changed (a folder swapped for a link
	// between the decision and the server's open), is beyond what the check
	// can see: confine such a server itself (its own allowed folders, or the
	// OS's confinement).
	Under string
	// Equals holds when the value is exactly this string.
	Equals string
	// Matches holds when the whole value matches this regular expression
	// (RE2 syntax; it is anchored at both ends).
	Matches string
}

// A Mode says whether a rule, or a whole policy, is applied or only
// observed.
type Mode string

// Modes.
const (
	Enforce Mode = ""        // applied
	Observe Mode = "observe" // recorded, not applied: a shadow rollout
)

// A Policy is a set of rules with defaults.
type Policy struct {
	// Version is the stored version this policy was read from (0: none, or
	// not from a [Store]). It is not part of the text or the hash.
	Version  int64
	Rules    []Rule
	Defaults map[Risk]Decision // by risk class; a class not here falls to Default
	Default  Decision          // the global default
	Budgets  []Budget          // caps on calls that run, whatever the rules say
	// Mode Observe puts every rule in observe mode; the defaults (by risk
	// class, and global) still apply.
	Mode Mode
}

// Observed reports whether rule r is in observe mode, by its own mode or
// the policy's.
func (p *Policy) Observed(r *Rule) bool { return p.Mode == Observe || r.Mode == Observe }

// Default returns the built-in policy: reads are allowed, everything else
// asks.
func Default() *Policy {
	return &Policy{
		Defaults: map[Risk]Decision{
			Low:      Allow,
			Medium:   ApprovalRequired,
			High:     ApprovalRequired,
			Critical: ApprovalRequired,
		},
		Default: ApprovalRequired,
	}
}

// Rule returns the rule with the given id, or nil.
func (p *Policy) Rule(id string) *Rule {
	for i := range p.Rules {
		if p.Rules[i].ID == id {
			return &p.Rules[i]
		}
	}
	return nil
}

// Clone returns a deep copy of p.
func (p *Policy) Clone() *Policy {
	q := *p
	q.Rules = make([]Rule, len(p.Rules))
	for i, r := range p.Rules {
		r.Args = append([]ArgConstraint(nil), r.Args...)
		r.Secrets = append([]string(nil), r.Secrets...)
		q.Rules[i] = r
	}
	if p.Rules == nil {
		q.Rules = nil
	}
	q.Budgets = slices.Clone(p.Budgets)
	if p.Defaults != nil {
		q.Defaults = make(map[Risk]Decision, len(p.Defaults))
		for k, v := range p.Defaults {
			q.Defaults[k] = v
		}
	}
	return &q
}

// ErrInvalid is wrapped by every error [Policy.Validate] and [Parse] return
// for a policy that is well-formed text but not a valid policy.
var ErrInvalid = errors.New("invalid policy")

// A problem is one thing wrong with a policy; rule is the index of the rule
// (-1 for the policy itself) and key the field, for line numbers.
type problem struct {
	rule   int // index of the rule, or of the budget when budget is set
	key    string
	msg    string
	budget bool
}

func (p *problem) Error() string { return p.msg }
func (p *problem) Unwrap() error { return ErrInvalid }

// Validate reports the first thing wrong with p: an unknown decision or risk,
// a malformed capability or client glob, a duplicate or malformed rule id, an
// argument constraint that cannot hold. A valid policy formats to text that
// [Parse] reads back.
func (p *Policy) Validate() error {
	if pr := p.validate(); pr != nil {
		return pr
	}
	return nil
}

func (p *Policy) validate() *problem {
	if p.Mode != Enforce && p.Mode != Observe {
		return &problem{rule: -1, key: "mode", msg: fmt.Sprintf("mode: unknown mode %q (want observe, or none)", p.Mode)}
	}
	if !p.Default.Valid() {
		return &problem{rule: -1, key: "default", msg: fmt.Sprintf("default: unknown decision %q (want ALLOW, DENY or APPROVAL_REQUIRED)", p.Default)}
	}
	for r, d := range p.Defaults {
		if !r.Valid() {
			return &problem{rule: -1, key: "defaults", msg: fmt.Sprintf("defaults: unknown risk %q (want low, medium, high or critical)", r)}
		}
		if !d.Valid() {
			return &problem{rule: -1, key: "defaults", msg: fmt.Sprintf("defaults.%s: unknown decision %q (want ALLOW, DENY or APPROVAL_REQUIRED)", r, d)}
		}
	}
	seen := make(map[string]int)
	for i := range p.Rules {
		if pr := p.Rules[i].validate(i); pr != nil {
			return pr
		}
		id := p.Rules[i].ID
		if j, dup := seen[id]; dup {
			return &problem{rule: i, key: "id", msg: fmt.Sprintf("rule %q: the id is also used by rule %d", id, j+1)}
		}
		seen[id] = i
	}
	budgets := make(map[string]int)
	for i := range p.Budgets {
		if key, msg := p.Budgets[i].validate(); msg != "" {
			return &problem{rule: i, key: key, msg: msg, budget: true}
		}
		id := p.Budgets[i].ID
		if j, dup := budgets[id]; dup {
			return &problem{rule: i, key: "id", msg: fmt.Sprintf("budget %q: the id is also used by budget %d", id, j+1), budget: true}
		}
		budgets[id] = i
	}
	return nil
}

// idRE is what a rule id may be.
var idRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,199}$`)

// serverGlobRE is what the server part of a capability glob may be: a
// server name ([store.ValidateName]) with stars.
var serverGlobRE = regexp.MustCompile(`^[A-Za-z0-9_*-]{1,64}$`)

func (r *Rule) validate(i int) *problem {
	bad := func(key, format string, args ...any) *problem {
		name := fmt.Sprintf("rule %d", i+1)
		if r.ID != "" {
			name = fmt.Sprintf("rule %q", r.ID)
		}
		return &problem{rule: i, key: key, msg: name + ": " + fmt.Sprintf(format, args...)}
	}
	switch {
	case r.ID == "":
		return bad("id", "no id")
	case !idRE.MatchString(r.ID):
		return bad("id", "invalid id %q: use up to 200 letters, digits and . _ : / @ + -, starting with a letter or digit", r.ID)
	case strings.HasPrefix(strings.ToLower(r.ID), "default"):
		return bad("id", "ids starting with \"default\" name the defaults in results; choose another")
	}
	if r.Capability == "" {
		if r.Risk == "" {
			return bad("capability", "no capability (mcp.<server>.<tool>, with * as a wildcard) and no risk class")
		}
		if r.Client == "" && len(r.Args) == 0 {
			return bad("risk", "a rule with only a risk class is the default for that class: set defaults.%s instead", r.Risk)
		}
	} else if err := validateCapability(r.Capability); err != nil {
		return bad("capability", "%v", err)
	}
	if r.Client != "" {
		if err := validateText(r.Client, false); err != nil {
			return bad("client", "client %q: %v", r.Client, err)
		}
		if strings.Contains(r.Client, "**") {
			return bad("client", "client %q: use a single * (it matches any run of characters)", r.Client)
		}
	}
	if r.Risk != "" && !r.Risk.Valid() {
		return bad("risk", "unknown risk %q (want low, medium, high or critical)", r.Risk)
	}
	if !r.Decision.Valid() {
		if r.Decision == "" {
			return bad("decision", "no decision (ALLOW, DENY or APPROVAL_REQUIRED)")
		}
		return bad("decision", "unknown decision %q (want ALLOW, DENY or APPROVAL_REQUIRED)", r.Decision)
	}
	if r.Mode != Enforce && r.Mode != Observe {
		return bad("mode", "unknown mode %q (want observe, or none)", r.Mode)
	}
	if r.Mode == Observe && len(r.Secrets) > 0 {
		return bad("secrets", "a rule in observe mode binds no secrets: it allows nothing")
	}
	if err := validateText(r.Note, true); err != nil {
		return bad("note", "note: %v", err)
	}
	if len(r.Secrets) > 0 && r.Decision != Allow {
		return bad("secrets", "secrets are bound by ALLOW rules only")
	}
	for _, id := range r.Secrets {
		if !secretIDRE.MatchString(id) {
			return bad("secrets", "invalid secret id %q: use 1-128 letters, digits, '.', '-' or '_', starting with a letter or digit", id)
		}
	}
	for j, a := range r.Args {
		if err := a.validate(); err != nil {
			return bad("args", "argument constraint %d: %v", j+1, err)
		}
	}
	return nil
}

func validateCapability(c string) error {
	if err := validateText(c, false); err != nil {
		return fmt.Errorf("capability %q: %v", c, err)
	}
	server, tool, ok := SplitCapability(c)
	if !ok {
		return fmt.Errorf("capability %q: want mcp.<server>.<tool>, with * as a wildcard", c)
	}
	if !serverGlobRE.MatchString(server) {
		return fmt.Errorf("capability %q: server %q: use letters, digits, '-', '_' or *", c, server)
	}
	if strings.Contains(c, "**") {
		return fmt.Errorf("capability %q: use a single * (it matches any run of characters within the server or the tool name)", c)
	}
	if strings.ContainsFunc(tool, unicode.IsSpace) {
		return fmt.Errorf("capability %q: the tool name holds a space", c)
	}
	return nil
}

// validateText checks a string that goes into the text format: valid UTF-8
// and no control characters (but newlines and tabs where multiline).
func validateText(s string, multiline bool) error {
	if !utf8.ValidString(s) {
		return errors.New("not valid UTF-8")
	}
	for _, c := range s {
		if multiline && (c == '\n' || c == '\t') {
			continue
		}
		if unicode.IsControl(c) {
			return fmt.Errorf("holds the control character %U", c)
		}
	}
	return nil
}

func (a *ArgConstraint) validate() error {
	if a.Arg == "" {
		return errors.New("no argument name")
	}
	if err := validateText(a.Arg, false); err != nil {
		return fmt.Errorf("argument %q: %v", a.Arg, err)
	}
	if strings.HasPrefix(a.Arg, "/") {
		if _, err := splitPointer(a.Arg); err != nil {
			return fmt.Errorf("argument %q: %v", a.Arg, err)
		}
	}
	if a.Under == "" && a.Equals == "" && a.Matches == "" {
		return fmt.Errorf("argument %q: no condition (under, equals or matches)", a.Arg)
	}
	if a.Under != "" {
		if _, err := cleanUnder(a.Under); err != nil {
			return fmt.Errorf("argument %q: under %q: %v", a.Arg, a.Under, err)
		}
	}
	if err := validateText(a.Equals, true); err != nil {
		return fmt.Errorf("argument %q: equals: %v", a.Arg, err)
	}
	if a.Matches != "" {
		if err := validateText(a.Matches, false); err != nil {
			return fmt.Errorf("argument %q: matches: %v", a.Arg, err)
		}
		if _, err := regexp.Compile(anchor(a.Matches)); err != nil {
			return fmt.Errorf("argument %q: matches: %v", a.Arg, err)
		}
	}
	return nil
}

// anchor makes a regular expression match whole values only.
func anchor(re string) string { return `^(?:` + re + `)$` }

// cleanUnder puts a folder of an Under constraint in canonical form:
// forward slashes, no "." or duplicate separators, no trailing slash. It
// must be absolute ("/..." or "C:/...") and hold no "..".
func cleanUnder(dir string) (string, error) {
	s := strings.ReplaceAll(dir, `\`, "/")
	if strings.ContainsRune(s, 0) {
		return "", errors.New("holds a NUL byte")
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == ".." {
			return "", errors.New(`holds a ".." element`)
		}
	}
	if strings.HasPrefix(s, "//") {
		return "", errors.New("is a network or device path")
	}
	if !isAbs(s) {
		return "", errors.New("is not an absolute path")
	}
	return path.Clean(s), nil
}

// isAbs reports whether a slash-separated path is absolute on Unix ("/...")
// or Windows ("C:/...").
func isAbs(s string) bool {
	if strings.HasPrefix(s, "/") {
		return true
	}
	return len(s) >= 3 && s[1] == ':' && s[2] == '/' &&
		('a' <= s[0] && s[0] <= 'z' || 'A' <= s[0] && s[0] <= 'Z')
}

// secretIDRE is what names a vault secret (as package vault has it).
var secretIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
