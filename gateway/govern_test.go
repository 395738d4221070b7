package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeGovernor decides with a function and records what it was asked.
type fakeGovernor struct {
	decide func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error)

	mu       sync.Mutex
	calls    []*Call
	outcomes chan outcomeRecord
}

type outcomeRecord struct {
	call *Call
	auth *Authorization
	out  *Outcome
}

func newFakeGovernor(decide func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error)) *fakeGovernor {
	return &fakeGovernor{decide: decide, outcomes: make(chan outcomeRecord, 10)}
}

func (f *fakeGovernor) Authorize(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
	f.mu.Lock()
	f.calls = append(f.calls, c)
	f.mu.Unlock()
	return f.decide(ctx, c, progress)
}

func (f *fakeGovernor) Complete(ctx context.Context, c *Call, a *Authorization, o *Outcome) {
	f.outcomes <- outcomeRecord{c, a, o}
}

func (f *fakeGovernor) outcome(t *testing.T) outcomeRecord {
	t.Helper()
	select {
	case o := <-f.outcomes:
		return o
	case <-time.After(10 * time.Second):
		t.Fatal("no outcome recorded within 10s")
	}
	return outcomeRecord{}
}

func TestGovernedCalls(t *testing.T) {
	release := make(chan struct{})
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		switch c.Tool {
		case "echo":
			if strings.Contains(string(c.Arguments), "vault://secret/x") {
				return &Authorization{Allow: true, Receipt: "r-1", Arguments: json.RawMessage(`{"token":"resolved"}`)}, nil
			}
			return &Authorization{Allow: true, Receipt: "r-1"}, nil
		case "denied":
			return &Authorization{Allow: false, Receipt: "r-2", Message: "Gatehouse denied mcp.t.denied (rule no-deletes); receipt r-2"}, nil
		case "broken":
			return nil, errors.New("policy store unreadable")
		case "waits":
			progress("waiting for approval")
			progress("still waiting")
			<-release
			return &Authorization{Allow: true, Receipt: "r-3"}, nil
		case "cancelled":
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return &Authorization{Allow: true}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov})
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"claude-code","version":"2.1.3"}}}`)
	s.recvMsg()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	s.recvMsg()

	t.Run("allowed, arguments resolved", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"echo","arguments":{"token":"vault://secret/x"}}}`)
		text, isErr := toolText(t, s.recvMsg())
		if isErr || !strings.Contains(text, `"token":"resolved"`) {
			t.Errorf("server received %s, want the governor's arguments", text)
		}
		o := gov.outcome(t)
		if o.out.Status != StatusSucceeded || o.auth.Receipt != "r-1" || !strings.Contains(string(o.out.Result), "resolved") {
			t.Errorf("outcome = %+v for %+v", o.out, o.auth)
		}
		c := o.call
		if c.Client.Name != "claude-code" || c.Client.Version != "2.1.3" || c.Server != "t" {
			t.Errorf("call client/server = %+v %q", c.Client, c.Server)
		}
		if c.Definition == nil || c.Definition.Name != "echo" || !strings.Contains(string(c.Definition.Raw), "taskSupport") {
			t.Errorf("call definition = %+v, want the listed echo tool", c.Definition)
		}
	})
	t.Run("denied", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"denied"}}`)
		text, isErr := toolText(t, s.recvMsg())
		if !isErr || !strings.Contains(text, "Gatehouse denied") || !strings.Contains(text, "r-2") {
			t.Errorf("denial = %q (isError %v)", text, isErr)
		}
	})
	t.Run("gate failure fails closed", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"broken"}}`)
		text, isErr := toolText(t, s.recvMsg())
		if !isErr || !strings.Contains(text, "could not decide") || !strings.Contains(text, "did not run") {
			t.Errorf("answer = %q (isError %v)", text, isErr)
		}
	})
	t.Run("waiting sends progress, other calls go on", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":13,"method":"tools/call","params":{"name":"waits","_meta":{"progressToken":"p-9"}}}`)
		for range 2 {
			if m := s.recvMsg(); m.Method != "notifications/progress" || !strings.Contains(string(m.Params), `"progressToken":"p-9"`) {
				t.Fatalf("got %s %s, want progress for p-9", m.Method, m.Params)
			}
		}
		s.send(`{"jsonrpc":"2.0","id":14,"method":"ping"}`)
		if m := s.recvMsg(); string(m.ID) != "14" {
			t.Errorf("ping answered with id %s while a call waited", m.ID)
		}
		close(release)
		if m := s.recvMsg(); string(m.ID) != "13" {
			t.Errorf("got id %s, want the released call 13", m.ID)
		}
		gov.outcome(t)
	})
	t.Run("cancelled while waiting", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"cancelled"}}`)
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":15}}`)
		s.send(`{"jsonrpc":"2.0","id":16,"method":"ping"}`)
		if m := s.recvMsg(); string(m.ID) != "16" {
			t.Errorf("got id %s, want no answer to the cancelled call, then 16", m.ID)
		}
	})
	t.Run("no batch gets past the gate", func(t *testing.T) {
		s := s.on(t)
		s.send(`[{"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"denied"}}]`)
		if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, "Gatehouse denied") {
			t.Errorf("batched call answered %q", text)
		}
	})
	t.Run("server crash mid-call is UNKNOWN", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":18,"method":"tools/call","params":{"name":"crash"}}`)
		if _, isErr := toolText(t, s.recvMsg()); !isErr {
			t.Error("crash answered without isError")
		}
		if o := gov.outcome(t); o.out.Status != StatusUnknown {
			t.Errorf("outcome after a crash = %s, want UNKNOWN", o.out.Status)
		}
	})
}

