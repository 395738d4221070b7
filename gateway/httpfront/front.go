// Package httpfront serves MCP's streamable HTTP transport in front of
// Gatehouse's relay, so that clients on other machines (or that speak only
// HTTP) reach a registered server through the same gate as the stdio proxy.
//
// A [Front] serves one endpoint per registered server, /mcp/NAME. Each MCP
// session a client opens there is one relay ([gateway.Proxy] in practice,
// through [OpenFunc]): the body of every POST is fed to it as one message
// of its client stream, exactly as a stdio client's line would be, and
// every message it writes back goes to the HTTP request it answers (a
// response, by id, or a progress notification, by token), or else to the
// session's GET stream. The relay reads every message once, strictly, and
// governs every tools/call; the front only routes bytes and never rewrites
// a message.
//
// # Sessions
//
// A POST without an Mcp-Session-Id header that holds a request opens a
// session: the relay starts its own server (one downstream per session, so
// that no state, grant or budget of one client's session leaks into
// another's), and the answer carries the new Mcp-Session-Id. A session
// belongs to the client whose token opened it; any other token, and any
// unknown id, get 404. DELETE ends a session; one idle for
// [Options.SessionIdle] ends by itself; at most [Options.MaxSessions] are
// open at once (503 beyond, which says so).
//
// # What is refused
//
// Every request to /mcp/ and /metrics MUST pass, in this order: its Host
// among the allowed hosts (403: DNS rebinding), its Origin, when it has one,
// the same as its Host or an allowed origin (403), no query string (400: a
// token in a URL ends up in logs and histories; the query is never logged),
// and a bearer token of a client (401). A token made for some servers
// reaches only their endpoints, and not /metrics (403). A body over
// [Options.MaxMessageBytes] gets 413, one that does not arrive within
// [Options.BodyTimeout] gets 408, one that is not JSON-RPC gets 400 with a
// JSON-RPC error; none of these reach the relay, and the server stays up
// for everyone else. /health answers without a token.
package httpfront

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// A Relay relays one client stream to one server: [gateway.Proxy] is one.
type Relay interface {
	Serve(ctx context.Context, in io.Reader, out io.Writer) error
}

// OpenFunc returns the relay of a new session of client with server. An
// error wrapping [ErrUnknownServer] answers 404.
type OpenFunc func(ctx context.Context, server, client string) (Relay, error)

// ErrUnknownServer is returned by an [OpenFunc] for a server not registered.
var ErrUnknownServer = errors.New("no such server")

// An Authenticator returns the client a bearer token belongs to ([Tokens]
// is one).
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (client Client, ok bool, err error)
}

// A Client is who a token speaks for, and where it may go.
type Client struct {
	Name string
	// Servers are the servers whose endpoints the token reaches; nil
	// means every registered server.
	Servers []string
}

// Reaches reports whether the client's token reaches server's endpoint.
func (c Client) Reaches(server string) bool {
	return c.Servers == nil || slices.Contains(c.Servers, server)
}

// Options configure a [Front]. Nil options mean the defaults.
type Options struct {
	Logger *slog.Logger
	// MaxMessageBytes bounds a request body; zero means the relay's
	// gateway.DefaultMaxMessageBytes.
	MaxMessageBytes int
	// MaxSessions bounds the sessions open at once; zero means
	// DefaultMaxSessions.
	MaxSessions int
	// SessionIdle ends a session with no request in flight, no GET stream
	// and no request for this long; zero means 30 minutes.
	SessionIdle time.Duration
	// BodyTimeout bounds the reading of one request body; zero means 30
	// seconds.
	BodyTimeout time.Duration
	// WriteTimeout bounds each write to a client; zero means 30 seconds.
	WriteTimeout time.Duration
	// AllowedHosts are the Host header names (without port) accepted; nil
	// means localhost, 127.0.0.1 and ::1.
	AllowedHosts []string
	// AllowedOrigins are the Origin values accepted besides the request's
	// own host (e.g. "https://inspector.example.com").
	AllowedOrigins []string
	// Metrics counts requests and sessions; nil counts nothing.
	Metrics *Metrics
}

