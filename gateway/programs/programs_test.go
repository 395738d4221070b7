package programs

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

func mustRunner(tb testing.TB, tools Tools) *Runner {
	tb.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	ps, err := OpenStore(ctx, st)
	if err != nil {
		tb.Fatal(err)
	}
	return NewRunner(ps, &Options{Tools: tools, Registered: func(s string) bool { return s == "fs" || s == "memory" }})
}

// fakeTools answers every call with its arguments as text, and counts.
type fakeTools struct {
	calls []ToolCall
	deny  string // a tool denied
	pend  string // a tool whose approval is pending
}

func (f *fakeTools) Call(_ context.Context, c ToolCall) (ToolResult, error) {
	f.calls = append(f.calls, c)
	switch c.Tool {
	case f.deny:
		return ToolResult{Denied: true, Message: "Gatehouse denied this call: mcp.fs." + c.Tool + " is not allowed (rule no-write). It did not run. Receipt e1.", Receipt: "e1"}, nil
	case f.pend:
		return ToolResult{Pending: true, Message: "waiting for a person"}, nil
	}
	res, _ := json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": "echo " + string(c.Args)}}})
	return ToolResult{Result: res, Receipt: fmt.Sprintf("e%d", len(f.calls))}, nil
}

func TestParseRefusesBadPrograms(t *testing.T) {
	t.Parallel()
	r := mustRunner(t, nil)
	tests := []struct {
		name, program, want string
	}{
		{"unknown kind", `{"name":"p","steps":[{"name":"a","kind":"shell"}]}`, `step "a": unknown kind "shell"`},
		{"unknown field", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t","cmd":"x"}]}`, `step "a": unknown field "cmd"`},
		{"field of another kind", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t","if":"true"}]}`, `step "a": field "if" is not a field of a tool step`},
		{"reference to a later step", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t","args":{"x":"${steps.b.text}"}},{"name":"b","kind":"tool","server":"fs","tool":"t"}]}`, `step "a": args refers to the output of step "b", which does not exist yet`},
		{"reference to no step", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t","args":{"x":"${steps.zz.text}"}}]}`, `step "a": args refers to step "zz", which does not exist`},
		{"cycle", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t"},{"name":"b","kind":"condition","if":"true","then":"a"}]}`, `step "b": then goes back to step "a": a cycle`},
		{"unregistered server", `{"name":"p","steps":[{"name":"a","kind":"tool","server":"github","tool":"t"}]}`, `step "a": server "github" is not registered`},
		{"condition does not compile", `{"name":"p","steps":[{"name":"a","kind":"condition","if":"steps.("}]}`, `step "a": condition does not compile`},
		{"condition calls a tool", `{"name":"p","steps":[{"name":"a","kind":"condition","if":"write_file('/etc/x', 'y')"}]}`, `step "a": condition does not compile`},
		{"condition calls a method", `{"name":"p","steps":[{"name":"r","kind":"tool","server":"fs","tool":"t"},{"name":"a","kind":"condition","if":"steps.r.text.Call() == nil"}]}`, `step "a": condition does not compile: calls steps.r.text.Call: only the built-in functions can be called`},
		{"condition reads the clock", `{"name":"p","steps":[{"name":"a","kind":"condition","if":"now().Year() > 2000"}]}`, `step "a": condition does not compile`},
		{"condition runs too long", `{"name":"p","steps":[{"name":"a","kind":"condition","if":"len(filter(1..100000, # % 7 == 0)) > 0"}]}`, `step "a": condition runs too long`},
		{"condition reads a later step", `{"name":"p","steps":[{"name":"a","kind":"condition","if":"steps.b.text == ''"},{"name":"b","kind":"tool","server":"fs","tool":"t"}]}`, `step "a": if refers to the output of step "b", which does not exist yet`},
		{"too large", `{"name":"p","description":"` + strings.Repeat("x", MaxProgramBytes) + `","steps":[]}`, `is over the limit of 262144`},
		{"llm without allowed outputs", `{"name":"p","steps":[{"name":"a","kind":"llm","prompt":"x"}]}`, `step "a": an llm step needs allowed_outputs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ft := &fakeTools{}
			r.opts.Tools = ft
			_, err := r.Run(context.Background(), []byte(tt.program), RunOptions{Client: "c"})
			if err == nil || !strings.Contains(err.Error(), tt.want) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Run(%s) = %v, want an error with %q", tt.name, err, tt.want)
			}
			if len(ft.calls) != 0 {
				t.Errorf("Run(%s) made %d calls, want none", tt.name, len(ft.calls))
			}
		})
	}
}

const readDecideWrite = `{"name":"notes","steps":[
 {"name":"read","kind":"tool","server":"fs","tool":"read_text_file","args":{"path":"/n/a.txt"}},
 {"name":"big","kind":"condition","if":"len(steps.read.text) > 5","then":"write","else":"end"},
 {"name":"write","kind":"tool","server":"fs","tool":"write_file","args":{"path":"/n/b.txt","content":"${steps.read.text}!"}}
]}`

func TestRunReplayAndEditedResult(t *testing.T) {
	t.Parallel()
	ft := &fakeTools{}
	r := mustRunner(t, ft)
	ctx := context.Background()
	tr, err := r.Run(ctx, []byte(readDecideWrite), RunOptions{Client: "claude-code", Key: "k1"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status != StatusSuccess || len(tr.Steps) != 3 {
		t.Fatalf("Run = %s with %d steps (%s), want SUCCESS with 3", tr.Status, len(tr.Steps), tr.Error)
	}
	if got := string(ft.calls[1].Args); !strings.Contains(got, `"content":"echo {\"path\":\"/n/a.txt\"}!"`) {
		t.Errorf("write's args = %s, want the read's text", got)
	}
	if ref := ft.calls[1].Ref; ref.Trace != tr.ID || ref.Step != "write" || ref.Seq != 3 || ref.Hash == "" {
		t.Errorf("write's ref = %+v, want trace %s, step write, seq 3", ref, tr.ID)
	}
	again, err := r.Run(ctx, []byte(readDecideWrite), RunOptions{Client: "claude-code", Key: "k1"})
	if err != nil || again.ID != tr.ID || len(ft.calls) != 2 {
		t.Fatalf("Run with the same key = %v, %v, %d calls; want trace %s and no new call", again.ID, err, len(ft.calls), tr.ID)
	}
	rep, err := r.Replay(ctx, tr.ID)
	if err != nil || !rep.Matched || rep.Steps != 3 {
		t.Fatalf("Replay = %+v, %v; want a match over 3 steps", rep, err)
	}
	// An edited recorded result is caught at its step.
	if _, err := r.store.db.Exec(`UPDATE program_steps SET output = CAST('{"text":"x","is_error":false}' AS BLOB) WHERE trace = ? AND seq = 1`, tr.ID); err != nil {
		t.Fatal(err)
	}
	rep, err = r.Replay(ctx, tr.ID)
	if err != nil || rep.Matched || len(rep.Diffs) == 0 || rep.Diffs[0].Seq != 1 {
		t.Fatalf("Replay after an edit = %+v, %v; want a difference at step 1", rep, err)
	}
	v := Project(tr)
	b, _ := json.Marshal(v)
	for _, leak := range []string{"sha256:", "receipt", "e1", "policy"} {
		if strings.Contains(string(b), leak) {
			t.Errorf("the model's view holds %q: %s", leak, b)
		}
	}
}

func TestDeniedStepStopsTheRun(t *testing.T) {
	t.Parallel()
	ft := &fakeTools{deny: "write_file"}
	r := mustRunner(t, ft)
	p := `{"name":"p","steps":[
	 {"name":"a","kind":"tool","server":"fs","tool":"read_text_file"},
	 {"name":"b","kind":"tool","server":"fs","tool":"list_directory","on_error":"skip"},
	 {"name":"c","kind":"tool","server":"fs","tool":"write_file","on_error":"skip"},
	 {"name":"d","kind":"tool","server":"fs","tool":"read_text_file"}]}`
	tr, err := r.Run(context.Background(), []byte(p), RunOptions{Client: "c"})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Status != StatusFailed || len(tr.Steps) != 3 || tr.Steps[2].Status != StepDenied || len(ft.calls) != 3 {
		t.Fatalf("Run = %s, %d steps, %d calls; want FAILED at step 3 with no call after", tr.Status, len(tr.Steps), len(ft.calls))
	}
	if !strings.Contains(tr.Error, "Gatehouse denied this call") {
		t.Errorf("Error = %q, want the gate's disclosure", tr.Error)
	}
}

func TestBudgetsAndSuspend(t *testing.T) {
	t.Parallel()
	ft := &fakeTools{pend: "slow"}
	r := mustRunner(t, ft)
	ctx := context.Background()
	var steps []string
	for i := range 6 {
		steps = append(steps, fmt.Sprintf(`{"name":"s%d","kind":"tool","server":"fs","tool":"t"}`, i))
	}
	tr, err := r.Run(ctx, []byte(`{"name":"p","budget":{"max_steps":4},"steps":[`+strings.Join(steps, ",")+`]}`), RunOptions{})
	if err != nil || tr.Status != StatusBudgetExceeded || len(ft.calls) != 4 {
		t.Fatalf("Run = %v, %v, %d calls; want BUDGET_EXCEEDED after 4", tr.Status, err, len(ft.calls))
	}
	tr, err = r.Run(ctx, []byte(`{"name":"q","budget":{"max_stalled":2},"steps":[{"name":"x","kind":"condition","if":"steps.y == 1"},{"name":"y","kind":"tool","server":"fs","tool":"t"}]}`), RunOptions{})
	if err == nil {
		t.Fatalf("a condition over a later step ran: %v", tr.Status)
	}
	tr, err = r.Run(ctx, []byte(`{"name":"s","steps":[{"name":"a","kind":"tool","server":"fs","tool":"t"},{"name":"b","kind":"tool","server":"fs","tool":"slow"},{"name":"c","kind":"tool","server":"fs","tool":"t"}]}`), RunOptions{})
	if err != nil || tr.Status != StatusSuspended || tr.Position != 1 {
		t.Fatalf("Run = %v at %d, %v; want SUSPENDED at step b", tr.Status, tr.Position, err)
	}
	ft.pend = ""
	n := len(ft.calls)
	tr, err = r.Resume(ctx, tr.ID, RunOptions{})
	if err != nil || tr.Status != StatusSuccess || len(ft.calls) != n+2 {
		t.Fatalf("Resume = %v, %v, %d calls; want SUCCESS with b and c run", tr.Status, err, len(ft.calls)-n)
	}
	// The replay of a resumed run meets the PENDING record first, suspends
	// where the run did, and resumes as the run was.
	if rep, err := r.Replay(ctx, tr.ID); err != nil || !rep.Matched || rep.Steps != 4 || rep.Status != StatusSuccess {
		t.Fatalf("Replay of the resumed run = %+v, %v; want every one of its 4 transitions the same, SUCCESS", rep, err)
	}
}

func TestRetryStalls(t *testing.T) {
	t.Parallel()
	r := mustRunner(t, errTools{})
	tr, err := r.Run(context.Background(), []byte(`{"name":"p","budget":{"max_stalled":2},"steps":[{"name":"a","kind":"tool","server":"fs","tool":"t","on_error":"retry","retries":5}]}`), RunOptions{})
	if err != nil || tr.Status != StatusStalled || len(tr.Steps) != 3 {
		t.Fatalf("Run = %v with %d steps, %v; want STALLED after 3 attempts", tr.Status, len(tr.Steps), err)
	}
}

type errTools struct{}

func (errTools) Call(context.Context, ToolCall) (ToolResult, error) {
	return ToolResult{Result: json.RawMessage(`{"content":[{"type":"text","text":"boom"}],"isError":true}`)}, nil
}

// receiptTools writes each call's pending record as the gate does, in the
// transaction of the call's receipt, which ends as end says: "commit",
// "rollback" (the receipt could not be written, so the call is refused),
// or "unconfirmed" (it committed, and the gate failed after it); or, with
// "untaken", a receipt that took no record. It notes how many records of
// the run each call found in the database.
type receiptTools struct {
	fakeTools
	db    *sql.DB
	end   string
	found []int
}

func (f *receiptTools) Call(ctx context.Context, c ToolCall) (ToolResult, error) {
	if p := c.Pending; p != nil && f.end == "untaken" {
		p.Committed() // the receipt's transaction committed, without it
	} else if p != nil {
		tx, err := f.db.BeginTx(ctx, nil)
		if err != nil {
			return ToolResult{}, err
		}
		if err := p.InTx(ctx, tx); err != nil {
			tx.Rollback()
			return ToolResult{}, err
		}
		switch f.end {
		case "rollback":
			tx.Rollback()
			return ToolResult{}, errors.New("the receipt could not be written")
		case "unconfirmed":
			if err := tx.Commit(); err != nil {
				return ToolResult{}, err
			}
			return ToolResult{}, errors.New("the idempotency key could not be recorded")
		}
		if err := tx.Commit(); err != nil {
			return ToolResult{}, err
		}
		p.Committed()
	}
	var n int
	if err := f.db.QueryRowContext(ctx, `SELECT count(*) FROM program_steps WHERE trace = ?`, c.Ref.Trace).Scan(&n); err != nil {
		return ToolResult{}, err
	}
	f.found = append(f.found, n)
	return f.fakeTools.Call(ctx, c)
}

// A step's record rides with the next step's receipt: every call finds
// the records of all the steps before it, and a receipt that was not
// written, or whose writing is not known to have ended well, leaves the
// trace whole, with each record once.
func TestRecordsRideWithReceipts(t *testing.T) {
	t.Parallel()
	const p = `{"name":"p","steps":[
	 {"name":"a","kind":"tool","server":"fs","tool":"read_text_file"},
	 {"name":"b","kind":"tool","server":"fs","tool":"read_text_file"},
	 {"name":"c","kind":"tool","server":"fs","tool":"read_text_file"}]}`
	tests := []struct {
		end        string
		status     string
		steps      []string // the statuses of the trace's steps
		foundCalls []int
	}{
		{"commit", StatusSuccess, []string{StepOK, StepOK, StepOK}, []int{0, 1, 2}},
		{"rollback", StatusFailed, []string{StepOK, StepFailed}, []int{0}},
		{"unconfirmed", StatusFailed, []string{StepOK, StepFailed}, []int{0}},
		// Each record is written by the runner, before the next one.
		{"untaken", StatusSuccess, []string{StepOK, StepOK, StepOK}, []int{0, 0, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.end, func(t *testing.T) {
			rt := &receiptTools{end: tt.end}
			r := mustRunner(t, rt)
			r.opts.PendingRecords = true
			rt.db = r.store.db
			ctx := context.Background()
			tr, err := r.Run(ctx, []byte(p), RunOptions{Client: "c"})
			if err != nil {
				t.Fatalf("Run: %v", err)
			}
			if tr.Status != tt.status {
				t.Errorf("Run = %s (%s), want %s", tr.Status, tr.Error, tt.status)
			}
			if fmt.Sprint(rt.found) != fmt.Sprint(tt.foundCalls) {
				t.Errorf("the calls found %v records of the run before them, want %v", rt.found, tt.foundCalls)
			}
			stored, err := r.store.Trace(ctx, tr.ID)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, s := range stored.Steps {
				got = append(got, s.Status)
			}
			if fmt.Sprint(got) != fmt.Sprint(tt.steps) || stored.Status != tt.status {
				t.Errorf("the stored trace is %s with steps %v, want %s with %v", stored.Status, got, tt.status, tt.steps)
			}
			if rep, err := r.Replay(ctx, tr.ID); err != nil || !rep.Matched {
				t.Errorf("Replay = %+v, %v; want every transition the same", rep, err)
			}
		})
	}
}
