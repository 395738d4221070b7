package httpfront

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// scripted is a relay that answers each request at once with its method,
// and on "progress" first sends a progress notification for the request's
// token, on "ask" first sends the client a request of its own, and never
// answers "hang".
type scripted struct {
	served atomic.Int32
	lines  chan string // every line the relay read
}

func (s *scripted) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	s.served.Add(1)
	sc := bufio.NewScanner(in)
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		if s.lines != nil {
			s.lines <- sc.Text()
		}
		var batch []struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &batch) == nil {
			var answers []string
			for _, m := range batch {
				answers = append(answers, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"result":{"method":%q}}`, m.ID, m.Method))
			}
			fmt.Fprintf(out, "[%s]\n", strings.Join(answers, ","))
			continue
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Meta struct {
					ProgressToken json.RawMessage `json:"progressToken"`
				} `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &m) != nil || m.ID == nil || m.Method == "" {
			continue
		}
		switch m.Method {
		case "hang":
			continue
		case "progress":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":1}}`+"\n", m.Params.Meta.ProgressToken)
		case "ask":
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":"s1","method":"roots/list"}`+"\n")
		}
		fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":{"method":%q}}`+"\n", m.ID, m.Method)
	}
	return nil
}

type tokenTable map[string]Client

func (t tokenTable) Authenticate(_ context.Context, token string) (Client, bool, error) {
	c, ok := t[token]
	return c, ok, nil
}

const (
	tokenA = "ghs_aaaa"
	tokenB = "ghs_bbbb"
	tokenC = "ghs_cccc" // carol's reaches only the server docs
)

func newTestFront(t *testing.T, relay Relay, opts *Options) (*Front, *httptest.Server) {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	f := New(func(ctx context.Context, server, client string) (Relay, error) {
		if server != "echo" {
			return nil, ErrUnknownServer
		}
		return relay, nil
	}, tokenTable{tokenA: {Name: "alice"}, tokenB: {Name: "bob"}, tokenC: {Name: "carol", Servers: []string{"docs"}}}, opts)
	srv := httptest.NewUnstartedServer(f)
	hs := f.HTTPServer()
	srv.Config.ReadHeaderTimeout, srv.Config.MaxHeaderBytes = hs.ReadHeaderTimeout, hs.MaxHeaderBytes
	srv.Start()
	t.Cleanup(func() { srv.Close(); f.Close() })
	return f, srv
}

type call struct {
	method, body, session, token, accept string
	header                               map[string]string
}

