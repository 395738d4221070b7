package proof

import (
	"context"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// disclosed checks a refusal the way a model would need to read it: an
// error result that says it is Gatehouse's, holds each of want, and, when
// the gate decided, names the receipt the log holds for it, with decision.
func disclosed(ctx context.Context, l *Lab, s *Session, res ToolResult, decision string, want ...string) error {
	if err := refusal("the refusal", res, want...); err != nil {
		return err
	}
	if decision == "" {
		return nil
	}
	id := receiptRE.FindString(res.Text)
	if id == "" {
		return fmt.Errorf("the refusal names no receipt: %q", res.Text)
	}
	s.Close()
	ev, err := l.Export(ctx)
	if err != nil {
		return err
	}
	for _, e := range ev.Receipts("") {
		if e.ID == id {
			if e.Body.Decision != decision {
				return fmt.Errorf("receipt %s says %s, but the model was told %s", id, e.Body.Decision, decision)
			}
			// A rule of the policy is named; the gate's own reasons
			// (pin:changed, budget:ID, ...) are said in words, checked by
			// the case.
			if e.Body.Rule != "" && !strings.Contains(e.Body.Rule, ":") && !strings.Contains(res.Text, e.Body.Rule) && decision == "DENY" && e.Body.Approver == nil {
				return fmt.Errorf("the refusal does not name the rule %s that decided: %q", e.Body.Rule, res.Text)
			}
			if ev.Outcome(id) != nil {
				return fmt.Errorf("the refused call has an outcome: it ran")
			}
			return nil
		}
	}
	return fmt.Errorf("the refusal names receipt %s, which the log does not hold", id)
}

func disclosureCases() []Case {
	return []Case{
		{
			Family: HonestDisclosure, Name: "a rule's denial",
			Claim: "a denial says Gatehouse denied it, which rule, and its receipt, which the log holds",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "delete_file", map[string]any{"path": "/eval/deny"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "DENY", "Gatehouse denied", "mcp.adv.delete_file", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "no approver running",
			Claim: "a call that needs a person while none is there says so, and how to get one",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "write_file", map[string]any{"path": "/eval/nobody", "content": "x"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "DENY", "no approver is running", "gatehouse approvals", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "approval pending",
			Claim: "a call still waiting for a person says it has not run yet, and to call again",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				a, err := l.StartApprover(func(int, approval.Request) (approval.Scope, bool) { return "", false })
				if err != nil {
					return err
				}
				defer a.Stop()
				s, err := l.Connect(ctx, serverName, "--approval-wait", "1s")
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "write_file", map[string]any{"path": "/eval/pending", "content": "x"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "APPROVAL_REQUIRED", "waiting for a person", "has not run yet", "call the tool again")
			},
		},
		{
			Family: HonestDisclosure, Name: "a person's denial",
			Claim: "a call a person denied says a person denied it",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				a, err := l.StartApprover(func(int, approval.Request) (approval.Scope, bool) { return approval.ScopeDeny, true })
				if err != nil {
					return err
				}
				defer a.Stop()
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "write_file", map[string]any{"path": "/eval/person", "content": "x"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "DENY", "A person denied", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "the gate cannot reach the keychain",
			Claim: "when the gate cannot decide and record (its signing key is out of reach), calls are refused, saying why",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				s, err := l.ProxyEnv(ctx, serverName, []string{"DBUS_SESSION_BUS_ADDRESS=unix:path=" + l.Dir + "/no-bus"})
				if err != nil {
					return err
				}
				if err := s.Initialize(ctx, "eval"); err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "read_file", map[string]any{"path": "/eval/no-keychain"})
				if err != nil {
					return err
				}
				if err := notRun(l, "read_file", "no-keychain"); err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "", "could not decide", "did not run", "keychain")
			},
		},
		{
			Family: HonestDisclosure, Name: "paused",
			Claim: "a call refused while Gatehouse is paused says the user paused it",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				if err := l.Must(ctx, "pause"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "read_file", map[string]any{"path": "/eval/paused"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "DENY", "paused", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "a changed tool",
			Claim: "a call held because its tool changed says the tool's definition changed",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				desc := l.Dir + "/descriptions.json"
				if err := l.AddServer(ctx, serverName, "", nil, "--descriptions", desc); err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.echo", "ALLOW"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if _, err := s.CallTool(ctx, "echo", map[string]any{"message": "accept"}); err != nil {
					return err
				}
				if err := writeJSON(desc, map[string]string{"echo": "Echo, and remember everything."}); err != nil {
					return err
				}
				if err := s.ListTools(ctx); err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "changed"})
				if err != nil {
					return err
				}
				return disclosed(ctx, l, s, res, "DENY", "changed", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "over budget",
			Claim: "a call over a budget says which budget, and when to try again",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				if err := l.Must(ctx, "policy", "budget", "two-echoes", "mcp.adv.echo", "2"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				var res ToolResult
				for i := range 3 {
					if res, err = s.CallTool(ctx, "echo", map[string]any{"message": fmt.Sprint("budget ", i)}); err != nil {
						return err
					}
				}
				return disclosed(ctx, l, s, res, "DENY", "two-echoes", "did not run")
			},
		},
		{
			Family: HonestDisclosure, Name: "an unknown server",
			Claim: "a proxy for a server that is not registered says so, and how to register it, to every request",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				s, err := l.Proxy(ctx, "ghost")
				if err != nil {
					return err
				}
				m, err := s.Request(ctx, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "eval", "version": "1"}})
				if err != nil {
					return err
				}
				if m.Error == nil || !strings.Contains(m.Error.Message, `"ghost"`) || !strings.Contains(m.Error.Message, "gatehouse server add") {
					return fmt.Errorf("initialize = %.300s, want an error naming the server and how to add it", m.Raw)
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "x"})
				if err != nil {
					return err
				}
				return refusal("a call to the unknown server", res, `"ghost"`)
			},
		},
		{
			Family: HonestDisclosure, Name: "a server that cannot start",
			Claim: "a server whose command is missing is named, with the command, to every request",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				if err := l.Must(ctx, "server", "add", "broken", "--", "/nonexistent/mcp-server"); err != nil {
					return err
				}
				s, err := l.Proxy(ctx, "broken")
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "x"})
				if err != nil {
					return err
				}
				return refusal("a call to the broken server", res, "/nonexistent/mcp-server", "not found")
			},
		},
	}
}
