package proof

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// programCases hold a governed program (gatehouse programs) to what the
// agent's own calls are held to: every tool step passes the gate, a
// condition can reach nothing, budgets stop a run, and a person's approval
// of one program's plan approves no other.
func programCases() []Case {
	return []Case{
		{
			Family: PolicyBypass, Name: "a program reaching a denied tool",
			Claim: "a program's step on a tool a rule denies does not run: the run stops there, with Gatehouse's disclosure and receipt, and no later step runs",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := programsLab(ctx, t)
				if err != nil {
					return err
				}
				run, err := runProgram(ctx, s, map[string]any{"name": "tidy", "steps": []any{
					echoStep("hello", "eval: program before"),
					map[string]any{"name": "wipe", "kind": "tool", "server": serverName, "tool": "delete_file", "args": map[string]any{"path": "/eval/program-wipe"}},
					echoStep("after", "eval: program after"),
				}})
				if err != nil {
					return err
				}
				if run.Status != "FAILED" || !strings.Contains(run.Error, "step wipe (2): Gatehouse denied") || !strings.Contains(run.Error, "adv-delete") || !strings.Contains(run.Error, "Receipt r-") {
					return fmt.Errorf("the run = %s (%s), want FAILED at wipe with the gate's disclosure", run.Status, run.Error)
				}
				if err := notRun(l, "delete_file", "/eval/program-wipe"); err != nil {
					return err
				}
				if err := notRun(l, "echo", "eval: program after"); err != nil {
					return fmt.Errorf("a step after the denied one ran: %w", err)
				}
				return wasRun(l, "echo", "eval: program before")
			},
		},
		{
			Family: PolicyBypass, Name: "a call smuggled through a condition",
			Claim: "a condition that calls a function, reads the environment or the clock, or builds a tool call is refused before anything runs",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := programsLab(ctx, t)
				if err != nil {
					return err
				}
				for _, cond := range []string{
					`delete_file("/eval/smuggled") == nil`,
					`now().Year() > 2000`,
					`date("2026-01-01") != nil`,
					`$env["steps"]["hello"] != nil`,
					`env("HOME") != ""`,
					`len(steps.hello.text) > 0 && ` + "steps.hello.text.Call()" + ` == nil`,
				} {
					run, err := runProgram(ctx, s, map[string]any{"name": "sly", "steps": []any{
						echoStep("hello", "eval: smuggler "+cond),
						map[string]any{"name": "check", "kind": "condition", "if": cond, "then": "end", "else": "end"},
					}})
					if err != nil && !strings.Contains(err.Error(), "condition") {
						return err
					}
					if err == nil {
						return fmt.Errorf("the condition %s was accepted (the run %s)", cond, run.Status)
					}
					if err := notRun(l, "echo", "eval: smuggler "+cond); err != nil {
						return fmt.Errorf("a program with the condition %s ran a step: %w", cond, err)
					}
				}
				// A condition that builds a tool call: its value is only true
				// or false, and nothing it builds is called.
				run, err := runProgram(ctx, s, map[string]any{"name": "builder", "steps": []any{
					echoStep("hello", "eval: builder"),
					map[string]any{"name": "check", "kind": "condition", "then": "end", "else": "end",
						"if": `{"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "delete_file", "arguments": {"path": "/eval/smuggled"}}}.params.name == "delete_file"`},
				}})
				if err != nil {
					return err
				}
				if run.Status != "SUCCESS" || run.StepCount != 2 {
					return fmt.Errorf("the run with a condition that builds a call = %s after %d steps, want SUCCESS after 2", run.Status, run.StepCount)
				}
				return notRun(l, "delete_file", "/eval/smuggled")
			},
		},
		{
			Family: PolicyBypass, Name: "a program past its budgets",
			Claim: "a program stops at its step budget (max_steps) and at its stall budget (max_stalled): no step runs past either",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := programsLab(ctx, t)
				if err != nil {
					return err
				}
				var steps []any
				for i := range 6 {
					steps = append(steps, echoStep(fmt.Sprintf("s%d", i), fmt.Sprintf("eval: budget %d", i)))
				}
				run, err := runProgram(ctx, s, map[string]any{"name": "long", "budget": map[string]any{"max_steps": 3}, "steps": steps})
				if err != nil {
					return err
				}
				if run.Status != "BUDGET_EXCEEDED" || run.StepCount != 3 {
					return fmt.Errorf("the run = %s after %d steps, want BUDGET_EXCEEDED after 3", run.Status, run.StepCount)
				}
				if err := notRun(l, "echo", "eval: budget 3"); err != nil {
					return fmt.Errorf("a step past max_steps ran: %w", err)
				}
				// A step that fails and is retried without end makes no
				// progress: max_stalled stops it.
				run, err = runProgram(ctx, s, map[string]any{"name": "stuck", "budget": map[string]any{"max_stalled": 2}, "steps": []any{
					echoStep("hello", "eval: stuck"),
					map[string]any{"name": "again", "kind": "tool", "server": serverName, "tool": "echo",
						"args": map[string]any{"message": "${steps.hello.nothing}"}, "on_error": "retry", "retries": 5},
					echoStep("after", "eval: after stalling"),
				}})
				if err != nil {
					return err
				}
				if run.Status != "STALLED" || run.StepCount != 4 {
					return fmt.Errorf("the stuck run = %s after %d steps, want STALLED after 4 (one, and three attempts)", run.Status, run.StepCount)
				}
				return notRun(l, "echo", "eval: after stalling")
			},
		},
		{
			Family: PolicyBypass, Name: "a plan approval reused for another program",
			Claim: "a person's lasting approval of one program's plan does not approve another with one step changed: it is asked again",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := programsLab(ctx, t)
				if err != nil {
					return err
				}
				// Always for the first plan; no for anything else.
				a, err := l.StartApprover(func(n int, req approval.Request) (approval.Scope, bool) {
					if n == 1 {
						return approval.ScopeAlways, true
					}
					return approval.ScopeDeny, true
				})
				if err != nil {
					return err
				}
				defer a.Stop()
				write := func(path string) map[string]any {
					return map[string]any{"name": "save", "steps": []any{
						echoStep("hello", "eval: plan "+path),
						map[string]any{"name": "write", "kind": "tool", "server": serverName, "tool": "write_file", "args": map[string]any{"path": path, "content": "x"}},
					}}
				}
				if run, err := runProgram(ctx, s, write("/eval/plan-a")); err != nil || run.Status != "SUCCESS" {
					return fmt.Errorf("program A, its plan approved always: %v %+v", err, run)
				}
				if err := wasRun(l, "write_file", "/eval/plan-a"); err != nil {
					return err
				}
				// The same program again: the lasting answer serves it.
				if run, err := runProgram(ctx, s, write("/eval/plan-a")); err != nil || run.Status != "SUCCESS" || len(a.Shown()) != 1 {
					return fmt.Errorf("program A again = %v %+v, asked %d times; want it run on the lasting answer", err, run, len(a.Shown()))
				}
				run, err := runProgram(ctx, s, write("/eval/plan-b"))
				if err != nil {
					return err
				}
				if len(a.Shown()) != 2 {
					return fmt.Errorf("program B (one argument changed) was not asked about: %d requests in all, the run %s", len(a.Shown()), run.Status)
				}
				if p := a.Shown()[1].Plan; p == nil || !strings.Contains(string(p.Steps[1].Args), "/eval/plan-b") {
					return fmt.Errorf("the second request does not show program B's plan: %+v", a.Shown()[1])
				}
				if run.Status != "FAILED" {
					return fmt.Errorf("program B, its plan refused, = %s", run.Status)
				}
				return notRun(l, "write_file", "/eval/plan-b")
			},
		},
	}
}

