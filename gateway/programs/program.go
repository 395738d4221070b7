package programs

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/expr-lang/expr/vm"
)

// Limits of a program.
const (
	// MaxProgramBytes bounds a program as submitted.
	MaxProgramBytes = 256 << 10
	// MaxSteps bounds the steps a program declares.
	MaxSteps = 200
	// DefaultMaxSteps is the default step budget of one run: steps run,
	// attempts of retried steps included.
	DefaultMaxSteps = 100
	// DefaultMaxStalled is the default budget of stalled steps: attempts
	// that made no progress (an error retried or skipped).
	DefaultMaxStalled = 3
	// MaxRetries bounds on_error "retry".
	MaxRetries = 5
)

// Step kinds.
const (
	KindTool      = "tool"
	KindCondition = "condition"
	KindLLM       = "llm"
	KindApproval  = "approval"
)

// End, as a step's next, then or else, ends the run.
const End = "end"

// A Program is a governed program as submitted: named steps, run in order
// unless a step says where to go next.
type Program struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	Budget      Budget `json:"budget,omitzero"`
	Steps       []Step `json:"steps"`

	conds map[string]*vm.Program // compiled conditions, by step name
	hash  string
}

// Budget bounds one run of a program.
type Budget struct {
	MaxSteps   int `json:"max_steps,omitempty"`   // attempts in all; DefaultMaxSteps when 0
	MaxStalled int `json:"max_stalled,omitempty"` // attempts without progress; DefaultMaxStalled when 0
}

// A Step is one step of a program. Which fields it may have depends on its
// kind; any other is an error.
type Step struct {
	Name string `json:"name"`
	Kind string `json:"kind"`

	// tool: a tool of a registered server. Args are JSON; a string that is
	// wholly ${steps.NAME.PATH} is replaced by that value of an earlier
	// step's output, one that holds such references has them replaced by
	// their text; vault://secret/ID is passed on for the gate to resolve
	// where a rule binds it.
	Server string          `json:"server,omitempty"`
	Tool   string          `json:"tool,omitempty"`
	Args   json.RawMessage `json:"args,omitempty"`

	// condition: If is an expression over earlier outputs (steps.NAME...)
	// that must be true or false; Then and Else name the step to go to
	// (a later one, or "end"); empty means the step that follows.
	If   string `json:"if,omitempty"`
	Then string `json:"then,omitempty"`
	Else string `json:"else,omitempty"`

	// llm: Prompt (with ${steps...} references) is sent to the client's
	// model; its answer, trimmed, must be one of AllowedOutputs.
	Prompt         string   `json:"prompt,omitempty"`
	AllowedOutputs []string `json:"allowed_outputs,omitempty"`
	MaxTokens      int      `json:"max_tokens,omitempty"`

	// approval: Message (with ${steps...} references) is shown to a person,
	// who lets the run go on or stops it.
	Message string `json:"message,omitempty"`

	// Next names the step that follows this one (a later one, or "end");
	// empty means the next in order. Not for a condition.
	Next string `json:"next,omitempty"`
	// OnError is what a step that fails does: "fail" (the default: the
	// run fails), "skip" (its output is {"skipped": true} and the run goes
	// on) or "retry" (up to Retries more attempts, then fail). A denial by
	// the policy or a person always stops the run.
	OnError string `json:"on_error,omitempty"`
	Retries int    `json:"retries,omitempty"`
}

// An Error is a program that cannot run: Step names the step at fault
// (empty when the fault is the program's).
type Error struct {
	Step string
	Msg  string
}

func (e *Error) Error() string {
	if e.Step == "" {
		return "program: " + e.Msg
	}
	return fmt.Sprintf("program: step %q: %s", e.Step, e.Msg)
}

// ErrInvalid is wrapped by every error of [Parse].
var ErrInvalid = errors.New("invalid program")

func (e *Error) Unwrap() error { return ErrInvalid }

func stepErr(step, format string, args ...any) error {
	return &Error{Step: step, Msg: fmt.Sprintf(format, args...)}
}

// Servers reports whether a server is registered.
type Servers func(name string) bool

