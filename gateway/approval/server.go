package approval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// A UI shows open requests to a person. The [Server] calls it from one
// goroutine, in order, never with a lock held: it may call [Server.Decide]
// from inside Show (an automatic approver does).
//
// The server shows a session at most one request at a time, so a UI that
// presents its requests in the order they were shown takes the sessions in
// turn (see "Fairness" in the package doc).
type UI interface {
	// Show presents an open request whose turn came. Calls asking with the
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
	// MaxOpen bounds the open requests of all sessions together; more are
	// rejected. Zero means 100.
	MaxOpen int
	// MaxOpenPerSession bounds the open requests one proxy session wants
	// answered (see "Fairness" in the package doc); its next one is
	// rejected, and other sessions' are not. Zero means 10.
	MaxOpenPerSession int
	// Logger receives the server's log, in a group "approval". Nil
	// discards it. It never holds arguments.
	Logger *slog.Logger
}

// DefaultMaxOpenPerSession is the default of Options.MaxOpenPerSession: the
// most approval requests one proxy session may have open at once.
const DefaultMaxOpenPerSession = 10

// Bounds of the server side.
const (
	// defaultMaxOpen is the default of Options.MaxOpen.
	defaultMaxOpen = 100
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
	ui         UI
	name       string
	keep       time.Duration
	maxOpen    int
	maxSession int // open requests per session
	log        *slog.Logger
	started    atomic.Bool
	wake       chan struct{} // cap 1: events were queued

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
// It counts against each session that wants its answer: a session with a
// connection in waiters, or one in lingers until its time.
type entry struct {
	req     Request // as shown (or to be shown)
	seq     uint64
	waiters map[*conn]bool
	// lingers holds the sessions whose askers stopped waiting, each with
	// until when it stays open for that session's next identical call.
	lingers map[string]time.Time
	timer   *time.Timer // fires when the last linger ends
	shown   bool        // the UI has it
	turn    string      // the session whose turn it was shown on
}

// until returns when the entry closes once nobody waits: when its last
// linger ends.
func (e *entry) until() time.Time {
	var t time.Time
	for _, u := range e.lingers {
		if u.After(t) {
			t = u
		}
	}
	return t
}

// wantedBy reports whether session wants the answer of e at now: one of its
// connections waits on it, or one stopped waiting and its linger lasts.
func (e *entry) wantedBy(session string, now time.Time) bool {
	if now.Before(e.lingers[session]) {
		return true
	}
	for c := range e.waiters {
		if c.session == session {
			return true
		}
	}
	return false
}

// wanters returns the sessions that want the answer of e at now: the
// session it is asked for first, then the others in order.
func (e *entry) wanters(now time.Time) []string {
	var ss []string
	for c := range e.waiters {
		ss = append(ss, c.session)
	}
	for session, until := range e.lingers {
		if now.Before(until) {
			ss = append(ss, session)
		}
	}
	slices.Sort(ss)
	ss = slices.Compact(ss)
	if i := slices.Index(ss, e.req.Session); i > 0 {
		ss = slices.Insert(slices.Delete(ss, i, i+1), 0, e.req.Session)
	}
	return ss
}

// A kept answer waits for the next identical call.
type kept struct {
	d       Decision // without ID
	session string   // for ScopeSession: the only session it serves
	until   time.Time
	used    bool // it answered a call already: it answers the next as a grant
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
		ui:         ui,
		name:       opts.Approver,
		keep:       opts.Keep,
		maxOpen:    opts.MaxOpen,
		maxSession: opts.MaxOpenPerSession,
		log:        opts.Logger,
		wake:       make(chan struct{}, 1),
		open:       map[string]*entry{},
		byID:       map[string]*entry{},
		kept:       map[string]*kept{},
		conns:      map[*conn]bool{},
	}
	if s.name == "" {
		s.name = "approver"
	}
	if s.keep <= 0 {
		s.keep = 10 * time.Minute
	}
	if s.maxOpen <= 0 {
		s.maxOpen = defaultMaxOpen
	}
	if s.maxSession <= 0 {
		s.maxSession = DefaultMaxOpenPerSession
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

// Decide answers the open request shown as shown (its ID and its Key) with
// a. The proxies waiting for it that the answer covers get it (one, for
// [ScopeOnce]; those of the shown session, for [ScopeSession]; else all);
// the request is shown again, open, for the others. When none waits any
// more, the answer is kept for the next identical call.
//
// The answer MUST NOT reach a call other than the one shown: Decide returns
// [ErrNotOpen] unless a request with shown's ID and Key is open, so a
// request that was answered, withdrawn, or replaced by another call under
// the same ID is not answered. An answer's Via is the caller's to say, and
// may not be [ViaGrant].
func (s *Server) Decide(shown Request, a Answer) error {
	if a.Via == ViaGrant {
		return fmt.Errorf("decide %s: an answer given now is not a grant", shown.ID)
	}
	// Checked with a stand-in for the Key, which is the open request's.
	d := Decision{ID: "-", Key: strings.Repeat("0", 64), Scope: a.Scope, Minutes: a.Minutes, Approver: s.name, Via: a.Via, Decided: time.Now()}
	if err := d.validate(); err != nil {
		return fmt.Errorf("decide %s: %w", shown.ID, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.byID[shown.ID]
	if e == nil || s.stopped {
		return fmt.Errorf("decide %s: %w", shown.ID, ErrNotOpen)
	}
	if e.req.Key != shown.Key {
		s.log.Warn("an answer for another call under the same id was refused", slog.String("id", shown.ID))
		return fmt.Errorf("decide %s: %w (another call has its id now)", shown.ID, ErrNotOpen)
	}
	d.Key = e.req.Key
	scope := a.Scope
	s.removeLocked(e)
	defer s.showTurnsLocked()
	s.log.Debug("decided", slog.String("id", e.req.ID), slog.String("scope", string(scope)),
		slog.String("via", string(a.Via)), slog.Int("waiting", len(e.waiters)))
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
		s.reopenLocked(e, served, rest)
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
// not cover, to be shown again when its turn comes. The sessions whose calls
// the answer served want it no more, unless they still wait.
func (s *Server) reopenLocked(e *entry, served, waiters map[*conn]bool) {
	var first *conn
	for c := range waiters {
		if first == nil || c.id < first.id {
			first = c
		}
	}
	s.seq++
	ne := &entry{req: e.req, seq: s.seq, waiters: waiters, lingers: maps.Clone(e.lingers)}
	for c := range served {
		delete(ne.lingers, c.session)
	}
	ne.req.ID, ne.req.Session = first.id, first.session
	for c := range waiters {
		c.e = ne
	}
	s.open[ne.req.Key] = ne
	s.byID[ne.req.ID] = ne
	s.log.Debug("open again for identical calls the answer did not cover", slog.String("id", ne.req.ID),
		slog.Int("waiting", len(waiters)))
}

// showTurnsLocked shows the open requests whose turn came. A session has at
// most one request on screen: its next one, oldest first, is shown when that
// one is answered or withdrawn, after those other sessions had on screen
// already. A request several sessions want is shown on the turn of the
// first of them that has none on screen, the session it was asked for
// first.
func (s *Server) showTurnsLocked() {
	if s.stopped {
		return
	}
	now := time.Now()
	busy := map[string]bool{}
	var waiting []*entry
	for _, e := range s.open {
		if e.shown {
			busy[e.turn] = true
		} else {
			waiting = append(waiting, e)
		}
	}
	slices.SortFunc(waiting, func(a, b *entry) int { return cmp.Compare(a.seq, b.seq) })
	for _, e := range waiting {
		ws := e.wanters(now)
		i := slices.IndexFunc(ws, func(session string) bool { return !busy[session] })
		if i < 0 {
			continue
		}
		e.shown, e.turn = true, ws[i]
		busy[e.turn] = true
		shown := e.req
		s.queueLocked(func(ui UI) { ui.Show(shown) })
		s.log.Debug("shown", slog.String("id", shown.ID))
	}
}

// openForLocked returns how many open requests session wants answered at
// now.
func (s *Server) openForLocked(session string, now time.Time) int {
	n := 0
	for _, e := range s.open {
		if e.wantedBy(session, now) {
			n++
		}
	}
	return n
}

// Requests returns the open requests, oldest first: those shown, and those
// that wait for their session's turn.
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
		if k.used {
			d.Via = ViaGrant // nobody was asked about this call
		}
		k.used = true
		s.log.Debug("answered from a kept decision", slog.String("id", req.ID), slog.String("scope", string(d.Scope)))
		return &message{Type: typeDecision, Decision: &d}
	}
	if s.idInUseLocked(req.ID) {
		// An answer is bound to the request's Key, but the UI names it by
		// its ID: no two open requests share one.
		return &message{Type: typeError, Error: "duplicate request id"}
	}
	e := s.open[req.Key]
	if e == nil || !e.wantedBy(req.Session, now) {
		// Joining a request another session wants counts against this
		// session too: it waits on it.
		if n := s.openForLocked(req.Session, now); n >= s.maxSession {
			s.log.Debug("refused: the session is at its bound", slog.String("id", req.ID), slog.Int("open", n))
			return &message{Type: typeError, Error: fmt.Sprintf(
				"this session has reached its limit of %d open approval requests: wait for a person to answer them, then call again",
				s.maxSession)}
		}
	}
	if e == nil {
		if len(s.open) >= s.maxOpen {
			return &message{Type: typeError, Error: fmt.Sprintf(
				"the approver has reached its limit of %d open approval requests from all sessions: wait for a person to answer them, then call again",
				s.maxOpen)}
		}
		s.seq++
		e = &entry{req: *req, seq: s.seq, waiters: map[*conn]bool{}, lingers: map[string]time.Time{}}
		s.open[req.Key] = e
		s.byID[req.ID] = e
		s.log.Debug("request", slog.String("id", req.ID), slog.String("server", req.Server),
			slog.String("tool", req.Tool), slog.String("client", req.Client))
	}
	defer s.showTurnsLocked()
	linger := req.Expires
	if linger.IsZero() {
		linger = now.Add(defaultLinger)
	}
	c.e, c.id, c.session, c.linger = e, req.ID, req.Session, earliest(linger, now.Add(maxLinger))
	e.waiters[c] = true
	return &message{Type: typePending, ID: req.ID, Approver: s.name}
}

// idInUseLocked reports whether id names an open request, or a proxy
// waiting on one.
func (s *Server) idInUseLocked(id string) bool {
	if s.byID[id] != nil {
		return true
	}
	for c := range s.conns {
		if c.e != nil && c.id == id {
			return true
		}
	}
	return false
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
	if c.linger.After(e.lingers[c.session]) {
		e.lingers[c.session] = c.linger
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
	if wait := time.Until(e.until()); wait > 0 && !s.stopped {
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
	s.log.Debug("withdrawn", slog.String("id", id), slog.Bool("shown", e.shown))
	if e.shown {
		s.queueLocked(func(ui UI) { ui.Withdraw(id) })
	}
	s.showTurnsLocked()
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
