package gate

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// BenchmarkAuthorize measures what the gate adds to one allowed call: the
// policy decision, the pin check, the durable receipt, and (off the call's
// path, but on the same database) the outcome.
func BenchmarkAuthorize(b *testing.B) {
	h := newHarness(b)
	p, _ := h.pol.Current(context.Background())
	p = p.Clone()
	p.Rules = append(p.Rules, policy.Rule{ID: "bench", Capability: "mcp.files.echo", Decision: policy.Allow})
	if _, err := h.pol.Save(context.Background(), p); err != nil {
		b.Fatal(err)
	}
	def := tool("echo", "echoes", nil)
	ctx := context.Background()
	b.ResetTimer()
	for range b.N {
		c := &gateway.Call{Server: "files", Tool: "echo", Arguments: json.RawMessage(`{"message":"hello"}`), Definition: def, Session: "s"}
		a, err := h.g.Authorize(ctx, c, nil)
		if err != nil || !a.Allow {
			b.Fatal(a, err)
		}
		h.g.Complete(ctx, c, a, &gateway.Outcome{Status: gateway.StatusSucceeded, Result: json.RawMessage(`{"content":[{"type":"text","text":"hello"}]}`), Duration: time.Millisecond})
	}
}
