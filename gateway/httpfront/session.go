package httpfront

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// maxBacklog bounds the messages kept for a GET stream that is not open:
// past it the oldest are dropped, and the log says so.
const maxBacklog = 1024

// A session is one MCP session: one relay, the POSTs awaiting its answers,
// and its GET stream.
type session struct {
	id, server, client string
	front              *Front
	in                 *io.PipeWriter // the relay's client stream
	pr                 *io.PipeReader
	done               chan struct{} // closed when the relay has stopped
	closeOnce          sync.Once

	mu       sync.Mutex
	pending  map[string]*exchange // by request id key; guarded by mu
	tokens   map[string]*exchange // by progress token key; guarded by mu
	stream   *stream              // the GET stream, nil when none; guarded by mu
	backlog  [][]byte             // for the next GET stream; guarded by mu
	open     map[*exchange]bool   // POSTs answering; guarded by mu
	last     time.Time            // the last request; guarded by mu
	partial  []byte               // an unfinished line from the relay; guarded by wmu
	wmu      sync.Mutex           // serializes Write
	dropped  int                  // backlog messages dropped; guarded by mu
	finished bool                 // the relay stopped; guarded by mu
}

// An exchange is one POST awaiting its answers.
type exchange struct {
	sse   bool
	batch bool
	want  map[string]json.RawMessage // unanswered requests: key -> id; guarded by session.mu
	queue [][]byte                   // guarded by session.mu
	wake  chan struct{}              // one pending wake-up
	toks  []string
}

// A stream is the session's GET stream.
type stream struct {
	wake chan struct{}
}

func newSession(f *Front, server, client string) *session {
	pr, pw := io.Pipe()
	return &session{id: newSessionID(), server: server, client: client, front: f, in: pw, pr: pr,
		done: make(chan struct{}), pending: map[string]*exchange{}, tokens: map[string]*exchange{},
		open: map[*exchange]bool{}, last: time.Now()}
}

// run relays until the session closes or the relay stops.
func (s *session) run(r Relay) {
	defer close(s.done)
	defer s.front.remove(s)
	err := r.Serve(s.front.ctx, s.pr, s)
	s.pr.CloseWithError(io.ErrClosedPipe)
	s.mu.Lock()
	s.finished = true
	for ex := range s.open {
		poke(ex.wake)
	}
	if s.stream != nil {
		poke(s.stream.wake)
	}
	s.mu.Unlock()
	if err != nil {
		s.front.log.Warn("session's relay stopped", slog.String("server", s.server), slog.Any("err", err))
	}
}

// close ends the session: the relay sees its client stream end, stops the
// server and returns.
func (s *session) close() {
	s.closeOnce.Do(func() { s.in.Close() })
}

func (s *session) touch() {
	s.mu.Lock()
	s.last = time.Now()
	s.mu.Unlock()
}

// idleSince reports whether nothing has happened in the session for d.
func (s *session) idleSince(d time.Duration) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.open) == 0 && s.stream == nil && time.Since(s.last) > d
}

// send writes one line to the relay.
func (s *session) send(line []byte) error {
	_, err := s.in.Write(line)
	return err
}

// expect registers a POST's requests before they are sent, so that no
// answer can come before its POST waits for it. It returns the id of a
// request already awaiting its answer, if one is, and then registers
// nothing.
func (s *session) expect(msgs []posted, sse, batch bool) (*exchange, json.RawMessage) {
	ex := &exchange{sse: sse, batch: batch, want: map[string]json.RawMessage{}, wake: make(chan struct{}, 1)}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, m := range msgs {
		if !m.request {
			continue
		}
		if s.pending[m.key] != nil || ex.want[m.key] != nil {
			return nil, m.id
		}
		ex.want[m.key] = m.id
	}
	for k := range ex.want {
		s.pending[k] = ex
	}
	for _, m := range msgs {
		if m.token != "" && s.tokens[m.token] == nil {
			s.tokens[m.token] = ex
			ex.toks = append(ex.toks, m.token)
		}
	}
	s.open[ex] = true
	s.last = time.Now()
	return ex, nil
}

// next returns the messages queued for ex, whether every request of it
// has its answer, and whether the session ended.
func (s *session) next(ex *exchange) (msgs [][]byte, done, ended bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	msgs, ex.queue = ex.queue, nil
	return msgs, len(ex.want) == 0, s.finished
}

