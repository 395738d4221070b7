package approval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// A UI shows open requests to a person. The [Server] calls it from one
// goroutine, in order, never with a lock held: it may call [Server.Decide]
// from inside Show (an automatic approver does).
type UI interface {
	// Show presents a request that was just opened. Calls asking with the
	// same Key while it is open join it and are not shown again.
	Show(req Request)
	// Withdraw removes the request with the given ID (as shown): every
	// proxy that asked went away, or stopped waiting and its Expires
	// passed. A request answered with Decide is not withdrawn.
	Withdraw(id string)
}

// Options configure a [Server]. The zero value is ready to use.
type Options struct {
	// Approver names the approver in its decisions ("tray", "terminal").
	// Empty means "approver".
	Approver string
	// Keep is how long an answer given after every asker stopped waiting
	// is kept for the next identical call. Zero means 10 minutes.
	Keep time.Duration
	// MaxOpen bounds the open requests; more are rejected. Zero means 100.
	MaxOpen int
	// Logger receives the server's log, in a group "approval". Nil
	// discards it. It never holds arguments.
	Logger *slog.Logger
}

// Bounds of the server side.
const (
	// defaultLinger and maxLinger bound Request.Expires, counted from when
	// the last asker stopped waiting.
	defaultLinger = 10 * time.Minute
	maxLinger     = time.Hour
	// firstLineTimeout is how long a connection may stay silent before its
	// request.
	firstLineTimeout = 10 * time.Second
	// maxConns bounds the connections served at once.
	maxConns = 1024
)

// A Server is an approver's queue of open requests. Create it with
// [NewServer], run it with [Server.Serve], and answer its requests with
// [Server.Decide].
type Server struct {
	ui      UI
	name    string
	keep    time.Duration
	maxOpen int
	log     *slog.Logger
	started atomic.Bool
	wake    chan struct{} // cap 1: events were queued

	mu      sync.Mutex
	open    map[string]*entry // by Key; guarded by mu
	byID    map[string]*entry // by the shown request's ID; guarded by mu
	kept    map[string]*kept  // answers nobody waited for, by Key; guarded by mu
	conns   map[*conn]bool    // guarded by mu
	events  []func(UI)        // for the UI, in order; guarded by mu
	seq     uint64            // guarded by mu
	stopped bool              // guarded by mu
}

// An entry is one open request, and the connections waiting for its answer.
type entry struct {
	req     Request // as shown
	seq     uint64
	waiters map[*conn]bool
	until   time.Time   // open until then once nobody waits
	timer   *time.Timer // fires at until
}

// A kept answer waits for the next identical call.
type kept struct {
	d       Decision // without ID
	session string   // for ScopeSession: the only session it serves
	until   time.Time
}

func (k *kept) serves(r *Request, now time.Time) bool {
	return now.Before(k.until) && (k.d.Scope != ScopeSession || k.session == r.Session)
}

// conn is one proxy's connection; one goroutine (handle) reads, writes and
// closes it.
type conn struct {
	nc       net.Conn
	decision chan Decision // cap 1: Decide's answer for handle to send

	// guarded by Server.mu:
	e        *entry    // the entry it waits on, nil before and after
	id       string    // its request's ID
	session  string    // its request's Session
	linger   time.Time // its request's Expires, clamped
	answered bool      // a decision was put in decision
}

