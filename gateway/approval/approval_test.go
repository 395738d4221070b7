package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func TestMain(m *testing.M) {
	// Waiting proxies report progress often, so that tests see it soon.
	progressEvery = 20 * time.Millisecond
	if mode := os.Getenv("APPROVAL_TEST_HELPER"); mode != "" {
		os.Exit(helper(mode, os.Getenv("APPROVAL_TEST_SOCKET")))
	}
	os.Exit(m.Run())
}

// socketPath returns a socket path in a new private folder, short enough for
// the OS's limit on socket paths (t.TempDir's can be too long).
func socketPath(tb testing.TB) string {
	tb.Helper()
	base := ""
	if runtime.GOOS != "windows" {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "appr-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return SocketPath(dir)
}

// fakeUI records what the server shows.
type fakeUI struct {
	shown     chan Request
	withdrawn chan string
}

func newFakeUI() *fakeUI {
	return &fakeUI{shown: make(chan Request, 64), withdrawn: make(chan string, 64)}
}

func (u *fakeUI) Show(r Request)     { u.shown <- r }
func (u *fakeUI) Withdraw(id string) { u.withdrawn <- id }

var _ UI = (*fakeUI)(nil)

// startServer runs an approver on a new socket until the test ends.
func startServer(tb testing.TB, opts *Options) (*Server, *fakeUI, string) {
	tb.Helper()
	path := socketPath(tb)
	ln, err := Listen(path)
	if err != nil {
		tb.Fatal(err)
	}
	ui := newFakeUI()
	if opts == nil {
		opts = &Options{Approver: "test"}
	}
	srv := NewServer(ui, opts)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			tb.Errorf("Serve = %v", err)
		}
	})
	return srv, ui, path
}

// recv returns the next value from ch, failing the test if none comes soon.
func recv[T any](tb testing.TB, ch <-chan T) T {
	tb.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		tb.Fatalf("nothing on %T in 10s", ch)
		panic("unreachable")
	}
}

// none fails the test if ch holds a value.
func none[T any](tb testing.TB, ch <-chan T) {
	tb.Helper()
	select {
	case v := <-ch:
		tb.Fatalf("unexpected %v", v)
	default:
	}
}

type result struct {
	d   Decision
	err error
}

func askAsync(ctx context.Context, path string, req Request, wait time.Duration, progress func(time.Duration)) <-chan result {
	ch := make(chan result, 1)
	go func() {
		d, err := Ask(ctx, path, req, wait, progress)
		ch <- result{d, err}
	}()
	return ch
}

func call(args string) Request {
	return Request{
		Server: "github", Tool: "create_issue", Client: "claude-code",
		Risk: "high", Rule: "risk.high", Session: "s1",
		Args:        json.RawMessage(args),
		Description: "Create an issue.",
	}
}

const forever = time.Hour

func TestAskNoApprover(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	start := time.Now()
	_, err := Ask(context.Background(), path, call(`{}`), forever, nil)
	if !errors.Is(err, ErrNoApprover) {
		t.Fatalf("Ask with no socket = %v, want ErrNoApprover", err)
	}
	// A socket file nothing accepts on: an approver that died.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	if _, err := Ask(context.Background(), path, call(`{}`), forever, nil); !errors.Is(err, ErrNoApprover) {
		t.Fatalf("Ask with a stale socket = %v, want ErrNoApprover", err)
	}
	if d := time.Since(start); d > dialTimeout {
		t.Errorf("Ask took %v to find no approver, want less than %v", d, dialTimeout)
	}
}