// DefaultMaxSessions is how many sessions a front keeps open at once by
// default: each runs its own server process.
const DefaultMaxSessions = 64

// A Front serves MCP streamable HTTP for the registered servers.
type Front struct {
	open    OpenFunc
	auth    Authenticator
	log     *slog.Logger
	max     int
	cap     int
	idle    time.Duration
	bodyTO  time.Duration
	writeTO time.Duration
	hosts   map[string]bool
	origins map[string]bool
	metrics *Metrics
	ctx     context.Context // ends every session
	stop    context.CancelFunc

	mu       sync.Mutex
	sessions map[string]*session // by Mcp-Session-Id; guarded by mu
}

// New returns a front that opens sessions with open and checks tokens
// with auth. Close ends its sessions.
func New(open OpenFunc, auth Authenticator, opts *Options) *Front {
	if open == nil || auth == nil {
		panic("httpfront: New needs an OpenFunc and an Authenticator")
	}
	if opts == nil {
		opts = &Options{}
	}
	f := &Front{open: open, auth: auth, log: opts.Logger, max: opts.MaxMessageBytes, cap: opts.MaxSessions,
		idle: opts.SessionIdle, bodyTO: opts.BodyTimeout, writeTO: opts.WriteTimeout, metrics: opts.Metrics,
		hosts: map[string]bool{}, origins: map[string]bool{}, sessions: map[string]*session{}}
	if f.log == nil {
		f.log = slog.New(slog.DiscardHandler)
	}
	if f.max <= 0 {
		f.max = gateway.DefaultMaxMessageBytes
	}
	if f.cap <= 0 {
		f.cap = DefaultMaxSessions
	}
	if f.idle <= 0 {
		f.idle = 30 * time.Minute
	}
	if f.bodyTO <= 0 {
		f.bodyTO = 30 * time.Second
	}
	if f.writeTO <= 0 {
		f.writeTO = 30 * time.Second
	}
	hosts := opts.AllowedHosts
	if hosts == nil {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	for _, h := range hosts {
		f.hosts[strings.ToLower(strings.Trim(h, "[]"))] = true
	}
	for _, o := range opts.AllowedOrigins {
		f.origins[strings.ToLower(strings.TrimRight(o, "/"))] = true
	}
	f.ctx, f.stop = context.WithCancel(context.Background())
	f.metrics.Gauge("gatehouse_sessions", func() float64 { return float64(f.Sessions()) })
	go f.reap()
	return f
}

// HTTPServer returns an http.Server for the front with the bounds it
// relies on: headers within 10 seconds and 64 KiB (slow clients that
// trickle bytes are cut off), idle connections closed after 2 minutes.
// Bodies are bounded per request, and streams have no overall deadline.
func (f *Front) HTTPServer() *http.Server {
	return &http.Server{
		Handler:           f,
		ReadHeaderTimeout: 10 * time.Second,
		MaxHeaderBytes:    64 << 10,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
	}
}

// Sessions returns how many sessions are open.
func (f *Front) Sessions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sessions)
}

// Close ends every session, stopping its server.
func (f *Front) Close() {
	f.stop()
	f.mu.Lock()
	all := make([]*session, 0, len(f.sessions))
	for _, s := range f.sessions {
		all = append(all, s)
	}
	f.mu.Unlock()
	for _, s := range all {
		s.close()
	}
	for _, s := range all {
		<-s.done
	}
}