// programsLab is the standard lab with `gatehouse programs` serving it.
func programsLab(ctx context.Context, t *T) (*Lab, *Session, error) {
	l, err := t.stdLab(ctx)
	if err != nil {
		return nil, nil, err
	}
	s, err := l.Programs(ctx)
	if err != nil {
		return nil, nil, err
	}
	return l, s, nil
}

func echoStep(name, message string) map[string]any {
	return map[string]any{"name": name, "kind": "tool", "server": serverName, "tool": "echo", "args": map[string]any{"message": message}}
}

type programRun struct {
	Trace     string `json:"trace"`
	Status    string `json:"status"`
	StepCount int    `json:"step_count"`
	Error     string `json:"error"`
}

// runProgram calls run_program; a program refused before it ran is an
// error holding the refusal.
func runProgram(ctx context.Context, s *Session, program map[string]any) (programRun, error) {
	res, err := s.CallTool(ctx, "run_program", map[string]any{"program": program})
	if err != nil {
		return programRun{}, err
	}
	if res.IsError {
		return programRun{}, fmt.Errorf("run_program refused the program: %s", res.Text)
	}
	var r struct {
		Result struct {
			Structured programRun `json:"structuredContent"`
		} `json:"result"`
	}
	if err := json.Unmarshal(res.Raw, &r); err != nil {
		return programRun{}, fmt.Errorf("run_program answered %s: %w", res.Raw, err)
	}
	return r.Result.Structured, nil
}