func do(t *testing.T, srv *httptest.Server, path string, c call) (*http.Response, string) {
	t.Helper()
	if c.method == "" {
		c.method = http.MethodPost
	}
	req, err := http.NewRequest(c.method, srv.URL+path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	if c.body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.accept == "" {
		c.accept = "application/json"
	}
	req.Header.Set("Accept", c.accept)
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`

func open(t *testing.T, srv *httptest.Server, token string) string {
	t.Helper()
	resp, body := do(t, srv, "/mcp/echo", call{body: initialize, token: token})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("initialize: %d %s", resp.StatusCode, body)
	}
	id := resp.Header.Get("Mcp-Session-Id")
	if id == "" {
		t.Fatalf("initialize: no Mcp-Session-Id")
	}
	return id
}

// rpcError reads the JSON-RPC error of a refusal.
func rpcErr(t *testing.T, body string) (int, string) {
	t.Helper()
	var m struct {
		Error struct {
			Code    int
			Message string
		}
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("body %q is not a JSON-RPC error: %v", body, err)
	}
	return m.Error.Code, m.Error.Message
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	relay := &scripted{}
	f, srv := newTestFront(t, relay, &Options{MaxMessageBytes: 1 << 10})
	sid := open(t, srv, tokenA)
	big := `{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{"pad":"` + strings.Repeat("x", 2<<10) + `"}}`
	tests := []struct {
		name   string
		path   string
		c      call
		status int
		code   int
		says   string
	}{
		{"no token", "/mcp/echo", call{body: initialize}, 401, -32000, "needs a client token"},
		{"unknown token", "/mcp/echo", call{body: initialize, token: "ghs_nope"}, 401, -32000, "unknown or revoked"},
		{"not bearer", "/mcp/echo", call{body: initialize, header: map[string]string{"Authorization": "Basic " + tokenA}}, 401, -32000, "needs a client token"},
		{"token in the query", "/mcp/echo?access_token=" + tokenA, call{body: initialize}, 400, -32000, "query string"},
		{"any query", "/mcp/echo?x=1", call{body: initialize, token: tokenA}, 400, -32000, "query string"},
		{"wrong origin", "/mcp/echo", call{body: initialize, token: tokenA, header: map[string]string{"Origin": "https://evil.example"}}, 403, -32000, "origin"},
		{"rebound host", "/mcp/echo", call{body: initialize, token: tokenA, header: map[string]string{"Host": "evil.example:80"}}, 403, -32000, "DNS rebinding"},
		{"body over the limit", "/mcp/echo", call{body: big, token: tokenA, session: sid}, 413, -32600, "1024-byte limit"},
		{"malformed JSON", "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":1,`, token: tokenA, session: sid}, 400, -32700, "not JSON"},
		{"duplicate member", "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}`, token: tokenA, session: sid}, 400, -32700, "not JSON"},
		{"not JSON-RPC", "/mcp/echo", call{body: `{"hello":1}`, token: tokenA, session: sid}, 400, -32600, "not a JSON-RPC"},
		{"empty batch", "/mcp/echo", call{body: `[]`, token: tokenA, session: sid}, 400, -32600, "empty batch"},
		{"fractional id", "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, token: tokenA, session: sid}, 400, -32600, "string or an integer"},
		{"unknown session", "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenA, session: "deadbeef"}, 404, -32000, "no such session"},
		{"another client's session", "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenB, session: sid}, 404, -32000, "no such session"},
		{"unknown server", "/mcp/nope", call{body: initialize, token: tokenA}, 404, -32000, "no server named"},
		{"notification without a session", "/mcp/echo", call{body: `{"jsonrpc":"2.0","method":"notifications/initialized"}`, token: tokenA}, 400, -32000, "no Mcp-Session-Id"},
		{"not JSON content", "/mcp/echo", call{body: initialize, token: tokenA, header: map[string]string{"Content-Type": "text/plain"}}, 415, -32000, "application/json"},
		{"metrics without a token", "/metrics", call{method: "GET"}, 401, -32000, "needs a client token"},
	}
	for _, tt := range tests {
		resp, body := do(t, srv, tt.path, tt.c)
		if resp.StatusCode != tt.status {
			t.Errorf("%s: status %d, want %d (%s)", tt.name, resp.StatusCode, tt.status, body)
			continue
		}
		code, msg := rpcErr(t, body)
		if code != tt.code || !strings.Contains(msg, tt.says) {
			t.Errorf("%s: error %d %q, want %d saying %q", tt.name, code, msg, tt.code, tt.says)
		}
	}
	// None of it reached the relay but the one session, which still works.
	if n := relay.served.Load(); n != 1 {
		t.Errorf("relays started = %d, want 1", n)
	}
	resp, body := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenA, session: sid})
	if resp.StatusCode != 200 || body != `{"jsonrpc":"2.0","id":2,"result":{"method":"ping"}}`+"\n" {
		t.Errorf("after the refusals: %d %q", resp.StatusCode, body)
	}
	if f.Sessions() != 1 {
		t.Errorf("Sessions() = %d, want 1", f.Sessions())
	}
	resp, body = do(t, srv, "/health", call{method: "GET"})
	if resp.StatusCode != 200 || !strings.Contains(body, `"ok"`) {
		t.Errorf("/health: %d %q", resp.StatusCode, body)
	}
	_, body = do(t, srv, "/metrics", call{method: "GET", token: tokenB})
	for _, want := range []string{`gatehouse_http_requests_total{endpoint="mcp",code="413"} 1`, `gatehouse_http_body_refused_total{reason="malformed"} 5`, "gatehouse_sessions 1"} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, body)
		}
	}
}

