package proof

import (
	"context"
	"fmt"
	"strings"
)

// observeCases are rules in observe mode (a shadow rollout): their
// decisions are recorded, never applied, neither to stop a call nor to let
// one through.
func observeCases() []Case {
	return []Case{
		{
			Family: PolicyBypass, Name: "a shadow-mode rule that must not block",
			Claim: "a rule in observe mode does not stop a call it would deny: the call runs as the applied rules decide, and its signed receipt records what the observed rule would have decided",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.echo", "DENY", "--observe", "--id", "shadow-echo"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				const marker = "eval: observed, not blocked"
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": marker})
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("the call was refused by a rule in observe mode: %s", res.Text)
				}
				if err := wasRun(l, "echo", marker); err != nil {
					return err
				}
				ev, err := l.Export(ctx)
				if err != nil {
					return err
				}
				rs := ev.Receipts("echo")
				if len(rs) != 1 {
					return fmt.Errorf("the log holds %d receipts for echo, want 1", len(rs))
				}
				b := rs[0].Body
				if b.Decision != "ALLOW" || b.Rule != "adv-echo" {
					return fmt.Errorf("the receipt says %s by %s, want ALLOW by adv-echo", b.Decision, b.Rule)
				}
				if b.Observed == nil || b.Observed.Decision != "DENY" || b.Observed.Rule != "shadow-echo" {
					return fmt.Errorf("the receipt does not record that shadow-echo would have denied the call (observed: %+v)", b.Observed)
				}
				out, _, err := l.Gatehouse(ctx, "", "history")
				if err != nil {
					return err
				}
				if !strings.Contains(out, "would have been DENIED by rule shadow-echo (observe mode)") {
					return fmt.Errorf("gatehouse history does not mark the call observed:\n%s", out)
				}
				return nil
			},
		},
		{
			Family: PolicyBypass, Name: "an observe-mode rule that would allow a denied call",
			Claim: "a rule in observe mode never weakens an applied one: a call a rule denies stays denied when an observed rule would allow it, and its receipt records both",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				// The observed rule is more specific than the applied
				// DENY (it constrains an argument): applied, it would win.
				if err := l.Policy(ctx, "mcp.adv.delete_file", "ALLOW", "--observe", "--id", "shadow-delete",
					"--arg", "path", "--equals", "/eval/observed-allow"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				const marker = "/eval/observed-allow"
				res, err := s.CallTool(ctx, "delete_file", map[string]any{"path": marker})
				if err != nil {
					return err
				}
				if err := notRun(l, "delete_file", marker); err != nil {
					return err
				}
				if err := refusal("delete_file", res, "denied", "adv-delete"); err != nil {
					return err
				}
				ev, err := l.Export(ctx)
				if err != nil {
					return err
				}
				rs := ev.Receipts("delete_file")
				if len(rs) != 1 || rs[0].Body.Decision != "DENY" || rs[0].Body.Rule != "adv-delete" {
					return fmt.Errorf("the log holds %d receipts for delete_file (want one DENY by adv-delete)", len(rs))
				}
				if o := rs[0].Body.Observed; o == nil || o.Decision != "ALLOW" || o.Rule != "shadow-delete" {
					return fmt.Errorf("the receipt does not record that shadow-delete would have allowed the call (observed: %+v)", o)
				}
				return nil
			},
		},
	}
}
