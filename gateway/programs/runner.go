package programs

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A ToolCall is a tool step to run through the gate.
type ToolCall struct {
	Program *Program
	Client  string        // the program's client: whom rules match, receipts name
	Ref     entry.Program // what the receipt records of the step
	Server  string
	Tool    string
	Args    json.RawMessage
	// Pending, when not nil, is the record of the run's step before this
	// one, not written yet: it MUST be durable before this call has any
	// effect. The gate writes it in the transaction of the call's receipt
	// ([Pending.InTx]), or on its own before it asks a person
	// ([Pending.Flush]); the runner writes it after the call if neither
	// did.
	Pending *Pending
}

// A ToolResult is what the gate and the server made of a [ToolCall].
type ToolResult struct {
	// Result is the MCP CallToolResult the server answered (redacted), when
	// the call ran.
	Result json.RawMessage
	// Denied: the policy, a person or the gate refused the call; Message
	// says why, as the model would read it.
	Denied bool
	// Pending: the call waits for a person's approval past the wait; the
	// run suspends.
	Pending bool
	Message string
	Receipt string // the receipt's entry id
}

// Tools runs tool steps as governed calls: policy, pins, approvals, a
// receipt before and an outcome after. An error means the call could not
// be decided or made (the gate is closed, the server did not start).
type Tools interface {
	Call(ctx context.Context, c ToolCall) (ToolResult, error)
}

// A Sampler asks the model of the client that ran the program (MCP
// sampling). It returns [ErrNoSampling] when that client cannot be asked.
type Sampler interface {
	Sample(ctx context.Context, prompt string, maxTokens int) (string, error)
}

// ErrNoSampling is a client that did not declare MCP sampling.
var ErrNoSampling = errors.New("the client that ran the program did not declare MCP sampling, so an llm step cannot ask its model")

// An Answer is a person's answer at an approval step.
type Answer int

// Answers.
const (
	Approved Answer = iota
	Refused
	Waiting // nobody answered within the wait: the run suspends
)

// Checkpoints asks a person at an approval step.
type Checkpoints interface {
	Checkpoint(ctx context.Context, c ToolCall, message string) (Answer, string, error)
}

// Options configure a [Runner].
type Options struct {
	Tools Tools
	// PendingRecords says that Tools writes the record each tool call
	// carries (ToolCall.Pending) before the call has an effect, in the
	// transaction of its receipt: one commit a step. Otherwise the runner
	// writes each record before the next step, and calls carry none.
	PendingRecords bool
	Checkpoints    Checkpoints // nil: approval steps are refused
	Registered     Servers     // nil: any server name is accepted
	Now            func() time.Time
}

// A Runner runs programs and keeps their traces.
type Runner struct {
	store *Store
	opts  Options
}

// NewRunner returns a runner that keeps traces in st.
func NewRunner(st *Store, opts *Options) *Runner {
	r := &Runner{store: st}
	if opts != nil {
		r.opts = *opts
	}
	if r.opts.Now == nil {
		r.opts.Now = time.Now
	}
	return r
}

// Store returns the runner's store.
func (r *Runner) Store() *Store { return r.store }

// RunOptions are one run's.
type RunOptions struct {
	Client string // the MCP client that asked for the run
	// Key, when set, makes the run idempotent: a second run with the same
	// key returns the first's trace (continued if it was suspended would
	// need resume_program), across restarts.
	Key     string
	Sampler Sampler // nil: llm steps fail with ErrNoSampling
}

// Parse reads a program, checking tool servers against the registered ones.
func (r *Runner) Parse(body []byte) (*Program, error) {
	return Parse(body, r.opts.Registered)
}

