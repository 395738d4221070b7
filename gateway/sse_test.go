package gateway

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// sseServer is a real HTTP+SSE MCP server (the SDK's) that wants a bearer
// token, with a tool that echoes and one that adds a tool.
func sseServer(t *testing.T) *httptest.Server {
	t.Helper()
	s := mcp.NewServer(&mcp.Implementation{Name: "legacy", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	mcp.AddTool(s, &mcp.Tool{Name: "grow"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		mcp.AddTool(s, &mcp.Tool{Name: "grown"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{}, nil, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "grown"}}}, nil, nil
	})
	h := mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return s }, nil)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer s3cret-token" {
			http.Error(w, "missing or wrong token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestRemoteSSE(t *testing.T) {
	srv := sseServer(t)
	s := startRemote(t, Remote{URL: srv.URL, SSE: true, Headers: map[string]string{"Authorization": "Bearer s3cret-token"}},
		&Options{Secrets: map[string]string{"t.Authorization": "Bearer s3cret-token"}})
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
	if m := s.recvMsg(); !strings.Contains(string(m.Result), `"legacy"`) {
		t.Fatalf("initialize = %+v", m)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if m := s.recvMsg(); !strings.Contains(string(m.Result), `"echo"`) {
		t.Fatalf("tools/list = %+v", m)
	}
	for i := 3; i <= 6; i++ {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi %d"}}}`, i, i))
	}
	got := map[string]bool{}
	for range 4 {
		m := s.recvMsg()
		text, isErr := toolText(t, m)
		if isErr {
			t.Fatalf("call %s: %s", m.ID, text)
		}
		got[text] = true
	}
	for i := 3; i <= 6; i++ {
		if !got[fmt.Sprintf("echo: hi %d", i)] {
			t.Errorf("no answer echoing hi %d: %v", i, got)
		}
	}
	// A notification the server sends on its own comes on the stream.
	s.send(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"grow","arguments":{}}}`)
	sawChange, sawAnswer := false, false
	for !sawChange || !sawAnswer {
		m := s.recvMsg()
		sawChange = sawChange || m.Method == "notifications/tools/list_changed"
		sawAnswer = sawAnswer || string(m.ID) == "7"
	}
}

func TestRemoteSSERefuses(t *testing.T) {
	t.Run("an endpoint on another origin", func(t *testing.T) {
		var posted atomic.Int32
		other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { posted.Add(1) }))
		t.Cleanup(other.Close)
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "event: endpoint\ndata: %s/message?sessionId=1\n\n", other.URL)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		s := startRemote(t, Remote{URL: srv.URL, SSE: true, Headers: map[string]string{"Authorization": "Bearer s3cret-token"}}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := s.recvMsg(); !strings.Contains(string(m.Error), "another origin") {
			t.Fatalf("initialize = %+v, want the endpoint refused", m)
		}
		if n := posted.Load(); n != 0 {
			t.Errorf("%d requests went to the other origin", n)
		}
	})
	t.Run("an event larger than the message limit", func(t *testing.T) {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Method == http.MethodPost {
				w.WriteHeader(http.StatusAccepted)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprint(w, "event: endpoint\ndata: /message\n\n")
			w.(http.Flusher).Flush()
			fmt.Fprintf(w, "event: message\ndata: %s\n\n", strings.Repeat("x", 4096))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		}))
		t.Cleanup(srv.Close)
		s := startRemote(t, Remote{URL: srv.URL, SSE: true}, &Options{MaxMessageBytes: 1024})
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := s.recvMsg(); m.Error == nil && !strings.Contains(string(m.Result), "isError") {
			t.Fatalf("initialize = %+v, want a failure", m)
		}
	})
	t.Run("a sign-in the server asks for, in band", func(t *testing.T) {
		srv := sseServer(t)
		inner := srv.Config.Handler
		srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") == "" {
				w.Header().Set("WWW-Authenticate", `Bearer resource_metadata="`+srv.URL+`/.well-known/oauth-protected-resource"`)
			}
			inner.ServeHTTP(w, r)
		})
		ts := &tokens{token: "s3cret-token"}
		s := startRemote(t, Remote{URL: srv.URL, SSE: true, Tokens: ts}, nil)
		s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := s.recvMsg(); !strings.Contains(string(m.Error), "gatehouse server login t") {
			t.Fatalf("initialize before a sign-in = %+v", m)
		}
		ts.signedIn.Store(true)
		s.send(`{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`)
		if m := s.recvMsg(); !strings.Contains(string(m.Result), `"legacy"`) {
			t.Fatalf("initialize after the sign-in = %+v", m)
		}
	})
}
