package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// relay is the state shared by the two directions of one proxied session.
type relay struct {
	log     *slog.Logger
	max     int         // bytes per message
	up      *lineWriter // to the client
	down    *lineWriter // to the server; nil when it never started
	secrets *secretSet  // nil when there is nothing to redact

	// Governance: nil gov relays tools/call like anything else.
	ctx       context.Context // ends when the proxy stops
	gov       Governor
	server    string
	sessionID string
	timeout   time.Duration // a governed call's wait for the server
	sess      sessionState
	wg        sync.WaitGroup // governed calls and outcome writes in flight
	listed    chan struct{}  // closed when the last ToolsListed is done; guarded by mu

	mu       sync.Mutex
	requests map[string]*request // the client's requests awaiting an answer, by id; guarded by mu
	failed   error               // set once the server is gone; guarded by mu
}

// A request is one request from the client, from its arrival to its
// answer: it is registered, under the relay's lock, before anything else
// happens to it, and taken off (by [relay.take]) by whatever answers it,
// once. Its answer comes from the server only after it was sent there.
type request struct {
	key    string          // its id as a value
	id     json.RawMessage // its id as the client wrote it
	method string

	// For a governed tools/call:
	governed bool
	ctx      context.Context    // ends when the client cancels it, or the proxy stops
	cancel   context.CancelFunc // ends ctx
	call     *Call              // set once read
	auth     *Authorization     // set once allowed

	// Guarded by relay.mu:
	sent  bool        // forwarded to the server: only now may the server answer it
	start time.Time   // when it was sent
	timer *time.Timer // ends the wait for the server's answer
}

func newRelay(log *slog.Logger, max int, out io.Writer) *relay {
	return &relay{log: log, max: max, up: &lineWriter{w: out}, ctx: context.Background(),
		requests: map[string]*request{}}
}

// take takes req off the books and reports whether it was still on them:
// whoever gets true answers it, and nobody else does.
func (r *relay) take(req *request) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.takeLocked(req)
}

func (r *relay) takeLocked(req *request) bool {
	if r.requests[req.key] != req {
		return false
	}
	delete(r.requests, req.key)
	if req.timer != nil {
		req.timer.Stop()
	}
	return true
}

// reply answers req with the proxy's own answer, if nothing answered it
// first. For a governed call that reached the server, o records how it
// ended (nil for none).
func (r *relay) reply(req *request, resp []byte, o *Outcome) bool {
	if !r.take(req) {
		return false
	}
	r.up.write(resp)
	if o != nil && req.governed && req.auth != nil {
		r.complete(req, o)
	}
	return true
}

// text makes a string from a message fit for the proxy's own log: secrets
// redacted, cut short. (The log's handlers quote control characters.)
func (r *relay) text(s string) string {
	s = r.secrets.redactor().redactText(s)
	if len(s) > 120 {
		s = strings.ToValidUTF8(s[:120], "") + "…"
	}
	return s
}

// watchTools hands a listed page of tools to the governor, if it watches
// them, after the pages before it.
func (r *relay) watchTools(tools []*Tool) {
	w, ok := r.gov.(ToolWatcher)
	if !ok {
		return
	}
	r.mu.Lock()
	prev, done := r.listed, make(chan struct{})
	r.listed = done
	r.wg.Add(1)
	r.mu.Unlock()
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
	var open []*request
	for _, req := range r.requests {
		open = append(open, req)
	}
	r.mu.Unlock()
	for _, req := range open {
		var o *Outcome
		if req.governed {
			// One that reached the server, which went away, may or may
			// not have taken effect; one still being decided stops.
			o = &Outcome{Status: StatusUnknown, Duration: time.Since(req.start)}
			req.cancel()
		}
		r.reply(req, failureResponse(req.id, req.method, "Gatehouse: "+err.Error()), o)
	}
}

