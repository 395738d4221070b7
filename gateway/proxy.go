// Package gateway is Gatehouse's MCP proxy: it stands between an MCP client
// (Claude Desktop, Claude Code, Cursor, ...) and one MCP server, and relays
// everything between them.
//
// A [Proxy] speaks MCP over stdio to its client, starts the server as a child
// process, and relays JSON-RPC messages both ways at the message level: each
// message is forwarded as the bytes that arrived, so both protocol eras
// (initialize up to 2025-11-25, the stateless 2026-07-28 with its
// server/discover probe), every method, notification and server-to-client
// request (sampling, elicitation, roots), and every field the proxy does not
// know pass unchanged. Tools keep their names.
//
// The proxy answers for itself only where relaying cannot: a line that is not
// JSON-RPC gets a parse or invalid-request error and reading goes on; a
// message over the size limit is refused with an error naming the limit; a
// server that cannot start, or exits, fails every request in flight and every
// later one with an error that says so, so the client never waits forever. A
// refused or failed tools/call is answered as a tool result with isError set,
// which the model reads; other methods get a JSON-RPC error.
//
// With a governor, the proxy also refuses from the client what a server could
// read as another call than the one the gate judged (a JSON-RPC member given
// twice or in another case, a method that only looks like tools/call; see
// strict.go), and drops an answer from the server to a request it was never
// sent (one the gate holds or refused), which would pass for the call's.
//
// Stopping is bounded: when the client goes away the server's stdin is closed,
// then it is sent SIGTERM, then killed with its process group.
package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxMessageBytes bounds one JSON-RPC message in either direction. It
// sits below the 10 MiB stdio read buffer of the TypeScript MCP SDK, which
// most clients and servers use: a larger message makes them drop the stream
// and leaves the sender waiting for an answer that never comes, so the
// proxy refuses it with an error instead.
const DefaultMaxMessageBytes = 8 << 20

// ErrServerExited is returned by [Proxy.Serve] when the server ended before
// the client did.
var ErrServerExited = errors.New("server exited")

// Options configure a [Proxy]. Nil options mean the defaults.
type Options struct {
	// Logger receives the proxy's own log records; nil discards them.
	// Records never hold tool arguments or results.
	Logger *slog.Logger
	// Stderr receives the server's stderr; nil means os.Stderr.
	Stderr io.Writer
	// MaxMessageBytes bounds one message; zero means DefaultMaxMessageBytes.
	MaxMessageBytes int
	// StopGrace is how long the server gets to exit after its stdin closes,
	// and again after SIGTERM, before it is killed. Zero means 2 seconds.
	StopGrace time.Duration
	// Secrets are the values (by secret id) the server was given. Every
	// message from the server is searched for them and their common
	// encodings, which are replaced before the client sees them.
	Secrets map[string]string
	// Governor decides on every tools/call before it reaches the server.
	// Nil relays tools/call like everything else (a pass-through proxy,
	// for measurements and tests).
	Governor Governor
	// Session identifies this proxy session in receipts; empty means a
	// random id.
	Session string
}

// A Proxy relays one MCP client to one stdio MCP server.
type Proxy struct {
	name    string
	command Command
	remote  *Remote // set for a remote server; then command is unused
	log     *slog.Logger
	stderr  io.Writer
	max     int
	grace   time.Duration
	redact  *redactor // nil when the server holds no secrets
	gov     Governor
	session string
}

