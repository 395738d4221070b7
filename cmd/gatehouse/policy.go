package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

const policyHelp = `
A rule names a capability, mcp.SERVER.TOOL, where * matches any run of
characters within the server or the tool name (quote it from the shell:
'mcp.github.delete_*'). The most specific rule that applies decides: one
naming the exact tool, then a tool glob (more literal characters first),
then a server-wide rule (mcp.SERVER.*), then the default for the tool's
risk class (low, medium, high, critical), then the global default. A rule
for the calling client beats one for any client; between equals, DENY
beats APPROVAL_REQUIRED beats ALLOW. A tool the server did not list is
allowed only by a rule naming it exactly.`

var policyShowCmd = &command{
	name:    "policy show",
	summary: "print the policy in force, with its version and hash",
	help:    policyHelp,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, ps, err := c.openPolicies(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		p, err := ps.Current(ctx)
		if err != nil {
			return err
		}
		_, err = c.stdout.Write(policyText(p))
		return err
	},
}

// policySetFlags are the flags of gatehouse policy set.
type policySetFlags struct {
	client  string
	risk    string
	id      string
	note    string
	observe bool
	secret  listFlag
	cs      constraintFlags // --arg and its conditions
}

var policySetCmd = &command{
	name:    "policy set",
	usage:   "CAPABILITY DECISION [--client NAME] [--risk RISK] [--arg ARG (--under DIR | --equals V | --matches RE)]... [--id ID] [--note TEXT] [--secret ID]...\n       gatehouse policy set --risk RISK DECISION\n       gatehouse policy set default DECISION",
	summary: "add or change a rule, a risk default, or the global default",
	help: `
DECISION is ALLOW, DENY or APPROVAL_REQUIRED. A rule with the same
capability, client, risk and arguments as an existing one (or the same
--id) replaces it; otherwise it is added, with an id made from the
capability unless --id gives one.

--risk RISK alone sets the default for tools of that risk class; with a
capability or --client it narrows a rule to tools of that class.

--arg names an argument (a top-level name, or a JSON pointer such as
/options/path) and starts a constraint; the --under, --equals and --matches
after it say what must hold. A relative --under folder is made absolute.
The rule applies only when every constraint holds.

--observe puts the rule in observe mode (a shadow rollout): calls are
decided as if it were not there, and each receipt where it would have won
records what it would have decided ('gatehouse history' shows it).

--secret ID binds the vault secret ID to the calls an ALLOW rule allows:
an agent may then pass vault://secret/ID in their arguments, and the proxy
puts the value in just before the call (the receipt keeps the reference),
and keeps it out of the result. A reference no rule binds is refused.

Every change is a new policy version, recorded in the evidence log before
it takes effect: the keychain holding the log's signing key must be
reachable.

Examples:
  gatehouse policy set 'mcp.github.delete_*' DENY --note 'deleted by hand'
  gatehouse policy set mcp.fs.write_file ALLOW --client claude-code --arg path --under ~/projects
  gatehouse policy set --risk high ALLOW --client ci-bot
  gatehouse policy set --risk low APPROVAL_REQUIRED
  gatehouse policy set default DENY
  gatehouse policy set mcp.github.create_issue ALLOW --secret gh-token
` + policyHelp,
	flags: flagged(func(fs *flag.FlagSet, f *policySetFlags) {
		fs.StringVar(&f.client, "client", "", "only calls from the client `NAME` (a glob)")
		fs.StringVar(&f.risk, "risk", "", "only tools of the `RISK` class; alone: that class's default")
		fs.StringVar(&f.id, "id", "", "the rule's `ID` (replaces the rule with this id)")
		fs.StringVar(&f.note, "note", "", "why, for people reading the policy")
		fs.BoolVar(&f.observe, "observe", false, "put the rule in observe mode: its decision is recorded in receipts, not applied")
		fs.Var(&f.secret, "secret", "bind the vault secret `ID` to the calls this ALLOW rule allows (repeatable)")
		cs := &f.cs
		fs.Var(argFlag{cs}, "arg", "start a constraint on the argument `ARG` (a name or a JSON pointer)")
		fs.Var(condFlag{cs, "under"}, "under", "the --arg is a path inside `DIR`")
		fs.Var(condFlag{cs, "equals"}, "equals", "the --arg equals `VALUE`")
		fs.Var(condFlag{cs, "matches"}, "matches", "the whole --arg matches the regular expression `RE`")
	}, runPolicySet),
}