// A token made for some servers gets 403 elsewhere, and from /metrics,
// with an answer that says which servers it reaches; the relay never runs.
func TestTokenScope(t *testing.T) {
	t.Parallel()
	_, srv := newTestFront(t, &scripted{}, nil)
	for _, path := range []string{"/mcp/echo", "/metrics"} {
		method := http.MethodPost
		if path == "/metrics" {
			method = http.MethodGet
		}
		resp, body := do(t, srv, path, call{method: method, token: tokenC, body: initialize})
		if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, `"jsonrpc":"2.0"`) || !strings.Contains(body, `carol`) {
			t.Errorf("%s with carol's token = %d %s; want 403 with a JSON-RPC error naming carol", path, resp.StatusCode, body)
		}
		if path == "/mcp/echo" && !strings.Contains(body, "reaches docs") {
			t.Errorf("%s with carol's token = %s; want it to say the token reaches docs", path, body)
		}
	}
	// Its own server is reached (docs is not registered here: 404, past the scope).
	resp, body := do(t, srv, "/mcp/docs", call{token: tokenC, body: initialize})
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("/mcp/docs with carol's token = %d %s; want 404 (the scope passed, the server is unknown)", resp.StatusCode, body)
	}
	// A token for every server still reaches echo.
	resp, body = do(t, srv, "/mcp/echo", call{token: tokenA, body: initialize})
	if resp.StatusCode != http.StatusOK {
		t.Errorf("/mcp/echo with alice's token = %d %s; want 200", resp.StatusCode, body)
	}
}

func TestTokenInTheQueryIsNeverLogged(t *testing.T) {
	t.Parallel()
	var log strings.Builder
	_, srv := newTestFront(t, &scripted{}, &Options{Logger: testLogger(&log)})
	do(t, srv, "/mcp/echo?access_token="+tokenA, call{body: initialize})
	if strings.Contains(log.String(), tokenA) || !strings.Contains(log.String(), "query string") {
		t.Errorf("log:\n%s", log.String())
	}
}

func TestSessionCap(t *testing.T) {
	t.Parallel()
	relay := &scripted{}
	f, srv := newTestFront(t, relay, &Options{MaxSessions: 3})
	var ids []string
	for range 3 {
		ids = append(ids, open(t, srv, tokenA))
	}
	resp, body := do(t, srv, "/mcp/echo", call{body: initialize, token: tokenB})
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("a fourth session: %d %s", resp.StatusCode, body)
	}
	if _, msg := rpcErr(t, body); !strings.Contains(msg, "too many sessions open (3") {
		t.Errorf("a fourth session: %q", msg)
	}
	// The sessions open go on; ending one makes room.
	if resp, _ := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenA, session: ids[0]}); resp.StatusCode != 200 {
		t.Errorf("ping in an open session: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "/mcp/echo", call{method: "DELETE", token: tokenA, session: ids[0]}); resp.StatusCode != http.StatusNoContent {
		t.Errorf("DELETE: %d", resp.StatusCode)
	}
	if resp, _ := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenA, session: ids[0]}); resp.StatusCode != 404 {
		t.Errorf("ping in a deleted session: %d, want 404", resp.StatusCode)
	}
	open(t, srv, tokenB)
	if f.Sessions() != 3 {
		t.Errorf("Sessions() = %d, want 3", f.Sessions())
	}
}

// A client that trickles its body is cut off, and the others are served
// meanwhile.
func TestSlowBody(t *testing.T) {
	t.Parallel()
	_, srv := newTestFront(t, &scripted{}, &Options{BodyTimeout: 300 * time.Millisecond})
	sid := open(t, srv, tokenA)
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "POST /mcp/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\nMcp-Session-Id: %s\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", tokenA, sid)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
				conn.Write([]byte(" "))
			}
		}
	}()
	defer close(stop)
	// Meanwhile, another request is answered.
	if resp, _ := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":2,"method":"ping"}`, token: tokenA, session: sid}); resp.StatusCode != 200 {
		t.Errorf("ping beside a slow client: %d", resp.StatusCode)
	}
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the slow client got no answer: %v", err)
	}
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("slow body: %d, want 408", resp.StatusCode)
	}
}

