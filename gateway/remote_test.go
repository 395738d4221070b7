package gateway

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// remoteServer is a real streamable HTTP MCP server (the SDK's) that wants
// a bearer token, with a tool that echoes and one that adds a tool (so the
// server announces tools/list_changed on its own stream).
func remoteServer(t *testing.T, stateless, jsonResponse bool) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "remote", Version: "1"}, nil)
	type echoArgs struct {
		Text string `json:"text"`
	}
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo text."}, func(ctx context.Context, req *mcp.CallToolRequest, in echoArgs) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "grow", Description: "Add a tool."}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: "grown"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: stateless, JSONResponse: jsonResponse})
	var unauthorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-token" {
			unauthorized.Add(1)
			http.Error(w, "missing or wrong token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, &unauthorized
}

func startRemote(t *testing.T, r Remote, opts *Options) *session {
	t.Helper()
	return startProxySession(t, func(opts *Options) *Proxy { return NewRemote("t", r, opts) }, opts)
}

func TestRemote(t *testing.T) {
	for _, mode := range []struct {
		name                    string
		stateless, jsonResponse bool
	}{{"sessions and event streams", false, false}, {"JSON answers", false, true}, {"stateless", true, true}} {
		t.Run(mode.name, func(t *testing.T) {
			srv, _ := remoteServer(t, mode.stateless, mode.jsonResponse)
			s := startRemote(t, Remote{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer s3cret-token"}},
				&Options{Secrets: map[string]string{"t.Authorization": "Bearer s3cret-token"}})
			s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
			if m := s.recvMsg(); !strings.Contains(string(m.Result), `"serverInfo"`) {
				t.Fatalf("initialize = %+v", m)
			}
			s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
			if m := s.recvMsg(); !strings.Contains(string(m.Result), `"echo"`) {
				t.Fatalf("tools/list = %+v", m)
			}
			// Calls in flight together, each answered.
			for i := 3; i <= 6; i++ {
				s.send(`{"jsonrpc":"2.0","id":` + string(rune('0'+i)) + `,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi ` + string(rune('0'+i)) + `"}}}`)
			}
			got := map[string]bool{}
			for range 4 {
				m := s.recvMsg()
				text, _ := toolText(t, m)
				got[text] = true
			}
			for i := 3; i <= 6; i++ {
				if want := "echo: hi " + string(rune('0'+i)); !got[want] {
					t.Errorf("answers %v lack %q", got, want)
				}
			}
			// The token the server holds never reaches the client.
			s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"my token is s3cret-token"}}}`)
			if text, _ := toolText(t, s.recvMsg()); strings.Contains(text, "s3cret-token") {
				t.Errorf("the server's token reached the client: %q", text)
			}
			if mode.stateless {
				return
			}
			// A notification on the server's own stream crosses.
			s.send(`{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"grow","arguments":{}}}`)
			seen := map[string]bool{}
			deadline := time.After(10 * time.Second)
			for !seen["answer"] || !seen["list_changed"] {
				select {
				case line, ok := <-s.lines:
					if !ok {
						t.Fatal("the proxy closed")
					}
					switch {
					case strings.Contains(line, `"notifications/tools/list_changed"`):
						seen["list_changed"] = true
					case strings.Contains(line, `"id":8`):
						seen["answer"] = true
					}
				case <-deadline:
					t.Fatalf("within 10s saw %v; want the answer and tools/list_changed", seen)
				}
			}
		})
	}
}

func TestRemoteFailures(t *testing.T) {
	srv, unauthorized := remoteServer(t, false, false)
	t.Run("wrong credentials", func(t *testing.T) {
		s := startRemote(t, Remote{URL: srv.URL, Headers: map[string]string{"Authorization": "Bearer wrong"}}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		m := s.recvMsg()
		if !strings.Contains(string(m.Error), "401") || !strings.Contains(string(m.Error), "credentials") || !strings.Contains(string(m.Error), "Gatehouse") {
			t.Errorf("initialize with a wrong token = %+v, want an error naming HTTP 401 and the credentials", m)
		}
		s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, "401") {
			t.Errorf("tools/call with a wrong token = %q (isError %v)", text, isErr)
		}
		if unauthorized.Load() == 0 {
			t.Error("the server saw no request")
		}
	})
	t.Run("nobody listening", func(t *testing.T) {
		dead := httptest.NewServer(http.NotFoundHandler())
		url := dead.URL
		dead.Close()
		s := startRemote(t, Remote{URL: url}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := s.recvMsg(); !strings.Contains(string(m.Error), "cannot reach") {
			t.Errorf("initialize of a dead server = %+v, want cannot reach", m)
		}
	})
	t.Run("redirects that leave the origin", func(t *testing.T) {
		var leaked atomic.Int32
		plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				leaked.Add(1)
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(plain.Close)
		var target atomic.Value
		tls := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, target.Load().(string), http.StatusTemporaryRedirect)
		}))
		t.Cleanup(tls.Close)
		for _, tt := range []struct{ name, to, want string }{
			{"to http on the same host and port", "http://" + tls.Listener.Addr().String() + "/mcp", "changes the scheme"},
			{"to another host", "https://" + plain.Listener.Addr().String() + "/mcp", "another host"},
			{"to http elsewhere", plain.URL + "/mcp", "refused a redirect"},
		} {
			target.Store(tt.to)
			s := startRemote(t, Remote{URL: tls.URL + "/mcp", Headers: map[string]string{"Authorization": "Bearer sk-redirect-secret"}, Client: tls.Client()}, nil)
			s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
			if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, tt.want) {
				t.Errorf("%s: answer = %q (isError %v), want the redirect refused (%q)", tt.name, text, isErr, tt.want)
			}
		}
		if n := leaked.Load(); n > 0 {
			t.Errorf("the credential reached another origin %d times", n)
		}
	})
	t.Run("a server that lies about content", func(t *testing.T) {
		liar := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			w.Write([]byte("<html>login</html>"))
		}))
		t.Cleanup(liar.Close)
		s := startRemote(t, Remote{URL: liar.URL}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`)
		if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, "text/html") {
			t.Errorf("answer of an HTML page = %q (isError %v)", text, isErr)
		}
	})
	t.Run("the session ends", func(t *testing.T) {
		var calls atomic.Int32
		ender := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if calls.Add(1) == 1 {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set(sessionHeader, "abc")
				json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{"protocolVersion": statelessVersion, "capabilities": map[string]any{}, "serverInfo": map[string]any{"name": "e", "version": "1"}}})
				return
			}
			if r.Header.Get(sessionHeader) != "abc" {
				t.Errorf("request %d without the session id", calls.Load())
			}
			http.NotFound(w, r)
		}))
		t.Cleanup(ender.Close)
		s := startRemote(t, Remote{URL: ender.URL}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		s.recvMsg()
		s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`)
		if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, "ended the session") {
			t.Errorf("call after the session ended = %q (isError %v)", text, isErr)
		}
		s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/list"}`)
		if m := s.recvMsg(); !strings.Contains(string(m.Error), "reconnect") {
			t.Errorf("request after the session ended = %+v, want an error saying to reconnect", m)
		}
	})
}