var policyRemoveCmd = &command{
	name:    "policy remove",
	aliases: []string{"rm"},
	usage:   "ID",
	summary: "remove a rule or a budget (or a risk default, default:RISK)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("policy remove: want exactly one rule ID")
		}
		id := pos[0]
		if id == "default" {
			return usagef("policy remove: the global default cannot be removed; change it with: gatehouse policy set default DECISION")
		}
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			if r, ok := strings.CutPrefix(id, "default:"); ok {
				risk, err := policy.ParseRisk(r)
				if err != nil {
					return usagef("policy remove: %v", err)
				}
				if _, ok := p.Defaults[risk]; !ok {
					return withHint(fmt.Errorf("the policy has no default for %s risk", risk), "see the policy with: gatehouse policy show")
				}
				delete(p.Defaults, risk)
				return nil
			}
			if p.Rule(id) == nil {
				if p.Budget(id) != nil {
					p.Budgets = slices.DeleteFunc(p.Budgets, func(b policy.Budget) bool { return b.ID == id })
					return nil
				}
				return withHint(fmt.Errorf("the policy has no rule or budget %q", id), "see the rules, budgets and their ids with: gatehouse policy show")
			}
			p.Rules = removeRuleByID(p.Rules, id)
			return nil
		})
	},
}

// policyBudgetFlags are the flags of gatehouse policy budget.
type policyBudgetFlags struct {
	per    string
	window string
	note   string
}

var policyBudgetCmd = &command{
	name:    "policy budget",
	usage:   "ID CAPABILITY CALLS [--per session|server] [--window DURATION] [--note TEXT]",
	summary: "add or change a budget: at most CALLS calls to CAPABILITY",
	help: `
A budget caps the calls that run, whatever the rules allow: at most CALLS
calls to CAPABILITY (a glob, as in rules; tool names match in any case) in
any WINDOW (30s, 10m, 1h, 7d), counted per session or per server (every
session of every client together; needs a window). Without a window a
session budget lasts the whole session. A call over budget is denied, and
the model is told which budget and when it may try again.

Examples:
  gatehouse policy budget github-writes 'mcp.github.create_*' 20 --per server --window 1h
  gatehouse policy budget session-cap 'mcp.*.*' 500`,
	flags: flagged(func(fs *flag.FlagSet, f *policyBudgetFlags) {
		fs.StringVar(&f.per, "per", "session", "count per `session` or per server")
		fs.StringVar(&f.window, "window", "", "count calls in any `window` this long (30s, 10m, 1h, 7d)")
		fs.StringVar(&f.note, "note", "", "why the budget is there")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *policyBudgetFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 3 {
			return usagef("policy budget: want ID CAPABILITY CALLS")
		}
		calls, err := strconv.Atoi(pos[2])
		if err != nil || calls < 0 {
			return usagef("policy budget: CALLS %q: want a whole number, 0 or more", pos[2])
		}
		text := fmt.Sprintf("[[budget]]\nid = %q\ncapability = %q\nper = %q\ncalls = %d\n", pos[0], pos[1], f.per, calls)
		if w := f.window; w != "" {
			text += fmt.Sprintf("window = %q\n", w)
		}
		if n := f.note; n != "" {
			text += fmt.Sprintf("note = %q\n", n)
		}
		parsed, err := policy.Parse([]byte(text))
		if err != nil {
			var perr *policy.ParseError
			if errors.As(err, &perr) {
				return usagef("policy budget: %s", perr.Msg)
			}
			return usagef("policy budget: %v", err)
		}
		b := parsed.Budgets[0]
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			if old := p.Budget(b.ID); old != nil {
				*old = b
			} else {
				p.Budgets = append(p.Budgets, b)
			}
			fmt.Fprintf(c.stderr, "gatehouse: budget %s: %s\n", b.ID, b.Describe())
			return nil
		})
	}),
}

// policyImportFlags are the flags of gatehouse policy import.
type policyImportFlags struct {
	dryRun bool
}

