package approval

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"
)

// ProgressEvery is how often [Ask] reports that it is still waiting.
const ProgressEvery = 5 * time.Second

// Timeouts of the client side. A live approver answers a request at once
// (pending, or a kept decision) and a detach at once; one that does not is
// as good as none.
const (
	dialTimeout = 2 * time.Second
	ackTimeout  = 5 * time.Second
	ioTimeout   = 5 * time.Second
)

// errForgedAnswer is an answer written by a process that is not an
// approver, on a connection an approver's program listened for.
var errForgedAnswer = errors.New("an answer written by another program than the approver")

// progressEvery is ProgressEvery; tests shorten it.
var progressEvery = ProgressEvery

// Ask asks the approver listening on socketPath to approve req, and waits at
// most wait for the answer (a wait of zero or less returns as soon as the
// approver has the request). It sets req's ID (when empty) and Key, and cuts
// Args, Description and Change to the protocol's limits.
//
// A nil error returns a decision for req: its ID and Key are req's. Ask
// refuses one whose Key is another's ([ErrProtocol]).
//
// The error is [ErrNoApprover] when nobody listens or the approver stops,
// [ErrPending] when the wait passed with no answer (the next identical call
// gets it), [ErrRejected] or [ErrProtocol] when the approver refused the
// request or answered nonsense, the context's error when ctx ended first
// (the request is then withdrawn), and another error for a request that
// cannot be sent (arguments that are not JSON). In every case but a nil
// error, the call must not run.
//
// progress, when not nil, is called on Ask's goroutine every
// [ProgressEvery] while a person sees the request, with the time waited.
func Ask(ctx context.Context, socketPath string, req Request, wait time.Duration, progress func(waited time.Duration)) (Decision, error) {
	start := time.Now()
	req, err := prepare(req)
	if err != nil {
		return Decision{}, fmt.Errorf("ask approver: %w", err)
	}
	req.WaitUntil = time.Time{}
	if wait > 0 {
		req.WaitUntil = start.Add(wait).UTC()
	}
	d := net.Dialer{Timeout: dialTimeout, Control: passCredentials}
	nc, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		if ctx.Err() != nil {
			return Decision{}, ctx.Err()
		}
		return Decision{}, fmt.Errorf("%w (%v)", ErrNoApprover, err)
	}
	defer nc.Close()
	if err := checkPeer(nc); err != nil {
		return Decision{}, fmt.Errorf("%w (the approver's socket: %v)", ErrNoApprover, err)
	}
	if err := checkApprover(nc); err != nil {
		return Decision{}, fmt.Errorf("%w (refused: %v)", ErrNoApprover, err)
	}
	// Every answer is read with its writer's credentials, checked as the
	// listener's were: the listener may have handed the connection on.
	if nc, err = verifiedReads(nc); err != nil {
		return Decision{}, fmt.Errorf("%w (%v)", ErrNoApprover, err)
	}
	// A cancelled ctx closes the connection without a detach: the approver
	// withdraws the request.
	stop := context.AfterFunc(ctx, func() { nc.Close() })
	defer stop()
	a := &asker{nc: nc, lr: newLineReader(nc, maxReply), id: req.ID, key: req.Key}
	d1, err := a.ask(ctx, &req, start, wait, progress)
	if err != nil && ctx.Err() != nil {
		return Decision{}, ctx.Err()
	}
	return d1, err
}

// asker is one Ask's connection.
type asker struct {
	nc  net.Conn
	lr  *lineReader
	id  string
	key string // the request's Key: a decision MUST carry it
}