// NewServer returns a server that shows its requests with ui. It panics if
// ui is nil.
func NewServer(ui UI, opts *Options) *Server {
	if ui == nil {
		panic("approval: NewServer with a nil UI")
	}
	if opts == nil {
		opts = &Options{}
	}
	s := &Server{
		ui:      ui,
		name:    opts.Approver,
		keep:    opts.Keep,
		maxOpen: opts.MaxOpen,
		log:     opts.Logger,
		wake:    make(chan struct{}, 1),
		open:    map[string]*entry{},
		byID:    map[string]*entry{},
		kept:    map[string]*kept{},
		conns:   map[*conn]bool{},
	}
	if s.name == "" {
		s.name = "approver"
	}
	if s.keep <= 0 {
		s.keep = 10 * time.Minute
	}
	if s.maxOpen <= 0 {
		s.maxOpen = 100
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.log = s.log.WithGroup("approval")
	return s
}

// Serve accepts proxies on ln until ctx ends or ln fails, and closes ln. It
// returns nil when ctx ended. Unanswered requests end with it (their
// proxies get [ErrNoApprover]); answers already given still go out. Serve
// may be called once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.started.CompareAndSwap(false, true) {
		return errors.New("approval: Serve called twice")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.deliver(ctx) })
	stop := context.AfterFunc(ctx, func() { ln.Close() })
	defer stop()

	var err error
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil {
				err = fmt.Errorf("accept: %w", aerr)
			}
			break
		}
		c := &conn{nc: nc, decision: make(chan Decision, 1)}
		wg.Go(func() { s.handle(ctx, c) })
	}
	cancel()
	ln.Close()
	s.mu.Lock()
	s.stopped = true
	for c := range s.conns {
		// Answered ones first send their decision (see handle).
		if !c.answered {
			c.nc.Close()
		}
	}
	for _, e := range s.open {
		if e.timer != nil {
			e.timer.Stop()
		}
	}
	s.mu.Unlock()
	wg.Wait()
	return err
}

