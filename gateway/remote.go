package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"
)

// A Remote is a server reached over MCP's streamable HTTP transport: the
// client still speaks stdio to the proxy, and the proxy POSTs each message to
// URL and relays what comes back (a JSON body or a server-sent event stream),
// plus the messages the server sends on its own stream.
type Remote struct {
	URL string
	// Headers go with every request (credentials, resolved from the
	// keychain when the proxy starts).
	Headers map[string]string
	// Client makes the requests; nil means one with bounded dial and TLS
	// handshake times that follows no redirect to another host.
	Client *http.Client
	// Tokens, when set, gives the OAuth access token every request
	// carries (Authorization: Bearer). Each token it gives is redacted
	// from what the server sends, as the secrets in Headers are.
	//
	// A sign-in is needed only when the server asks for one: while Tokens
	// says that none is held (its error has SignInRequired), requests go
	// without a token, and only once the server answers one with HTTP 401
	// and a WWW-Authenticate challenge is the client told, in band, to
	// sign in. A public server keeps working without a sign-in.
	Tokens TokenSource
	// SSE reaches the server over the HTTP+SSE transport of protocol
	// version 2024-11-05 (see sse.go): URL is its event stream, whose
	// endpoint event names where to POST.
	SSE bool
}

// A TokenSource gives the access token a remote server's requests carry.
// Package gateway/oauth provides one that signs in with OAuth 2.1.
type TokenSource interface {
	// Token returns the access token to send. rejected, when not empty,
	// is the token the server just refused (HTTP 401): Token returns
	// another one or an error. An error is answered to the client in
	// band, as it is written: it says what the user must do. An error
	// with a method SignInRequired() bool that returns true says that no
	// sign-in is held (see [Remote.Tokens]).
	Token(ctx context.Context, rejected string) (string, error)
}

// signInRequired reports whether err says that no sign-in is held.
func signInRequired(err error) bool {
	var s interface{ SignInRequired() bool }
	return errors.As(err, &s) && s.SignInRequired()
}

// challenged reports whether resp asks for a bearer token: HTTP 401 with a
// WWW-Authenticate challenge of the Bearer scheme.
func challenged(resp *http.Response) bool {
	if resp.StatusCode != http.StatusUnauthorized {
		return false
	}
	for _, v := range resp.Header.Values("WWW-Authenticate") {
		for _, c := range strings.Split(v, ",") {
			scheme, _, _ := strings.Cut(strings.TrimSpace(c), " ")
			if strings.EqualFold(scheme, "Bearer") {
				return true
			}
		}
	}
	return false
}

// NewRemote returns a proxy for the remote server called name.
func NewRemote(name string, remote Remote, opts *Options) *Proxy {
	p := New(name, Command{}, opts)
	p.remote = &remote
	return p
}

// serverConn is the proxy's connection to its server: a child process, or
// a session with a remote server.
type serverConn interface {
	input() io.Writer  // framed messages to the server
	output() io.Reader // framed messages from the server
	// stop ends the connection, bounded by grace per step.
	stop(grace time.Duration)
	// awaitExit, after output ended, waits (bounded) for the end.
	awaitExit(ctx context.Context, grace time.Duration)
	// exitError says how the server ended.
	exitError() error
	// describe is what the log says of a started connection.
	describe() slog.Attr
}

func (c *child) input() io.Writer    { return c.stdin }
func (c *child) output() io.Reader   { return c.stdout }
func (c *child) describe() slog.Attr { return slog.Int("server_pid", c.cmd.Process.Pid) }

// Header names of the streamable HTTP transport.
const (
	sessionHeader  = "Mcp-Session-Id"
	versionHeader  = "Mcp-Protocol-Version"
	lastEventIDHdr = "Last-Event-ID"
)

// statelessVersion is the first protocol version without sessions' own GET
// stream.
const statelessVersion = "2026-07-28"

