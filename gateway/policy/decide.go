package policy

import (
	"cmp"
	"fmt"
	"strings"
)

// A Result is a policy's decision on a call.
type Result struct {
	Decision Decision
	// Rule is the id of the rule that decided, "default:<risk>" for a risk
	// class's default, or "default" for the global default.
	Rule string
	// Risk is the call's risk class ([Classify]).
	Risk Risk
	// Explanation is the decision step by step, for people: the call and
	// its risk, each rule and whether it applies, and why the winner won.
	Explanation []string
	// Observed is what a rule in observe mode would have decided, when it
	// would have won: recorded, not applied. Nil otherwise.
	Observed *Observation
}

// An Observation is the decision a rule in observe mode would have made.
type Observation struct {
	Decision Decision
	Rule     string
}

// Steps of the specificity ladder, from least to most specific.
const (
	tierGlobal   = 1 // the global default
	tierRisk     = 2 // a risk class's default, or a rule naming only a risk class
	tierServer   = 3 // mcp.<server>.*
	tierToolGlob = 4 // mcp.<server>.<tool glob>
	tierTool     = 5 // mcp.<server>.<tool>
)

// specificity ranks the candidates for a decision; greater is more specific.
type specificity struct {
	tier           int
	toolLiterals   int  // characters of the tool glob other than *
	serverExact    bool // the server part has no *
	serverLiterals int
	client         int // 0 any client, 1 a client glob, 2 a client name
	constraints    int // argument constraints, plus one for a risk class
}