// The event-stream reader takes whatever a server sends: it never panics,
// never emits more than the message limit, and every line it hands the relay
// is one JSON value with no newline in it.
func FuzzReadEvents(f *testing.F) {
	for _, s := range []string{
		"event: message\ndata: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n\n",
		"id: 7\ndata: {\"jsonrpc\":\"2.0\",\ndata: \"method\":\"notifications/tools/list_changed\"}\n\n",
		"data:{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{\"content\":[]}}\r\n\r\n",
		": comment\nretry: 100\n\ndata: not json\n\n",
		"data: [{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}},{\"jsonrpc\":\"2.0\",\"method\":\"x\"}]\n\n",
		"data: " + strings.Repeat("x", 300) + "\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := dialRemote("f", Remote{URL: "http://127.0.0.1:1/mcp"}, 256, slog.New(slog.DiscardHandler), nil)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan []string)
		go func() {
			var lines []string
			sc := bufio.NewScanner(c.pr)
			sc.Buffer(nil, 1<<20)
			for sc.Scan() {
				lines = append(lines, sc.Text())
			}
			done <- lines
		}()
		last := ""
		c.readEvents(bytes.NewReader(data), map[string]bool{"1": true}, false, &last)
		c.stop(time.Millisecond)
		for _, l := range <-done {
			if len(l) > 256 || !json.Valid([]byte(l)) {
				t.Fatalf("emitted %q", l)
			}
		}
	})
}