// watchingGovernor is a fakeGovernor that also watches listed tools.
type watchingGovernor struct {
	*fakeGovernor
	listed chan []*Tool
}

func (w *watchingGovernor) ToolsListed(ctx context.Context, tools []*Tool) { w.listed <- tools }

func TestToolWatcher(t *testing.T) {
	gov := &watchingGovernor{
		fakeGovernor: newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
			return &Authorization{Allow: true, Receipt: "r"}, nil
		}),
		listed: make(chan []*Tool, 10),
	}
	s := startSession(t, testServerCommand(), &Options{Governor: gov})
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	s.recvMsg()
	for i := 1; i <= 3; i++ {
		s.send(`{"jsonrpc":"2.0","id":` + string(rune('0'+i)) + `,"method":"tools/list"}`)
		if got := s.recv(); !strings.Contains(got, `"listing `+string(rune('0'+i))+`"`) {
			t.Fatalf("listing %d reached the client as %s", i, got)
		}
	}
	for i := 1; i <= 3; i++ {
		select {
		case tools := <-gov.listed:
			if len(tools) != 1 || tools[0].Name != "echo" || tools[0].Description != "listing "+string(rune('0'+i)) {
				t.Errorf("watcher's page %d = %+v; want echo as listed the %dth time, in order", i, tools, i)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the watcher saw %d of 3 listings", i-1)
		}
	}
	// The call carries the definition listed last.
	s.send(`{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
	s.recvMsg()
	if o := gov.outcome(t); o.call.Definition == nil || o.call.Definition.Description != "listing 3" {
		t.Errorf("call definition = %+v, want the last listing", o.call.Definition)
	}
}

// A replayed call is answered from the record: the server never sees it,
// and its outcome is recorded.
func TestReplay(t *testing.T) {
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		if c.IdempotencyKey == "k" {
			return &Authorization{Allow: true, Receipt: "r-2", Replay: json.RawMessage(`{"content":[{"type":"text","text":"from the record"}]}`)}, nil
		}
		return &Authorization{Allow: true, Receipt: "r-1"}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"echo","arguments":{"x":1},"_meta":{"idempotencyKey":"k"}}}`)
	m := s.recvMsg()
	if text, isErr := toolText(t, m); isErr || text != "from the record" || string(m.ID) != "5" {
		t.Errorf("replayed call = %s (id %s)", text, m.ID)
	}
	if o := gov.outcome(t); o.out.Status != StatusSucceeded || o.auth.Receipt != "r-2" || o.call.IdempotencyKey != "k" {
		t.Errorf("outcome of the replay = %+v for %+v", o.out, o.auth)
	}
	// The namespaced key works too, and a call without a key runs.
	s.send(`{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"name":"echo","arguments":{},"_meta":{"dev.gatehouse/idempotencyKey":"k"}}}`)
	if text, _ := toolText(t, s.recvMsg()); text != "from the record" {
		t.Errorf("namespaced key = %q", text)
	}
	gov.outcome(t)
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"y":2},"_meta":{"dev.gatehouse/callTag":"st_1"}}}`)
	if text, _ := toolText(t, s.recvMsg()); !strings.Contains(text, `"y":2`) {
		t.Errorf("a call without a key did not reach the server: %q", text)
	}
	if o := gov.outcome(t); o.call.Tag != "st_1" || o.call.IdempotencyKey != "" {
		t.Errorf("the call's tag = %q (key %q), want the _meta's st_1 and no key", o.call.Tag, o.call.IdempotencyKey)
	}
}

// A governed call still at the server when the client goes away is
// recorded UNKNOWN: nobody is left to say how it ended.
func TestAbandonedCallIsUnknown(t *testing.T) {
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		return &Authorization{Allow: true, Receipt: "r-1"}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov, StopGrace: 100 * time.Millisecond})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hang"}}`)
	if line := s.recv(); !strings.Contains(line, "started") {
		t.Fatalf("got %s, want the server to say the call started", line)
	}
	s.in.Close()
	if o := gov.outcome(t); o.out.Status != StatusUnknown || o.call.Tool != "hang" {
		t.Errorf("outcome of the abandoned call = %s for %s, want UNKNOWN for hang", o.out.Status, o.call.Tool)
	}
}

// A governed call the server does not answer in time ends with an error
// that names the wait, and its outcome is UNKNOWN; the session goes on.
func TestCallTimeout(t *testing.T) {
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		return &Authorization{Allow: true, Receipt: "r-7"}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov, CallTimeout: 200 * time.Millisecond})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow"}}`)
	m := s.recvMsg()
	if text, isErr := toolText(t, m); string(m.ID) != "1" || !isErr || !strings.Contains(text, "within 200ms") || !strings.Contains(text, "r-7") {
		t.Errorf("answer = %s %q (isError %v), want Gatehouse's timeout naming the wait and the receipt", m.ID, text, isErr)
	}
	if o := gov.outcome(t); o.out.Status != StatusUnknown {
		t.Errorf("outcome = %s, want UNKNOWN", o.out.Status)
	}
	// The server was told: the slow tool reports its cancellation.
	if line := s.recv(); !strings.Contains(line, "cancelled 1") {
		t.Errorf("after the timeout the server said %s, want its cancellation of 1", line)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	if m := s.recvMsg(); string(m.ID) != "2" {
		t.Errorf("next answer is for %s, want 2", m.ID)
	}
}