// New returns a proxy for the server called name, started with command.
func New(name string, command Command, opts *Options) *Proxy {
	if opts == nil {
		opts = &Options{}
	}
	p := &Proxy{name: name, command: command, log: opts.Logger, stderr: opts.Stderr,
		max: opts.MaxMessageBytes, grace: opts.StopGrace}
	if len(opts.Secrets) > 0 {
		p.redact = newRedactor(opts.Secrets)
	}
	p.gov, p.session = opts.Governor, opts.Session
	if p.session == "" {
		p.session = newSessionID()
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	p.log = p.log.With(slog.String("server", name))
	if p.stderr == nil {
		p.stderr = os.Stderr
	}
	if p.max <= 0 {
		p.max = DefaultMaxMessageBytes
	}
	if p.grace <= 0 {
		p.grace = 2 * time.Second
	}
	return p
}

// Serve starts the server and relays between it and the client on in and
// out until the client closes in (nil is returned), ctx is done, or the
// server exits (an error wrapping [ErrServerExited] is returned once the
// client has been told and has closed in). Only JSON-RPC messages are ever
// written to out.
func (p *Proxy) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	start := time.Now()
	ch, err := p.connect()
	if err != nil {
		p.log.Error("server did not start", slog.Any("err", err))
		Refuse(ctx, in, out, err)
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r := newRelay(p.log, p.max, out)
	r.down = &lineWriter{w: ch.input()}
	r.redact = p.redact
	r.ctx, r.gov, r.server, r.sessionID = ctx, p.gov, p.name, p.session
	defer p.settle(r)
	clientDone := make(chan error, 1)
	p.log.Info("server started", ch.describe(), slog.Duration("spawn", time.Since(start)))

	serverDone := make(chan error, 1)
	go func() { serverDone <- r.serverPump(ch.output()) }()
	go func() { clientDone <- r.clientPump(in) }()

	select {
	case err := <-clientDone:
		if err != nil {
			p.log.Error("reading from client", slog.Any("err", err))
		}
		// Let the server finish what it was answering while it shuts down.
		ch.stop(p.grace)
		p.drain(serverDone)
		p.log.Info("client closed; server stopped")
		return nil
	case <-ctx.Done():
		ch.stop(p.grace)
		p.drain(serverDone)
		p.log.Info("stopped", slog.Any("reason", context.Cause(ctx)))
		return nil
	case err := <-serverDone:
		if err != nil {
			p.log.Error("reading from server", slog.Any("err", err))
		}
		ch.awaitExit(ctx, p.grace)
		exit := fmt.Errorf("server %q %w", p.name, ch.exitError())
		p.log.Error("server ended before the client", slog.Any("err", exit))
		r.fail(fmt.Errorf("%w; reconnect (or restart the MCP client) to start it again", exit))
		select {
		case <-clientDone:
		case <-ctx.Done():
		}
		return fmt.Errorf("%w: %w", ErrServerExited, exit)
	}
}

// connect starts the server, or opens the session with a remote one.
func (p *Proxy) connect() (serverConn, error) {
	if p.remote != nil {
		c, err := dialRemote(p.name, *p.remote, p.max, p.log)
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", p.name, err)
		}
		return c, nil
	}
	ch, err := startChild(p.command, p.stderr, p.redact)
	if err != nil {
		return nil, startError(p.name, p.command, err)
	}
	return ch, nil
}

// settle waits, bounded, for the outcomes still being recorded, so that a
// proxy that stops does not lose the record of a call that ran.
func (p *Proxy) settle(r *relay) {
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		p.log.Error("outcomes still unwritten after 10s; stopping anyway")
	}
}

// drain waits, bounded, for the server's last output once it has been
// stopped: a grandchild that left its own process group could hold the pipe.
func (p *Proxy) drain(serverDone <-chan error) {
	select {
	case <-serverDone:
	case <-time.After(p.grace):
		p.log.Warn("server output still open after it was stopped; leaving it")
	}
}

// relay is the state shared by the two directions of one proxied session.
type relay struct {
	log    *slog.Logger
	max    int         // bytes per message
	up     *lineWriter // to the client
	down   *lineWriter // to the server; nil when it never started
	redact *redactor   // nil when there is nothing to redact

	// Governance: nil gov relays tools/call like anything else.
	ctx       context.Context // ends when the proxy stops
	gov       Governor
	server    string
	sessionID string
	sess      sessionState
	wg        sync.WaitGroup // governed calls and outcome writes in flight
	listed    chan struct{}  // closed when the last ToolsListed is done; guarded by mu

	mu       sync.Mutex
	pending  map[string]string    // client request id -> method, awaiting an answer; guarded by mu
	governed map[string]*governed // client request id -> governed tools/call; guarded by mu
	failed   error                // set once the server is gone; guarded by mu
}

func newRelay(log *slog.Logger, max int, out io.Writer) *relay {
	return &relay{log: log, max: max, up: &lineWriter{w: out}, ctx: context.Background(),
		pending: map[string]string{}, governed: map[string]*governed{}}
}

