package proof

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// approvalCases check that an approval covers the call it was given for and
// no other, and that its receipt says how it came.
func approvalCases() []Case {
	return []Case{
		{
			Family: EvidenceTampering, Name: "an automatic approver is not recorded as a person",
			Claim: "a call `gatehouse approvals --auto once` approves has a receipt that says the answer was automatic",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				stop, err := startTerminalApprover(ctx, l, nil, "--auto", "once")
				if err != nil {
					return err
				}
				defer stop()
				return approvedVia(ctx, l, "/eval/auto", "automatic")
			},
		},
		{
			Family: EvidenceTampering, Name: "piped answers are recorded as piped",
			Claim: "a call approved by a line piped into `gatehouse approvals` has a receipt that says the answer was piped, not typed at a terminal",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				r, w, err := os.Pipe()
				if err != nil {
					return err
				}
				defer w.Close()
				stop, err := startTerminalApprover(ctx, l, r)
				r.Close()
				if err != nil {
					return err
				}
				defer stop()
				if _, err := w.WriteString("o\n"); err != nil { // as `yes o |` would
					return err
				}
				return approvedVia(ctx, l, "/eval/piped", "piped")
			},
		},
		{
			Family: PolicyBypass, Name: "an answer for other arguments does not run the call",
			Claim: "a person's answer to the call on screen does not approve another call put in its place under the same request id",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				shown := make(chan approval.Request, 4)
				a, err := l.StartApprover(func(_ int, req approval.Request) (approval.Scope, bool) {
					shown <- req
					return "", false // the person answers below
				})
				if err != nil {
					return err
				}
				defer a.Stop()
				withdrawn := make(chan string, 4)
				a.OnWithdraw(func(id string) { withdrawn <- id })
				sock := approval.SocketPath(l.Home)

				// A program of the user asks about a harmless call, and
				// while the person looks at it, puts a harmful one in its
				// place under the same id, for the agent to call next.
				harmless := approval.Request{ID: "swapped", Server: serverName, Tool: "write_file", Client: "eval",
					Args: json.RawMessage(`{"content":"x","path":"/eval/harmless"}`), Session: "another-program"}
				askCtx, leave := context.WithCancel(ctx)
				defer leave()
				go approval.Ask(askCtx, sock, harmless, time.Minute, nil)
				seen, err := next(ctx, shown)
				if err != nil {
					return fmt.Errorf("the harmless request was not shown: %w", err)
				}
				leave()
				if _, err := next(ctx, withdrawn); err != nil {
					return fmt.Errorf("the harmless request was not withdrawn: %w", err)
				}
				harmful := harmless
				harmful.Args = json.RawMessage(`{"content":"x","path":"/eval/harmful"}`)
				if _, err := approval.Ask(ctx, sock, harmful, 0, nil); !errors.Is(err, approval.ErrPending) {
					return fmt.Errorf("the harmful request: %v, want it pending", err)
				}
				if _, err := next(ctx, shown); err != nil {
					return fmt.Errorf("the harmful request was not shown: %w", err)
				}
				// The person allows, once, the call they saw.
				if err := a.DecideShown(seen, approval.ScopeOnce); err != nil {
					t.Note("the answer to the harmless call was refused: %v", err)
				}

				s, err := l.Connect(ctx, serverName, "--approval-wait", "1s")
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "write_file", map[string]any{"path": "/eval/harmful", "content": "x"})
				if err != nil {
					return err
				}
				if err := notRun(l, "write_file", "/eval/harmful"); err != nil {
					return fmt.Errorf("%w: it ran on the answer given for /eval/harmless", err)
				}
				return refusal("the harmful call", res, "has not run")
			},
		},
		{
			Family: PolicyBypass, Name: "one once answer runs one call across two proxies",
			Claim: "two proxies waiting on the same call, answered once, run it once between them, however they race",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				first := make(chan approval.Request, 1)
				a, err := l.StartApprover(func(n int, req approval.Request) (approval.Scope, bool) {
					if n == 1 {
						first <- req
						return "", false // answered below, once both proxies want it
					}
					return approval.ScopeDeny, true
				})
				if err != nil {
					return err
				}
				defer a.Stop()
				args := map[string]any{"path": "/eval/two-proxies", "content": "x"}
				var sessions []*Session
				for range 2 {
					s, err := l.Connect(ctx, serverName, "--approval-wait", "1s")
					if err != nil {
						return err
					}
					// Each waits, is told the call is pending, and wants
					// the answer for its next identical call.
					res, err := s.CallTool(ctx, "write_file", args)
					if err != nil {
						return err
					}
					if err := refusal("the call before the answer", res, "has not run"); err != nil {
						return err
					}
					sessions = append(sessions, s)
				}
				req, err := next(ctx, first)
				if err != nil {
					return err
				}
				if err := a.DecideShown(req, approval.ScopeOnce); err != nil {
					return err
				}
				// Both call again at once.
				var wg sync.WaitGroup
				for _, s := range sessions {
					wg.Go(func() { s.CallTool(ctx, "write_file", args) })
				}
				wg.Wait()
				return runsOf(l, "write_file", "/eval/two-proxies", 1)
			},
		},
	}
}