// reap ends idle sessions until the front closes.
func (f *Front) reap() {
	t := time.NewTicker(min(f.idle/2, time.Minute))
	defer t.Stop()
	for {
		select {
		case <-f.ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		var idle []*session
		for _, s := range f.sessions {
			if s.idleSince(f.idle) {
				idle = append(idle, s)
			}
		}
		f.mu.Unlock()
		for _, s := range idle {
			f.log.Info("ended an idle session", slog.String("server", s.server), slog.String("client", s.client))
			s.close()
		}
	}
}

// statusWriter remembers the status code, for the metrics.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// ServeHTTP implements [http.Handler].
func (f *Front) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sw := &statusWriter{ResponseWriter: w}
	endpoint := "other"
	defer func() {
		f.metrics.Add("gatehouse_http_requests_total", 1, "endpoint", endpoint, "code", strconv.Itoa(sw.code))
	}()
	switch {
	case r.URL.Path == "/health":
		endpoint = "health"
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			httpError(sw, http.StatusMethodNotAllowed, codeServerError, "Gatehouse: /health answers GET")
			return
		}
		sw.Header().Set("Content-Type", "application/json")
		sw.Header().Set("Cache-Control", "no-store")
		io.WriteString(sw, `{"status":"ok"}`+"\n")
	case r.URL.Path == "/metrics":
		endpoint = "metrics"
		c, ok := f.admit(sw, r)
		if !ok {
			return
		}
		if c.Servers != nil {
			// The metrics count every server's calls.
			httpError(sw, http.StatusForbidden, codeServerError, "Gatehouse: the token of "+strconv.Quote(c.Name)+
				" reaches only some servers, and /metrics counts every server's calls; it needs a token made without --server")
			return
		}
		sw.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
		f.metrics.WriteTo(sw)
	case strings.HasPrefix(r.URL.Path, "/mcp/"):
		endpoint = "mcp"
		server := strings.TrimPrefix(r.URL.Path, "/mcp/")
		c, ok := f.admit(sw, r)
		if !ok {
			return
		}
		if server == "" || strings.Contains(server, "/") {
			httpError(sw, http.StatusNotFound, codeServerError, "Gatehouse: the endpoint is /mcp/NAME, for a registered server NAME")
			return
		}
		if !c.Reaches(server) {
			f.log.Warn("refused a token outside its servers", slog.String("client", c.Name), slog.String("server", clip(server)))
			httpError(sw, http.StatusForbidden, codeServerError, "Gatehouse: the token of "+strconv.Quote(c.Name)+" does not reach the server "+
				strconv.Quote(clip(server))+"; it reaches "+strings.Join(c.Servers, ", ")+" (gatehouse serve token add CLIENT --server NAME)")
			return
		}
		client := c.Name
		switch r.Method {
		case http.MethodPost:
			f.post(sw, r, server, client)
		case http.MethodGet:
			f.get(sw, r, server, client)
		case http.MethodDelete:
			f.delete(sw, r, server, client)
		default:
			sw.Header().Set("Allow", "GET, POST, DELETE")
			httpError(sw, http.StatusMethodNotAllowed, codeServerError, "Gatehouse: an MCP endpoint answers POST, GET and DELETE")
		}
	default:
		httpError(sw, http.StatusNotFound, codeServerError, "Gatehouse: not found; MCP endpoints are /mcp/NAME")
	}
}

