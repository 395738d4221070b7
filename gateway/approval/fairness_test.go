package approval

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// asked returns the request with the given ID of a session, for a call with
// args.
func asked(id, session, args string) Request {
	r := call(args)
	r.ID, r.Session = id, session
	return r
}

// mustPend asks without waiting, and fails the test unless the approver took
// the request: it stays open, for its session's next identical call.
func mustPend(tb testing.TB, path string, req Request) {
	tb.Helper()
	if _, err := Ask(context.Background(), path, req, 0, nil); !errors.Is(err, ErrPending) {
		tb.Fatalf("Ask(%s from %s) = %v, want ErrPending", req.ID, req.Session, err)
	}
}

// mustReject asks, and fails the test unless the approver refused the
// request with an error that says want.
func mustReject(tb testing.TB, path string, req Request, want string) {
	tb.Helper()
	_, err := Ask(context.Background(), path, req, 0, nil)
	if !errors.Is(err, ErrRejected) || !strings.Contains(err.Error(), want) {
		tb.Fatalf("Ask(%s from %s) = %v, want ErrRejected saying %q", req.ID, req.Session, err, want)
	}
}

func openIDs(srv *Server) string {
	var ids []string
	for _, r := range srv.Requests() {
		ids = append(ids, r.ID)
	}
	return strings.Join(ids, " ")
}

// A session at its bound is refused at once, saying so; other sessions are
// not; an answer makes room again.
func TestSessionBound(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, &Options{Approver: "test", MaxOpenPerSession: 3})
	mustPend(t, path, asked("a1", "A", `{"a":1}`))
	mustPend(t, path, asked("a2", "A", `{"a":2}`))
	mustPend(t, path, asked("a3", "A", `{"a":3}`))
	const atBound = "this session has reached its limit of 3 open approval requests"
	mustReject(t, path, asked("a4", "A", `{"a":4}`), atBound)

	// Another session's request is taken, and shown, while A's are open.
	mustPend(t, path, asked("b1", "B", `{"b":1}`))
	if got := recv(t, ui.shown).ID; got != "a1" {
		t.Errorf("shown first: %s, want a1", got)
	}
	if got := recv(t, ui.shown).ID; got != "b1" {
		t.Errorf("shown second: %s, want b1 (A's other requests wait for A's turn)", got)
	}

	// At its bound, A may still call again a call it is waiting on: that is
	// how it picks up the answer.
	mustPend(t, path, asked("a2-again", "A", `{"a":2}`))
	if got, want := openIDs(srv), "a1 a2 a3 b1"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}

	// An answer makes room for one more.
	if err := srv.Decide(openRequest(srv, "a1"), Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if got := recv(t, ui.shown).ID; got != "a2" {
		t.Errorf("shown after a1's answer: %s, want a2", got)
	}
	mustPend(t, path, asked("a4", "A", `{"a":4}`))
	mustReject(t, path, asked("a5", "A", `{"a":5}`), atBound)
	// The answer kept for a1's next call takes no place.
	if d, err := Ask(context.Background(), path, asked("a1-again", "A", `{"a":1}`), 0, nil); err != nil || d.Scope != ScopeOnce {
		t.Errorf("a1 called again = %+v, %v; want the kept answer, once", d, err)
	}
	if got, want := openIDs(srv), "a2 a3 b1 a4"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}
}