// abandon ends every request still in flight once the proxy stops and
// nobody is left to answer: a governed call that reached the server, which
// was stopped before it answered, is recorded UNKNOWN; one still being
// decided stops.
func (r *relay) abandon() {
	r.mu.Lock()
	var open []*request
	for _, req := range r.requests {
		if r.takeLocked(req) {
			open = append(open, req)
		}
	}
	r.mu.Unlock()
	for _, req := range open {
		if !req.governed {
			continue
		}
		req.cancel()
		if req.sent {
			r.complete(req, &Outcome{Status: StatusUnknown, Duration: time.Since(req.start)})
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
				slog.Int64("bytes", tooLarge.Size), slog.String("method", r.text(method)))
			if id != nil && !r.inFlight(id) {
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

// inFlight reports whether a request with this id is awaiting an answer:
// the proxy's own error to a new message with that id would pass for the
// answer to the other.
func (r *relay) inFlight(id json.RawMessage) bool {
	v, err := ReadValue(id)
	if err != nil {
		return false
	}
	_, key, ok := readID(v)
	return ok && r.keyInFlight(key)
}

// keyInFlight is inFlight for an id already read.
func (r *relay) keyInFlight(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests[key] != nil
}

// fromClient relays one frame from the client: what the gate cannot read
// one way, or that a server could run as something else, is refused whole;
// every request is registered before any of it can be answered; governed
// calls go to the gate, the rest to the server as the bytes that were read.
func (r *relay) fromClient(frame []byte) {
	msgs, batch, err := parseFrame(frame)
	if err != nil {
		if msgs == nil {
			// Not JSON the gate reads one way: its id, if one can be
			// found, only addresses the error.
			id, method := headFields(frame)
			if v, verr := ReadValue(id); verr == nil {
				_, key, _ := readID(v)
				msgs = []message{{kind: kindInvalid, id: id, key: key, method: method}}
			}
		}
		r.refuseFrame(msgs, err)
		return
	}
	if r.gov != nil {
		for _, m := range msgs {
			if why := methodRefusal(m); why != "" {
				r.refuseFrame(msgs, fmt.Errorf("%w: %s", errRefused, why))
				return
			}
		}
	}
	var (
		reqs     []*request // by message; nil for a notification
		governed bool
		dup      string
	)
	r.mu.Lock()
	failed := r.failed
	if failed == nil {
		reqs = make([]*request, len(msgs))
		seen := map[string]bool{}
		for i, m := range msgs {
			if m.kind != kindRequest {
				continue
			}
			if r.requests[m.key] != nil || seen[m.key] {
				dup = string(m.id)
				break
			}
			seen[m.key] = true
			reqs[i] = &request{key: m.key, id: bytes.Clone(m.id), method: m.method,
				governed: r.gov != nil && m.method == governedMethod}
			governed = governed || reqs[i].governed
		}
		if dup == "" {
			for i, m := range msgs {
				if req := reqs[i]; req != nil {
					if req.governed {
						req.ctx, req.cancel = context.WithCancel(r.ctx)
					}
					r.requests[req.key] = req
				} else if m.kind == kindNotification && m.method == "notifications/cancelled" {
					r.cancelledLocked(m)
				}
			}
		}
	}
	r.mu.Unlock()
	switch {
	case failed != nil:
		r.refuseFrame(msgs, failed)
		return
	case dup != "":
		r.refuseFrame(msgs, fmt.Errorf("%w: the id %s is already in use by a request awaiting its answer", errRefused, r.text(dup)))
		return
	}
	if len(msgs) == 1 && msgs[0].method == "initialize" {
		if info, ok := msgs[0].val.Path("params", "clientInfo"); ok {
			r.sess.setClient(clientOf(info))
		}
	}
	if !governed {
		r.toServer(frame)
		return
	}
	// A tools/call must not slip past the gate inside a batch (allowed up
	// to protocol 2025-03-26): the batch is taken apart, and its answers
	// come back one by one.
	for i, m := range msgs {
		if req := reqs[i]; req != nil && req.governed {
			m := m.clone() // the frame's buffer is reused
			r.wg.Add(1)
			go r.govern(req, m)
			continue
		}
		if batch {
			r.toServer(m.raw)
		}
	}
}

// errRefused marks a message the proxy read but will not relay.
var errRefused = errors.New("refused")

// refuseFrame answers each request of a frame that is not relayed (each
// batch member that has a usable id); nothing of it reaches the server. A
// frame with no such request gets one error with id null.
func (r *relay) refuseFrame(msgs []message, err error) {
	code, reason := codeInternalError, err.Error()
	malformed := true
	switch {
	case errors.Is(err, errNotJSON):
		code = codeParseError
	case errors.Is(err, errInvalid):
		code = codeInvalidRequest
	case errors.Is(err, errRefused):
		code = codeInvalidRequest
		reason = "a server could read it differently from the gate: " + strings.TrimPrefix(reason, errRefused.Error()+": ")
	default:
		malformed = false // the server is gone: requests are told, notifications dropped
	}
	text := "Gatehouse: " + reason
	if malformed {
		text = "Gatehouse refused this message: " + reason
		r.log.Warn("refused a message from the client", slog.String("why", r.text(reason)))
	}
	answered := false
	for _, m := range msgs {
		if m.key == "" || m.kind == kindResponse || m.kind == kindNotification || r.keyInFlight(m.key) {
			continue
		}
		answered = true
		if m.method == governedMethod {
			call := text
			if malformed {
				call = "Gatehouse refused this call, so it did not run: " + reason
			}
			r.up.write(toolErrorResponse(m.id, call))
		} else {
			r.up.write(errorResponse(m.id, code, text))
		}
	}
	if !answered && malformed {
		r.up.write(errorResponse(nil, code, text))
	}
}

// toServer writes one frame to the server.
func (r *relay) toServer(frame []byte) {
	if err := r.down.write(frame); err != nil {
		// The server's stdin is closed: it is exiting. The server pump will
		// see it and fail whatever is still pending.
		r.log.Warn("writing to server", slog.Any("err", err))
	}
}

// cancelledLocked handles the client's notifications/cancelled: the
// request is off the books at once (the client expects no answer, and may
// reuse its id), so a late answer from the server is dropped. A governed
// call still being decided stops waiting; one that reached the server has
// its outcome recorded as UNKNOWN (the server may never answer a cancelled
// request). The notification itself is relayed.
func (r *relay) cancelledLocked(m message) {
	id, ok := m.val.Path("params", "requestId")
	if !ok {
		return
	}
	_, key, ok := readID(id)
	if !ok {
		return
	}
	req := r.requests[key]
	if req == nil || !r.takeLocked(req) {
		return
	}
	if req.governed {
		req.cancel()
		if req.sent {
			r.complete(req, &Outcome{Status: StatusUnknown, Duration: time.Since(req.start)})
		}
	}
}

// serverPump relays server -> client until the server's stdout ends.
func (r *relay) serverPump(stdout io.Reader) error {
	fr := newFrameReader(stdout, r.max)
	for {
		frame, err := fr.next()
		var tooLarge *tooLargeError
		switch {
		case errors.As(err, &tooLarge):
			r.unreadableFromServer(tooLarge.Head, fmt.Sprintf(
				"Gatehouse: the server's answer is %d bytes, over the proxy's %d-byte limit per message; it was not delivered",
				tooLarge.Size, tooLarge.Limit))
			continue
		case errors.Is(err, io.EOF):
			return nil
		case err != nil:
			return err
		}
		r.fromServer(frame)
	}
}

// fromServer relays one frame from the server: each answer only to a
// request the server was sent and nobody has answered; every message with
// the session's secrets redacted; each governed call's outcome recorded
// from the very value the client gets.
func (r *relay) fromServer(frame []byte) {
	msgs, batch, err := parseFrame(frame)
	if err != nil {
		r.unreadableFromServer(frame, "Gatehouse could not read the server's answer one way, so it was not delivered: "+err.Error())
		return
	}
	answers := make([]*request, len(msgs))
	var forged []string
	r.mu.Lock()
	for i, m := range msgs {
		if m.kind != kindResponse || m.key == "" {
			continue // a request or notification; or an error about a message without a usable id
		}
		req := r.requests[m.key]
		if req == nil || !req.sent && req.governed {
			// A request the client never sent, one already answered (by
			// the proxy, or cancelled), or a tools/call the gate has not
			// let through: its answer would pass for the call's.
			forged = append(forged, r.text(string(m.id)))
			msgs[i].kind = kindInvalid
			continue
		}
		r.takeLocked(req)
		answers[i] = req
	}
	r.mu.Unlock()
	if len(forged) > 0 {
		r.log.Warn("dropped answers to requests the server was not sent", slog.String("ids", strings.Join(forged, ",")))
	}
	red := r.secrets.redactor()
	out := make([][]byte, 0, len(msgs))
	type done struct {
		req    *request
		answer Value
		found  []Finding
	}
	var outcomes []done
	for i, m := range msgs {
		if m.kind == kindInvalid {
			continue
		}
		v, found := red.redactValue(m.val)
		for _, f := range found {
			r.log.Warn("redacted a secret the server sent", slog.String("secret", f.Secret),
				slog.String("encoding", f.Encoding), slog.Int("count", f.Count), slog.String("method", r.text(m.method)))
		}
		req := answers[i]
		if req != nil && req.method == "tools/list" && r.gov != nil {
			r.noteTools(v)
		}
		if req != nil && req.governed {
			// The frame's buffer is reused once this returns.
			outcomes = append(outcomes, done{req, Value{raw: bytes.Clone(v.Raw())}, found})
		}
		out = append(out, v.Raw())
	}
	switch {
	case len(out) == 0:
	case !batch:
		r.up.write(out[0])
	default:
		r.up.write(append(append([]byte{'['}, bytes.Join(out, []byte{','})...), ']'))
	}
	for _, d := range outcomes {
		o := outcomeOf(d.answer, time.Since(d.req.start))
		o.Findings = d.found
		r.complete(d.req, o)
	}
}

// unreadableFromServer handles a frame from the server that cannot be
// relayed: the request it answers, found from its first bytes, is answered
// with why; anything else is dropped, and the log says so.
func (r *relay) unreadableFromServer(head []byte, why string) {
	id, _ := headFields(head)
	var req *request
	if v, err := ReadValue(id); err == nil {
		if _, key, ok := readID(v); ok {
			r.mu.Lock()
			if q := r.requests[key]; q != nil && (q.sent || !q.governed) {
				req = q
			}
			r.mu.Unlock()
		}
	}
	r.log.Warn("dropped a message from the server", slog.String("why", r.text(why)), slog.Int("bytes", len(head)))
	if req == nil {
		return
	}
	// why may quote the server (a member name it repeated): the client
	// is told it with the session's secrets redacted, like all the rest.
	why = r.secrets.redactor().redactText(why)
	if req.method == "tools/list" && r.gov != nil {
		r.sess.hold("the tool definitions in its last listing could not be read one way: " + why)
	}
	r.reply(req, failureResponse(req.id, req.method, why), &Outcome{Status: StatusFailed, Duration: time.Since(req.start)})
}

// noteTools reads a tools/list answer as the client got it.
func (r *relay) noteTools(answer Value) {
	result, ok := answer.Get("result")
	if !ok {
		return
	}
	if tools := r.sess.noteTools(result); len(tools) > 0 {
		r.watchTools(tools)
	}
}
