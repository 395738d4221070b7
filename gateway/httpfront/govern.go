package httpfront

import (
	"context"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// Govern returns g with its decisions, outcomes and decision times counted
// in m, for the session of client with server. The tools it is shown are
// passed on when g watches them.
func (m *Metrics) Govern(g gateway.Governor, server, client string) gateway.Governor {
	return &countingGovernor{g: g, m: m, server: server, client: client}
}

type countingGovernor struct {
	g              gateway.Governor
	m              *Metrics
	server, client string
}

var (
	_ gateway.Governor    = (*countingGovernor)(nil)
	_ gateway.ToolWatcher = (*countingGovernor)(nil)
)

// waitedKey marks, in an Authorize's context, that the call waited for a
// person: its decision time is then not the gate's.
type waitedKey struct{}

// Waited records, from an approval asker, that the call whose
// authorization ctx belongs to waited d for a person who answered answer.
func (m *Metrics) Waited(ctx context.Context, d time.Duration, answer string) {
	if w, ok := ctx.Value(waitedKey{}).(*bool); ok {
		*w = true
	}
	m.Observe("gatehouse_approval_wait_seconds", d, "answer", answer)
}

func (c *countingGovernor) Authorize(ctx context.Context, call *gateway.Call, progress func(string)) (*gateway.Authorization, error) {
	start := time.Now()
	waited := new(bool)
	a, err := c.g.Authorize(context.WithValue(ctx, waitedKey{}, waited), call, progress)
	decision := "error"
	switch {
	case err != nil:
		c.m.Add("gatehouse_errors_total", 1, "kind", "gate")
	case a.Allow:
		decision = "allowed"
	default:
		decision = "refused"
	}
	c.m.Add("gatehouse_calls_total", 1, "server", c.server, "client", c.client, "decision", decision)
	if err == nil && !*waited {
		c.m.Observe("gatehouse_decision_seconds", time.Since(start))
	}
	return a, err
}

func (c *countingGovernor) Complete(ctx context.Context, call *gateway.Call, a *gateway.Authorization, o *gateway.Outcome) {
	c.g.Complete(ctx, call, a, o)
	c.m.Add("gatehouse_call_outcomes_total", 1, "server", c.server, "client", c.client, "status", o.Status)
	c.m.Observe("gatehouse_call_duration_seconds", o.Duration)
}

func (c *countingGovernor) ToolsListed(ctx context.Context, tools []*gateway.Tool) {
	if w, ok := c.g.(gateway.ToolWatcher); ok {
		w.ToolsListed(ctx, tools)
	}
}
