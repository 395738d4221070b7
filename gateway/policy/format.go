package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/BurntSushi/toml"

	"github.com/gatehouse-dev/gatehouse/internal/tomltext"
)

// A ParseError is a mistake in a policy's text, at a line (0 when the line
// is not known).
type ParseError struct {
	Line int
	Msg  string
	err  error
}

func (e *ParseError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("line %d: %s", e.Line, e.Msg)
	}
	return e.Msg
}

// Unwrap returns [ErrInvalid] for a policy that is valid TOML but not a valid
// policy.
func (e *ParseError) Unwrap() error { return e.err }

// Parse reads a policy from its text (see the package documentation for
// the format). A missing default is APPROVAL_REQUIRED; a risk class missing
// from [defaults] falls to the default. The policy is validated
// ([Policy.Validate]) and put in canonical form: decisions in upper case,
// risks in lower case, folders of under constraints cleaned.
func Parse(data []byte) (*Policy, error) {
	if !utf8.Valid(data) {
		return nil, &ParseError{Msg: "the policy is not valid UTF-8 text"}
	}
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		var perr toml.ParseError
		if errors.As(err, &perr) {
			line := perr.Position.Line
			if s := perr.Position.Start; s > 0 && s <= len(data) {
				// The byte offset is exact; the line is one too far when the
				// offending character is a newline.
				line = bytes.Count(data[:s], []byte("\n")) + 1
			}
			return nil, &ParseError{Line: line, Msg: perr.Message}
		}
		return nil, &ParseError{Msg: err.Error()}
	}
	lines := newLocator(data)
	p := &Policy{Default: ApprovalRequired}
	fail := func(rule int, key, format string, args ...any) error {
		return &ParseError{Line: lines.find(rule, key, "args"), Msg: fmt.Sprintf(format, args...), err: ErrInvalid}
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		v := doc[k]
		switch k {
		case "mode":
			m, err := parseMode(v)
			if err != nil {
				return nil, fail(-1, k, "mode: %v", err)
			}
			p.Mode = m
		case "default":
			s, ok := v.(string)
			if !ok {
				return nil, fail(-1, k, "default: want a string (ALLOW, DENY or APPROVAL_REQUIRED), not %s", tomlType(v))
			}
			d, err := ParseDecision(s)
			if err != nil {
				return nil, fail(-1, k, "default: %v", err)
			}
			p.Default = d
		case "defaults":
			t, ok := v.(map[string]any)
			if !ok {
				return nil, fail(-1, k, "defaults: want a table ([defaults]), not %s", tomlType(v))
			}
			for _, rk := range slices.Sorted(maps.Keys(t)) {
				r, err := ParseRisk(rk)
				if err != nil {
					return nil, fail(-1, rk, "defaults: %v", err)
				}
				s, ok := t[rk].(string)
				if !ok {
					return nil, fail(-1, rk, "defaults.%s: want a decision string, not %s", rk, tomlType(t[rk]))
				}
				d, err := ParseDecision(s)
				if err != nil {
					return nil, fail(-1, rk, "defaults.%s: %v", rk, err)
				}
				if _, dup := p.Defaults[r]; dup {
					return nil, fail(-1, rk, "defaults: %s is given twice", r)
				}
				if p.Defaults == nil {
					p.Defaults = make(map[Risk]Decision)
				}
				p.Defaults[r] = d
			}
		case "rule":
			tables, ok := tableArray(v)
			if !ok {
				return nil, fail(-1, k, "rule: want rules as [[rule]] tables, not %s", tomlType(v))
			}
			for i, t := range tables {
				r, err := parseRule(t, func(key, format string, args ...any) error {
					return fail(i, key, format, args...)
				}, i)
				if err != nil {
					return nil, err
				}
				p.Rules = append(p.Rules, r)
			}
		case "budget":
			tables, ok := tableArray(v)
			if !ok {
				return nil, fail(-1, k, "budget: want budgets as [[budget]] tables, not %s", tomlType(v))
			}
			for i, t := range tables {
				b, err := parseBudget(t, func(key, format string, args ...any) error {
					return &ParseError{Line: lines.findBudget(i, key), Msg: fmt.Sprintf(format, args...), err: ErrInvalid}
				}, i)
				if err != nil {
					return nil, err
				}
				p.Budgets = append(p.Budgets, b)
			}
		default:
			return nil, fail(-1, k, "unknown setting %q (want default, mode, [defaults], [[rule]] or [[budget]])", k)
		}
	}
	if pr := p.validate(); pr != nil {
		if pr.budget {
			return nil, &ParseError{Line: lines.findBudget(pr.rule, pr.key), Msg: pr.msg, err: ErrInvalid}
		}
		return nil, fail(pr.rule, pr.key, "%s", pr.msg)
	}
	return p, nil
}