// admit checks a request's Host, Origin, URL and token, in that order,
// and answers it when one fails. It returns the token's client.
func (f *Front) admit(w http.ResponseWriter, r *http.Request) (Client, bool) {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if !f.hosts[strings.ToLower(strings.Trim(host, "[]"))] {
		f.log.Warn("refused a request for another host", slog.String("host", clip(r.Host)), slog.String("remote", r.RemoteAddr))
		httpError(w, http.StatusForbidden, codeServerError, "Gatehouse: this server does not answer for the host "+strconv.Quote(clip(r.Host))+
			" (a DNS rebinding guard); a host name it should answer for is given with gatehouse serve --allowed-host")
		return Client{}, false
	}
	if origin := r.Header.Get("Origin"); origin != "" && !f.originAllowed(origin, r.Host) {
		f.log.Warn("refused a request from another origin", slog.String("origin", clip(origin)), slog.String("remote", r.RemoteAddr))
		httpError(w, http.StatusForbidden, codeServerError, "Gatehouse: requests from the origin "+strconv.Quote(clip(origin))+
			" are not allowed; an origin is allowed with gatehouse serve --allowed-origin")
		return Client{}, false
	}
	if r.URL.RawQuery != "" || r.URL.ForceQuery {
		// The query may hold a token: it is never logged, and never read.
		f.log.Warn("refused a request with a query string", slog.String("path", r.URL.Path), slog.String("remote", r.RemoteAddr))
		httpError(w, http.StatusBadRequest, codeServerError,
			"Gatehouse refused this request: the URL has a query string, which may hold a token and would then be written to logs and histories; send the token in the Authorization header (Authorization: Bearer TOKEN) and no query")
		return Client{}, false
	}
	token, ok := bearer(r)
	if !ok {
		unauthorized(w, "Gatehouse: this endpoint needs a client token in the Authorization header (Authorization: Bearer TOKEN); make one with: gatehouse serve token add CLIENT")
		return Client{}, false
	}
	client, ok, err := f.auth.Authenticate(r.Context(), token)
	if err != nil {
		f.log.Error("tokens unreadable", slog.Any("err", err))
		f.metrics.Add("gatehouse_errors_total", 1, "kind", "tokens")
		httpError(w, http.StatusServiceUnavailable, codeServerError, "Gatehouse: the tokens cannot be read now; try again")
		return Client{}, false
	}
	if !ok {
		f.log.Warn("refused an unknown or revoked token", slog.String("remote", r.RemoteAddr))
		unauthorized(w, "Gatehouse: the token is unknown or revoked; see the live tokens with: gatehouse serve token list")
		return Client{}, false
	}
	return client, true
}