// Run parses body, saves the program under its name with its new run,
// and runs it. A
// program that does not parse returns an error wrapping [ErrInvalid], and
// nothing runs. With a key already used, the trace of that run is returned
// as it is.
func (r *Runner) Run(ctx context.Context, body []byte, ro RunOptions) (*Trace, error) {
	p, err := r.Parse(body)
	if err != nil {
		return nil, err
	}
	if ro.Key != "" {
		if t, err := r.store.TraceByKey(ctx, ro.Key); err == nil {
			return t, nil
		}
	}
	t := &Trace{ID: newTraceID(), Key: ro.Key, Client: ro.Client, Name: p.Name, Hash: p.Hash(), Body: body, Status: StatusRunning}
	existing, err := r.store.start(ctx, p, t, p.Steps[0].Kind != KindTool)
	if err != nil {
		return nil, err
	}
	if existing {
		return r.store.TraceByKey(ctx, ro.Key)
	}
	return t, r.execute(ctx, p, t, &live{r: r, ro: ro})
}

// Resume continues a suspended run from the step it waits at.
func (r *Runner) Resume(ctx context.Context, id string, ro RunOptions) (*Trace, error) {
	t, err := r.store.Trace(ctx, id)
	if err != nil {
		return nil, err
	}
	if t.Status != StatusSuspended {
		return t, fmt.Errorf("trace %s is %s: only a SUSPENDED run can be resumed", id, t.Status)
	}
	p, err := r.Parse(t.Body)
	if err != nil {
		return nil, err
	}
	if ro.Client == "" {
		ro.Client = t.Client
	}
	t.Status, t.Error = StatusRunning, ""
	if err := r.store.setState(ctx, t); err != nil {
		return nil, err
	}
	return t, r.execute(ctx, p, t, &live{r: r, ro: ro})
}

// outcome is what an external step (tool, llm, approval) came to.
type outcome struct {
	status  string // StepOK, StepDenied, StepPending, or StepError for a failure
	output  any
	message string
	receipt string
}

// effects runs a step's outside part: live, or from a trace (replay).
type effects interface {
	external(ctx context.Context, p *Program, t *Trace, seq int, s Step, input json.RawMessage) outcome
	record(ctx context.Context, t *Trace, rec StepRecord, sync bool) error
	state(ctx context.Context, t *Trace) error
}