var policyImportCmd = &command{
	name:    "policy import",
	usage:   "FILE",
	summary: "replace the policy with one from a file (- for stdin), showing what changes",
	help: `
FILE is a policy as 'gatehouse policy export' writes it (TOML). It is
checked, the changes to the decisions are listed, and it is saved as a new
version (recorded in the evidence log), unless --dry-run.`,
	flags: flagged(func(fs *flag.FlagSet, f *policyImportFlags) {
		fs.BoolVar(&f.dryRun, "dry-run", false, "check and list the changes, but save nothing")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *policyImportFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("policy import: want exactly one FILE")
		}
		name := pos[0]
		var data []byte
		if name == "-" {
			data, err = io.ReadAll(c.stdin)
		} else {
			data, err = os.ReadFile(name)
		}
		if err != nil {
			return fmt.Errorf("read policy: %w", err)
		}
		next, err := policy.Parse(data)
		if err != nil {
			var perr *policy.ParseError
			if errors.As(err, &perr) && perr.Line > 0 {
				return fmt.Errorf("%s:%d: %s", name, perr.Line, perr.Msg)
			}
			return fmt.Errorf("%s: %w", name, err)
		}
		if f.dryRun {
			st, ps, err := c.openPolicies(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			cur, err := ps.Current(ctx)
			if err != nil {
				return err
			}
			c.printDiff(cur, next)
			return nil
		}
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			*p = *next.Clone()
			return nil
		})
	}),
}

var policyExportCmd = &command{
	name:    "policy export",
	usage:   "[FILE]",
	summary: "write the policy in force to FILE (or stdout), to edit and import",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) > 1 {
			return usagef("policy export: want at most one FILE")
		}
		st, ps, err := c.openPolicies(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		p, err := ps.Current(ctx)
		if err != nil {
			return err
		}
		if len(pos) == 0 || pos[0] == "-" {
			_, err = c.stdout.Write(policyText(p))
			return err
		}
		if err := atomicfile.Write(pos[0], policyText(p), 0o644); err != nil {
			return fmt.Errorf("export policy: %w", err)
		}
		fmt.Fprintf(c.stderr, "gatehouse: wrote policy version %d to %s\n", p.Version, pos[0])
		fmt.Fprintf(c.stderr, "hint: edit it, then load it with: gatehouse policy import %s\n", pos[0])
		return nil
	},
}

// policyExplainFlags are the flags of gatehouse policy explain.
type policyExplainFlags struct {
	client      string
	args        string
	annotations string
	trusted     bool
	unlisted    bool
}

var policyExplainCmd = &command{
	name:    "policy explain",
	usage:   "mcp.SERVER.TOOL [--client NAME] [--args JSON] [--annotations JSON] [--trusted] [--unlisted]",
	summary: "show what the policy decides for a call, and why",
	help: `
Decides a call as the proxy would, and prints the decision, the rule that
made it, the tool's risk class and every step. The tool is taken to be one
the server lists, unless --unlisted. --annotations takes the tool's MCP
annotations, as in tools/list: {"readOnlyHint": true, ...}.` + "\n" + policyHelp,
	flags: flagged(func(fs *flag.FlagSet, f *policyExplainFlags) {
		fs.StringVar(&f.client, "client", "", "the calling client's `NAME`")
		fs.StringVar(&f.args, "args", "", "the call's arguments, a `JSON` object")
		fs.StringVar(&f.annotations, "annotations", "", "the tool's MCP annotations, a `JSON` object")
		fs.BoolVar(&f.trusted, "trusted", false, "the server is trusted (its read-only hints may lower risk)")
		fs.BoolVar(&f.unlisted, "unlisted", false, "the tool is not in the server's tools/list")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *policyExplainFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("policy explain: want exactly one capability, mcp.SERVER.TOOL")
		}
		server, tool, ok := policy.SplitCapability(pos[0])
		if !ok {
			return usagef("policy explain: %q is not a capability: want mcp.SERVER.TOOL", pos[0])
		}
		call := policy.Call{
			Server: server, Tool: tool,
			Client:  f.client,
			Known:   !f.unlisted,
			Trusted: f.trusted,
		}
		if a := f.args; a != "" {
			if !json.Valid([]byte(a)) {
				return usagef("policy explain: --args is not JSON")
			}
			call.Args = json.RawMessage(a)
		}
		if a := f.annotations; a != "" {
			call.Annotations = &policy.Annotations{}
			if err := json.Unmarshal([]byte(a), call.Annotations); err != nil {
				return usagef("policy explain: --annotations: %v", err)
			}
		}
		st, ps, err := c.openPolicies(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		p, err := ps.Current(ctx)
		if err != nil {
			return err
		}
		res := p.Decide(call)
		fmt.Fprintf(c.stdout, "%s by %s (%s risk)\n", res.Decision, res.Rule, res.Risk)
		fmt.Fprintf(c.stdout, "policy version %d, %s\n", p.Version, p.Hash())
		for _, step := range res.Explanation {
			fmt.Fprintf(c.stdout, "  - %s\n", step)
		}
		return nil
	}),
}

