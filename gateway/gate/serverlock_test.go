package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// Gates of several proxies spend one per-server budget: racing each other
// (here two gates in one process, each with its own in-process lock, as two
// proxies have), they allow no more calls than it holds.
func TestServerBudgetAcrossGates(t *testing.T) {
	home := t.TempDir()
	h := newHarnessWith(t, func(c *Config) { c.Home = home })
	ctx := context.Background()
	p, err := h.pol.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	next := p.Clone()
	next.Rules = append(next.Rules, policy.Rule{ID: "files-ok", Capability: "mcp.files.*", Decision: policy.Allow})
	next.Budgets = []policy.Budget{{ID: "five", Capability: "mcp.files.*", Per: policy.PerServer, Calls: 5, Window: time.Hour}}
	if _, err := h.pol.Save(ctx, next); err != nil {
		t.Fatal(err)
	}
	other, err := New(ctx, Config{Server: "files", Log: h.log, Policies: h.pol, Pins: h.g.cfg.Pins, Ask: h.app.ask, Home: home})
	if err != nil {
		t.Fatal(err)
	}
	read := tool("read_file", "reads", nil)
	var allowed atomic.Int32
	var wg sync.WaitGroup
	for i := range 24 {
		g := h.g
		if i%2 == 1 {
			g = other
		}
		wg.Go(func() {
			c := &gateway.Call{Server: "files", Tool: "read_file", Arguments: json.RawMessage(fmt.Sprintf(`{"n":%d}`, i)), Session: fmt.Sprint("s-", i%2), Definition: read}
			a, err := g.Authorize(ctx, c, nil)
			if err != nil {
				t.Error(err)
				return
			}
			if a.Allow {
				allowed.Add(1)
			}
		})
	}
	wg.Wait()
	if n := allowed.Load(); n != 5 {
		t.Errorf("%d calls allowed by two gates racing for a budget of 5", n)
	}
}