// execute runs p from t.Position until it ends, suspends or stops.
func (r *Runner) execute(ctx context.Context, p *Program, t *Trace, fx effects) error {
	maxSteps, maxStalled := p.Budget.MaxSteps, p.Budget.MaxStalled
	if maxSteps == 0 {
		maxSteps = DefaultMaxSteps
	}
	if maxStalled == 0 {
		maxStalled = DefaultMaxStalled
	}
	outputs := map[string]any{}
	prev := p.Hash()
	attempts := 0
	for _, rec := range t.Steps {
		prev = rec.Hash
		if rec.Status == StepOK || rec.Status == StepSkipped {
			var v any
			if err := decode(rec.Output, &v); err == nil {
				outputs[rec.Step] = v
			}
		}
	}
	if n := len(t.Steps); n > 0 && t.Steps[n-1].Status == StepError {
		for i := n - 1; i >= 0 && t.Steps[i].Step == t.Steps[n-1].Step && t.Steps[i].Status == StepError; i-- {
			attempts++
		}
	}
	index := map[string]int{}
	for i, s := range p.Steps {
		index[s.Name] = i
	}
	finish := func(status, why string) error {
		t.Status, t.Error = status, why
		return fx.state(context.WithoutCancel(ctx), t)
	}
	for t.Position < len(p.Steps) {
		if err := ctx.Err(); err != nil {
			return finish(StatusSuspended, "the run was interrupted: "+err.Error())
		}
		seq := len(t.Steps) + 1
		if seq > maxSteps {
			return finish(StatusBudgetExceeded, fmt.Sprintf("the program ran %d steps, its budget (max_steps %d)", seq-1, maxSteps))
		}
		s := p.Steps[t.Position]
		rec := StepRecord{Seq: seq, Step: s.Name, Kind: s.Kind, At: r.opts.Now()}
		var o outcome
		switch s.Kind {
		case KindCondition:
			ok, err := evalCondition(p.conds[s.Name], outputs)
			if err != nil {
				o = outcome{status: StepError, message: fmt.Sprintf("condition %s", err)}
			} else {
				o = outcome{status: StepOK, output: map[string]any{"value": ok}}
				rec.Next = s.Else
				if ok {
					rec.Next = s.Then
				}
			}
		default:
			input, err := resolveInput(s, outputs)
			if err != nil {
				o = outcome{status: StepError, message: err.Error()}
			} else {
				rec.Input = input
				o = fx.external(ctx, p, t, seq, s, input)
			}
			if o.status == StepOK {
				rec.Next = s.Next
			}
		}
		rec.Message, rec.Receipt = o.message, o.receipt
		if o.output != nil {
			b, err := json.Marshal(o.output)
			if err != nil {
				return err
			}
			rec.Output = b
		}
		status, next := "", -1
		switch o.status {
		case StepOK:
			rec.Status, attempts = StepOK, 0
			outputs[s.Name] = o.output
		case StepDenied:
			rec.Status, status = StepDenied, StatusFailed
		case StepPending:
			rec.Status, status = StepPending, StatusSuspended
		default:
			attempts++
			switch {
			case s.OnError == "retry" && attempts <= max(s.Retries, 1):
				rec.Status, next = StepError, t.Position
				t.Stalled++
			case s.OnError == "skip":
				rec.Status, attempts = StepSkipped, 0
				rec.Output = json.RawMessage(`{"skipped":true}`)
				outputs[s.Name] = map[string]any{"skipped": true}
				t.Stalled++
			default:
				rec.Status, status = StepFailed, StatusFailed
			}
		}
		if next < 0 && status == "" {
			next = t.Position + 1
			if rec.Next == End {
				next = len(p.Steps)
			} else if rec.Next != "" {
				next = index[rec.Next]
			}
		}
		rec.Hash = stateHash(prev, rec)
		prev = rec.Hash
		if next >= 0 {
			t.Position = next
		}
		if status != "" {
			t.Status, t.Error = status, fmt.Sprintf("step %s (%d): %s", s.Name, seq, o.message)
		}
		if status == "" && t.Stalled > maxStalled {
			t.Status, t.Error = StatusStalled, fmt.Sprintf("%d steps made no progress, over the budget (max_stalled %d); the last, %s: %s", t.Stalled, maxStalled, s.Name, o.message)
		}
		t.Steps = append(t.Steps, rec)
		// The record must be durable before the next step has an effect:
		// a tool step's receipt, flushed before its call, flushes it too.
		sync := t.Status != StatusRunning || t.Position >= len(p.Steps) || p.Steps[t.Position].Kind != KindTool
		if err := fx.record(context.WithoutCancel(ctx), t, rec, sync); err != nil {
			return err
		}
		if t.Status != StatusRunning {
			return nil
		}
	}
	return finish(StatusSuccess, "")
}

// stateHash is the hash of the run's state after rec: the state before it
// and what the step did, without the times and receipt ids that differ
// from run to run.
func stateHash(prev string, rec StepRecord) string {
	in, _ := canonicalJSON(orNull(rec.Input))
	out, _ := canonicalJSON(orNull(rec.Output))
	b, _ := json.Marshal([]any{"gatehouse program state 1", prev, rec.Seq, rec.Step, rec.Kind, rec.Status,
		json.RawMessage(in), json.RawMessage(out), rec.Next})
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

func orNull(b json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return json.RawMessage("null")
	}
	return b
}

func decode(b json.RawMessage, v any) error {
	dec := json.NewDecoder(strings.NewReader(string(orNull(b))))
	dec.UseNumber()
	return dec.Decode(v)
}