// notSignedIn is a token source's answer when no sign-in is held.
type notSignedIn struct{}

func (notSignedIn) Error() string {
	return "needs you to sign in; sign in again: gatehouse server login t"
}
func (notSignedIn) SignInRequired() bool { return true }

// tokens gives token once signedIn is set, else notSignedIn.
type tokens struct {
	signedIn atomic.Bool
	token    string
}

func (ts *tokens) Token(ctx context.Context, rejected string) (string, error) {
	if !ts.signedIn.Load() {
		return "", notSignedIn{}
	}
	return ts.token, nil
}

// TestRemoteSignInWhenAsked: a server registered to sign in with OAuth is
// reached without a token while no sign-in is held; a public one keeps
// working, and one that asks (401 with a Bearer challenge) gets the sign-in
// instruction in band, then the token once signed in.
func TestRemoteSignInWhenAsked(t *testing.T) {
	t.Run("a public server needs no sign-in", func(t *testing.T) {
		s := mcp.NewServer(&mcp.Implementation{Name: "public", Version: "1"}, nil)
		mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "public"}}}, nil, nil
		})
		h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
		var withToken atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "" {
				withToken.Add(1)
			}
			h.ServeHTTP(w, r)
		}))
		t.Cleanup(srv.Close)
		sess := startRemote(t, Remote{URL: srv.URL, Tokens: &tokens{}}, nil)
		sess.initialize()
		sess.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}`)
		if m := sess.recvMsg(); !strings.Contains(string(m.Result), `"public"`) || strings.Contains(string(m.Result), `"isError":true`) {
			t.Fatalf("tools/call = %s, want the public server's answer", m.Result)
		}
		if n := withToken.Load(); n != 0 {
			t.Errorf("%d requests carried a token, want 0", n)
		}
	})
	t.Run("a server that asks gets the instruction, then the token", func(t *testing.T) {
		srv, _ := remoteServer(t, false, false)
		inner := srv.Config.Handler
		var challenges atomic.Int32
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				challenges.Add(1)
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource"`)
			}
			inner.ServeHTTP(w, r)
		})
		ts := &tokens{token: "s3cret-token"}
		sess := startRemote(t, Remote{URL: srv.URL, Tokens: ts}, nil)
		sess.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := sess.recvMsg(); !strings.Contains(string(m.Error), "gatehouse server login t") {
			t.Fatalf("initialize before a sign-in = %+v, want the sign-in instruction", m)
		}
		if n := challenges.Load(); n != 1 {
			t.Fatalf("requests without a token = %d, want 1", n)
		}
		ts.signedIn.Store(true)
		sess.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := sess.recvMsg(); !strings.Contains(string(m.Result), `"serverInfo"`) {
			t.Fatalf("initialize after the sign-in = %+v", m)
		}
		if n := challenges.Load(); n != 1 {
			t.Errorf("requests without a token = %d after the server asked once, want 1", n)
		}
	})
	t.Run("a 401 without a challenge is an error, not a sign-in", func(t *testing.T) {
		srv, _ := remoteServer(t, false, false) // 401 with no WWW-Authenticate
		sess := startRemote(t, Remote{URL: srv.URL, Tokens: &tokens{}}, nil)
		sess.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		m := sess.recvMsg()
		if !strings.Contains(string(m.Error), "HTTP 401") || strings.Contains(string(m.Error), "server login") {
			t.Fatalf("initialize = %+v, want the HTTP 401 error", m)
		}
	})
}
