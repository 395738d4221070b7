package proof

import (
	"context"
	"fmt"
	"sync"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// An Approver answers a lab's approval requests as a script says, in the
// evaluation's process: on the lab's socket, with the approval package's
// server, as the tray app and `gatehouse approvals` do.
type Approver struct {
	srv    *approval.Server
	answer func(n int, req approval.Request) (approval.Scope, bool) // false: leave it unanswered

	mu    sync.Mutex
	shown []approval.Request // guarded by mu
	stop  func()
}

// StartApprover listens on l's approval socket and answers each request
// (numbered from 1 as shown) with answer's scope, or leaves it open when
// answer says false.
func (l *Lab) StartApprover(answer func(n int, req approval.Request) (approval.Scope, bool)) (*Approver, error) {
	ln, err := approval.Listen(approval.SocketPath(l.Home))
	if err != nil {
		return nil, fmt.Errorf("listen for approval requests: %w", err)
	}
	a := &Approver{answer: answer}
	a.srv = approval.NewServer(a, &approval.Options{Approver: "eval"})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.srv.Serve(ctx, ln); close(done) }()
	a.stop = func() { cancel(); <-done }
	return a, nil
}

// Show implements approval.UI.
func (a *Approver) Show(req approval.Request) {
	a.mu.Lock()
	a.shown = append(a.shown, req)
	n := len(a.shown)
	a.mu.Unlock()
	if scope, ok := a.answer(n, req); ok {
		a.srv.Decide(req.ID, scope, 0)
	}
}

// Withdraw implements approval.UI.
func (a *Approver) Withdraw(string) {}

// Decide answers an open request later.
func (a *Approver) Decide(id string, scope approval.Scope) error {
	return a.srv.Decide(id, scope, 0)
}

// Shown returns the requests shown so far.
func (a *Approver) Shown() []approval.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approval.Request(nil), a.shown...)
}

// Stop stops listening; open requests end (their proxies deny).
func (a *Approver) Stop() { a.stop() }
