// Package gateway is Gatehouse's MCP proxy: it stands between an MCP client
// (Claude Desktop, Claude Code, Cursor, ...) and one MCP server, and relays
// everything between them.
//
// A [Proxy] speaks MCP over stdio to its client, starts the server as a child
// process (or opens a session with a remote one), and relays JSON-RPC
// messages both ways at the message level, so both protocol eras
// (initialize up to 2025-11-25, the stateless 2026-07-28 with its
// server/discover probe), every method, notification and server-to-client
// request (sampling, elicitation, roots), and every field the proxy does not
// know pass unchanged. Tools keep their names.
//
// # One reading
//
// Every message, in both directions, is read once, by [ReadValue]: exact
// member names, no member given twice (or twice once case and width are
// folded), UTF-8 only, numbers within float64's range, nesting bounded
// without recursion. What it cannot read that way is not relayed. What is
// relayed is the bytes that were read, or, where the gate changed a call's
// arguments or redacted a secret, those bytes with exactly that part
// rewritten: nothing crosses that the gate has not read.
//
// With a governor, the proxy also refuses from the client what a server
// could run as another call than the one the gate judged (see strict.go):
// a batch with any invalid member, a tools/call without an id, a method
// that is not MCP's unless its name is plain and no folding makes it
// tools/call, tools/call params with a member only a case-folding reader
// takes for the gate's.
//
// # One object per request
//
// Each request from the client is a request object, registered under the
// relay's lock when it arrives and taken off by whatever answers it, once:
// the server (only after it was sent the request), the gate (a refusal), a
// timeout, the client's cancellation, or the server going away. An answer
// from the server to a request it was not sent is dropped. A governed call's
// life, from decision to outcome, reads top to bottom in govern.go.
//
// # Secrets
//
// Every message to the client, the server's stderr and the proxy's own log
// lines have the session's secrets redacted: the values the server was
// started with and every vault value the gate resolved into a call in this
// session, as they are and in their common encodings (see redact.go).
//
// # Bounds
//
// A line that is not JSON-RPC gets a parse or invalid-request error and
// reading goes on; a message over the size limit is refused with an error
// naming the limit; a governed call the server does not answer within
// [Options.CallTimeout] ends with an isError and an UNKNOWN outcome; a server
// that cannot start, or exits, fails every request in flight and every later
// one with an error that says so, so the client never waits forever. A
// refused or failed tools/call is answered as a tool result with isError
// set, which the model reads; other methods get a JSON-RPC error.
//
// Stopping is bounded: when the client goes away the server's stdin is closed,
// then it is sent SIGTERM, then killed with its process group.
package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
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
	// CallTimeout bounds how long a governed call that reached the server
	// may wait for its answer: past it the client is told, the server is
	// sent a cancellation, and the outcome is UNKNOWN. Zero means
	// DefaultCallTimeout.
	CallTimeout time.Duration
}

// DefaultCallTimeout is how long a governed call waits for the server by
// default: longer than any MCP client waits for a tool (Claude Desktop gives
// up after about a minute), so that only a server that never answers meets
// it.
const DefaultCallTimeout = 10 * time.Minute

// A Proxy relays one MCP client to one stdio MCP server.
type Proxy struct {
	name    string
	command Command
	remote  *Remote // set for a remote server; then command is unused
	log     *slog.Logger
	stderr  io.Writer
	max     int
	grace   time.Duration
	secrets *secretSet // what the session keeps out of every channel
	gov     Governor
	session string
	timeout time.Duration
}

// New returns a proxy for the server called name, started with command.
func New(name string, command Command, opts *Options) *Proxy {
	if opts == nil {
		opts = &Options{}
	}
	p := &Proxy{name: name, command: command, log: opts.Logger, stderr: opts.Stderr,
		max: opts.MaxMessageBytes, grace: opts.StopGrace}
	p.secrets = newSecretSet(opts.Secrets)
	p.gov, p.session, p.timeout = opts.Governor, opts.Session, opts.CallTimeout
	if p.timeout <= 0 {
		p.timeout = DefaultCallTimeout
	}
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
	r.secrets, r.timeout = p.secrets, p.timeout
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
		r.abandon()
		p.log.Info("client closed; server stopped")
		return nil
	case <-ctx.Done():
		ch.stop(p.grace)
		p.drain(serverDone)
		r.abandon()
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
		c, err := dialRemote(p.name, *p.remote, p.max, p.log, func(token string) {
			p.secrets.add(map[string]string{"oauth-access-token": token})
		})
		if err != nil {
			return nil, fmt.Errorf("server %q: %w", p.name, err)
		}
		return c, nil
	}
	ch, err := startChild(p.command, p.stderr, p.secrets)
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