// remoteConn is one session with a remote server. Messages from the relay
// are POSTed in order of arrival (initialize alone waits for its answer, so
// that later requests carry the session); what the server answers, on each
// POST's response or on its own GET stream, is written to a pipe the relay
// reads as if it were a child's stdout, one message per line.
type remoteConn struct {
	name   string
	url    string
	host   string
	header http.Header
	client *http.Client
	max    int
	log    *slog.Logger
	tokens TokenSource
	// onToken is given each access token the first time it is used, for
	// redaction.
	onToken func(token string)

	ctx    context.Context // ends when the connection stops
	cancel context.CancelFunc
	queue  chan []byte
	posts  sync.WaitGroup // POSTs in flight
	// listenCtx ends the server's own stream, first when stopping.
	listenCtx  context.Context
	stopListen context.CancelFunc
	pr         *io.PipeReader
	pw         *io.PipeWriter
	outMu      sync.Mutex // one line at a time into pw

	mu        sync.Mutex
	session   string    // Mcp-Session-Id; guarded by mu
	lastToken string    // the access token last given; guarded by mu
	sse       *sseState // the HTTP+SSE transport's, when Remote.SSE
	// asked is set once the server asked for a token (a 401 challenge):
	// from then on no request goes without one. Guarded by mu.
	asked     bool
	version   string // negotiated protocol version; guarded by mu
	listening bool   // the GET stream was started; guarded by mu
	closed    bool   // no more input; guarded by mu
	// draining is set by stop before it waits for posts: no post starts
	// after it (a WaitGroup's Add from zero must come before its Wait).
	// Guarded by mu.
	draining bool
	err      error // why the session ended; guarded by mu
	stopOnce sync.Once
}

func dialRemote(name string, r Remote, max int, log *slog.Logger, onToken func(string)) (*remoteConn, error) {
	u, err := url.Parse(r.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", r.URL)
	}
	client := remoteClient(u, r.Client)
	header := http.Header{}
	for k, v := range r.Headers {
		header.Set(k, v)
	}
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	c := &remoteConn{name: name, url: r.URL, host: u.Host, header: header, client: client, max: max, log: log,
		tokens: r.Tokens, onToken: onToken, ctx: ctx, cancel: cancel, queue: make(chan []byte, 64), pr: pr, pw: pw}
	c.listenCtx, c.stopListen = context.WithCancel(ctx)
	if r.SSE {
		c.sse = &sseState{}
		go c.dispatchSSE()
		return c, nil
	}
	go c.dispatch()
	return c, nil
}

// remoteClient returns a copy of given (nil: a client that bounds
// connecting) whose redirects never leave the server's origin u: the
// requests carry the server's credentials.
func remoteClient(u *url.URL, given *http.Client) *http.Client {
	client := defaultHTTPClient()
	if given != nil {
		c := *given
		client = &c
	}
	next := client.CheckRedirect
	client.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if err := sameOrigin(u, req.URL); err != nil {
			return err
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return nil
	}
	return client
}

// defaultHTTPClient bounds connecting.
func defaultHTTPClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout:   10 * time.Second,
			MaxIdleConnsPerHost:   8,
			IdleConnTimeout:       90 * time.Second,
			ExpectContinueTimeout: time.Second,
			ForceAttemptHTTP2:     true,
		},
	}
}

// sameOrigin refuses a redirect from the server's URL to another scheme,
// host or port: the credentials would go to someone else, or in clear text.
func sameOrigin(from, to *url.URL) error {
	switch {
	case !strings.EqualFold(to.Scheme, from.Scheme):
		return fmt.Errorf("refused a redirect from %s to %s: it changes the scheme, and the request carries the server's credentials", from.Scheme, to.Scheme)
	case !strings.EqualFold(to.Host, from.Host):
		return fmt.Errorf("refused a redirect to another host (%s): the request carries the server's credentials", to.Host)
	}
	return nil
}

func (c *remoteConn) input() io.Writer  { return remoteInput{c} }
func (c *remoteConn) output() io.Reader { return c.pr }
func (c *remoteConn) describe() slog.Attr {
	return slog.String("server_url", c.url)
}

// remoteInput takes the relay's framed messages, one per Write.
type remoteInput struct{ c *remoteConn }

func (in remoteInput) Write(p []byte) (int, error) {
	c := in.c
	frame := bytes.Clone(bytes.TrimSuffix(p, []byte("\n")))
	c.mu.Lock()
	closed, err := c.closed, c.err
	c.mu.Unlock()
	if closed {
		if err == nil {
			err = errors.New("connection closed")
		}
		return 0, err
	}
	select {
	case c.queue <- frame:
		return len(p), nil
	case <-c.ctx.Done():
		return 0, errors.New("connection closed")
	}
}

// next returns the relay's next frame and its messages, skipping any that
// do not parse (the relay forwards only valid frames); false once the
// connection is closed.
func (c *remoteConn) next() ([]byte, []message, bool) {
	for {
		select {
		case frame := <-c.queue:
			if msgs, _, err := parseFrame(frame); err == nil {
				return frame, msgs, true
			}
		case <-c.ctx.Done():
			return nil, nil, false
		}
	}
}