// resolveInput is a step's input with its references replaced: a tool's
// arguments, an llm step's prompt or an approval step's message (as JSON
// strings).
func resolveInput(s Step, outputs map[string]any) (json.RawMessage, error) {
	switch s.Kind {
	case KindTool:
		if len(s.Args) == 0 {
			return json.RawMessage("{}"), nil
		}
		var v any
		if err := decode(s.Args, &v); err != nil {
			return nil, err
		}
		v, err := resolveValue(v, outputs)
		if err != nil {
			return nil, err
		}
		return json.Marshal(v)
	case KindLLM, KindApproval:
		text := s.Prompt
		if s.Kind == KindApproval {
			text = s.Message
		}
		out, err := interpolate(text, outputs)
		if err != nil {
			return nil, err
		}
		return json.Marshal(out)
	}
	return nil, nil
}

var wholeRef = regexp.MustCompile(`^` + refPattern.String() + `$`)

func resolveValue(v any, outputs map[string]any) (any, error) {
	switch x := v.(type) {
	case string:
		if m := wholeRef.FindStringSubmatch(x); m != nil {
			return lookup(outputs, m[1], m[2])
		}
		if strings.Contains(x, "${steps.") {
			return interpolate(x, outputs)
		}
		return x, nil
	case []any:
		for i := range x {
			r, err := resolveValue(x[i], outputs)
			if err != nil {
				return nil, err
			}
			x[i] = r
		}
		return x, nil
	case map[string]any:
		for k, e := range x {
			r, err := resolveValue(e, outputs)
			if err != nil {
				return nil, err
			}
			x[k] = r
		}
		return x, nil
	}
	return v, nil
}

func interpolate(text string, outputs map[string]any) (string, error) {
	var err error
	out := refPattern.ReplaceAllStringFunc(text, func(ref string) string {
		m := refPattern.FindStringSubmatch(ref)
		v, e := lookup(outputs, m[1], m[2])
		if e != nil {
			err = e
			return ""
		}
		if s, ok := v.(string); ok {
			return s
		}
		b, _ := json.Marshal(v)
		return string(b)
	})
	return out, err
}

// lookup reads ${steps.step.path}.
func lookup(outputs map[string]any, step, path string) (any, error) {
	v, ok := outputs[step]
	if !ok {
		return nil, fmt.Errorf("${steps.%s%s}: step %s has no output (it did not run)", step, path, step)
	}
	for _, name := range strings.Split(strings.TrimPrefix(path, "."), ".") {
		if name == "" {
			continue
		}
		switch x := v.(type) {
		case map[string]any:
			if v, ok = x[name]; !ok {
				return nil, fmt.Errorf("${steps.%s%s}: no member %q", step, path, name)
			}
		case []any:
			i, err := strconv.Atoi(name)
			if err != nil || i < 0 || i >= len(x) {
				return nil, fmt.Errorf("${steps.%s%s}: no element %q", step, path, name)
			}
			v = x[i]
		default:
			return nil, fmt.Errorf("${steps.%s%s}: %q is not in a value without members", step, path, name)
		}
	}
	return v, nil
}

// live runs a step's outside part for real.
type live struct {
	r       *Runner
	ro      RunOptions
	pending *Pending // the last step's record, left to the next tool step's receipt
}

// record writes rec, after the record before it. A record that a tool
// step follows is left to that step's receipt (ToolCall.Pending).
func (l *live) record(ctx context.Context, t *Trace, rec StepRecord, sync bool) error {
	if err := l.flush(ctx); err != nil {
		return err
	}
	if !sync && l.r.opts.PendingRecords && l.r.opts.Tools != nil {
		l.pending = l.r.store.pending(t, rec)
		return nil
	}
	return l.r.store.appendStep(ctx, t, rec, sync)
}

func (l *live) state(ctx context.Context, t *Trace) error {
	if err := l.flush(ctx); err != nil {
		return err
	}
	return l.r.store.setState(ctx, t)
}

