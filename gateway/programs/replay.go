package programs

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// A ReplayReport says whether a trace, run again against its recorded
// results, makes the same transitions.
type ReplayReport struct {
	Trace   string
	Steps   int  // steps replayed
	Matched bool // every transition the same, and the same end
	Diffs   []Diff
	Status  string // the replay's end
	Took    time.Duration
}

// A Diff is the first place a replay went another way than the trace.
type Diff struct {
	Seq  int
	Step string
	Why  string
}

// Replay runs trace id's program again, answering each tool, llm and
// approval step with the result the trace recorded and evaluating
// everything else (arguments, conditions, jumps, budgets) anew, and
// compares each step's state hash with the recorded one. A recorded result
// edited after the run changes the hash of its step.
func (r *Runner) Replay(ctx context.Context, id string) (*ReplayReport, error) {
	start := time.Now()
	t, err := r.store.Trace(ctx, id)
	if err != nil {
		return nil, err
	}
	p, err := Parse(t.Body, nil)
	if err != nil {
		return nil, fmt.Errorf("trace %s: its program no longer parses: %w", id, err)
	}
	rep := &ReplayReport{Trace: id}
	nt := &Trace{ID: t.ID, Client: t.Client, Name: t.Name, Hash: t.Hash, Body: t.Body, Status: StatusRunning}
	fx := &replayer{recorded: t.Steps, rep: rep}
	if err := r.execute(ctx, p, nt, fx); err != nil {
		return nil, err
	}
	// A run that suspended and was resumed goes on in the trace after the
	// step it waited at: the replay resumes there too, as Resume did.
	for nt.Status == StatusSuspended && len(nt.Steps) < len(t.Steps) && len(rep.Diffs) == 0 {
		nt.Status, nt.Error = StatusRunning, ""
		if err := r.execute(ctx, p, nt, fx); err != nil {
			return nil, err
		}
	}
	rep.Steps, rep.Status = len(nt.Steps), nt.Status
	if len(nt.Steps) != len(t.Steps) && len(rep.Diffs) == 0 {
		rep.Diffs = append(rep.Diffs, Diff{Seq: len(nt.Steps), Why: fmt.Sprintf("the replay made %d steps, the trace %d", len(nt.Steps), len(t.Steps))})
	}
	if nt.Status != t.Status && len(rep.Diffs) == 0 && t.Status != StatusRunning {
		rep.Diffs = append(rep.Diffs, Diff{Seq: len(nt.Steps), Why: fmt.Sprintf("the replay ended %s, the trace %s", nt.Status, t.Status)})
	}
	rep.Matched = len(rep.Diffs) == 0
	rep.Took = time.Since(start)
	return rep, nil
}

// replayer answers steps from a trace and compares what the replay records.
type replayer struct {
	recorded []StepRecord
	rep      *ReplayReport
}

func (x *replayer) external(_ context.Context, _ *Program, _ *Trace, seq int, s Step, input json.RawMessage) outcome {
	if seq > len(x.recorded) {
		return outcome{status: StepError, message: "the trace has no result recorded for this step"}
	}
	rec := x.recorded[seq-1]
	o := outcome{message: rec.Message, receipt: rec.Receipt}
	if len(rec.Output) > 0 {
		var v any
		if err := decode(rec.Output, &v); err == nil {
			o.output = v
		}
	}
	switch rec.Status {
	case StepOK, StepDenied, StepPending:
		o.status = rec.Status
	default:
		o.status = StepError
	}
	return o
}

func (x *replayer) record(_ context.Context, _ *Trace, rec StepRecord, _ bool) error {
	if len(x.rep.Diffs) > 0 {
		return nil // the first difference is the one that counts
	}
	if rec.Seq > len(x.recorded) {
		x.rep.Diffs = append(x.rep.Diffs, Diff{Seq: rec.Seq, Step: rec.Step, Why: "the replay went on past the end of the trace"})
		return nil
	}
	want := x.recorded[rec.Seq-1]
	switch {
	case want.Step != rec.Step:
		x.rep.Diffs = append(x.rep.Diffs, Diff{Seq: rec.Seq, Step: rec.Step, Why: fmt.Sprintf("the replay ran step %s where the trace ran %s", rec.Step, want.Step)})
	case want.Status != rec.Status:
		x.rep.Diffs = append(x.rep.Diffs, Diff{Seq: rec.Seq, Step: rec.Step, Why: fmt.Sprintf("the step ended %s, the trace says %s", rec.Status, want.Status)})
	case want.Next != rec.Next:
		x.rep.Diffs = append(x.rep.Diffs, Diff{Seq: rec.Seq, Step: rec.Step, Why: fmt.Sprintf("the step went on to %q, the trace to %q", rec.Next, want.Next)})
	case want.Hash != rec.Hash:
		x.rep.Diffs = append(x.rep.Diffs, Diff{Seq: rec.Seq, Step: rec.Step, Why: "the state after the step differs from the recorded one (its input or recorded result is not what the run hashed)"})
	}
	return nil
}

func (x *replayer) state(context.Context, *Trace) error { return nil }

// View is what the model reads of a run: statuses and outputs, never
// hashes, receipts' contents, policy, signatures or other calls.
type View struct {
	Trace     string     `json:"trace"`
	Program   string     `json:"program"`
	Status    string     `json:"status"`
	Error     string     `json:"error,omitempty"`
	StepCount int        `json:"step_count"`
	Steps     []StepView `json:"steps"`
}

// StepView is one attempt of a step, as the model reads it.
type StepView struct {
	Seq    int    `json:"seq"`
	Step   string `json:"step"`
	Kind   string `json:"kind"`
	Status string `json:"status"`
	// Output is any JSON value: a json.RawMessage here would be described
	// to clients as an array of bytes, which the output schema then refuses.
	Output  any    `json:"output,omitempty"`
	Message string `json:"message,omitempty"`
}

// Project is the model's view of t.
func Project(t *Trace) View {
	v := View{Trace: t.ID, Program: t.Name, Status: t.Status, Error: t.Error, StepCount: len(t.Steps), Steps: []StepView{}}
	for _, s := range t.Steps {
		sv := StepView{Seq: s.Seq, Step: s.Step, Kind: s.Kind, Status: s.Status, Message: s.Message}
		if len(s.Output) > 0 {
			var out any
			if err := decode(s.Output, &out); err == nil {
				sv.Output = out
			}
		}
		v.Steps = append(v.Steps, sv)
	}
	return v
}