func (a *asker) ask(ctx context.Context, req *Request, start time.Time, wait time.Duration, progress func(time.Duration)) (Decision, error) {
	if err := a.send(&message{Type: typeRequest, Request: req}); err != nil {
		return Decision{}, fmt.Errorf("%w (send the request: %v)", ErrNoApprover, err)
	}

	// The first answer comes at once: pending, or a kept decision.
	a.nc.SetReadDeadline(time.Now().Add(ackTimeout))
	m, err := a.read()
	switch {
	case isTimeout(err):
		return Decision{}, fmt.Errorf("%w (the approver did not acknowledge the request)", ErrNoApprover)
	case err != nil:
		return Decision{}, err
	case m.Type == typeDecision:
		return *m.Decision, nil
	case m.Type != typePending:
		return Decision{}, fmt.Errorf("%w: %s message where pending was due", ErrProtocol, m.Type)
	}

	deadline := start.Add(wait)
	tick := time.Now()
	for time.Now().Before(deadline) {
		next := deadline
		if progress != nil {
			tick = tick.Add(progressEvery)
			if tick.Before(next) {
				next = tick
			}
		}
		a.nc.SetReadDeadline(next)
		m, err := a.read()
		switch {
		case isTimeout(err):
			if progress != nil && !time.Now().Before(tick) && ctx.Err() == nil {
				progress(time.Since(start))
			}
			continue
		case err != nil:
			return Decision{}, err
		case m.Type == typeDecision:
			return *m.Decision, nil
		default:
			return Decision{}, fmt.Errorf("%w: %s message while waiting for a decision", ErrProtocol, m.Type)
		}
	}

	// The wait is over: detach, and take a decision that crossed the detach.
	if err := a.send(&message{Type: typeDetach, ID: a.id}); err != nil {
		return Decision{}, fmt.Errorf("%w (send detach: %v)", ErrNoApprover, err)
	}
	a.nc.SetReadDeadline(time.Now().Add(ioTimeout))
	m, err = a.read()
	switch {
	case isTimeout(err):
		return Decision{}, ErrPending
	case err != nil:
		return Decision{}, err
	case m.Type == typeDecision:
		return *m.Decision, nil
	case m.Type == typeDetached:
		return Decision{}, ErrPending
	}
	return Decision{}, fmt.Errorf("%w: %s message where detached was due", ErrProtocol, m.Type)
}

func (a *asker) send(m *message) error {
	b, err := encode(m)
	if err != nil {
		return err
	}
	a.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err = a.nc.Write(b)
	return err
}

// read reads the approver's next message. Timeouts come back as they are
// (isTimeout); the approver's end, an error message, or one that is
// malformed or about another request come back as Ask's errors.
func (a *asker) read() (*message, error) {
	line, err := a.lr.next()
	switch {
	case isTimeout(err):
		return nil, err
	case errors.Is(err, io.EOF), errors.Is(err, net.ErrClosed), errors.Is(err, os.ErrClosed):
		return nil, fmt.Errorf("%w (the approver closed the connection)", ErrNoApprover)
	case errors.Is(err, errForgedAnswer):
		return nil, fmt.Errorf("%w (refused: %v)", ErrNoApprover, err)
	case errors.Is(err, errLineTooLong), errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	case err != nil:
		return nil, fmt.Errorf("%w (read: %v)", ErrNoApprover, err)
	}
	m, err := decode(line)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrProtocol, err)
	}
	if m.Type == typeError {
		return nil, fmt.Errorf("%w: %s", ErrRejected, shortField(m.Error))
	}
	id := m.ID
	if m.Decision != nil {
		id = m.Decision.ID
	}
	if id != a.id {
		return nil, fmt.Errorf("%w: %s message for request %q, not %q", ErrProtocol, m.Type, shortField(id), a.id)
	}
	if m.Decision != nil && m.Decision.Key != a.key {
		return nil, fmt.Errorf("%w: a decision for another call (key %.12s…, not %.12s…)", ErrProtocol, m.Decision.Key, a.key)
	}
	return m, nil
}

func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}

// prepare fills in what Ask sets and makes req fit the protocol's limits.
// The key is computed before anything is cut.
func prepare(req Request) (Request, error) {
	if req.ID == "" {
		req.ID = rand.Text()
	}
	if req.Server == "" || req.Tool == "" {
		return req, errors.New("request without server or tool")
	}
	key, err := CallKey(req)
	if err != nil {
		return req, err
	}
	req.Key = key
	args, _ := canonicalArgs(req.Args) // CallKey checked them
	req.ArgsSize = 0
	if req.Args, req.ArgsTruncated = clip(args, MaxArgs); req.ArgsTruncated {
		req.ArgsSize = len(args)
	}
	if c := req.Change; c != nil {
		old, _ := canonical(c.Old)
		new, _ := canonical(c.New)
		var cutOld, cutNew bool
		ch := *c
		ch.Old, cutOld = clip(old, MaxArgs)
		ch.New, cutNew = clip(new, MaxArgs)
		ch.Truncated = cutOld || cutNew
		req.Change = &ch
	}
	req.Description = cutText(req.Description, MaxDescription)
	for _, f := range []*string{&req.ID, &req.Server, &req.Tool, &req.Client, &req.Risk, &req.Rule, &req.Session} {
		*f = shortField(*f)
	}
	if err := req.validate(); err != nil {
		return req, err
	}
	return req, nil
}