func (c *remoteConn) dispatch() {
	for {
		frame, msgs, ok := c.next()
		if !ok {
			return
		}
		if len(msgs) == 1 && msgs[0].kind == kindRequest && msgs[0].method == "initialize" {
			c.post(frame, msgs) // later requests need its session
			continue
		}
		c.mu.Lock()
		draining := c.draining
		if !draining {
			c.posts.Add(1)
		}
		c.mu.Unlock()
		if draining {
			c.answerFailed(msgs, errors.New("the connection is closing"))
			continue
		}
		go func() {
			defer c.posts.Done()
			c.post(frame, msgs)
		}()
	}
}

// setHeaders puts the transport's and the user's headers on req.
func (c *remoteConn) setHeaders(req *http.Request) {
	for k, v := range c.header {
		req.Header[k] = v
	}
	c.mu.Lock()
	if c.session != "" {
		req.Header.Set(sessionHeader, c.session)
	}
	if c.version != "" {
		req.Header.Set(versionHeader, c.version)
	}
	c.mu.Unlock()
}

// noTokenError is the token source's refusal to give a token, as it
// worded it.
type noTokenError struct{ err error }

func (e *noTokenError) Error() string { return e.err.Error() }
func (e *noTokenError) Unwrap() error { return e.err }

// send makes one request to the server's URL with the transport's and the
// user's headers, those that set adds, and the access token when the
// server takes one; a token the server refuses (HTTP 401) is replaced
// once, and the request sent again. Without a sign-in, the request goes
// without a token until the server asks for one (see [Remote.Tokens]). An
// error is the one to show the client.
func (c *remoteConn) send(ctx context.Context, method string, body []byte, set func(http.Header)) (*http.Response, error) {
	return c.sendTo(ctx, method, c.url, body, set)
}

// sendTo is send to another address of the server's origin (the HTTP+SSE
// transport's POST endpoint).
func (c *remoteConn) sendTo(ctx context.Context, method, target string, body []byte, set func(http.Header)) (*http.Response, error) {
	rejected := ""
	for attempt := 0; ; attempt++ {
		req, err := http.NewRequestWithContext(ctx, method, target, bytes.NewReader(body))
		if err != nil {
			return nil, err
		}
		c.setHeaders(req)
		if set != nil {
			set(req.Header)
		}
		token := ""
		var noSignIn error
		if c.tokens != nil {
			token, err = c.token(ctx, rejected)
			switch {
			case err != nil && signInRequired(err) && !c.wasAsked():
				noSignIn = err // go without: the server may not ask
			case err != nil:
				return nil, &noTokenError{err}
			default:
				req.Header.Set("Authorization", "Bearer "+token)
			}
		}
		resp, err := c.client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("cannot reach %s: %w", c.host, unwrapURLError(err))
		}
		if resp.StatusCode != http.StatusUnauthorized || c.tokens == nil || attempt > 0 {
			return resp, nil
		}
		if token == "" {
			if !challenged(resp) {
				return resp, nil // no token asked for: an error like any other
			}
			c.mu.Lock()
			c.asked = true
			c.mu.Unlock()
			io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if noSignIn != nil {
				return nil, &noTokenError{noSignIn}
			}
			continue // a sign-in arrived meanwhile: try with it
		}
		c.mu.Lock()
		c.asked = true // it refused a token: it takes one
		c.mu.Unlock()
		io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		rejected = token
	}
}

func (c *remoteConn) wasAsked() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked
}

// token asks the token source for the access token, and gives a new one
// to the redactor before it is used.
func (c *remoteConn) token(ctx context.Context, rejected string) (string, error) {
	token, err := c.tokens.Token(ctx, rejected)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	fresh := token != c.lastToken
	c.lastToken = token
	c.mu.Unlock()
	if fresh && c.onToken != nil {
		c.onToken(token)
	}
	return token, nil
}