// Slow headers are cut off by the server's header timeout.
func TestSlowHeaders(t *testing.T) {
	t.Parallel()
	f, _ := newTestFront(t, &scripted{}, nil)
	hs := f.HTTPServer()
	hs.ReadHeaderTimeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go hs.Serve(ln)
	t.Cleanup(func() { hs.Close() })
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte("POST /mcp/echo HTTP/1.1\r\nHost: 127.0.0.1\r\n"))
	start := time.Now()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(conn)
	if err != nil {
		t.Fatalf("reading: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a client that never finished its headers was kept %v", d)
	}
}

// Answers go to the POST that asked, as JSON or as an event stream; a
// progress notification goes to its call's stream; the server's own
// requests to the GET stream.
func TestRouting(t *testing.T) {
	t.Parallel()
	_, srv := newTestFront(t, &scripted{}, nil)
	sid := open(t, srv, tokenA)
	resp, body := do(t, srv, "/mcp/echo", call{body: `[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":7,"method":"tools/list"}]`, token: tokenA, session: sid})
	if resp.StatusCode != 200 || body != `[{"jsonrpc":"2.0","id":"a","result":{"method":"ping"}},{"jsonrpc":"2.0","id":7,"result":{"method":"tools/list"}}]`+"\n" {
		t.Errorf("batch: %d %q", resp.StatusCode, body)
	}
	resp, body = do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":3,"method":"progress","params":{"_meta":{"progressToken":"p1"}}}`,
		token: tokenA, session: sid, accept: "application/json, text/event-stream"})
	want := "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"params\":{\"progressToken\":\"p1\",\"progress\":1}}\n\n" +
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{\"method\":\"progress\"}}\n\n"
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || body != want {
		t.Errorf("SSE: %d %s %q", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	// The server asks the client something while no GET stream is open:
	// it waits for the next one.
	if resp, _ := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":4,"method":"ask"}`, token: tokenA, session: sid}); resp.StatusCode != 200 {
		t.Fatalf("ask: %d", resp.StatusCode)
	}
	req, _ := http.NewRequest("GET", srv.URL+"/mcp/echo", nil)
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Accept", "text/event-stream")
	get, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer get.Body.Close()
	br := bufio.NewReader(get.Body)
	var event []string
	for len(event) < 2 {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("GET stream: %v", err)
		}
		event = append(event, strings.TrimSuffix(line, "\n"))
	}
	if event[1] != `data: {"jsonrpc":"2.0","id":"s1","method":"roots/list"}` {
		t.Errorf("GET stream: %q", event)
	}
	// A second GET stream is refused while one is open.
	if resp, _ := do(t, srv, "/mcp/echo", call{method: "GET", token: tokenA, session: sid, accept: "text/event-stream"}); resp.StatusCode != http.StatusConflict {
		t.Errorf("a second GET stream: %d, want 409", resp.StatusCode)
	}
	// A request id already awaiting its answer is refused.
}

// A POST whose client goes away before its answer has its request
// cancelled at the relay.
func TestClientGoneCancels(t *testing.T) {
	t.Parallel()
	relay := &scripted{lines: make(chan string, 16)}
	_, srv := newTestFront(t, relay, nil)
	sid := open(t, srv, tokenA)
	<-relay.lines // initialize
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", srv.URL+"/mcp/echo", strings.NewReader(`{"jsonrpc":"2.0","id":5,"method":"hang"}`))
	req.Header.Set("Authorization", "Bearer "+tokenA)
	req.Header.Set("Mcp-Session-Id", sid)
	req.Header.Set("Content-Type", "application/json")
	done := make(chan struct{})
	go func() { srv.Client().Do(req); close(done) }()
	if got := <-relay.lines; !strings.Contains(got, `"hang"`) {
		t.Fatalf("relay read %q", got)
	}
	// The same id while it waits is refused, not relayed.
	resp, _ := do(t, srv, "/mcp/echo", call{body: `{"jsonrpc":"2.0","id":5,"method":"ping"}`, token: tokenA, session: sid})
	if resp.StatusCode != 400 {
		t.Errorf("a duplicate id: %d, want 400", resp.StatusCode)
	}
	cancel()
	<-done
	select {
	case got := <-relay.lines:
		if got != `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":5,"reason":"the HTTP client went away"}}` {
			t.Errorf("relay read %q, want the cancellation", got)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no cancellation reached the relay")
	}
}