// flush writes the record left to a receipt, if no receipt took it.
func (l *live) flush(ctx context.Context) error {
	p := l.pending
	l.pending = nil
	if p == nil {
		return nil
	}
	return p.Flush(ctx)
}

func (l *live) external(ctx context.Context, p *Program, t *Trace, seq int, s Step, input json.RawMessage) outcome {
	call := ToolCall{Program: p, Client: l.ro.Client, Server: s.Server, Tool: s.Tool, Args: input,
		Ref: entry.Program{Name: p.Name, Hash: p.Hash(), Trace: t.ID, Step: s.Name, Seq: seq}}
	switch s.Kind {
	case KindTool:
		if l.r.opts.Tools == nil {
			return outcome{status: StepError, message: "no tools are reachable"}
		}
		call.Pending = l.pending
		res, err := l.r.opts.Tools.Call(ctx, call)
		switch {
		case err != nil:
			return outcome{status: StepError, message: err.Error()}
		case res.Denied:
			return outcome{status: StepDenied, message: res.Message, receipt: res.Receipt}
		case res.Pending:
			return outcome{status: StepPending, message: res.Message, receipt: res.Receipt}
		}
		out, isErr, pending := toolOutput(res.Result)
		o := outcome{status: StepOK, output: out, receipt: res.Receipt}
		switch {
		case pending:
			o.status, o.message = StepPending, "the tool answered that its work is pending"
		case isErr:
			o.status, o.message = StepError, "the tool answered with an error: "+cut(out["text"], 500)
		}
		return o
	case KindLLM:
		var prompt string
		json.Unmarshal(input, &prompt)
		if l.ro.Sampler == nil {
			return outcome{status: StepError, message: ErrNoSampling.Error()}
		}
		maxTokens := s.MaxTokens
		if maxTokens == 0 {
			maxTokens = 256
		}
		text, err := l.ro.Sampler.Sample(ctx, prompt, maxTokens)
		if err != nil {
			return outcome{status: StepError, message: err.Error()}
		}
		text = strings.TrimSpace(text)
		if !slices.Contains(s.AllowedOutputs, text) {
			return outcome{status: StepError, message: fmt.Sprintf("the model answered %q, not one of the allowed outputs (%s)", cut(text, 200), strings.Join(s.AllowedOutputs, ", "))}
		}
		return outcome{status: StepOK, output: map[string]any{"text": text}}
	case KindApproval:
		var msg string
		json.Unmarshal(input, &msg)
		if l.r.opts.Checkpoints == nil {
			return outcome{status: StepDenied, message: "no approver can be asked"}
		}
		ans, why, err := l.r.opts.Checkpoints.Checkpoint(ctx, call, msg)
		switch {
		case err != nil:
			return outcome{status: StepError, message: err.Error()}
		case ans == Waiting:
			return outcome{status: StepPending, message: why}
		case ans == Refused:
			return outcome{status: StepDenied, message: why}
		}
		return outcome{status: StepOK, output: map[string]any{"approved": true}}
	}
	return outcome{status: StepError, message: "unknown kind " + s.Kind}
}

func cut(v any, n int) string {
	s := fmt.Sprint(v)
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// toolOutput is a tool step's output from the server's CallToolResult:
// its text, its structured content when it gave one, and whether it is an
// error; pending when the structured content says {"status": "pending"}.
func toolOutput(result json.RawMessage) (out map[string]any, isErr, pending bool) {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		Structured any  `json:"structuredContent"`
		IsError    bool `json:"isError"`
	}
	dec := json.NewDecoder(strings.NewReader(string(orNull(result))))
	dec.UseNumber()
	dec.Decode(&r)
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	out = map[string]any{"text": strings.Join(texts, "\n"), "is_error": r.IsError}
	if r.Structured != nil {
		out["structured"] = r.Structured
		if m, ok := r.Structured.(map[string]any); ok && m["status"] == "pending" {
			pending = true
		}
	}
	return out, r.IsError, pending
}