func TestAskDecide(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	req := call(`{ "title": "Bug", "labels": ["a"], "body": "x" }`)
	got := askAsync(context.Background(), path, req, forever, nil)
	shown := recv(t, ui.shown)
	if shown.ID == "" || len(shown.Key) != 64 {
		t.Errorf("shown request has ID %q, Key %q: want both set", shown.ID, shown.Key)
	}
	if want := `{"body":"x","labels":["a"],"title":"Bug"}`; string(shown.Args) != want {
		t.Errorf("shown Args = %s, want canonical %s", shown.Args, want)
	}
	if shown.Server != "github" || shown.Tool != "create_issue" || shown.Client != "claude-code" ||
		shown.Risk != "high" || shown.Rule != "risk.high" || shown.Description != "Create an issue." || shown.Session != "s1" {
		t.Errorf("shown request = %+v, want the asked fields", shown)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].ID != shown.ID {
		t.Errorf("Requests() = %v, want the one shown", reqs)
	}
	// The approver can count down to the end of the asker's wait.
	if left := time.Until(shown.WaitUntil); left <= forever-time.Minute || left > forever {
		t.Errorf("shown WaitUntil is %v from now, want about the asker's wait, %v", left, forever)
	}
	if err := srv.Decide(shown, Answer{Scope: ScopeMinutes, Minutes: 15, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	r := recv(t, got)
	if r.err != nil {
		t.Fatalf("Ask = %v", r.err)
	}
	d := r.d
	if d.ID != shown.ID || d.Scope != ScopeMinutes || d.Minutes != 15 || d.Approver != "test" || !d.Scope.Allows() {
		t.Errorf("decision = %+v, want minutes 15 for %s from test", d, shown.ID)
	}
	if got, want := d.Until().Sub(d.Decided), 15*time.Minute; got != want {
		t.Errorf("Until - Decided = %v, want %v", got, want)
	}
	if err := srv.Decide(shown, Answer{Scope: ScopeOnce, Via: ViaTerminal}); !errors.Is(err, ErrNotOpen) {
		t.Errorf("Decide on an answered request = %v, want ErrNotOpen", err)
	}
	if len(srv.Requests()) != 0 {
		t.Errorf("Requests() after the answer = %v, want none", srv.Requests())
	}
	none(t, ui.withdrawn)
}

// The wait passes: the proxy answers "pending"; the person answers later;
// the next identical call gets that answer at once, and "once" only once.
func TestPendingThenIdenticalCall(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	var ticks []time.Duration
	_, err := Ask(context.Background(), path, call(`{"title":"Bug"}`), 200*time.Millisecond,
		func(waited time.Duration) { ticks = append(ticks, waited) })
	if !errors.Is(err, ErrPending) {
		t.Fatalf("Ask = %v, want ErrPending", err)
	}
	if len(ticks) == 0 {
		t.Errorf("progress was never called in a %v wait (every %v)", 200*time.Millisecond, progressEvery)
	}
	for i := 1; i < len(ticks); i++ {
		if ticks[i] <= ticks[i-1] {
			t.Errorf("progress went from %v to %v, want it to grow", ticks[i-1], ticks[i])
		}
	}
	shown := recv(t, ui.shown)
	if err := srv.Decide(shown, Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	// Another argument order is the same call; a zero wait proves it is at once.
	again := call(`{ "title" : "Bug" }`)
	again.ID = "second"
	d, err := Ask(context.Background(), path, again, 0, nil)
	if err != nil || d.Scope != ScopeOnce || d.ID != "second" {
		t.Fatalf("identical Ask = %+v, %v; want once for request second", d, err)
	}
	// Used up: a third call is a new request.
	if _, err := Ask(context.Background(), path, call(`{"title":"Bug"}`), 0, nil); !errors.Is(err, ErrPending) {
		t.Fatalf("third Ask = %v, want ErrPending", err)
	}
	third := recv(t, ui.shown)
	// A different call does not get an answer meant for another.
	if err := srv.Decide(third, Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if _, err := Ask(context.Background(), path, call(`{"title":"Other"}`), 0, nil); !errors.Is(err, ErrPending) {
		t.Fatalf("Ask for other arguments = %v, want ErrPending", err)
	}
}

// The next identical call may come before the answer: it joins the open
// request and gets the answer when it is given.
func TestPendingThenWaitAgain(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	if _, err := Ask(context.Background(), path, call(`{}`), 0, nil); !errors.Is(err, ErrPending) {
		t.Fatalf("Ask = %v, want ErrPending", err)
	}
	shown := recv(t, ui.shown)
	joined := make(chan bool, 1)
	got := askAsync(context.Background(), path, call(`{}`), forever, func(time.Duration) {
		select {
		case joined <- true:
		default:
		}
	})
	recv(t, joined) // progress means it is waiting
	none(t, ui.shown)
	if err := srv.Decide(shown, Answer{Scope: ScopeSession, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got); r.err != nil || r.d.Scope != ScopeSession {
		t.Fatalf("second Ask = %+v, %v; want session", r.d, r.err)
	}
}

func TestKeptDecisions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		scope   Scope
		minutes int
		next    []string // sessions of the following identical calls
		want    []bool   // whether each gets the kept answer
	}{
		{"once is used up", ScopeOnce, 0, []string{"s1", "s1"}, []bool{true, false}},
		{"deny is used up", ScopeDeny, 0, []string{"s2", "s1"}, []bool{true, false}},
		{"session serves its session only", ScopeSession, 0, []string{"s2", "s1", "s1"}, []bool{false, true, true}},
		{"minutes last", ScopeMinutes, 5, []string{"s2", "s2"}, []bool{true, true}},
		{"always lasts", ScopeAlways, 0, []string{"s1", "s2"}, []bool{true, true}},
		{"always-deny lasts", ScopeAlwaysDeny, 0, []string{"s1", "s2"}, []bool{true, true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv, ui, path := startServer(t, nil)
			if _, err := Ask(context.Background(), path, call(`{}`), 0, nil); !errors.Is(err, ErrPending) {
				t.Fatalf("Ask = %v, want ErrPending", err)
			}
			if err := srv.Decide(recv(t, ui.shown), Answer{Scope: tt.scope, Minutes: tt.minutes, Via: ViaTerminal}); err != nil {
				t.Fatal(err)
			}
			for i, session := range tt.next {
				req := call(`{}`)
				req.Session = session
				d, err := Ask(context.Background(), path, req, 0, nil)
				if got := err == nil; got != tt.want[i] {
					t.Fatalf("call %d from %s: Ask = %+v, %v; want kept answer %v", i+1, session, d, err, tt.want[i])
				}
				if err == nil && (d.Scope != tt.scope || d.Minutes != tt.minutes) {
					t.Errorf("call %d: decision = %+v, want %s %d", i+1, d, tt.scope, tt.minutes)
				}
				if err != nil {
					recv(t, ui.shown) // it opened a new request instead
				}
			}
		})
	}
}

func TestKeptDecisionExpires(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, &Options{Approver: "test", Keep: time.Nanosecond})
	Ask(context.Background(), path, call(`{}`), 0, nil)
	if err := srv.Decide(recv(t, ui.shown), Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if _, err := Ask(context.Background(), path, call(`{}`), 0, nil); !errors.Is(err, ErrPending) {
		t.Fatalf("Ask after the answer's keep time = %v, want ErrPending", err)
	}
}

func TestTwoProxiesSameKey(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	// Progress from a proxy means it is waiting.
	waiting := func() (chan bool, func(time.Duration)) {
		ch := make(chan bool, 1)
		return ch, func(time.Duration) {
			select {
			case ch <- true:
			default:
			}
		}
	}
	a, b := call(`{"x":1}`), call(`{"x":1}`)
	a.ID, b.ID = "proxy-a", "proxy-b"
	b.Session = "s2"
	waitingA, progressA := waiting()
	waitingB, progressB := waiting()
	ga := askAsync(context.Background(), path, a, forever, progressA)
	gb := askAsync(context.Background(), path, b, forever, progressB)
	recv(t, waitingA)
	recv(t, waitingB)
	shown := recv(t, ui.shown)
	none(t, ui.shown)
	// "once" lets one of the two identical calls run: the one shown. The
	// other is shown again, for an answer of its own.
	if err := srv.Decide(shown, Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	first, other, gFirst, gOther := "proxy-a", "proxy-b", ga, gb
	if shown.ID == "proxy-b" {
		first, other, gFirst, gOther = other, first, gb, ga
	}
	if r := recv(t, gFirst); r.err != nil || r.d.ID != first || r.d.Scope != ScopeOnce {
		t.Errorf("%s (shown): %+v, %v; want once", first, r.d, r.err)
	}
	none(t, gOther)
	again := recv(t, ui.shown)
	if again.ID != other || again.Key != shown.Key {
		t.Errorf("shown again: %+v, want %s's request", again, other)
	}
	if err := srv.Decide(again, Answer{Scope: ScopeDeny, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, gOther); r.err != nil || r.d.ID != other || r.d.Scope != ScopeDeny {
		t.Errorf("%s: %+v, %v; want deny", other, r.d, r.err)
	}
}

// "session" answers the calls of the session it was shown for; "always"
// answers every identical call waiting.
func TestSameKeyScopes(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	a, b, c := call(`{"x":2}`), call(`{"x":2}`), call(`{"x":2}`)
	a.ID, b.ID, c.ID = "a", "b", "c"
	a.Session, b.Session, c.Session = "s1", "s1", "s2"
	ga := askAsync(context.Background(), path, a, forever, nil)
	shown := recv(t, ui.shown)
	gb := askAsync(context.Background(), path, b, forever, nil)
	gc := askAsync(context.Background(), path, c, forever, nil)
	// Once all three wait on the one request (no other request is shown).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		srv.mu.Lock()
		n := len(srv.open[shown.Key].waiters)
		srv.mu.Unlock()
		if n == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d calls wait on the request, want 3", n)
		}
	}
	if err := srv.Decide(shown, Answer{Scope: ScopeSession, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	for _, g := range []<-chan result{ga, gb} {
		if r := recv(t, g); r.err != nil || r.d.Scope != ScopeSession {
			t.Errorf("a call of session s1: %+v, %v; want session", r.d, r.err)
		}
	}
	again := recv(t, ui.shown)
	if again.ID != "c" || again.Session != "s2" {
		t.Fatalf("shown again: %+v, want c's request (session s2)", again)
	}
	if err := srv.Decide(again, Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, gc); r.err != nil || r.d.Scope != ScopeAlways {
		t.Errorf("c: %+v, %v; want always", r.d, r.err)
	}
}

func TestProxyGoneWithdraws(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	got := askAsync(ctx, path, call(`{}`), forever, nil)
	shown := recv(t, ui.shown)
	cancel() // the host cancelled the call, or the proxy exited
	if r := recv(t, got); !errors.Is(r.err, context.Canceled) {
		t.Errorf("cancelled Ask = %v, want context.Canceled", r.err)
	}
	if id := recv(t, ui.withdrawn); id != shown.ID {
		t.Errorf("withdrawn %q, want %q", id, shown.ID)
	}
	if err := srv.Decide(shown, Answer{Scope: ScopeOnce, Via: ViaTerminal}); !errors.Is(err, ErrNotOpen) {
		t.Errorf("Decide on a withdrawn request = %v, want ErrNotOpen", err)
	}
	// A proxy going away does not withdraw a request another still waits on.
	if _, err := Ask(context.Background(), path, call(`{}`), 0, nil); !errors.Is(err, ErrPending) {
		t.Fatal(err)
	}
	kept := recv(t, ui.shown)
	ctx, cancel = context.WithCancel(context.Background())
	joined := make(chan bool, 1)
	got = askAsync(ctx, path, call(`{}`), forever, func(time.Duration) {
		select {
		case joined <- true:
		default:
		}
	})
	recv(t, joined)
	cancel()
	recv(t, got)
	none(t, ui.withdrawn)
	if err := srv.Decide(kept, Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Errorf("Decide on the request the first proxy left open = %v", err)
	}
}

func TestExpiredWithdraws(t *testing.T) {
	t.Parallel()
	_, ui, path := startServer(t, nil)
	for _, expires := range []time.Time{time.Now().Add(-time.Second), time.Now().Add(50 * time.Millisecond)} {
		req := call(`{}`)
		req.Expires = expires
		if _, err := Ask(context.Background(), path, req, 0, nil); !errors.Is(err, ErrPending) {
			t.Fatalf("Ask = %v, want ErrPending", err)
		}
		shown := recv(t, ui.shown)
		if id := recv(t, ui.withdrawn); id != shown.ID {
			t.Errorf("withdrawn %q, want %q", id, shown.ID)
		}
	}
}

// A decision given before the proxy's detach reaches the approver goes to
// the proxy, instead of being kept or lost.
func TestDecisionCrossesDetach(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	nc, lr := dialRaw(t, path)
	req, err := prepare(call(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	writeMsg(t, nc, &message{Type: typeRequest, Request: &req})
	if m := readMsg(t, lr); m.Type != typePending {
		t.Fatalf("got %s, want pending", m.Type)
	}
	if err := srv.Decide(recv(t, ui.shown), Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	// The approver may have sent the decision and closed already.
	b, _ := encode(&message{Type: typeDetach, ID: req.ID})
	nc.Write(b)
	if m := readMsg(t, lr); m.Type != typeDecision || m.Decision.Scope != ScopeAlways {
		t.Fatalf("after detach: %+v, want the decision", m)
	}
}

func TestApproverStops(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	ui := newFakeUI()
	srv := NewServer(ui, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	got := askAsync(context.Background(), path, call(`{}`), forever, nil)
	recv(t, ui.shown)
	cancel()
	if err := recv(t, done); err != nil {
		t.Errorf("Serve = %v, want nil", err)
	}
	if r := recv(t, got); !errors.Is(r.err, ErrNoApprover) {
		t.Errorf("Ask when the approver stops = %v, want ErrNoApprover", r.err)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Serve: %v, want it removed", err)
	}
	if err := srv.Serve(context.Background(), ln); err == nil {
		t.Error("second Serve = nil, want an error")
	}
}

// An answer given just before the approver stops still reaches the proxy.
func TestDecisionBeforeStop(t *testing.T) {
	t.Parallel()
	for range 20 {
		path := socketPath(t)
		ln, err := Listen(path)
		if err != nil {
			t.Fatal(err)
		}
		ui := newFakeUI()
		srv := NewServer(ui, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- srv.Serve(ctx, ln) }()
		got := askAsync(context.Background(), path, call(`{}`), forever, nil)
		if err := srv.Decide(recv(t, ui.shown), Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
			t.Fatal(err)
		}
		cancel()
		recv(t, done)
		if r := recv(t, got); r.err != nil || r.d.Scope != ScopeOnce {
			t.Fatalf("Ask = %+v, %v; want the answer given before the stop", r.d, r.err)
		}
	}
}

func dialRaw(tb testing.TB, path string) (net.Conn, *lineReader) {
	tb.Helper()
	nc, err := net.Dial("unix", path)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { nc.Close() })
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	return nc, newLineReader(nc, MaxLine)
}

func writeMsg(tb testing.TB, nc net.Conn, m *message) {
	tb.Helper()
	b, err := encode(m)
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := nc.Write(b); err != nil {
		tb.Fatal(err)
	}
}

func readMsg(tb testing.TB, lr *lineReader) *message {
	tb.Helper()
	line, err := lr.next()
	if err != nil {
		tb.Fatal(err)
	}
	m, err := decode(line)
	if err != nil {
		tb.Fatalf("decode %s: %v", line, err)
	}
	return m
}

// A proxy (or anything else) sending nonsense gets an error line and is
// disconnected; the approver shows nothing and goes on serving.
func TestMalformedFromClient(t *testing.T) {
	t.Parallel()
	_, ui, path := startServer(t, nil)
	good, err := prepare(call(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	line := func(m *message) string {
		b, err := encode(m)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	with := func(f func(r *Request)) string {
		r := good
		f(&r)
		return line(&message{Type: typeRequest, Request: &r})
	}
	tests := []struct {
		name, send, want string // want: in the error line; "" for a silent close
	}{
		{"not JSON", "hello\n", "not a JSON object"},
		{"no version", `{"type":"request"}` + "\n", "no protocol version"},
		{"future version", `{"v":3,"type":"request","shiny":true}` + "\n", "protocol version 3, want 2"},
		{"version 1", `{"v":1,"type":"request","request":{}}` + "\n", "protocol version 1, want 2"},
		{"unknown field", strings.Replace(line(&message{Type: typeRequest, Request: &good}), `"type"`, `"color":1,"type"`, 1), "unknown field"},
		{"unknown type", `{"v":2,"type":"approve","id":"x"}` + "\n", `unknown message type "approve"`},
		{"a decision from a proxy", line(&message{Type: typeDecision, Decision: &Decision{ID: "x", Key: strings.Repeat("ab", 32), Scope: ScopeAlways, Approver: "me", Via: ViaWindow, Decided: time.Now()}}), "decision message where a request was due"},
		{"detach first", line(&message{Type: typeDetach, ID: "x"}), "detach message where a request was due"},
		{"trailing data", strings.TrimSuffix(line(&message{Type: typeRequest, Request: &good}), "\n") + " {}\n", "after top-level value"},
		{"bad key", with(func(r *Request) { r.Key = "abc" }), "key must be 64 hex digits"},
		{"no tool", with(func(r *Request) { r.Tool = "" }), "no tool"},
		{"control character", with(func(r *Request) { r.Server = "a\x1b[2Jb" }), "server holds a control character"},
		{"truncated but not a string", with(func(r *Request) { r.ArgsTruncated, r.ArgsSize = true, 99 }), "truncated args must be a JSON string"},
		{"args not JSON", strings.Replace(line(&message{Type: typeRequest, Request: &good}), `"args":{}`, `"args":{`, 1), "malformed request"},
		{"oversized line", `{"v":2,"type":"request","request":{"description":"` + strings.Repeat("x", MaxLine) + "\"}}\n", "message longer than"},
		{"silence then close", "", ""},
		{"half a line then close", `{"v":2,`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			nc, lr := dialRaw(t, path)
			// Write while reading: the approver may answer before it has read
			// everything (an oversized line).
			go func() {
				nc.Write([]byte(tt.send))
				nc.(*net.UnixConn).CloseWrite()
			}()
			b, err := lr.next()
			if tt.want == "" {
				if err == nil {
					t.Fatalf("got %s, want the connection closed", b)
				}
				return
			}
			if err != nil {
				t.Fatalf("read the answer: %v", err)
			}
			m, err := decode(b)
			if err != nil || m.Type != typeError || !strings.Contains(m.Error, tt.want) {
				t.Fatalf("answer %s (%v), want an error with %q", b, err, tt.want)
			}
			if b, err := lr.next(); err == nil {
				t.Fatalf("after the error: %s, want the connection closed", b)
			}
		})
	}
	none(t, ui.shown)
	// The approver is fine.
	got := askAsync(context.Background(), path, call(`{}`), forever, nil)
	recv(t, ui.shown)
	_ = got
}

// keyMark stands for the request's Key in a reply: the impostor below puts
// the Key in its place.
const keyMark = "KEY-OF-THE-REQUEST"

// An approver (or an impostor) sending nonsense makes Ask fail closed.
func TestMalformedFromServer(t *testing.T) {
	t.Parallel()
	decision := func(f func(d *Decision)) func(id string) string {
		return func(id string) string {
			d := Decision{ID: id, Key: keyMark, Scope: ScopeOnce, Approver: "x", Via: ViaWindow, Decided: time.Now()}
			f(&d)
			b, _ := encode(&message{Type: typeDecision, Decision: &d})
			return string(b)
		}
	}
	fixed := func(s string) func(string) string { return func(string) string { return s } }
	pending := func(id string) string { return fmt.Sprintf(`{"v":2,"type":"pending","id":%q}`+"\n", id) }
	tests := []struct {
		name  string
		reply func(id string) string
		want  error
	}{
		{"not JSON", fixed("yes\n"), ErrProtocol},
		{"future version", fixed(`{"v":3,"type":"decision"}` + "\n"), ErrProtocol},
		{"version 1", func(id string) string {
			return strings.Replace(decision(func(*Decision) {})(id), `"v":2`, `"v":1`, 1)
		}, ErrProtocol},
		{"decision for another call", decision(func(d *Decision) { d.Key = strings.Repeat("ab", 32) }), ErrProtocol},
		{"decision without key", decision(func(d *Decision) { d.Key = "" }), ErrProtocol},
		{"decision without via", decision(func(d *Decision) { d.Via = "" }), ErrProtocol},
		{"unknown via", decision(func(d *Decision) { d.Via = "person" }), ErrProtocol},
		{"unknown scope", func(id string) string {
			return strings.Replace(decision(func(*Decision) {})(id), `"scope":"once"`, `"scope":"forever"`, 1)
		}, ErrProtocol},
		{"minutes without count", decision(func(d *Decision) { d.Scope = ScopeMinutes }), ErrProtocol},
		{"minutes too many", decision(func(d *Decision) { d.Scope, d.Minutes = ScopeMinutes, MaxMinutes+1 }), ErrProtocol},
		{"decision for another request", decision(func(d *Decision) { d.ID = "other" }), ErrProtocol},
		{"decision without time", decision(func(d *Decision) { d.Decided = time.Time{} }), ErrProtocol},
		{"detached before detach", func(id string) string { return fmt.Sprintf(`{"v":2,"type":"detached","id":%q}`+"\n", id) }, ErrProtocol},
		{"pending then nonsense", func(id string) string { return pending(id) + "{}\n" }, ErrProtocol},
		{"oversized line", fixed(`{"v":2,"type":"error","error":"` + strings.Repeat("x", maxReply) + "\"}\n"), ErrProtocol},
		{"half a line", fixed(`{"v":2,"type":`), ErrProtocol},
		{"an error", fixed(`{"v":2,"type":"error","error":"busy"}` + "\n"), ErrRejected},
		{"closes at once", fixed(""), ErrNoApprover},
		{"closes while pending", pending, ErrNoApprover},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := socketPath(t)
			ln, err := net.Listen("unix", path)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			go func() {
				nc, err := ln.Accept()
				if err != nil {
					return
				}
				defer nc.Close()
				line, err := newLineReader(nc, MaxLine).next()
				if err != nil {
					return
				}
				m, err := decode(line)
				if err != nil {
					return
				}
				nc.Write([]byte(strings.ReplaceAll(tt.reply(m.Request.ID), keyMark, m.Request.Key)))
			}()
			_, err = Ask(context.Background(), path, call(`{}`), forever, nil)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Ask = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestSecondApproverRefused(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	ln, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = Listen(path)
	if !errors.Is(err, ErrApproverRunning) {
		t.Fatalf("second Listen = %v, want ErrApproverRunning", err)
	}
	if want := fmt.Sprintf("another approver is running: pid %d", os.Getpid()); err.Error() != want {
		t.Errorf("second Listen = %q, want %q", err, want)
	}
	// The process can tell the approver is itself.
	var re *RunningError
	if !errors.As(err, &re) || !re.Self() {
		t.Errorf("second Listen = %#v, want a RunningError whose Self is true", err)
	}
	// Once the first stops, the socket is gone and another may start.
	ln.Close()
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v, want it removed", err)
	}
	ln, err = Listen(path)
	if err != nil {
		t.Fatalf("Listen after the first approver stopped = %v", err)
	}
	ln.Close()
}

func TestStaleSocketReplaced(t *testing.T) {
	t.Parallel()
	path := socketPath(t)
	old, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	// A live socket that holds no lock (another approver on a file system
	// without locks) is refused too.
	if _, err := Listen(path); !errors.Is(err, ErrApproverRunning) {
		t.Fatalf("Listen beside a live socket = %v, want ErrApproverRunning", err)
	}
	old.(*net.UnixListener).SetUnlinkOnClose(false)
	old.Close() // the approver died, its socket file stays
	ln, err := Listen(path)
	if err != nil {
		t.Fatalf("Listen over a stale socket = %v", err)
	}
	ui := newFakeUI()
	srv := NewServer(ui, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go srv.Serve(ctx, ln)
	got := askAsync(context.Background(), path, call(`{}`), forever, nil)
	if err := srv.Decide(recv(t, ui.shown), Answer{Scope: ScopeDeny, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got); r.err != nil || r.d.Scope != ScopeDeny || r.d.Scope.Allows() {
		t.Errorf("Ask = %+v, %v; want deny", r.d, r.err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("socket: %v, %v; want mode 0600", fi.Mode(), err)
	}
}

func TestListenRefuses(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("file modes do not apply on Windows")
	}
	t.Parallel()
	path := socketPath(t)
	os.Chmod(filepath.Dir(path), 0o755)
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "open to other users") {
		t.Errorf("Listen in a folder others can enter = %v, want a refusal", err)
	}
	os.Chmod(filepath.Dir(path), 0o700)
	os.WriteFile(path, []byte("not a socket"), 0o600)
	if _, err := Listen(path); err == nil || !strings.Contains(err.Error(), "not a socket") {
		t.Errorf("Listen over a regular file = %v, want a refusal", err)
	}
	long := filepath.Join(filepath.Dir(path), strings.Repeat("x", 120), SocketFile)
	if _, err := Listen(long); err == nil || !strings.Contains(err.Error(), "choose a shorter home folder") {
		t.Errorf("Listen on a long path = %v, want a refusal", err)
	}
}

// The peer check itself, with made-up credentials.
func TestSameUser(t *testing.T) {
	t.Parallel()
	tests := []struct {
		peer, self int
		ok         bool
	}{
		{1000, 1000, true},
		{0, 0, true},
		{1001, 1000, false},
		{0, 1000, false}, // root is another user too
		{1000, 0, false},
	}
	for _, tt := range tests {
		if err := sameUser(tt.peer, tt.self); (err == nil) != tt.ok {
			t.Errorf("sameUser(%d, %d) = %v, want ok %v", tt.peer, tt.self, err, tt.ok)
		}
	}
}

// helper runs in a child process of TestOtherUserRefused.
func helper(mode, path string) int {
	switch mode {
	case "raw":
		nc, err := net.Dial("unix", path)
		if err != nil {
			fmt.Println(err)
			return 1
		}
		req, _ := prepare(call(`{}`))
		b, _ := encode(&message{Type: typeRequest, Request: &req})
		nc.Write(b)
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		line, err := newLineReader(nc, maxReply).next()
		fmt.Printf("%s %v\n", line, err)
	case "ask":
		_, err := Ask(context.Background(), path, call(`{}`), 0, nil)
		fmt.Println(err)
	case "write-fd3":
		// A process the listener handed its connection to writes on it.
		f := os.NewFile(3, "conn")
		if _, err := f.WriteString(`{"v":2,"type":"pending","id":"x","approver":"forged"}` + "\n"); err != nil {
			fmt.Println(err)
			return 1
		}
	}
	return 0
}

func TestCallKey(t *testing.T) {
	t.Parallel()
	base := call(`{"a":1,"b":[true,null,"x"]}`)
	key := func(f func(r *Request)) string {
		r := base
		f(&r)
		k, err := CallKey(r)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	want := key(func(*Request) {})
	same := map[string]func(r *Request){
		"key order and space": func(r *Request) { r.Args = json.RawMessage(" { \"b\" : [true, null, \"x\"],\n\"a\":1 } ") },
		"another id":          func(r *Request) { r.ID = "x" },
		"another session":     func(r *Request) { r.Session = "s9" },
		"another risk":        func(r *Request) { r.Risk = "low" },
		"another description": func(r *Request) { r.Description = "changed" },
	}
	for name, f := range same {
		if got := key(f); got != want {
			t.Errorf("%s: key %s, want %s", name, got, want)
		}
	}
	differ := map[string]func(r *Request){
		"another server":    func(r *Request) { r.Server = "gitlab" },
		"another tool":      func(r *Request) { r.Tool = "delete_issue" },
		"another client":    func(r *Request) { r.Client = "cursor" },
		"another value":     func(r *Request) { r.Args = json.RawMessage(`{"a":2,"b":[true,null,"x"]}`) },
		"number as written": func(r *Request) { r.Args = json.RawMessage(`{"a":1.0,"b":[true,null,"x"]}`) },
		"a changed tool":    func(r *Request) { r.Change = &Change{Old: json.RawMessage(`{}`), New: json.RawMessage(`{"d":1}`)} },
		"fields run into":   func(r *Request) { r.Server, r.Tool = "githubcreate", "_issue" },
		"array order":       func(r *Request) { r.Args = json.RawMessage(`{"a":1,"b":[null,true,"x"]}`) },
	}
	for name, f := range differ {
		if got := key(f); got == want {
			t.Errorf("%s: same key as the base call", name)
		}
	}
	empty := key(func(r *Request) { r.Args = nil })
	for _, args := range []string{`{}`, `null`, ` `} {
		if got := key(func(r *Request) { r.Args = json.RawMessage(args) }); got != empty {
			t.Errorf("args %q: key differs from absent arguments", args)
		}
	}
	for _, args := range []string{`{`, `{"a":1} x`, `nope`} {
		r := base
		r.Args = json.RawMessage(args)
		if _, err := CallKey(r); err == nil {
			t.Errorf("CallKey with args %q = nil error, want one", args)
		}
		if _, err := Ask(context.Background(), "/nonexistent", r, 0, nil); err == nil || errors.Is(err, ErrNoApprover) {
			t.Errorf("Ask with args %q = %v, want an arguments error", args, err)
		}
	}
}

func TestLargeRequestsAreCut(t *testing.T) {
	t.Parallel()
	_, ui, path := startServer(t, nil)
	// Quotes double in a JSON string: the cut must count the escapes.
	big := `{"text":"` + strings.Repeat(`\"é`, MaxArgs) + `","z":`
	reqA, reqB := call(big+`1}`), call(big+`2}`)
	reqB.Session = "s2" // shown beside reqA, not after it
	reqA.Description = strings.Repeat("ü", MaxDescription)
	reqA.Change = &Change{Old: json.RawMessage(`{"description":"old"}`), New: json.RawMessage(`{"description":"` + strings.Repeat("n", 2*MaxArgs) + `"}`)}
	reqA.Tool = strings.Repeat("t", 2*maxField)
	for _, req := range []Request{reqA, reqB} {
		if _, err := Ask(context.Background(), path, req, 0, nil); !errors.Is(err, ErrPending) {
			t.Fatalf("Ask = %v, want ErrPending", err)
		}
	}
	a, b := recv(t, ui.shown), recv(t, ui.shown)
	if a.Key == b.Key {
		t.Error("calls that differ after the cut share a key")
	}
	if !a.ArgsTruncated || len(a.Args) > MaxArgs || a.ArgsSize <= MaxArgs {
		t.Errorf("args: truncated %v, %d bytes sent, size %d; want cut to %d with the full size", a.ArgsTruncated, len(a.Args), a.ArgsSize, MaxArgs)
	}
	var s string
	if err := json.Unmarshal(a.Args, &s); err != nil || !strings.HasPrefix(s, `{"text":"\"é\"é`) {
		t.Errorf("cut args = %.40q (%v), want a JSON string holding their canonical start", a.Args, err)
	}
	if len(a.Description) > MaxDescription || !strings.HasSuffix(a.Description, "…") {
		t.Errorf("description: %d bytes, want at most %d, marked cut", len(a.Description), MaxDescription)
	}
	if c := a.Change; c == nil || !c.Truncated || string(c.Old) != `{"description":"old"}` || len(c.New) > MaxArgs {
		t.Errorf("change = %+v, want the new definition cut", c)
	}
	if len(a.Tool) > maxField {
		t.Errorf("tool name: %d bytes, want at most %d", len(a.Tool), maxField)
	}
}

func TestDecideChecks(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	Ask(context.Background(), path, call(`{}`), 0, nil)
	id := recv(t, ui.shown).ID
	for _, tt := range []struct {
		scope   Scope
		minutes int
	}{{"forever", 0}, {ScopeMinutes, 0}, {ScopeMinutes, MaxMinutes + 1}, {ScopeOnce, 5}, {"", 0}} {
		if err := srv.Decide(openRequest(srv, id), Answer{Scope: tt.scope, Minutes: tt.minutes, Via: ViaTerminal}); err == nil {
			t.Errorf("Decide(%q, %d) = nil, want an error", tt.scope, tt.minutes)
		}
	}
	if err := srv.Decide(openRequest(srv, "nobody"), Answer{Scope: ScopeOnce, Via: ViaTerminal}); !errors.Is(err, ErrNotOpen) {
		t.Errorf("Decide on an unknown request = %v, want ErrNotOpen", err)
	}
	for _, via := range []Via{"", "person", ViaGrant} {
		if err := srv.Decide(openRequest(srv, id), Answer{Scope: ScopeOnce, Via: via}); err == nil {
			t.Errorf("Decide via %q = nil, want an error", via)
		}
	}
	if err := srv.Decide(openRequest(srv, id), Answer{Scope: ScopeMinutes, Minutes: MaxMinutes, Via: ViaTerminal}); err != nil {
		t.Errorf("Decide for a day = %v", err)
	}
}

func TestParseScope(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"once", "session", "minutes", "always", "deny", "always-deny"} {
		if sc, err := ParseScope(s); err != nil || string(sc) != s {
			t.Errorf("ParseScope(%q) = %q, %v", s, sc, err)
		}
	}
	for _, s := range []string{"", "Once", "allow", "always_deny"} {
		if _, err := ParseScope(s); err == nil {
			t.Errorf("ParseScope(%q) = nil error, want one", s)
		}
	}
}

func TestLineReader(t *testing.T) {
	t.Parallel()
	lr := newLineReader(strings.NewReader("one\r\ntwo\n"+strings.Repeat("x", 20)+"\nlast"), 10)
	for _, want := range []string{"one", "two"} {
		if b, err := lr.next(); err != nil || string(b) != want {
			t.Errorf("next() = %q, %v; want %q", b, err, want)
		}
	}
	if _, err := lr.next(); !errors.Is(err, errLineTooLong) {
		t.Errorf("next() on a long line = %v, want errLineTooLong", err)
	}
}

func FuzzDecode(f *testing.F) {
	req, _ := prepare(call(`{"a":[1,2,{"b":null}]}`))
	for _, m := range []*message{
		{Type: typeRequest, Request: &req},
		{Type: typePending, ID: "x", Approver: "tray"},
		{Type: typeDecision, Decision: &Decision{ID: "x", Scope: ScopeMinutes, Minutes: 5, Approver: "t", Decided: time.Now()}},
		{Type: typeDetach, ID: "x"},
		{Type: typeError, Error: "no"},
	} {
		b, _ := encode(m)
		f.Add(bytes.TrimSuffix(b, []byte("\n")))
	}
	f.Add([]byte(`{"v":1}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		m, err := decode(line)
		if err != nil {
			return
		}
		// What decodes, encodes and decodes again to the same message.
		b, err := encode(m)
		if err != nil {
			t.Fatal(err)
		}
		m2, err := decode(bytes.TrimSuffix(b, []byte("\n")))
		if err != nil {
			t.Fatalf("decode(encode(%s)) = %v", line, err)
		}
		b2, _ := encode(m2)
		if !bytes.Equal(b, b2) {
			t.Fatalf("round trip changed %s into %s", b, b2)
		}
	})
}

func FuzzCanonical(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[1.50,"x\u00e9"]}`, `null`, `"\ud800"`, `{"a":{"a":{}}}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		c, err := canonical(raw)
		if err != nil {
			return
		}
		c2, err := canonical(c)
		if err != nil || !bytes.Equal(c, c2) {
			t.Fatalf("canonical(%s) = %s, again = %s, %v", raw, c, c2, err)
		}
		if cut, ok := clip(c, 16); len(cut) > 16 || !json.Valid(cut) || ok != (len(c) > 16) {
			t.Fatalf("clip(%s, 16) = %s, %v", c, cut, ok)
		}
	})
}

// The approver check, on made-up paths.
func TestApproverProgram(t *testing.T) {
	tests := []struct {
		exe, self string
		ok        bool
	}{
		{"/usr/bin/gatehouse-app", "/usr/bin/gatehouse", true},
		{"/usr/bin/gatehouse", "/usr/bin/gatehouse", true},
		{"/usr/bin/gatehouse-app (deleted)", "/usr/bin/gatehouse", true},
		{"/tmp/x/app.test", "/tmp/x/app.test", true},
		{"/usr/bin/python3", "/tmp/x/approval.test", true}, // a program that is not Gatehouse's asks without the check
		{"/home/me/.local/bin/gatehouse-app", "/usr/bin/gatehouse", false},
		{"/usr/bin/python3", "/usr/bin/gatehouse", false},
		{"/usr/bin/gatehouse-app-evil", "/usr/bin/gatehouse", false},
		{`C:\Program Files\Gatehouse\gatehouse-app.exe`, `C:\Program Files\Gatehouse\gatehouse.exe`, true},
	}
	for _, tt := range tests {
		if err := approverProgram(tt.exe, tt.self); (err == nil) != tt.ok {
			t.Errorf("approverProgram(%q, %q) = %v, want ok %v", tt.exe, tt.self, err, tt.ok)
		}
	}
}

// An answer is for the call shown: a request withdrawn while on screen and
// replaced by another call under the same ID is not answered by it, and a
// decision names the Key of the call it answers.
func TestAnswerBoundToShownCall(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	x := call(`{"title":"harmless"}`)
	x.ID = "same-id"
	gone := askAsync(ctx, path, x, forever, nil)
	shown := recv(t, ui.shown)
	cancel() // the asker goes away: withdrawn
	recv(t, gone)
	if got := recv(t, ui.withdrawn); got != "same-id" {
		t.Fatalf("withdrawn %q, want same-id", got)
	}
	y := call(`{"title":"harmful"}`)
	y.ID = "same-id"
	mustPend(t, path, y)
	replaced := recv(t, ui.shown)
	if err := srv.Decide(shown, Answer{Scope: ScopeOnce, Via: ViaWindow}); !errors.Is(err, ErrNotOpen) {
		t.Fatalf("Decide(the request shown before, once) = %v, want ErrNotOpen", err)
	}
	// Nothing was kept for the other call: it is still open.
	if _, err := Ask(context.Background(), path, y, 0, nil); !errors.Is(err, ErrRejected) {
		// y's ID is still open: the same ID again is refused.
		t.Fatalf("Ask(the other call, same id) = %v, want ErrRejected", err)
	}
	y.ID = "another-id"
	if _, err := Ask(context.Background(), path, y, 0, nil); !errors.Is(err, ErrPending) {
		t.Fatalf("Ask(the other call) = %v, want ErrPending: no answer was given for it", err)
	}
	// Answered as shown, it is answered, with its Key.
	if err := srv.Decide(replaced, Answer{Scope: ScopeOnce, Via: ViaWindow}); err != nil {
		t.Fatalf("Decide(the request shown now) = %v", err)
	}
	y.ID = "third-id"
	d, err := Ask(context.Background(), path, y, 0, nil)
	if err != nil || d.Key != replaced.Key || d.Via != ViaWindow {
		t.Fatalf("Ask(the other call) = %+v, %v; want once with key %s via window", d, err, replaced.Key)
	}
}

// Two open requests never share an ID, even when the second would join the
// first's call.
func TestDuplicateIDRefused(t *testing.T) {
	t.Parallel()
	_, ui, path := startServer(t, nil)
	mustPend(t, path, asked("one", "A", `{"n":1}`))
	recv(t, ui.shown)
	mustPend(t, path, asked("two", "A", `{"n":2}`))
	for _, tt := range []struct{ name, args string }{
		{"another call", `{"n":3}`},
		{"the call of the other id", `{"n":2}`},
	} {
		mustReject(t, path, asked("one", "B", tt.args), "duplicate request id")
	}
}

// A kept answer answers the call it was given for as the person gave it;
// used again for an identical call, it is a grant: nobody was asked.
func TestKeptAnswerReusedIsGrant(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	mustPend(t, path, call(`{"title":"Bug"}`))
	if err := srv.Decide(recv(t, ui.shown), Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	for i, want := range []Via{ViaTerminal, ViaGrant, ViaGrant} {
		d, err := Ask(context.Background(), path, call(`{"title":"Bug"}`), 0, nil)
		if err != nil || d.Scope != ScopeAlways || d.Via != want {
			t.Errorf("identical call %d = %+v, %v; want always via %s", i+1, d, err, want)
		}
	}
}