// next returns the next value from ch, or an error when ctx ends first.
func next[V any](ctx context.Context, ch <-chan V) (V, error) {
	select {
	case v := <-ch:
		return v, nil
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}

// startTerminalApprover starts `gatehouse approvals args...` with stdin
// (nil: input that stays open and says nothing), and returns once it
// listens; stop ends it.
func startTerminalApprover(ctx context.Context, l *Lab, stdin *os.File, args ...string) (stop func(), err error) {
	cmd := l.Command(ctx, append([]string{"approvals"}, args...)...)
	closeInput := func() {}
	if stdin == nil {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		defer r.Close()
		stdin, closeInput = r, func() { w.Close() }
	}
	cmd.Stdin = stdin
	if err := cmd.Start(); err != nil {
		closeInput()
		return nil, err
	}
	stop = func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
		closeInput()
	}
	if err := waitForFile(ctx, approval.SocketPath(l.Home)); err != nil {
		stop()
		return nil, err
	}
	return stop, nil
}

// approvedVia makes a call that needs approval, checks that it ran, and
// that its receipt's approver says the answer came via want.
func approvedVia(ctx context.Context, l *Lab, marker, want string) error {
	s, err := l.Connect(ctx, serverName)
	if err != nil {
		return err
	}
	res, err := s.CallTool(ctx, "write_file", map[string]any{"path": marker, "content": "x"})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("the call was not approved: %s", clip(res.Text, 200))
	}
	ev, err := l.Export(ctx)
	if err != nil {
		return err
	}
	approvers, err := receiptApprovers(ev, "write_file")
	if err != nil {
		return err
	}
	if len(approvers) != 1 {
		return fmt.Errorf("%d receipts for write_file, want 1", len(approvers))
	}
	got := approvers[0]
	if got["via"] != want {
		return fmt.Errorf("the receipt's approver is %v: it does not say the answer was %s, so it reads as a person's", got, want)
	}
	return nil
}

// receiptApprovers returns the approver member of each receipt for tool
// in the bundle, as it is written.
func receiptApprovers(ev *Evidence, tool string) ([]map[string]any, error) {
	f, err := os.Open(filepath.Join(ev.Dir, verify.FileEntries))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e struct {
			Kind string `json:"kind"`
			Body struct {
				Tool     string         `json:"tool"`
				Approver map[string]any `json:"approver"`
			} `json:"body"`
		}
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("read %s: %w", verify.FileEntries, err)
		}
		if e.Kind == "receipt" && e.Body.Tool == tool {
			out = append(out, e.Body.Approver)
		}
	}
	return out, sc.Err()
}