// policyText is the policy as show and export print it: a header with its
// version and hash, then its canonical text.
func policyText(p *policy.Policy) []byte {
	var b strings.Builder
	if p.Version == 0 {
		b.WriteString("# Gatehouse policy: the built-in default (no version saved yet)\n")
	} else {
		fmt.Fprintf(&b, "# Gatehouse policy version %d\n", p.Version)
	}
	fmt.Fprintf(&b, "# %s\n#\n", p.Hash())
	var observed []string
	for i := range p.Rules {
		if p.Observed(&p.Rules[i]) {
			observed = append(observed, p.Rules[i].ID)
		}
	}
	switch {
	case p.Mode == policy.Observe:
		b.WriteString("# OBSERVE MODE: the whole policy observes. Its rules are not applied, only the\n")
		b.WriteString("# defaults; receipts record what the rules would have decided.\n#\n")
	case len(observed) > 0:
		fmt.Fprintf(&b, "# OBSERVE MODE: %s: recorded in receipts, not applied.\n#\n", strings.Join(observed, ", "))
	}
	b.WriteString("# The most specific rule that applies decides: exact tool, tool glob, server-wide\n")
	b.WriteString("# (mcp.SERVER.*), the default for the tool's risk class, the global default.\n")
	b.WriteString("# Load an edited copy with: gatehouse policy import FILE\n\n")
	b.Write(p.Format())
	return []byte(b.String())
}

// openPolicies opens the home folder's policy store for reading.
func (c *cli) openPolicies(ctx context.Context) (*store.Store, *policy.Store, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	ps, err := policy.Open(ctx, st, nil)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, ps, nil
}

// changePolicy applies change to a copy of the policy in force and saves
// the result as a new version. It opens the evidence log first: if the
// keychain that holds the log's key is unreachable, nothing is saved.
func (c *cli) changePolicy(ctx context.Context, change func(p *policy.Policy) error) error {
	st, l, err := c.openLog(ctx)
	if err != nil {
		return fmt.Errorf("cannot change the policy: every version is recorded in the evidence log: %w", err)
	}
	defer st.Close()
	ps, err := policy.Open(ctx, st, &policy.Options{Recorder: policyRecorder(l)})
	if err != nil {
		return err
	}
	cur, err := ps.Current(ctx)
	if err != nil {
		return err
	}
	next := cur.Clone()
	if err := change(next); err != nil {
		return err
	}
	next.Version = cur.Version
	if err := next.Validate(); err != nil {
		return usagef("%v", err)
	}
	if next.Hash() == cur.Hash() {
		fmt.Fprintf(c.stderr, "gatehouse: policy unchanged (version %d)\n", cur.Version)
		return nil
	}
	v, err := ps.Save(ctx, next)
	if errors.Is(err, policy.ErrConflict) {
		return withHint(err, "another change was saved meanwhile; run the command again")
	}
	if err != nil {
		return err
	}
	c.printDiff(cur, next)
	fmt.Fprintf(c.stderr, "gatehouse: saved policy version %d (%s), recorded in the evidence log\n", v, next.Hash())
	return nil
}

// printDiff lists how decisions change, on stdout.
func (c *cli) printDiff(from, to *policy.Policy) {
	lines := policy.Diff(from, to)
	if len(lines) == 0 {
		fmt.Fprintln(c.stdout, "no changes")
		return
	}
	for _, line := range lines {
		fmt.Fprintln(c.stdout, line)
	}
}