var (
	namePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]{0,63}$`)
	// refPattern is a reference to an earlier output: ${steps.NAME.PATH}.
	refPattern = regexp.MustCompile(`\$\{steps\.([A-Za-z][A-Za-z0-9_-]{0,63})((?:\.[A-Za-z0-9_-]+)*)\}`)
)

// Parse reads a program strictly, once: one JSON object of at most
// [MaxProgramBytes], no unknown field and no field its step's kind does not
// take, names unique, every reference to an earlier step, every jump
// forward (no cycle), every condition compiled and within its cost, every
// tool on a server that registered reports. Nothing of a program that
// does not parse runs.
func Parse(b []byte, registered Servers) (*Program, error) {
	if len(b) > MaxProgramBytes {
		return nil, &Error{Msg: fmt.Sprintf("%d bytes is over the limit of %d", len(b), MaxProgramBytes)}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var p Program
	if err := dec.Decode(&p); err != nil {
		return nil, fieldError(err, b)
	}
	if dec.More() {
		return nil, &Error{Msg: "more than one JSON value"}
	}
	if err := p.validate(registered); err != nil {
		return nil, err
	}
	canon, err := p.canonical()
	if err != nil {
		return nil, &Error{Msg: err.Error()}
	}
	sum := sha256.Sum256(canon)
	p.hash = "sha256:" + hex.EncodeToString(sum[:])
	return &p, nil
}

// fieldError names the step an unknown field is in, when it can.
func fieldError(err error, b []byte) error {
	f, ok := strings.CutPrefix(err.Error(), "json: unknown field ")
	if !ok {
		return &Error{Msg: err.Error()}
	}
	name := strings.Trim(f, `"`)
	var loose struct {
		Steps []map[string]json.RawMessage `json:"steps"`
	}
	if json.Unmarshal(b, &loose) == nil {
		for _, s := range loose.Steps {
			if _, has := s[name]; has {
				var sn string
				json.Unmarshal(s["name"], &sn)
				return stepErr(sn, "unknown field %q", name)
			}
		}
	}
	return &Error{Msg: fmt.Sprintf("unknown field %q", name)}
}

// Hash is sha256:<hex> of the program in canonical form: what a plan
// approval is bound to.
func (p *Program) Hash() string { return p.hash }

// canonical is the program re-encoded with sorted keys and no space.
func (p *Program) canonical() ([]byte, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	return canonicalJSON(b)
}