// watchTools hands a listed page of tools to the governor, if it watches
// them, after the pages before it. Called with r.mu held.
func (r *relay) watchTools(tools []*Tool) {
	w, ok := r.gov.(ToolWatcher)
	if !ok {
		return
	}
	prev, done := r.listed, make(chan struct{})
	r.listed = done
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		defer close(done)
		if prev != nil {
			<-prev
		}
		w.ToolsListed(r.ctx, tools)
	}()
}

// fail marks the server as gone and answers every request in flight.
func (r *relay) fail(err error) {
	r.mu.Lock()
	r.failed = err
	pending := r.pending
	r.pending = map[string]string{}
	inFlight := r.governed
	r.governed = map[string]*governed{}
	r.mu.Unlock()
	for id, method := range pending {
		r.up.write(failureResponse(json.RawMessage(id), method, "Gatehouse: "+err.Error()))
	}
	for _, g := range inFlight {
		if g.ran {
			// It reached the server, which went away: whether it took
			// effect is not known.
			r.complete(g, &Outcome{Status: StatusUnknown, Duration: time.Since(g.start)})
		} else {
			g.cancel()
		}
	}
}

// clientPump relays client -> server until in ends.
func (r *relay) clientPump(in io.Reader) error {
	fr := newFrameReader(in, r.max)
	for {
		frame, err := fr.next()
		var tooLarge *tooLargeError
		switch {
		case errors.As(err, &tooLarge):
			id, method := headFields(tooLarge.Head)
			r.log.Warn("refused an oversized message from the client",
				slog.Int64("bytes", tooLarge.Size), slog.String("method", method))
			if id != nil {
				r.up.write(failureResponse(id, method, fmt.Sprintf(
					"Gatehouse refused this %s request: it is %d bytes, over the proxy's %d-byte limit per message.",
					method, tooLarge.Size, tooLarge.Limit)))
			} else {
				r.up.write(errorResponse(nil, codeInvalidRequest, "Gatehouse: "+tooLarge.Error()))
			}
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		r.fromClient(frame)
	}
}

func (r *relay) fromClient(frame []byte) {
	msgs, batch, err := parseFrame(frame)
	if err != nil {
		code := codeInvalidRequest
		if errors.Is(err, errNotJSON) {
			code = codeParseError
		}
		var id json.RawMessage
		if len(msgs) == 1 {
			id = msgs[0].id
		}
		r.log.Warn("refused a malformed message from the client", slog.Any("err", err))
		r.up.write(errorResponse(id, code, "Gatehouse: "+err.Error()))
		return
	}
	if r.gov != nil {
		for _, m := range msgs {
			if why := ambiguousMessage(m); why != "" {
				r.refuseAmbiguous(msgs, why)
				return
			}
		}
	}
	if r.gov != nil && batch && hasToolCall(msgs) {
		// A tools/call must not slip past the gate inside a batch (allowed
		// up to protocol 2025-03-26): take the batch apart. Its answers
		// come back one by one.
		for _, m := range msgs {
			r.fromClient(m.raw)
		}
		return
	}
	// Register requests before they can be answered, and refuse them all if
	// the server is gone.
	var toGovern []message
	r.mu.Lock()
	failed := r.failed
	if failed == nil {
		for _, m := range msgs {
			switch m.kind {
			case kindRequest:
				r.pending[string(m.id)] = m.method
				if r.gov != nil && m.method == "tools/call" {
					toGovern = append(toGovern, m)
				}
			case kindNotification:
				if m.method == "notifications/cancelled" {
					if id := cancelledID(m.raw); id != nil {
						delete(r.pending, string(id))
						if g := r.governed[string(id)]; g != nil {
							delete(r.governed, string(id))
							r.cancelGovernedLocked(g)
						}
					}
				}
			}
		}
	}
	r.mu.Unlock()
	if failed != nil {
		for _, m := range msgs {
			if m.kind == kindRequest {
				r.up.write(failureResponse(m.id, m.method, "Gatehouse: "+failed.Error()))
			}
		}
		return
	}
	if batch {
		for _, m := range msgs {
			if m.kind == kindInvalid {
				r.log.Warn("relaying a batch with an invalid member")
			}
		}
	}
	if len(msgs) == 1 && msgs[0].method == "initialize" {
		r.sess.setClient(initializeClient(msgs[0].raw))
	}
	if len(toGovern) > 0 {
		for _, m := range toGovern {
			m.raw = append([]byte(nil), m.raw...) // the frame's buffer is reused
			m.id = append(json.RawMessage(nil), m.id...)
			r.wg.Add(1)
			go r.govern(r.ctx, m)
		}
		return // a batch with tools/call was taken apart above: this is one message
	}
	if err := r.down.write(frame); err != nil {
		// The server's stdin is closed: it is exiting. The server pump will
		// see it and fail whatever is still pending.
		r.log.Warn("writing to server", slog.Any("err", err))
	}
}

// refuseAmbiguous answers each request of a frame that a server could read
// differently from the gate; nothing of it reaches the server.
func (r *relay) refuseAmbiguous(msgs []message, why string) {
	r.log.Warn("refused a message the server could read differently", slog.String("why", why))
	text := "Gatehouse refused this message, which a server could read differently from the gate: " + why
	for _, m := range msgs {
		if m.kind == kindRequest {
			r.up.write(failureResponse(m.id, m.method, text))
		}
	}
}

func hasToolCall(msgs []message) bool {
	for _, m := range msgs {
		if m.kind == kindRequest && m.method == "tools/call" {
			return true
		}
	}
	return false
}

// cancelGovernedLocked handles the client's cancellation of a governed
// call: one still waiting for its authorization stops waiting; one that
// reached the server is recorded as UNKNOWN now (the server may never
// answer a cancelled request). The cancellation itself is relayed.
func (r *relay) cancelGovernedLocked(g *governed) {
	if !g.ran {
		g.cancel()
		return
	}
	r.complete(g, &Outcome{Status: StatusUnknown, Duration: time.Since(g.start)})
}

// initializeClient returns params.clientInfo of an initialize request.
func initializeClient(raw []byte) Client {
	var m struct {
		Params struct {
			ClientInfo Client `json:"clientInfo"`
		} `json:"params"`
	}
	json.Unmarshal(raw, &m)
	return m.Params.ClientInfo
}

// cancelledID returns params.requestId of a notifications/cancelled message.
func cancelledID(raw []byte) json.RawMessage {
	var n struct {
		Params struct {
			RequestID json.RawMessage `json:"requestId"`
		} `json:"params"`
	}
	if json.Unmarshal(raw, &n) != nil {
		return nil
	}
	return n.Params.RequestID
}

// serverPump relays server -> client until the server's stdout ends.
func (r *relay) serverPump(stdout io.Reader) error {
	fr := newFrameReader(stdout, r.max)
	for {
		frame, err := fr.next()
		var tooLarge *tooLargeError
		switch {
		case errors.As(err, &tooLarge):
			r.fromServerTooLarge(tooLarge)
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		r.fromServer(frame)
	}
}

func (r *relay) fromServer(frame []byte) {
	msgs, _, err := parseFrame(frame)
	if err != nil {
		// Servers that print logs to stdout are common; such lines would
		// break the client's stream. Drop them and say so.
		r.log.Warn("dropped a line from the server's stdout that is not JSON-RPC",
			slog.Any("err", err), slog.Int("bytes", len(frame)))
		return
	}
	var (
		done   *governed
		listed bool     // the frame answers tools/list
		forged []string // answers to requests the server was not sent
	)
	r.mu.Lock()
	for _, m := range msgs {
		if m.kind != kindResponse {
			continue
		}
		if string(m.id) == "null" && !bytes.Contains(m.raw, []byte(`"result"`)) {
			continue // an error about a message without a usable id: it answers no call
		}
		key, ok := r.pendingKeyLocked(m.id)
		g := r.governed[key]
		if !ok || g != nil && !g.ran {
			// A request the client never sent, one already answered (by
			// the proxy, or cancelled), or a tools/call the gate still
			// holds: the server was not sent it, and its answer would
			// pass for the call's.
			forged = append(forged, string(m.id))
			continue
		}
		listed = listed || r.pending[key] == "tools/list"
		delete(r.pending, key)
		if g != nil && len(msgs) == 1 {
			done = g
			delete(r.governed, key)
		}
	}
	r.mu.Unlock()
	if len(forged) > 0 {
		r.log.Warn("dropped answers to requests the server was not sent", slog.String("ids", strings.Join(forged, ",")))
		if len(forged) == len(msgs) {
			return
		}
		frame = withoutAnswers(msgs, forged)
	}
	var findings []Finding
	if done != nil && done.auth != nil && len(done.auth.Redact) > 0 {
		frame, findings = newRedactor(done.auth.Redact).redact(frame)
	}
	if r.redact != nil {
		var more []Finding
		frame, more = r.redact.redact(frame)
		findings = append(findings, more...)
	}
	if len(findings) > 0 {
		for _, f := range findings {
			r.log.Warn("redacted a secret the server sent", slog.String("secret", f.Secret),
				slog.String("encoding", f.Encoding), slog.Int("count", f.Count), slog.String("method", msgs[0].method))
		}
	}
	if listed && r.gov != nil {
		// The tools as the client sees them, secrets redacted: what the
		// gate pins and shows a person is what the model read.
		if tools := r.sess.noteTools(frame); len(tools) > 0 {
			r.mu.Lock()
			r.watchTools(tools)
			r.mu.Unlock()
		}
	}
	r.up.write(frame)
	if done != nil {
		r.completed(done, frame, findings)
	}
}

// pendingKeyLocked finds the pending request an answer's id names: as it
// was written, or else as the same JSON value written another way (a server
// that parsed the id echoes 1.0 as 1).
func (r *relay) pendingKeyLocked(id json.RawMessage) (string, bool) {
	if _, ok := r.pending[string(id)]; ok {
		return string(id), true
	}
	want, err := canonicalID(id)
	if err != nil {
		return "", false
	}
	for key := range r.pending {
		if c, err := canonicalID(json.RawMessage(key)); err == nil && c == want {
			return key, true
		}
	}
	return "", false
}

// canonicalID re-encodes a JSON id so that equal values compare equal.
func canonicalID(id json.RawMessage) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(id))
	if err := dec.Decode(&v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}

// withoutAnswers returns a batch frame without the answers to ids.
func withoutAnswers(msgs []message, ids []string) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for _, m := range msgs {
		if m.kind == kindResponse && slices.Contains(ids, string(m.id)) {
			continue
		}
		if b.Len() > 1 {
			b.WriteByte(',')
		}
		b.Write(m.raw)
	}
	b.WriteByte(']')
	return b.Bytes()
}