// post sends one frame and relays the answer.
func (c *remoteConn) post(frame []byte, msgs []message) {
	resp, err := c.send(c.ctx, http.MethodPost, frame, func(h http.Header) {
		h.Set("Content-Type", "application/json")
		h.Set("Accept", "application/json, text/event-stream")
	})
	if err != nil {
		if c.ctx.Err() == nil {
			c.answerFailed(msgs, err)
		}
		return
	}
	defer resp.Body.Close()
	initialize := len(msgs) == 1 && msgs[0].method == "initialize"
	if sid := resp.Header.Get(sessionHeader); sid != "" && initialize {
		c.mu.Lock()
		c.session = sid
		c.mu.Unlock()
	}
	switch {
	case resp.StatusCode == http.StatusAccepted || resp.StatusCode == http.StatusNoContent:
		if hasRequest(msgs) {
			c.answerFailed(msgs, fmt.Errorf("%s accepted a request without answering it (HTTP %d)", c.host, resp.StatusCode))
		}
		return
	case resp.StatusCode == http.StatusNotFound && c.sessionID() != "":
		// Closed to input before this answer goes out: a client that
		// sends again on reading it must meet the ended session, not a
		// second POST into it.
		err := fmt.Errorf("%s ended the session (HTTP 404)", c.host)
		c.close(err)
		c.answerFailed(msgs, err)
		c.pw.Close()
		return
	case resp.StatusCode >= 300:
		c.answerFailed(msgs, c.statusError(resp))
		return
	}
	want := map[string]bool{}
	for _, m := range msgs {
		if m.kind == kindRequest {
			want[string(m.id)] = true
		}
	}
	var perr error
	switch ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ct {
	case "application/json":
		body, err := io.ReadAll(io.LimitReader(resp.Body, int64(c.max)+1))
		switch {
		case err != nil:
			perr = fmt.Errorf("reading the answer from %s: %w", c.host, err)
		case len(body) > c.max:
			perr = fmt.Errorf("the answer from %s is larger than the %d-byte message limit", c.host, c.max)
		case len(bytes.TrimSpace(body)) == 0:
			if len(want) > 0 {
				perr = fmt.Errorf("%s answered with an empty body", c.host)
			}
		default:
			perr = c.emit(body, want, initialize)
		}
	case "text/event-stream":
		perr = c.readEvents(resp.Body, want, initialize, nil)
	default:
		if len(want) > 0 {
			perr = fmt.Errorf("%s answered with content type %q, not JSON or an event stream", c.host, ct)
		}
	}
	if c.ctx.Err() != nil {
		return
	}
	if perr != nil || len(want) > 0 {
		if perr == nil {
			perr = fmt.Errorf("%s ended its answer without a response", c.host)
		}
		var unanswered []message
		for _, m := range msgs {
			if m.kind == kindRequest && want[string(m.id)] {
				unanswered = append(unanswered, m)
			}
		}
		c.answerFailed(unanswered, perr)
	}
}

// emit writes one message (or batch) from the server to the relay, as one
// line, and crosses off the requests it answers.
func (c *remoteConn) emit(data []byte, want map[string]bool, initialize bool) error {
	var line bytes.Buffer
	if err := json.Compact(&line, data); err != nil {
		c.log.Warn("dropped a message from the server that is not JSON", slog.Int("bytes", len(data)))
		return nil
	}
	msgs, _, err := parseFrame(line.Bytes())
	if err != nil {
		// The relay refuses it too, and answers the request it was for.
		return c.writeLine(line.Bytes())
	}
	for _, m := range msgs {
		if m.kind == kindResponse {
			if initialize && want[string(m.id)] {
				c.initialized(m.raw)
			}
			delete(want, string(m.id))
		}
	}
	return c.writeLine(line.Bytes())
}

func (c *remoteConn) writeLine(line []byte) error {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	_, err := c.pw.Write(append(line, '\n'))
	return err
}

// initialized learns the protocol version from initialize's answer, and
// opens the server's own stream where the version has one.
func (c *remoteConn) initialized(raw []byte) {
	var res struct {
		Result struct {
			ProtocolVersion string `json:"protocolVersion"`
		} `json:"result"`
	}
	if json.Unmarshal(raw, &res) != nil || res.Result.ProtocolVersion == "" {
		return
	}
	c.mu.Lock()
	c.version = res.Result.ProtocolVersion
	start := !c.listening && c.version < statelessVersion
	c.listening = c.listening || start
	c.mu.Unlock()
	if start {
		go c.listen()
	}
}

// listen keeps the server's own event stream open (GET), resuming after
// the last event seen when it drops, for notifications such as
// tools/list_changed and for the server's requests (sampling, roots).
func (c *remoteConn) listen() {
	ctx := c.listenCtx
	lastID := ""
	failures := 0
	for ctx.Err() == nil {
		resp, err := c.send(ctx, http.MethodGet, nil, func(h http.Header) {
			h.Set("Accept", "text/event-stream")
			if lastID != "" {
				h.Set(lastEventIDHdr, lastID)
			}
		})
		switch {
		case errors.As(err, new(*noTokenError)):
			return // the session's requests say why
		case err != nil:
		case resp.StatusCode == http.StatusMethodNotAllowed:
			resp.Body.Close()
			return // the server offers no stream of its own
		case resp.StatusCode == http.StatusNotFound && c.sessionID() != "":
			resp.Body.Close()
			c.fail(fmt.Errorf("%s ended the session (HTTP 404)", c.host))
			return
		case resp.StatusCode != http.StatusOK:
			err = c.statusError(resp)
			resp.Body.Close()
		default:
			failures = 0
			err = c.readEvents(resp.Body, map[string]bool{}, false, &lastID)
			resp.Body.Close()
		}
		if ctx.Err() != nil {
			return
		}
		if failures++; failures > 5 {
			c.log.Warn("gave up on the server's own event stream", slog.Any("err", err))
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Duration(failures) * time.Second):
		}
	}
}

