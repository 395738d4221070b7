package gate

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// serverBudgetLock is the file in the home folder whose lock a gate holds
// from counting a per-server budget to writing the receipt that spends it,
// so that proxies racing each other cannot both take the last place.
const serverBudgetLock = "budgets.lock"

// perServer reports whether any of budgets is counted per server.
func perServer(budgets []policy.Budget) bool {
	for _, b := range budgets {
		if b.Per == policy.PerServer {
			return true
		}
	}
	return false
}

// allowedCall is a call this session's gate allowed, for per-session
// budgets.
type allowedCall struct {
	tool string
	at   time.Time
}

// overBudget returns the first of budgets that has no call left, and how
// long until it has one (zero: not in this session). Called with budgetMu
// held.
func (g *Gate) overBudget(ctx context.Context, budgets []policy.Budget, now time.Time) (*policy.Budget, time.Duration, error) {
	for i := range budgets {
		b := &budgets[i]
		var since time.Time
		if b.Window > 0 {
			since = now.Add(-b.Window)
		}
		match := func(tool string) bool { return b.Matches(g.cfg.Server, tool) }
		var times []time.Time
		switch b.Per {
		case policy.PerServer:
			var err error
			if times, err = g.cfg.Log.CallsAllowed(ctx, g.cfg.Server, since, match); err != nil {
				return nil, 0, err
			}
		default:
			for _, c := range g.allowed {
				if !c.at.Before(since) && match(c.tool) {
					times = append(times, c.at)
				}
			}
		}
		if len(times) < b.Calls {
			continue
		}
		var wait time.Duration
		if b.Window > 0 {
			if b.Calls == 0 {
				wait = b.Window
			} else {
				// The call that frees a place is the one Calls places back.
				wait = max(times[len(times)-b.Calls].Add(b.Window).Sub(now), time.Second).Round(time.Second)
			}
		}
		return b, wait, nil
	}
	return nil, 0, nil
}

// budgetMessage is what the model reads when a budget refuses a call.
func budgetMessage(b *policy.Budget, wait time.Duration) string {
	when := "It cannot run again in this session."
	if wait > 0 {
		when = fmt.Sprintf("It can run again in %s.", wait)
	}
	return fmt.Sprintf("Gatehouse refused this call: budget %s allows %s, and they are used up. The call did not run. %s",
		b.ID, b.Describe(), when)
}