func runPolicySet(ctx context.Context, c *cli, fs *flag.FlagSet, f *policySetFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	cs := &f.cs
	var riskClass policy.Risk
	if s := f.risk; s != "" {
		if riskClass, err = policy.ParseRisk(s); err != nil {
			return usagef("policy set: --risk: %v", err)
		}
	}
	var target, decision string
	switch {
	case len(pos) == 2:
		target, decision = pos[0], pos[1]
	case len(pos) == 1 && riskClass != "":
		decision = pos[0]
	default:
		return usagef("policy set: want CAPABILITY DECISION, --risk RISK DECISION, or default DECISION")
	}
	d, err := policy.ParseDecision(decision)
	if err != nil {
		return usagef("policy set: %v", err)
	}
	rule := policy.Rule{
		ID: f.id, Capability: target, Client: f.client, Risk: riskClass,
		Args: cs.list, Decision: d, Note: f.note, Secrets: secretList(f.secret),
	}
	if f.observe {
		rule.Mode = policy.Observe
	}
	for i, a := range rule.Args {
		if a.Under == "" {
			continue
		}
		if strings.HasPrefix(a.Under, "~") {
			return usagef("policy set: --under %s: write the folder in full (the shell expands ~ only at the start of a word)", a.Under)
		}
		if slices.Contains(strings.FieldsFunc(a.Under, func(r rune) bool { return r == '/' || r == '\\' }), "..") {
			return usagef("policy set: --under %s: holds a \"..\" element; write the folder plainly", a.Under)
		}
		abs, err := filepath.Abs(a.Under)
		if err != nil {
			return usagef("policy set: --under %s: %v", a.Under, err)
		}
		rule.Args[i].Under = abs
	}
	switch {
	case target == "default":
		if rule.ID != "" || rule.Client != "" || rule.Risk != "" || len(rule.Args) > 0 {
			return usagef("policy set default: the global default takes no --id, --client, --risk or --arg")
		}
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			p.Default = d
			return nil
		})
	case target == "" && rule.Client == "" && len(rule.Args) == 0:
		if rule.ID != "" {
			return usagef("policy set: a risk default has no --id; add --client or --arg to make it a rule")
		}
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			if p.Defaults == nil {
				p.Defaults = make(map[policy.Risk]policy.Decision)
			}
			p.Defaults[riskClass] = d
			return nil
		})
	case target != "":
		if _, _, ok := policy.SplitCapability(target); !ok {
			return usagef("policy set: %q is not a capability: want mcp.SERVER.TOOL (with * as a wildcard), or default", target)
		}
	}
	return c.changePolicy(ctx, func(p *policy.Policy) error {
		upsertRule(p, rule)
		return nil
	})
}

// upsertRule replaces the rule with r's id, or else the rule that matches
// the same calls as r, or else adds r with a new id.
func upsertRule(p *policy.Policy, r policy.Rule) {
	if r.ID == "" {
		for _, old := range p.Rules {
			if sameScope(&old, &r) && old.Mode == r.Mode {
				r.ID = old.ID
				if r.Note == "" {
					r.Note = old.Note
				}
				break
			}
		}
	}
	if r.ID == "" {
		r.ID = newRuleID(p, &r)
	}
	for i := range p.Rules {
		if p.Rules[i].ID == r.ID {
			p.Rules[i] = r
			return
		}
	}
	p.Rules = append(p.Rules, r)
}

// sameScope reports whether two rules apply to the same calls.
func sameScope(a, b *policy.Rule) bool {
	if a.Capability != b.Capability || a.Client != b.Client || a.Risk != b.Risk || len(a.Args) != len(b.Args) {
		return false
	}
	for i := range a.Args {
		x, y := a.Args[i], b.Args[i]
		x.Under, y.Under = filepath.ToSlash(filepath.Clean(x.Under)), filepath.ToSlash(filepath.Clean(y.Under))
		if x != y {
			return false
		}
	}
	return true
}

var nonIDChars = regexp.MustCompile(`[^a-z0-9]+`)