// readEvents relays the data of each server-sent event, until the stream
// ends or every request in want is answered.
func (c *remoteConn) readEvents(body io.Reader, want map[string]bool, initialize bool, lastID *string) error {
	br := bufio.NewReaderSize(body, 64<<10)
	var data bytes.Buffer
	hasData := false
	for {
		line, err := readLine(br, c.max)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("reading events from %s: %w", c.host, err)
		}
		if len(line) == 0 { // end of an event
			if hasData {
				if err := c.emit(data.Bytes(), want, initialize); err != nil {
					return err
				}
				if len(want) == 0 && lastID == nil {
					return nil // a POST's stream: everything is answered
				}
			}
			data.Reset()
			hasData = false
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if hasData {
				data.WriteByte('\n')
			}
			data.Write(value)
			hasData = true
			if data.Len() > c.max {
				return fmt.Errorf("an event from %s is larger than the %d-byte message limit", c.host, c.max)
			}
		case "id":
			if lastID != nil {
				*lastID = string(value)
			}
		}
	}
}

// readLine reads one line of an event stream, without its end (LF, CRLF or
// CR), bounded by max bytes.
func readLine(br *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := br.ReadSlice('\n')
		line = append(line, chunk...)
		if len(line) > max {
			return nil, fmt.Errorf("a line longer than %d bytes", max)
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil && (len(line) == 0 || !errors.Is(err, io.EOF)) {
			return nil, err
		}
		return bytes.TrimRight(line, "\r\n"), nil
	}
}

// answerFailed answers each request among msgs with err, in the form the
// client expects (an isError result for tools/call).
func (c *remoteConn) answerFailed(msgs []message, err error) {
	for _, m := range msgs {
		if m.kind != kindRequest {
			continue
		}
		c.log.Warn("the remote server did not answer", slog.String("method", m.method), slog.Any("err", err))
		c.writeLine(failureResponse(m.id, m.method, fmt.Sprintf("Gatehouse: server %q: %v", c.name, err)))
	}
}

func hasRequest(msgs []message) bool {
	for _, m := range msgs {
		if m.kind == kindRequest {
			return true
		}
	}
	return false
}

func (c *remoteConn) sessionID() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session
}

// fail ends the session: the relay's read of it ends, and it answers every
// request in flight with the reason.
func (c *remoteConn) fail(err error) {
	c.close(err)
	c.pw.Close()
}

// close takes no more input, for the reason err (the first one given).
func (c *remoteConn) close(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.closed = true
	c.mu.Unlock()
}

func (c *remoteConn) stop(grace time.Duration) {
	c.stopOnce.Do(func() {
		c.mu.Lock()
		c.closed = true
		c.draining = true
		session := c.session
		c.mu.Unlock()
		c.stopListen()
		// Let answers in flight arrive, then end the session.
		done := make(chan struct{})
		go func() { c.posts.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(grace):
		}
		if session != "" {
			ctx, cancel := context.WithTimeout(context.Background(), grace)
			if resp, err := c.send(ctx, http.MethodDelete, nil, nil); err == nil {
				resp.Body.Close()
			}
			cancel()
		}
		c.cancel()
		c.pw.Close()
	})
}

func (c *remoteConn) awaitExit(ctx context.Context, grace time.Duration) { c.stop(grace) }

func (c *remoteConn) exitError() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return c.err
	}
	return errors.New("closed the connection")
}

// statusError describes an HTTP error answer from the server.
func (c *remoteConn) statusError(resp *http.Response) error {
	hint := "check the server's credentials: gatehouse secret list"
	if c.tokens != nil {
		hint = "it refused a fresh access token too; sign in again"
	}
	return statusError(c.host, resp, hint)
}

// statusError describes an HTTP error answer, with the start of its body
// (printable characters only: it is shown to people and models).
func statusError(host string, resp *http.Response, hint string) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 300))
	text := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.TrimSpace(string(body)))
	msg := fmt.Sprintf("%s answered HTTP %s", host, resp.Status)
	if text != "" {
		msg += ": " + text
	}
	if resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden {
		msg += " (" + hint + ")"
	}
	return errors.New(msg)
}

// unwrapURLError drops net/http's "Post URL:" prefix, which repeats the URL.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