// Decide answers the open request named by ref (the ID it was shown with,
// or its Key) with scope, for minutes when scope is [ScopeMinutes]. The
// proxies waiting for it that the answer covers get it (one, for
// [ScopeOnce]; those of the shown session, for [ScopeSession]; else all);
// the request is shown again, open, for the others. When none waits any
// more, the answer is kept for the next identical call. It returns
// [ErrNotOpen] when the request was answered, withdrawn, or never opened.
func (s *Server) Decide(ref string, scope Scope, minutes int) error {
	d := Decision{ID: "-", Scope: scope, Minutes: minutes, Approver: s.name, Decided: time.Now()}
	if err := d.validate(); err != nil {
		return fmt.Errorf("decide %s: %w", ref, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[ref]
	if e == nil {
		e = s.open[ref]
	}
	if e == nil || s.stopped {
		return fmt.Errorf("decide %s: %w", ref, ErrNotOpen)
	}
	s.removeLocked(e)
	s.log.Debug("decided", slog.String("id", e.req.ID), slog.String("scope", string(scope)),
		slog.Int("waiting", len(e.waiters)))
	if len(e.waiters) == 0 {
		until := d.Decided.Add(s.keep)
		if scope == ScopeMinutes {
			until = earliest(until, d.Until())
		}
		d.ID = ""
		s.kept[e.req.Key] = &kept{d: d, session: e.req.Session, until: until}
		return nil
	}
	served, rest := covered(e, scope)
	for c := range served {
		c.answered = true
		dc := d
		dc.ID = c.id
		c.decision <- dc // cap 1, and answered once
	}
	if len(rest) > 0 {
		s.reopenLocked(e, rest)
	}
	return nil
}

// covered splits the waiters of e into those an answer with scope answers
// and the rest: "once" answers one call (the one shown, when it still
// waits), "session" the calls of the session shown, any other scope all.
func covered(e *entry, scope Scope) (served, rest map[*conn]bool) {
	switch scope {
	case ScopeOnce:
		var one *conn
		for c := range e.waiters {
			if one == nil || c.id == e.req.ID || one.id != e.req.ID && c.id < one.id {
				one = c
			}
		}
		served, rest = map[*conn]bool{one: true}, map[*conn]bool{}
		for c := range e.waiters {
			if c != one {
				rest[c] = true
			}
		}
		return served, rest
	case ScopeSession:
		served, rest = map[*conn]bool{}, map[*conn]bool{}
		for c := range e.waiters {
			if c.session == e.req.Session {
				served[c] = true
			} else {
				rest[c] = true
			}
		}
		return served, rest
	}
	return e.waiters, nil
}

// reopenLocked opens the request of e again for the waiters an answer did
// not cover, and shows it.
func (s *Server) reopenLocked(e *entry, waiters map[*conn]bool) {
	var first *conn
	for c := range waiters {
		if first == nil || c.id < first.id {
			first = c
		}
	}
	s.seq++
	ne := &entry{req: e.req, seq: s.seq, waiters: waiters, until: e.until}
	ne.req.ID, ne.req.Session = first.id, first.session
	for c := range waiters {
		c.e = ne
	}
	s.open[ne.req.Key] = ne
	s.byID[ne.req.ID] = ne
	shown := ne.req
	s.queueLocked(func(ui UI) { ui.Show(shown) })
	s.log.Debug("shown again for identical calls the answer did not cover", slog.String("id", ne.req.ID),
		slog.Int("waiting", len(waiters)))
}

// Requests returns the open requests, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	es := make([]*entry, 0, len(s.open))
	for _, e := range s.open {
		es = append(es, e)
	}
	slices.SortFunc(es, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	reqs := make([]Request, len(es))
	for i, e := range es {
		reqs[i] = e.req
	}
	return reqs
}

// deliver calls the UI with the queued events, in order, until ctx ends.
func (s *Server) deliver(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		s.mu.Lock()
		evs := s.events
		s.events = nil
		s.mu.Unlock()
		for _, ev := range evs {
			ev(s.ui)
		}
	}
}

func (s *Server) queueLocked(ev func(UI)) {
	s.events = append(s.events, ev)
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// handle serves one connection: its request, then the answer or the
// proxy's detach or departure.
func (s *Server) handle(ctx context.Context, c *conn) {
	defer s.gone(c)
	defer c.nc.Close()
	s.mu.Lock()
	full := len(s.conns) >= maxConns
	stopped := s.stopped
	if !full && !stopped {
		s.conns[c] = true
	}
	s.mu.Unlock()
	switch {
	case stopped:
		return
	case full:
		s.refuse(c, "too many connections")
		return
	}
	if err := checkPeer(c.nc); err != nil {
		s.log.Warn("refused a connection", slog.Any("err", err))
		s.refuse(c, fmt.Sprintf("refused: %v", err))
		return
	}

	lr := newLineReader(c.nc, MaxLine)
	c.nc.SetReadDeadline(time.Now().Add(firstLineTimeout))
	line, err := lr.next()
	if err != nil {
		if errors.Is(err, errLineTooLong) {
			s.refuse(c, fmt.Sprintf("message longer than %d bytes", MaxLine))
		}
		return
	}
	m, err := decode(line)
	if err == nil && m.Type != typeRequest {
		err = fmt.Errorf("%s message where a request was due", m.Type)
	}
	if err != nil {
		s.log.Warn("malformed request", slog.Any("err", err))
		s.refuse(c, fmt.Sprintf("malformed request: %v", err))
		return
	}
	c.nc.SetReadDeadline(time.Time{})
	reply := s.ask(c, m.Request)
	if err := s.send(c, reply); err != nil || reply.Type != typePending {
		return
	}

	// Wait for the answer, a detach, or the proxy's departure. A reader
	// goroutine owned by this one reads; closing the connection ends it.
	msgs := make(chan *message)
	readErr := make(chan error, 1)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer c.nc.Close()
	wg.Go(func() {
		for {
			line, err := lr.next()
			var m *message
			if err == nil {
				m, err = decode(line)
			}
			if err == nil && (m.Type != typeDetach || m.ID != c.id) {
				err = fmt.Errorf("unexpected %s message", m.Type)
			}
			if err != nil {
				readErr <- err
				return
			}
			select {
			case msgs <- m:
			case <-ctx.Done():
				return
			}
		}
	})
	for {
		select {
		case d := <-c.decision:
			s.send(c, &message{Type: typeDecision, Decision: &d})
			return
		case <-msgs:
			if s.detach(c) {
				s.send(c, &message{Type: typeDetached, ID: c.id})
				return
			}
			// Answered meanwhile: the decision is in c.decision.
		case err := <-readErr:
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				s.log.Warn("malformed message", slog.Any("err", err))
				s.refuse(c, fmt.Sprintf("malformed message: %v", err))
			}
			return
		case <-ctx.Done():
			// Decide returned nil to the person: the answer goes out even as
			// the approver stops.
			select {
			case d := <-c.decision:
				s.send(c, &message{Type: typeDecision, Decision: &d})
			default:
			}
			return
		}
	}
}

// ask answers a new request: a kept decision, or pending on its entry.
func (s *Server) ask(c *conn, req *Request) *message {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return &message{Type: typeError, Error: "the approver is stopping"}
	}
	now := time.Now()
	for key, k := range s.kept {
		if !now.Before(k.until) {
			delete(s.kept, key)
		}
	}
	if k := s.kept[req.Key]; k != nil && k.serves(req, now) {
		if k.d.Scope == ScopeOnce || k.d.Scope == ScopeDeny {
			delete(s.kept, req.Key)
		}
		d := k.d
		d.ID = req.ID
		s.log.Debug("answered from a kept decision", slog.String("id", req.ID), slog.String("scope", string(d.Scope)))
		return &message{Type: typeDecision, Decision: &d}
	}
	e := s.open[req.Key]
	if e == nil {
		if len(s.open) >= s.maxOpen {
			return &message{Type: typeError, Error: fmt.Sprintf("too many open requests (%d)", s.maxOpen)}
		}
		if s.byID[req.ID] != nil {
			return &message{Type: typeError, Error: "duplicate request id"}
		}
		s.seq++
		e = &entry{req: *req, seq: s.seq, waiters: map[*conn]bool{}}
		s.open[req.Key] = e
		s.byID[req.ID] = e
		shown := *req
		s.queueLocked(func(ui UI) { ui.Show(shown) })
		s.log.Debug("request", slog.String("id", req.ID), slog.String("server", req.Server),
			slog.String("tool", req.Tool), slog.String("client", req.Client))
	}
	linger := req.Expires
	if linger.IsZero() {
		linger = now.Add(defaultLinger)
	}
	c.e, c.id, c.session, c.linger = e, req.ID, req.Session, earliest(linger, now.Add(maxLinger))
	e.waiters[c] = true
	return &message{Type: typePending, ID: req.ID, Approver: s.name}
}