// newRuleID makes an id for r from what it covers: "github-delete-any",
// "risk-high-ci-bot".
func newRuleID(p *policy.Policy, r *policy.Rule) string {
	base := strings.TrimPrefix(r.Capability, "mcp.")
	if base == "" {
		base = "risk-" + string(r.Risk)
	} else if r.Risk != "" {
		base += "-" + string(r.Risk)
	}
	if r.Client != "" {
		base += "-" + r.Client
	}
	base = strings.ReplaceAll(strings.ToLower(base), "*", "-any-")
	base = strings.Trim(nonIDChars.ReplaceAllString(base, "-"), "-")
	if len(base) > 60 {
		base = strings.TrimRight(base[:60], "-")
	}
	if base == "" || strings.HasPrefix(base, "default") {
		base = "rule-" + base
	}
	id := base
	for n := 2; p.Rule(id) != nil; n++ {
		id = fmt.Sprintf("%s-%d", base, n)
	}
	return id
}

func removeRuleByID(rules []policy.Rule, id string) []policy.Rule {
	out := rules[:0:0]
	for _, r := range rules {
		if r.ID != id {
			out = append(out, r)
		}
	}
	return out
}

// constraintFlags collects --arg constraints in order: --arg starts one,
// --under, --equals and --matches fill in the last.
type constraintFlags struct {
	list []policy.ArgConstraint
}

type argFlag struct{ cs *constraintFlags }

func (f argFlag) String() string { return "" }
func (f argFlag) Set(s string) error {
	if s == "" {
		return errors.New("empty argument name")
	}
	f.cs.list = append(f.cs.list, policy.ArgConstraint{Arg: s})
	return nil
}

type condFlag struct {
	cs   *constraintFlags
	kind string
}

func (f condFlag) String() string { return "" }
func (f condFlag) Set(s string) error {
	if len(f.cs.list) == 0 {
		return fmt.Errorf("--%s needs an --arg before it", f.kind)
	}
	a := &f.cs.list[len(f.cs.list)-1]
	var dst *string
	switch f.kind {
	case "under":
		dst = &a.Under
	case "equals":
		dst = &a.Equals
	default:
		dst = &a.Matches
	}
	if *dst != "" {
		return fmt.Errorf("--%s given twice for --arg %s", f.kind, a.Arg)
	}
	*dst = s
	return nil
}

// secretList returns the --secret ids, or nil when none were given.
func secretList(ids listFlag) []string {
	if len(ids) == 0 {
		return nil
	}
	return ids
}

// policySuggestFlags are the flags of gatehouse policy suggest.
type policySuggestFlags struct {
	apply bool
}

var policySuggestCmd = &command{
	name:    "policy suggest",
	usage:   "NAME [--apply]",
	summary: "print the rules server NAME's capability pack suggests, or add them",
	help: `
A server that matches a capability pack (see 'gatehouse server list') has
rules the pack suggests for it: reads allowed inside the folders the server
was given, writes, merges and deletions asked or denied. They are printed as
policy text; --apply adds them to the policy (replacing rules of the same
id), as one new version.`,
	flags: flagged(func(fs *flag.FlagSet, f *policySuggestFlags) {
		fs.BoolVar(&f.apply, "apply", false, "add the suggested rules to the policy")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *policySuggestFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "policy suggest", pos)
		if err != nil {
			return err
		}
		st.Close()
		pack := policy.PackByRef(srv.Pack)
		if pack == nil {
			return withHint(fmt.Errorf("server %s matches no capability pack", srv.Name),
				"its tools are classified by their names; set the rules you want with: gatehouse policy set")
		}
		rules := pack.SuggestedRules(srv.Name, srv.Args)
		if len(rules) == 0 {
			fmt.Fprintf(c.stderr, "gatehouse: capability pack %s suggests no rules for %s\n", pack.Ref(), srv.Name)
			return nil
		}
		if !f.apply {
			fmt.Fprintf(c.stdout, "# rules capability pack %s suggests for server %s\n# add them with: gatehouse policy suggest %s --apply\n\n", pack.Ref(), srv.Name, srv.Name)
			_, err := c.stdout.Write(policy.FormatRules(rules))
			return err
		}
		return c.changePolicy(ctx, func(p *policy.Policy) error {
			for _, r := range rules {
				p.Rules = append(slices.DeleteFunc(p.Rules, func(o policy.Rule) bool { return o.ID == r.ID }), r)
			}
			return nil
		})
	}),
}