// finish takes a POST off the books. Requests still unanswered (the client
// went away) are cancelled at the relay, which records a governed call
// that reached the server as UNKNOWN.
func (s *session) finish(ex *exchange) {
	if ex == nil {
		return
	}
	s.mu.Lock()
	delete(s.open, ex)
	for _, t := range ex.toks {
		if s.tokens[t] == ex {
			delete(s.tokens, t)
		}
	}
	var cancel []json.RawMessage
	for k, id := range ex.want {
		if s.pending[k] == ex {
			delete(s.pending, k)
			cancel = append(cancel, id)
		}
	}
	ex.want = nil
	s.last = time.Now()
	finished := s.finished
	s.mu.Unlock()
	if finished {
		return
	}
	for _, id := range cancel {
		s.send(fmt.Appendf(nil, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":"the HTTP client went away"}}`+"\n", id))
	}
}

// listen opens the session's GET stream, if none is open.
func (s *session) listen() (*stream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != nil {
		return nil, false
	}
	s.stream = &stream{wake: make(chan struct{}, 1)}
	poke(s.stream.wake)
	return s.stream, true
}

func (s *session) unlisten(st *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream == st {
		s.stream = nil
	}
	s.last = time.Now()
}

// drain returns what waits for the GET stream.
func (s *session) drain(st *stream) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stream != st {
		return nil
	}
	msgs := s.backlog
	s.backlog = nil
	return msgs
}

func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// Write takes the relay's messages to the client, one per line, and routes
// each: an answer to the POST that sent its request; a progress
// notification to the POST streaming its call's events; anything else
// (the server's requests and notifications) to the GET stream, or, while
// none is open, to a POST streaming events, or else to the backlog for
// the next GET stream.
func (s *session) Write(p []byte) (int, error) {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	s.partial = append(s.partial, p...)
	for {
		i := bytes.IndexByte(s.partial, '\n')
		if i < 0 {
			break
		}
		line := bytes.Clone(s.partial[:i])
		s.partial = s.partial[i+1:]
		if len(bytes.TrimSpace(line)) > 0 {
			s.route(line)
		}
	}
	if len(s.partial) == 0 {
		s.partial = nil
	}
	return len(p), nil
}

func (s *session) route(line []byte) {
	v, err := gateway.ReadValue(line)
	if err != nil {
		// The relay writes only what it read one way: this is a bug.
		s.front.log.Error("the relay wrote a message that does not read", slog.Any("err", err))
		return
	}
	elems := []gateway.Value{v}
	if v.Kind() == gateway.Array {
		elems = elems[:0]
		for e := range v.Elements() {
			elems = append(elems, e)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range elems {
		raw := e.Raw()
		_, hasMethod := e.Get("method")
		id, hasID := e.Get("id")
		if !hasMethod && hasID {
			if key, ok := idKey(id); ok {
				if ex := s.pending[key]; ex != nil {
					delete(s.pending, key)
					delete(ex.want, key)
					ex.queue = append(ex.queue, raw)
					poke(ex.wake)
					continue
				}
				continue // its POST is gone: the client went away
			}
		}
		if m, _ := e.Get("method"); hasMethod && string(m.Raw()) == `"notifications/progress"` {
			if tok, ok := e.Path("params", "progressToken"); ok {
				if key, ok := idKey(tok); ok {
					if ex := s.tokens[key]; ex != nil && ex.sse {
						ex.queue = append(ex.queue, raw)
						poke(ex.wake)
						continue
					}
				}
			}
		}
		s.toStreamLocked(raw)
	}
}

// toStreamLocked queues a message that answers no POST.
func (s *session) toStreamLocked(raw []byte) {
	if s.stream == nil {
		for ex := range s.open {
			if ex.sse {
				ex.queue = append(ex.queue, raw)
				poke(ex.wake)
				return
			}
		}
	}
	if len(s.backlog) >= maxBacklog {
		s.backlog = s.backlog[1:]
		s.dropped++
		if s.dropped == 1 || s.dropped%100 == 0 {
			s.front.log.Warn("dropped messages for a GET stream that is not open", slog.Int("dropped", s.dropped),
				slog.String("server", s.server), slog.String("client", s.client))
		}
	}
	s.backlog = append(s.backlog, raw)
	if s.stream != nil {
		poke(s.stream.wake)
	}
}