// A call that joins a request another session asked (the same Key) counts
// against the session that joins it as well, and a request counts against
// a session only while that session wants its answer.
func TestJoinedRequestCounts(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, &Options{Approver: "test", MaxOpenPerSession: 2})
	const atBound = "this session has reached its limit of 2 open approval requests"
	mustPend(t, path, asked("x", "A", `{"x":1}`))
	mustPend(t, path, asked("y", "A", `{"y":1}`))
	if got := recv(t, ui.shown).ID; got != "x" {
		t.Fatalf("shown: %s, want x", got)
	}

	// B joins y, which waits for A's turn: it is shown on B's turn, at
	// once, as A asked it.
	mustPend(t, path, asked("y-b", "B", `{"y":1}`))
	if got := recv(t, ui.shown); got.ID != "y" || got.Session != "A" {
		t.Errorf("shown: %s of %s, want y of A", got.ID, got.Session)
	}
	// The join took one of B's two places.
	mustPend(t, path, asked("z", "B", `{"z":1}`))
	mustReject(t, path, asked("w", "B", `{"w":1}`), atBound)
	mustReject(t, path, asked("x-b", "B", `{"x":1}`), atBound) // joining costs a place too
	if got, want := openIDs(srv), "x y z"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}

	// Once y is answered, it counts against neither.
	if err := srv.Decide(openRequest(srv, "y"), Answer{Scope: ScopeAlways, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	mustPend(t, path, asked("w", "B", `{"w":1}`))
	mustPend(t, path, asked("v", "A", `{"v":1}`))

	// C waits on q; D calls q too but stops waiting, and does not want it
	// kept (its Expires has passed): q counts against C alone.
	waiting := make(chan bool, 1)
	got := askAsync(context.Background(), path, asked("q", "C", `{"q":1}`), forever, func(time.Duration) {
		select {
		case waiting <- true:
		default:
		}
	})
	recv(t, waiting)
	qd := asked("q-d", "D", `{"q":1}`)
	qd.Expires = time.Now().Add(-time.Second)
	mustPend(t, path, qd)
	mustPend(t, path, asked("d1", "D", `{"d":1}`))
	mustPend(t, path, asked("d2", "D", `{"d":2}`))
	mustReject(t, path, asked("d3", "D", `{"d":3}`), atBound)
	if err := srv.Decide(openRequest(srv, "q"), Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	if r := recv(t, got); r.err != nil || r.d.Scope != ScopeOnce {
		t.Errorf("C's call = %+v, %v; want once", r.d, r.err)
	}
}

// The bound on all sessions together holds, past the bound of each.
func TestGlobalBound(t *testing.T) {
	t.Parallel()
	srv, _, path := startServer(t, &Options{Approver: "test", MaxOpen: 3, MaxOpenPerSession: 2})
	const full = "the approver has reached its limit of 3 open approval requests from all sessions"
	mustPend(t, path, asked("a1", "A", `{"a":1}`))
	mustPend(t, path, asked("a2", "A", `{"a":2}`))
	mustPend(t, path, asked("b1", "B", `{"b":1}`))
	mustReject(t, path, asked("b2", "B", `{"b":2}`), full)
	mustReject(t, path, asked("c1", "C", `{"c":1}`), full)
	// A session at its own bound hears of its own.
	mustReject(t, path, asked("a3", "A", `{"a":3}`), "this session has reached its limit of 2")
	// Joining an open request opens none.
	mustPend(t, path, asked("a1-c", "C", `{"a":1}`))
	if got, want := openIDs(srv), "a1 a2 b1"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}
	if err := srv.Decide(openRequest(srv, "b1"), Answer{Scope: ScopeDeny, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	mustPend(t, path, asked("c1", "C", `{"c":1}`))
}

// A person who answers the oldest request on screen, as the tray's window
// and `gatehouse approvals` do, takes the sessions in turn: one session's
// many calls do not come before another session's one.
func TestSessionsTakeTurns(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	for _, r := range []Request{
		asked("a1", "A", `{"a":1}`), asked("a2", "A", `{"a":2}`), asked("a3", "A", `{"a":3}`),
		asked("b1", "B", `{"b":1}`), asked("b2", "B", `{"b":2}`),
	} {
		mustPend(t, path, r)
	}
	if got, want := openIDs(srv), "a1 a2 a3 b1 b2"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}
	screen := []string{recv(t, ui.shown).ID, recv(t, ui.shown).ID}
	var answered []string
	for len(screen) > 0 {
		id := screen[0]
		screen = screen[1:]
		if err := srv.Decide(openRequest(srv, id), Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
			t.Fatal(err)
		}
		answered = append(answered, id)
		if len(answered) < 4 { // the last two answers leave no request to show
			screen = append(screen, recv(t, ui.shown).ID)
		}
	}
	if got, want := strings.Join(answered, " "), "a1 b1 a2 b2 a3"; got != want {
		t.Errorf("requests in the order answered: %s, want %s", got, want)
	}
	if got := openIDs(srv); got != "" {
		t.Errorf("open requests after every answer: %s, want none", got)
	}
}

// A request that ends while it waits for its turn was never shown: the UI is
// not told to withdraw it.
func TestWaitingRequestEnds(t *testing.T) {
	t.Parallel()
	srv, ui, path := startServer(t, nil)
	mustPend(t, path, asked("a1", "A", `{"a":1}`))
	gone := asked("a2", "A", `{"a":2}`)
	gone.Expires = time.Now().Add(-time.Second)
	mustPend(t, path, gone)
	if got, want := openIDs(srv), "a1"; got != want {
		t.Errorf("open requests: %s, want %s", got, want)
	}
	if err := srv.Decide(openRequest(srv, "a1"), Answer{Scope: ScopeOnce, Via: ViaTerminal}); err != nil {
		t.Fatal(err)
	}
	mustPend(t, path, asked("a3", "A", `{"a":3}`))
	for _, want := range []string{"a1", "a3"} {
		if got := recv(t, ui.shown).ID; got != want {
			t.Errorf("shown %s, want %s", got, want)
		}
	}
	// The UI hears of events in order: a withdrawal of a2 would have come
	// before a3 was shown.
	none(t, ui.withdrawn)
}

// openRequest returns the open request with the given ID, as the approver
// shows it; one with no Key when none is open.
func openRequest(srv *Server, id string) Request {
	for _, r := range srv.Requests() {
		if r.ID == id {
			return r
		}
	}
	return Request{ID: id}
}