func canonicalJSON(b []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

func (p *Program) validate(registered Servers) error {
	if !namePattern.MatchString(p.Name) {
		return &Error{Msg: fmt.Sprintf("name %q must be a letter then up to 63 letters, digits, - or _", p.Name)}
	}
	if len(p.Steps) == 0 {
		return &Error{Msg: "no steps"}
	}
	if len(p.Steps) > MaxSteps {
		return &Error{Msg: fmt.Sprintf("%d steps is over the limit of %d", len(p.Steps), MaxSteps)}
	}
	if p.Budget.MaxSteps < 0 || p.Budget.MaxStalled < 0 || p.Budget.MaxSteps > 10*DefaultMaxSteps {
		return &Error{Msg: fmt.Sprintf("budget max_steps must be from 1 to %d, max_stalled 0 or more", 10*DefaultMaxSteps)}
	}
	index := map[string]int{}
	for i, s := range p.Steps {
		if !namePattern.MatchString(s.Name) || s.Name == End {
			return stepErr(s.Name, "a step's name must be a letter then up to 63 letters, digits, - or _ (and not %q)", End)
		}
		if _, dup := index[s.Name]; dup {
			return stepErr(s.Name, "two steps have this name")
		}
		index[s.Name] = i
	}
	if registered != nil {
		// Each server is looked up once, however many steps call it.
		known, lookup := map[string]bool{}, registered
		registered = func(name string) bool {
			ok, seen := known[name]
			if !seen {
				ok = lookup(name)
				known[name] = ok
			}
			return ok
		}
	}
	p.conds = map[string]*vm.Program{}
	for i, s := range p.Steps {
		if err := p.validateStep(i, s, index, registered); err != nil {
			return err
		}
	}
	return nil
}

// fields lists the kind-specific fields a step sets.
func (s Step) fields() map[string]bool {
	return map[string]bool{
		"server": s.Server != "", "tool": s.Tool != "", "args": len(s.Args) > 0,
		"if": s.If != "", "then": s.Then != "", "else": s.Else != "",
		"prompt": s.Prompt != "", "allowed_outputs": s.AllowedOutputs != nil, "max_tokens": s.MaxTokens != 0,
		"message": s.Message != "", "next": s.Next != "",
	}
}

var kindFields = map[string][]string{
	KindTool:      {"server", "tool", "args", "next"},
	KindCondition: {"if", "then", "else"},
	KindLLM:       {"prompt", "allowed_outputs", "max_tokens", "next"},
	KindApproval:  {"message", "next"},
}

func (p *Program) validateStep(i int, s Step, index map[string]int, registered Servers) error {
	allowed, ok := kindFields[s.Kind]
	if !ok {
		return stepErr(s.Name, "unknown kind %q (tool, condition, llm or approval)", s.Kind)
	}
	for f, set := range s.fields() {
		if set && !slices.Contains(allowed, f) {
			return stepErr(s.Name, "field %q is not a field of a %s step", f, s.Kind)
		}
	}
	switch s.OnError {
	case "", "fail", "skip":
		if s.Retries != 0 {
			return stepErr(s.Name, "retries is for on_error \"retry\" only")
		}
	case "retry":
		if s.Retries < 0 || s.Retries > MaxRetries {
			return stepErr(s.Name, "retries must be from 1 to %d", MaxRetries)
		}
	default:
		return stepErr(s.Name, "on_error %q is not fail, skip or retry", s.OnError)
	}
	jump := func(field, to string) error {
		if to == "" || to == End {
			return nil
		}
		j, ok := index[to]
		switch {
		case !ok:
			return stepErr(s.Name, "%s names step %q, which does not exist", field, to)
		case j <= i:
			return stepErr(s.Name, "%s goes back to step %q: a cycle (a step may only go forward)", field, to)
		}
		return nil
	}
	refs := func(field, text string) error {
		for _, m := range refPattern.FindAllStringSubmatch(text, -1) {
			if err := earlier(s.Name, i, field, m[1], index); err != nil {
				return err
			}
		}
		if strings.Contains(strings.ReplaceAll(text, "$${", ""), "${") && !refPattern.MatchString(text) {
			return stepErr(s.Name, "%s holds a reference that is not ${steps.NAME.PATH}", field)
		}
		return nil
	}
	if err := jump("next", s.Next); err != nil {
		return err
	}
	switch s.Kind {
	case KindTool:
		if s.Server == "" || s.Tool == "" {
			return stepErr(s.Name, "a tool step needs server and tool")
		}
		if registered != nil && !registered(s.Server) {
			return stepErr(s.Name, "server %q is not registered (gatehouse server list)", s.Server)
		}
		if len(s.Args) > 0 {
			var obj map[string]json.RawMessage
			if err := json.Unmarshal(s.Args, &obj); err != nil || obj == nil {
				return stepErr(s.Name, "args must be a JSON object")
			}
			if err := refs("args", string(s.Args)); err != nil {
				return err
			}
		}
	case KindCondition:
		if s.If == "" {
			return stepErr(s.Name, "a condition step needs if")
		}
		if err := jump("then", s.Then); err != nil {
			return err
		}
		if err := jump("else", s.Else); err != nil {
			return err
		}
		prog, names, err := compileCondition(s.If)
		if err != nil {
			return stepErr(s.Name, "condition does not compile: %v", err)
		}
		for _, n := range names {
			if err := earlier(s.Name, i, "if", n, index); err != nil {
				return err
			}
		}
		if err := dryRun(prog); err != nil {
			return stepErr(s.Name, "condition %v", err)
		}
		p.conds[s.Name] = prog
	case KindLLM:
		if s.Prompt == "" {
			return stepErr(s.Name, "an llm step needs a prompt")
		}
		if len(s.AllowedOutputs) == 0 {
			return stepErr(s.Name, "an llm step needs allowed_outputs: its answer is checked against them")
		}
		if s.MaxTokens < 0 || s.MaxTokens > 4096 {
			return stepErr(s.Name, "max_tokens must be from 1 to 4096")
		}
		if err := refs("prompt", s.Prompt); err != nil {
			return err
		}
	case KindApproval:
		if s.Message == "" {
			return stepErr(s.Name, "an approval step needs a message for the person")
		}
		if err := refs("message", s.Message); err != nil {
			return err
		}
	}
	return nil
}

// earlier checks that step i's reference to step name is to a step before
// it: an output that exists by then.
func earlier(step string, i int, field, name string, index map[string]int) error {
	j, ok := index[name]
	switch {
	case !ok:
		return stepErr(step, "%s refers to step %q, which does not exist", field, name)
	case j >= i:
		return stepErr(step, "%s refers to the output of step %q, which does not exist yet at this point", field, name)
	}
	return nil
}

// ToolSteps returns the program's tool steps, in order.
func (p *Program) ToolSteps() []Step {
	var out []Step
	for _, s := range p.Steps {
		if s.Kind == KindTool {
			out = append(out, s)
		}
	}
	return out
}

// Describe is a one-line account of a step that is not a tool call, for a
// plan shown to a person.
func (s Step) Describe() string {
	switch s.Kind {
	case KindCondition:
		d := "if " + s.If
		if s.Then != "" {
			d += " then " + s.Then
		}
		if s.Else != "" {
			d += " else " + s.Else
		}
		return d
	case KindLLM:
		return fmt.Sprintf("ask the model: %q, answer one of %s", s.Prompt, strings.Join(s.AllowedOutputs, ", "))
	case KindApproval:
		return "a person's checkpoint: " + s.Message
	}
	return ""
}
