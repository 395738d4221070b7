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

	mu         sync.Mutex
	shown      []approval.Request // guarded by mu
	onWithdraw func(id string)    // guarded by mu
	stop       func()
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
		a.DecideShown(req, scope)
	}
}

// Withdraw implements approval.UI.
func (a *Approver) Withdraw(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.onWithdraw != nil {
		a.onWithdraw(id)
	}
}

// OnWithdraw calls f (on the approver's goroutine) with the ID of each
// request withdrawn from now on.
func (a *Approver) OnWithdraw(f func(id string)) {
	a.mu.Lock()
	a.onWithdraw = f
	a.mu.Unlock()
}

// Decide answers later the open request last shown with the given ID.
func (a *Approver) Decide(id string, scope approval.Scope) error {
	a.mu.Lock()
	var shown approval.Request
	for _, r := range a.shown {
		if r.ID == id {
			shown = r
		}
	}
	a.mu.Unlock()
	return a.DecideShown(shown, scope)
}

// DecideShown answers req, as it was shown. A script decides, so the answer
// comes as automatic.
func (a *Approver) DecideShown(req approval.Request, scope approval.Scope) error {
	return a.srv.Decide(req, approval.Answer{Scope: scope, Via: approval.ViaAutomatic})
}

// Shown returns the requests shown so far.
func (a *Approver) Shown() []approval.Request {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]approval.Request(nil), a.shown...)
}

// Stop stops listening; open requests end (their proxies deny).
func (a *Approver) Stop() { a.stop() }