func parseRule(t map[string]any, fail func(key, format string, args ...any) error, i int) (Rule, error) {
	var r Rule
	name := fmt.Sprintf("rule %d", i+1)
	if id, ok := t["id"].(string); ok && id != "" {
		name = fmt.Sprintf("rule %q", id)
	}
	str := func(key string) (string, error) {
		v, ok := t[key]
		if !ok {
			return "", nil
		}
		s, ok := v.(string)
		if !ok {
			return "", fail(key, "%s: %s: want a string, not %s", name, key, tomlType(v))
		}
		return s, nil
	}
	for _, k := range slices.Sorted(maps.Keys(t)) {
		var err error
		switch k {
		case "id":
			r.ID, err = str(k)
		case "capability":
			r.Capability, err = str(k)
		case "client":
			r.Client, err = str(k)
		case "note":
			r.Note, err = str(k)
		case "mode":
			if r.Mode, err = parseMode(t[k]); err != nil {
				err = fail(k, "%s: mode: %v", name, err)
			}
		case "secrets":
			list, ok := t[k].([]any)
			if !ok {
				return r, fail(k, "%s: secrets: want a list of secret ids, not %s", name, tomlType(t[k]))
			}
			for _, v := range list {
				id, ok := v.(string)
				if !ok {
					return r, fail(k, "%s: secrets: want secret ids (strings), not %s", name, tomlType(v))
				}
				r.Secrets = append(r.Secrets, id)
			}
		case "risk":
			var s string
			if s, err = str(k); err == nil {
				if r.Risk, err = ParseRisk(s); err != nil {
					err = fail(k, "%s: %v", name, err)
				}
			}
		case "decision":
			var s string
			if s, err = str(k); err == nil {
				if r.Decision, err = ParseDecision(s); err != nil {
					err = fail(k, "%s: %v", name, err)
				}
			}
		case "args":
			tables, ok := tableArray(t[k])
			if !ok {
				return r, fail(k, "%s: args: want a list of tables ({ arg = \"path\", under = \"/folder\" }), not %s", name, tomlType(t[k]))
			}
			for j, at := range tables {
				a, err := parseArg(at, func(key, format string, args ...any) error {
					return fail(key, "%s: argument constraint %d: %s", name, j+1, fmt.Sprintf(format, args...))
				})
				if err != nil {
					return r, err
				}
				r.Args = append(r.Args, a)
			}
		default:
			err = fail(k, "%s: unknown setting %q (want id, capability, client, risk, decision, note, secrets or args)", name, k)
		}
		if err != nil {
			return r, err
		}
	}
	return r, nil
}

func parseArg(t map[string]any, fail func(key, format string, args ...any) error) (ArgConstraint, error) {
	var a ArgConstraint
	for _, k := range slices.Sorted(maps.Keys(t)) {
		s, ok := t[k].(string)
		if !ok {
			return a, fail(k, "%s: want a string, not %s", k, tomlType(t[k]))
		}
		switch k {
		case "arg":
			a.Arg = s
		case "under":
			a.Under = s
			if clean, err := cleanUnder(s); err == nil {
				a.Under = clean
			}
		case "equals":
			a.Equals = s
		case "matches":
			a.Matches = s
		default:
			return a, fail(k, "unknown setting %q (want arg, under, equals or matches)", k)
		}
	}
	return a, nil
}

func tableArray(v any) ([]map[string]any, bool) {
	switch v := v.(type) {
	case []map[string]any:
		return v, true
	case []any:
		out := make([]map[string]any, len(v))
		for i, e := range v {
			t, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out[i] = t
		}
		return out, true
	}
	return nil, false
}

func tomlType(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "a number"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any, []any:
		return "a list"
	}
	return fmt.Sprintf("a %T", v)
}

// A locator finds the line of a setting in a policy's text, for errors: the
// decoded TOML keeps no positions. It knows where each [[rule]] starts.
type locator struct {
	lines [][]byte
	rules []int // index into lines of each [[rule]] header
}

var (
	budgetHeaderRE = regexp.MustCompile(`^\s*\[\[\s*budget\s*\]\]`)
	ruleHeaderRE   = regexp.MustCompile(`^\s*\[\[\s*rule\s*\]\]`)
	anyHeaderRE    = regexp.MustCompile(`^\s*\[`)
)

func newLocator(data []byte) *locator {
	l := &locator{lines: bytes.Split(data, []byte("\n"))}
	for i, line := range l.lines {
		if ruleHeaderRE.Match(line) {
			l.rules = append(l.rules, i)
		}
	}
	return l
}

// find returns the 1-based line of the first of keys found in rule (or
// outside the rules, for rule -1), else the rule's header line, else 0.
func (l *locator) find(rule int, keys ...string) int {
	for _, key := range keys {
		if n := l.findKey(rule, key); n > 0 {
			return n
		}
	}
	if rule >= 0 && rule < len(l.rules) {
		return l.rules[rule] + 1
	}
	return 0
}