// detach records that c's proxy stopped waiting, and reports whether its
// request is still unanswered (else its decision is on its way).
func (s *Server) detach(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c.answered {
		return false
	}
	e := c.e
	if e == nil {
		return true
	}
	delete(e.waiters, c)
	c.e = nil
	if c.linger.After(e.until) {
		e.until = c.linger
	}
	s.reapLocked(e)
	return true
}

// gone forgets c. If its proxy was still waiting, it went away: the request
// is withdrawn unless someone else still wants it.
func (s *Server) gone(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
	if e := c.e; e != nil && !c.answered {
		delete(e.waiters, c)
		c.e = nil
		s.reapLocked(e)
	}
}

// reapLocked withdraws e when nobody waits for it and its time is up, and
// otherwise sets a timer for when it will be.
func (s *Server) reapLocked(e *entry) {
	if s.open[e.req.Key] != e || len(e.waiters) > 0 {
		return
	}
	if wait := time.Until(e.until); wait > 0 && !s.stopped {
		if e.timer != nil {
			e.timer.Stop()
		}
		e.timer = time.AfterFunc(wait, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.reapLocked(e)
		})
		return
	}
	s.removeLocked(e)
	id := e.req.ID
	s.log.Debug("withdrawn", slog.String("id", id))
	s.queueLocked(func(ui UI) { ui.Withdraw(id) })
}

func (s *Server) removeLocked(e *entry) {
	delete(s.open, e.req.Key)
	delete(s.byID, e.req.ID)
	if e.timer != nil {
		e.timer.Stop()
	}
}

// send writes m to c, bounded in time.
func (s *Server) send(c *conn, m *message) error {
	b, err := encode(m)
	if err != nil {
		return err
	}
	c.nc.SetWriteDeadline(time.Now().Add(ioTimeout))
	_, err = c.nc.Write(b)
	return err
}

// refuse tells c's proxy why its connection ends.
func (s *Server) refuse(c *conn, why string) {
	s.send(c, &message{Type: typeError, Error: why})
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