func (r *relay) fromServerTooLarge(e *tooLargeError) {
	id, _ := headFields(e.Head)
	r.mu.Lock()
	method, ok := r.pending[string(id)]
	delete(r.pending, string(id))
	g := r.governed[string(id)]
	delete(r.governed, string(id))
	r.mu.Unlock()
	r.log.Warn("dropped an oversized message from the server", slog.Int64("bytes", e.Size))
	if ok {
		r.up.write(failureResponse(id, method, fmt.Sprintf(
			"Gatehouse: the server's answer is %d bytes, over the proxy's %d-byte limit per message; it was not delivered.",
			e.Size, e.Limit)))
	}
	if g != nil && g.ran {
		r.complete(g, &Outcome{Status: StatusFailed, Duration: time.Since(g.start)})
	}
}

// lineWriter writes newline-terminated messages, one whole message per Write,
// safe for concurrent use.
type lineWriter struct {
	mu  sync.Mutex
	w   io.Writer
	buf bytes.Buffer // guarded by mu
	err error        // first write error; guarded by mu
}

func (l *lineWriter) write(msg []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return l.err
	}
	l.buf.Reset()
	l.buf.Write(msg)
	l.buf.WriteByte('\n')
	_, l.err = l.w.Write(l.buf.Bytes())
	if l.buf.Cap() > 1<<20 {
		l.buf = bytes.Buffer{} // do not hold on to a huge message's memory
	}
	return l.err
}

// Refuse answers every request from the client with err until the client
// closes in or ctx is done: for a proxy that cannot run its server at all
// (an unknown server name, an unreadable home folder), so that the client
// shows why instead of a dropped connection. tools/call gets an isError
// result, other requests a JSON-RPC error; notifications are ignored.
func Refuse(ctx context.Context, in io.Reader, out io.Writer, err error) {
	r := newRelay(slog.New(slog.DiscardHandler), DefaultMaxMessageBytes, out)
	r.fail(err)
	done := make(chan error, 1)
	go func() { done <- r.clientPump(in) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}