func (f *Front) originAllowed(origin, host string) bool {
	o := strings.ToLower(strings.TrimRight(origin, "/"))
	if f.origins[o] {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Path != "" {
		return false
	}
	return strings.EqualFold(u.Host, host)
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	vals := r.Header.Values("Authorization")
	if len(vals) != 1 {
		return "", false
	}
	scheme, token, ok := strings.Cut(vals[0], " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

func unauthorized(w http.ResponseWriter, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="gatehouse"`)
	httpError(w, http.StatusUnauthorized, codeServerError, msg)
}

// JSON-RPC error codes the front answers with.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeServerError    = -32000
)

// httpError answers with status and a JSON-RPC error (id null) that says
// why, for clients that show only the body.
func httpError(w http.ResponseWriter, status, code int, msg string) {
	httpErrorID(w, status, nil, code, msg)
}

func httpErrorID(w http.ResponseWriter, status int, id json.RawMessage, code int, msg string) {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}{JSONRPC: "2.0", ID: id, Error: struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}{code, msg}})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// clip makes a header value fit for a log line and an error message.
func clip(s string) string {
	s = strings.ToValidUTF8(s, "?")
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return s
}

func newSessionID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// lookup returns the session id names, if it is client's and server's.
func (f *Front) lookup(w http.ResponseWriter, r *http.Request, server, client string) (*session, bool) {
	id := r.Header.Get("Mcp-Session-Id")
	f.mu.Lock()
	s := f.sessions[id]
	f.mu.Unlock()
	if s == nil || s.client != client || s.server != server {
		httpError(w, http.StatusNotFound, codeServerError, "Gatehouse: no such session (it ended, or never was); start a new one with initialize")
		return nil, false
	}
	return s, true
}

// newSession opens a session of client with server, within the cap.
func (f *Front) newSession(w http.ResponseWriter, r *http.Request, server, client string) (*session, bool) {
	f.mu.Lock()
	n := len(f.sessions)
	if n >= f.cap {
		f.mu.Unlock()
		f.metrics.Add("gatehouse_sessions_refused_total", 1)
		f.log.Warn("refused a session: the cap is reached", slog.Int("sessions", n), slog.String("client", client))
		w.Header().Set("Retry-After", "10")
		httpError(w, http.StatusServiceUnavailable, codeServerError, fmt.Sprintf(
			"Gatehouse: too many sessions open (%d, the most this server keeps at once); end one with an HTTP DELETE of its Mcp-Session-Id, or try again later", f.cap))
		return nil, false
	}
	s := newSession(f, server, client)
	f.sessions[s.id] = s
	f.mu.Unlock()
	relay, err := f.open(f.ctx, server, client)
	if err != nil {
		f.remove(s)
		if errors.Is(err, ErrUnknownServer) {
			httpError(w, http.StatusNotFound, codeServerError, "Gatehouse: no server named "+strconv.Quote(server)+"; register it with: gatehouse server add "+server+" -- COMMAND [ARGS...]")
			return nil, false
		}
		f.log.Error("session not opened", slog.String("server", server), slog.Any("err", err))
		httpError(w, http.StatusInternalServerError, codeServerError, "Gatehouse: the session could not be opened: "+err.Error())
		return nil, false
	}
	f.metrics.Add("gatehouse_sessions_opened_total", 1)
	f.log.Info("session opened", slog.String("server", server), slog.String("client", client))
	go s.run(relay)
	return s, true
}

func (f *Front) remove(s *session) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sessions[s.id] == s {
		delete(f.sessions, s.id)
	}
}

// readBody reads a POST's body within the size and time bounds, answering
// the request itself when it does not fit them.
func (f *Front) readBody(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Now().Add(f.bodyTO))
	defer rc.SetReadDeadline(time.Time{})
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(f.max)))
	var tooLarge *http.MaxBytesError
	var netErr net.Error
	switch {
	case err == nil:
		return body, true
	case errors.As(err, &tooLarge):
		f.metrics.Add("gatehouse_http_body_refused_total", 1, "reason", "too_large")
		httpError(w, http.StatusRequestEntityTooLarge, codeInvalidRequest, fmt.Sprintf(
			"Gatehouse refused this request: its body is over the %d-byte limit per message", f.max))
	case errors.As(err, &netErr) && netErr.Timeout():
		f.metrics.Add("gatehouse_http_body_refused_total", 1, "reason", "too_slow")
		f.log.Warn("cut off a request body that came too slowly", slog.String("remote", r.RemoteAddr))
		w.Header().Set("Connection", "close")
		httpError(w, http.StatusRequestTimeout, codeServerError, fmt.Sprintf(
			"Gatehouse: the request body did not arrive within %s", f.bodyTO))
	default:
		f.log.Warn("request body unreadable", slog.Any("err", err), slog.String("remote", r.RemoteAddr))
	}
	return nil, false
}

// A posted message, as the front routes it: the relay reads it again,
// strictly, and decides.
type posted struct {
	request bool
	key     string          // for a request: its id as a key
	id      json.RawMessage // for a request: its id as written
	token   string          // for a request: its progress token as a key, if any
}

// classify finds the requests of a POST body, and refuses what cannot be
// routed: what is not JSON, an empty batch, a member that is neither a
// request, a notification nor a response, an id of a type no reader holds
// the same.
func classify(body []byte) ([]posted, bool, error) {
	v, err := gateway.ReadValue(body)
	if err != nil {
		return nil, false, &rpcError{codeParseError, "Gatehouse refused this message: it is not JSON read one way: " + err.Error()}
	}
	elems := []gateway.Value{v}
	batch := v.Kind() == gateway.Array
	if batch {
		elems = elems[:0]
		for e := range v.Elements() {
			elems = append(elems, e)
		}
		if len(elems) == 0 {
			return nil, true, &rpcError{codeInvalidRequest, "Gatehouse refused this message: an empty batch"}
		}
	}
	out := make([]posted, 0, len(elems))
	for _, e := range elems {
		if e.Kind() != gateway.Object {
			return nil, batch, &rpcError{codeInvalidRequest, "Gatehouse refused this message: a JSON-RPC message is an object"}
		}
		_, hasMethod := e.Get("method")
		id, hasID := e.Get("id")
		_, hasResult := e.Get("result")
		_, hasErr := e.Get("error")
		switch {
		case hasMethod && hasID:
			key, ok := idKey(id)
			if !ok {
				return nil, batch, &rpcError{codeInvalidRequest, "Gatehouse refused this message: a request id is a string or an integer"}
			}
			p := posted{request: true, key: key, id: bytes.Clone(id.Raw())}
			if tok, ok := e.Path("params", "_meta", "progressToken"); ok {
				p.token, _ = idKey(tok)
			}
			out = append(out, p)
		case hasMethod:
			out = append(out, posted{})
		case hasID && (hasResult || hasErr):
			out = append(out, posted{})
		default:
			return nil, batch, &rpcError{codeInvalidRequest, "Gatehouse refused this message: it is not a JSON-RPC request, notification or response"}
		}
	}
	return out, batch, nil
}

// idKey returns a key equal for equal ids (and progress tokens): a string,
// or an integer every reader holds exactly, as the relay reads them.
func idKey(v gateway.Value) (string, bool) {
	switch v.Kind() {
	case gateway.String:
		s, _ := v.Text()
		return "s" + s, true
	case gateway.Number:
		n, ok := v.Int()
		if !ok {
			return "", false
		}
		return "n" + strconv.FormatInt(n, 10), true
	}
	return "", false
}

type rpcError struct {
	code int
	msg  string
}

func (e *rpcError) Error() string { return e.msg }

func (f *Front) post(w http.ResponseWriter, r *http.Request, server, client string) {
	if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(strings.ToLower(strings.TrimSpace(ct)), "application/json") {
		httpError(w, http.StatusUnsupportedMediaType, codeServerError, "Gatehouse: an MCP message is posted as Content-Type: application/json")
		return
	}
	body, ok := f.readBody(w, r)
	if !ok {
		return
	}
	msgs, batch, err := classify(body)
	if err != nil {
		var re *rpcError
		errors.As(err, &re)
		f.metrics.Add("gatehouse_http_body_refused_total", 1, "reason", "malformed")
		httpError(w, http.StatusBadRequest, re.code, re.msg)
		return
	}
	hasRequest := false
	for _, m := range msgs {
		hasRequest = hasRequest || m.request
	}
	var s *session
	opened := false
	if r.Header.Get("Mcp-Session-Id") == "" {
		if !hasRequest {
			httpError(w, http.StatusBadRequest, codeServerError, "Gatehouse: no Mcp-Session-Id; a session starts with a request (initialize)")
			return
		}
		if s, ok = f.newSession(w, r, server, client); !ok {
			return
		}
		opened = true
	} else if s, ok = f.lookup(w, r, server, client); !ok {
		return
	}
	// One line of the relay's client stream: in JSON a raw line break can
	// only be white space, so it is made a space; the bytes are otherwise
	// the client's.
	line := make([]byte, 0, len(body)+1)
	for _, c := range body {
		if c == '\n' || c == '\r' {
			c = ' '
		}
		line = append(line, c)
	}
	line = append(line, '\n')
	if !hasRequest {
		s.touch()
		if err := s.send(line); err != nil {
			httpError(w, http.StatusNotFound, codeServerError, "Gatehouse: the session ended; start a new one with initialize")
			return
		}
		w.WriteHeader(http.StatusAccepted)
		return
	}
	sse := accepts(r, "text/event-stream")
	ex, dup := s.expect(msgs, sse, batch)
	if dup != nil {
		httpErrorID(w, http.StatusBadRequest, dup, codeInvalidRequest, "Gatehouse refused this message: the id "+string(dup)+" is already in use by a request awaiting its answer")
		return
	}
	defer s.finish(ex)
	if err := s.send(line); err != nil {
		httpError(w, http.StatusNotFound, codeServerError, "Gatehouse: the session ended; start a new one with initialize")
		return
	}
	if opened {
		w.Header().Set("Mcp-Session-Id", s.id)
	}
	f.answer(w, r, s, ex)
}

// answer writes what the relay answers to one POST: as an SSE stream of
// each message as it comes, or as one JSON body once every request has
// its answer.
func (f *Front) answer(w http.ResponseWriter, r *http.Request, s *session, ex *exchange) {
	rc := http.NewResponseController(w)
	if ex.sse {
		w.Header().Set("Content-Type", "text/event-stream")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		rc.Flush()
	}
	var collected [][]byte
	for {
		msgs, done, ended := s.next(ex)
		for _, m := range msgs {
			if !ex.sse {
				collected = append(collected, m)
				continue
			}
			rc.SetWriteDeadline(time.Now().Add(f.writeTO))
			if err := writeEvent(w, m); err != nil {
				return // the client went away: finish cancels what is left
			}
			rc.Flush()
		}
		if done {
			break
		}
		if ended {
			if ex.sse {
				return
			}
			httpError(w, http.StatusNotFound, codeServerError, "Gatehouse: the session ended before the server answered")
			return
		}
		select {
		case <-ex.wake:
		case <-r.Context().Done():
			return
		case <-s.done:
		}
	}
	if ex.sse {
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	rc.SetWriteDeadline(time.Now().Add(f.writeTO))
	switch {
	case !ex.batch && len(collected) == 1:
		w.Write(append(collected[0], '\n'))
	default:
		w.Write(append(append([]byte{'['}, bytes.Join(collected, []byte{','})...), ']', '\n'))
	}
}

func writeEvent(w io.Writer, msg []byte) error {
	_, err := fmt.Fprintf(w, "event: message\ndata: %s\n\n", msg)
	return err
}

// accepts reports whether the request's Accept header names typ.
func accepts(r *http.Request, typ string) bool {
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), typ) {
				return true
			}
		}
	}
	return false
}

func (f *Front) get(w http.ResponseWriter, r *http.Request, server, client string) {
	if !accepts(r, "text/event-stream") {
		httpError(w, http.StatusNotAcceptable, codeServerError, "Gatehouse: the GET stream is text/event-stream")
		return
	}
	if r.Header.Get("Mcp-Session-Id") == "" {
		httpError(w, http.StatusBadRequest, codeServerError, "Gatehouse: no Mcp-Session-Id; a GET stream belongs to a session")
		return
	}
	s, ok := f.lookup(w, r, server, client)
	if !ok {
		return
	}
	st, ok := s.listen()
	if !ok {
		httpError(w, http.StatusConflict, codeServerError, "Gatehouse: this session already has a GET stream open")
		return
	}
	defer s.unlisten(st)
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	beat := time.NewTicker(20 * time.Second)
	defer beat.Stop()
	for {
		for _, m := range s.drain(st) {
			rc.SetWriteDeadline(time.Now().Add(f.writeTO))
			if err := writeEvent(w, m); err != nil {
				return
			}
		}
		rc.Flush()
		select {
		case <-st.wake:
		case <-beat.C:
			rc.SetWriteDeadline(time.Now().Add(f.writeTO))
			if _, err := io.WriteString(w, ": keep-alive\n\n"); err != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
}

func (f *Front) delete(w http.ResponseWriter, r *http.Request, server, client string) {
	s, ok := f.lookup(w, r, server, client)
	if !ok {
		return
	}
	s.close()
	<-s.done
	f.log.Info("session ended by the client", slog.String("server", server), slog.String("client", client))
	w.WriteHeader(http.StatusNoContent)
}