func (a specificity) compare(b specificity) int {
	return cmp.Or(
		cmp.Compare(a.tier, b.tier),
		cmp.Compare(a.toolLiterals, b.toolLiterals),
		cmp.Compare(b2i(a.serverExact), b2i(b.serverExact)),
		cmp.Compare(a.serverLiterals, b.serverLiterals),
		cmp.Compare(a.client, b.client),
		cmp.Compare(a.constraints, b.constraints),
	)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

var tierNames = map[int]string{
	tierGlobal:   "the global default",
	tierRisk:     "a risk default",
	tierServer:   "a server-wide rule",
	tierToolGlob: "a tool glob",
	tierTool:     "a rule naming the exact tool",
}

// beats says why a is more specific than b (a.compare(b) > 0).
func (a specificity) beats(b specificity) string {
	switch {
	case a.tier != b.tier:
		return fmt.Sprintf("%s beats %s", tierNames[a.tier], tierNames[b.tier])
	case a.toolLiterals != b.toolLiterals:
		return fmt.Sprintf("its tool glob has more literal characters (%d, not %d)", a.toolLiterals, b.toolLiterals)
	case a.serverExact != b.serverExact:
		return "it names the server exactly, not with a glob"
	case a.serverLiterals != b.serverLiterals:
		return fmt.Sprintf("its server glob has more literal characters (%d, not %d)", a.serverLiterals, b.serverLiterals)
	case a.client != b.client:
		if b.client == 0 {
			return "a rule for this client beats one for any client"
		}
		return "a rule naming the client beats a client glob"
	}
	return fmt.Sprintf("it has more constraints (%d, not %d)", a.constraints, b.constraints)
}

// A candidate is a rule or default that applies to a call.
type candidate struct {
	id       string
	decision Decision
	spec     specificity
	observed bool // a rule in observe mode
}

// better reports whether a wins over b: more specific, or as specific and
// safer. Between equals, the earlier stays.
func (a *candidate) better(b *candidate) bool {
	if c := a.spec.compare(b.spec); c != 0 {
		return c > 0
	}
	return a.decision.safety() > b.decision.safety()
}

// Decide decides c: the most specific rule that applies wins (see the
// package documentation for the ladder), then the default for the call's
// risk class, then the global default. A tool the server never listed
// (c.Known false) is allowed only by a rule naming it exactly; anything else
// that would allow it asks instead.
//
// Decide never fails: a decision that is not valid (in a policy that does not
// pass [Policy.Validate]) counts as APPROVAL_REQUIRED.
func (p *Policy) Decide(c Call) Result {
	risk, reasons := ClassifyIn(c.Pack, c.Tool, c.Annotations, c.Trusted)
	res := Result{Risk: risk}
	say := func(format string, args ...any) {
		res.Explanation = append(res.Explanation, fmt.Sprintf(format, args...))
	}
	client := "an unnamed client"
	if c.Client != "" {
		client = fmt.Sprintf("client %q", c.Client)
	}
	var facts []string
	if !c.Known {
		facts = append(facts, "a tool the server did not list")
	}
	if c.Trusted {
		facts = append(facts, "a trusted server")
	}
	say("call %s from %s%s", c.Capability(), client, parens(strings.Join(facts, ", ")))
	say("risk %s: %s", risk, strings.Join(reasons, "; "))

	var a *args
	argsOnce := func() *args {
		if a == nil {
			a = readArgs(c.Args)
			a.resolve = c.ResolvePath
		}
		return a
	}
	var cands []candidate
	for i := range p.Rules {
		r := &p.Rules[i]
		spec, ok, why := r.match(&c, risk, argsOnce)
		if !ok {
			say("rule %s (%s): does not apply: %s", r.ID, r.summary(), why)
			continue
		}
		observed := p.Observed(r)
		mode := ""
		if observed {
			mode = " in observe mode"
		}
		say("rule %s%s (%s): applies, as %s", r.ID, mode, r.summary(), why)
		cands = append(cands, candidate{id: r.ID, decision: r.Decision, spec: spec, observed: observed})
	}
	if d, ok := p.Defaults[risk]; ok {
		say("default for %s risk: %s", risk, d)
		cands = append(cands, candidate{id: "default:" + string(risk), decision: d, spec: specificity{tier: tierRisk}})
	} else {
		say("no default for %s risk", risk)
	}
	say("global default: %s", p.Default)
	cands = append(cands, candidate{id: "default", decision: p.Default, spec: specificity{tier: tierGlobal}})

	// The winner among every candidate, and the one applied: the winner
	// among those not in observe mode. The defaults are never observed, so
	// there is always one; and removing candidates never unseats a winner,
	// so a rule not observed that wins with every rule in play (a DENY,
	// say) is applied whatever rules observe.
	best := func(skipObserved bool) int {
		win := -1
		for i := range cands {
			if skipObserved && cands[i].observed {
				continue
			}
			if win < 0 || cands[i].better(&cands[win]) {
				win = i
			}
		}
		return win
	}
	all, win := best(false), best(true)
	w := &cands[win]
	runner := -1
	for i := range cands {
		if i != win && !cands[i].observed && (runner < 0 || cands[i].better(&cands[runner])) {
			runner = i
		}
	}
	if runner >= 0 {
		r := &cands[runner]
		switch c := w.spec.compare(r.spec); {
		case c > 0:
			say("%s wins over %s: %s", w.id, r.id, w.spec.beats(r.spec))
		case w.decision != r.decision:
			say("%s wins over %s: as specific, and %s is safer than %s", w.id, r.id, w.decision, r.decision)
		default:
			say("%s wins over %s: as specific, same decision, first in the policy", w.id, r.id)
		}
	}
	d := w.decision
	if !d.Valid() {
		say("%s has no valid decision (%q): asking instead", w.id, d)
		d = ApprovalRequired
	}
	if !c.Known && d == Allow && w.spec.tier != tierTool {
		say("the server did not list this tool: only a rule naming it exactly can allow it, so %s asks instead", w.id)
		d = ApprovalRequired
	}
	res.Decision, res.Rule = d, w.id
	if all != win {
		o := &cands[all]
		od := o.decision
		if !od.Valid() {
			od = ApprovalRequired
		}
		if !c.Known && od == Allow && o.spec.tier != tierTool {
			od = ApprovalRequired
		}
		res.Observed = &Observation{Decision: od, Rule: o.id}
		say("rule %s is in observe mode: it would have decided %s, over %s; that is recorded, not applied", o.id, od, w.id)
	}
	say("decision: %s", d)
	return res
}

func parens(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

// summary is a rule in one line: "mcp.github.delete_* → DENY".
func (r *Rule) summary() string {
	var b strings.Builder
	if r.Capability != "" {
		b.WriteString(r.Capability)
	} else {
		b.WriteString("any tool")
	}
	if r.Risk != "" {
		fmt.Fprintf(&b, ", %s risk", r.Risk)
	}
	if r.Client != "" {
		fmt.Fprintf(&b, ", client %s", r.Client)
	}
	for _, a := range r.Args {
		b.WriteString(", " + a.summary())
	}
	fmt.Fprintf(&b, " → %s", r.Decision)
	if len(r.Secrets) > 0 {
		fmt.Fprintf(&b, " with secrets %s", strings.Join(r.Secrets, ", "))
	}
	return b.String()
}

func (a *ArgConstraint) summary() string {
	var conds []string
	if a.Under != "" {
		conds = append(conds, "under "+a.Under)
	}
	if a.Equals != "" {
		conds = append(conds, fmt.Sprintf("= %q", a.Equals))
	}
	if a.Matches != "" {
		conds = append(conds, fmt.Sprintf("matching %q", a.Matches))
	}
	return a.Arg + " " + strings.Join(conds, " and ")
}

// match reports whether r applies to c, how specific it is, and why (or why
// not). A rule that denies or asks matches names regardless of case and
// applies when an argument cannot be checked; a rule that allows does not.
func (r *Rule) match(c *Call, risk Risk, argsOf func() *args) (specificity, bool, string) {
	var spec specificity
	strict := r.Decision == Allow
	var how []string
	if r.Capability == "" {
		spec.tier = tierRisk
		how = append(how, "a rule for a risk class")
	} else {
		server, tool, ok := SplitCapability(r.Capability)
		if !ok {
			return spec, false, "its capability is malformed"
		}
		if !glob(server, c.Server, !strict) || !glob(tool, c.Tool, !strict) {
			return spec, false, "another capability"
		}
		spec.toolLiterals = literals(tool)
		spec.serverLiterals = literals(server)
		spec.serverExact = spec.serverLiterals == len([]rune(server))
		switch {
		case tool == "*":
			spec.tier = tierServer
		case spec.toolLiterals == len([]rune(tool)):
			spec.tier = tierTool
		default:
			spec.tier = tierToolGlob
		}
		how = append(how, tierNames[spec.tier])
		if spec.tier == tierToolGlob {
			how[0] += fmt.Sprintf(" with %d literal characters", spec.toolLiterals)
		}
		if !spec.serverExact {
			how = append(how, "any matching server")
		}
	}
	switch {
	case r.Client == "" || r.Client == "*":
	case c.Client == "" || !glob(r.Client, c.Client, !strict):
		return spec, false, fmt.Sprintf("it is for client %s", r.Client)
	case strings.Contains(r.Client, "*"):
		spec.client = 1
		how = append(how, "for clients "+r.Client)
	default:
		spec.client = 2
		how = append(how, "for this client")
	}
	if r.Risk != "" {
		if r.Risk != risk {
			return spec, false, fmt.Sprintf("it is for %s risk", r.Risk)
		}
		spec.constraints++
	}
	for i := range r.Args {
		v, why := r.Args[i].check(argsOf())
		switch {
		case v == fails:
			return spec, false, why
		case v == unsure && strict:
			return spec, false, why + "; a rule that allows needs a value it can check"
		case v == unsure:
			how = append(how, why+"; a rule that denies or asks applies in doubt")
		default:
			how = append(how, why)
		}
		spec.constraints++
	}
	return spec, true, strings.Join(how, ", ")
}

// literals counts the characters of a glob other than *.
func literals(pattern string) int {
	n := 0
	for _, r := range pattern {
		if r != '*' {
			n++
		}
	}
	return n
}

// glob reports whether s matches pattern, where * matches any run of
// characters (bytes: the literal parts are whole UTF-8 sequences, so a match
// never splits one). fold ignores case.
func glob(pattern, s string, fold bool) bool {
	if fold {
		pattern, s = strings.ToLower(pattern), strings.ToLower(s)
	}
	px, sx := 0, 0
	star, mark := -1, 0
	for sx < len(s) {
		switch {
		case px < len(pattern) && pattern[px] == '*':
			star, mark = px, sx
			px++
		case px < len(pattern) && pattern[px] == s[sx]:
			px++
			sx++
		case star >= 0:
			px = star + 1
			mark++
			sx = mark
		default:
			return false
		}
	}
	for px < len(pattern) && pattern[px] == '*' {
		px++
	}
	return px == len(pattern)
}