// findBudget returns the 1-based line of key in the budget-th [[budget]]
// table, else of the table's header, else 0.
func (l *locator) findBudget(budget int, key string) int {
	keyRE := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*=`)
	current, seen, header := -1, 0, 0
	for i, line := range l.lines {
		switch {
		case budgetHeaderRE.Match(line):
			current = seen
			seen++
			if current == budget {
				header = i + 1
			}
			continue
		case anyHeaderRE.Match(line):
			current = -1
		}
		if current == budget && keyRE.Match(line) {
			return i + 1
		}
	}
	return header
}

func (l *locator) findKey(rule int, key string) int {
	k := regexp.QuoteMeta(key)
	keyRE := regexp.MustCompile(`^\s*"?` + k + `"?\s*=|^\s*\[\s*` + k + `\s*\]|^\s*\[\[\s*rule\.` + k + `\s*\]\]`)
	current, seen := -1, 0 // the rule the line is in (-1 outside the rules); rules so far
	for i, line := range l.lines {
		switch {
		case ruleHeaderRE.Match(line):
			current = seen
			seen++
			continue
		case anyHeaderRE.Match(line) && !bytes.Contains(line, []byte("rule.")):
			current = -1 // [defaults], say, after the rules
		}
		if keyRE.Match(line) && current == rule {
			return i + 1
		}
	}
	return 0
}

// Format returns p's canonical text: the settings in a fixed order, strings
// quoted one way, no comments. [Parse] reads it back to an equal policy
// (Version aside), and [Policy.Hash] covers it.
func (p *Policy) Format() []byte {
	var b bytes.Buffer
	d := p.Default
	if d == "" {
		d = ApprovalRequired
	}
	fmt.Fprintf(&b, "default = %s\n", tomltext.Quote(canonDecision(d)))
	if p.Mode != Enforce {
		fmt.Fprintf(&b, "mode = %s\n", tomltext.Quote(string(p.Mode)))
	}
	if len(p.Defaults) > 0 {
		b.WriteString("\n[defaults]\n")
		for _, r := range Risks {
			if d, ok := p.Defaults[r]; ok {
				fmt.Fprintf(&b, "%s = %s\n", r, tomltext.Quote(canonDecision(d)))
			}
		}
	}
	for i := range p.Rules {
		formatRule(&b, &p.Rules[i])
	}
	var budgets strings.Builder
	for _, bu := range p.Budgets {
		formatBudget(&budgets, bu)
	}
	b.WriteString(budgets.String())
	return b.Bytes()
}

// FormatRules returns rules as [[rule]] tables of the canonical text, as
// [Policy.Format] writes them.
func FormatRules(rules []Rule) []byte {
	var b bytes.Buffer
	for i := range rules {
		formatRule(&b, &rules[i])
	}
	return bytes.TrimPrefix(b.Bytes(), []byte("\n"))
}

func formatRule(b *bytes.Buffer, r *Rule) {
	b.WriteString("\n[[rule]]\n")
	field := func(key, value string) {
		if value != "" {
			fmt.Fprintf(b, "%s = %s\n", key, tomltext.Quote(value))
		}
	}
	field("id", r.ID)
	field("capability", r.Capability)
	field("client", r.Client)
	field("risk", strings.ToLower(string(r.Risk)))
	field("decision", canonDecision(r.Decision))
	field("mode", string(r.Mode))
	field("note", r.Note)
	if len(r.Secrets) > 0 {
		quoted := make([]string, len(r.Secrets))
		for i, id := range r.Secrets {
			quoted[i] = tomltext.Quote(id)
		}
		fmt.Fprintf(b, "secrets = [%s]\n", strings.Join(quoted, ", "))
	}
	if len(r.Args) > 0 {
		b.WriteString("args = [\n")
		for _, a := range r.Args {
			var kv []string
			add := func(key, value string) {
				if value != "" {
					kv = append(kv, key+" = "+tomltext.Quote(value))
				}
			}
			under := a.Under
			if clean, err := cleanUnder(under); err == nil {
				under = clean
			}
			add("arg", a.Arg)
			add("under", under)
			add("equals", a.Equals)
			add("matches", a.Matches)
			fmt.Fprintf(b, "  { %s },\n", strings.Join(kv, ", "))
		}
		b.WriteString("]\n")
	}
}

// parseMode reads a mode: "observe", or "enforce" (the default, written
// as no mode at all).
func parseMode(v any) (Mode, error) {
	s, ok := v.(string)
	if !ok {
		return "", fmt.Errorf("want a string (observe or enforce), not %s", tomlType(v))
	}
	switch strings.ToLower(s) {
	case "observe":
		return Observe, nil
	case "enforce":
		return Enforce, nil
	}
	return "", fmt.Errorf("unknown mode %q (want observe or enforce)", s)
}

func canonDecision(d Decision) string {
	if c, err := ParseDecision(string(d)); err == nil {
		return string(c)
	}
	return string(d)
}

// Hash returns "sha256:<hex>" of p's canonical text ([Policy.Format]).
func (p *Policy) Hash() string {
	sum := sha256.Sum256(p.Format())
	return "sha256:" + hex.EncodeToString(sum[:])
}
