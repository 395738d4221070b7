package gateway

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os/exec"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Health is what [Probe] found out about a server.
type Health struct {
	ServerName      string        // serverInfo.name
	ServerVersion   string        // serverInfo.version
	ProtocolVersion string        // negotiated protocol version
	Tools           []ToolInfo    // every tool, across pages
	ConnectTime     time.Duration // start to initialized
	ListTime        time.Duration // tools/list, all pages
}

// ToolInfo names a tool a server offers.
type ToolInfo struct {
	Name        string
	Description string
}

// Probe starts the server as a real MCP client would, completes the
// handshake, lists its tools and stops it. The server's stderr goes to
// stderr (nil discards it). ctx bounds the whole probe.
func Probe(ctx context.Context, c Command, stderr io.Writer) (*Health, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(cmd.Environ(), c.Env...)
	cmd.Dir = c.Dir
	setProcAttr(cmd)
	if stderr != nil {
		cmd.Stderr = stderr
	}
	return probe(ctx, &mcp.CommandTransport{Command: cmd, TerminateDuration: time.Second}, func() bool { return cmd.Process != nil })
}

// ProbeRemote is [Probe] for a remote server.
func ProbeRemote(ctx context.Context, r Remote) (*Health, error) {
	u, err := url.Parse(r.URL)
	if err != nil || u.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", r.URL)
	}
	client := remoteClient(u, r.Client)
	client.Transport = withHeaders{next: client.Transport, headers: r.Headers, tokens: r.Tokens, origin: u}
	if r.SSE {
		return probe(ctx, &mcp.SSEClientTransport{Endpoint: r.URL, HTTPClient: client}, func() bool { return true })
	}
	return probe(ctx, &mcp.StreamableClientTransport{Endpoint: r.URL, HTTPClient: client, MaxRetries: -1, DisableStandaloneSSE: true},
		func() bool { return true })
}

// withHeaders adds headers, and the access token, to every request to the
// server's origin (and nothing to a request elsewhere). Without a sign-in,
// a request goes without a token, as the proxy's do, until the server asks.
type withHeaders struct {
	next    http.RoundTripper
	headers map[string]string
	tokens  TokenSource
	origin  *url.URL
}

func (w withHeaders) RoundTrip(req *http.Request) (*http.Response, error) {
	next := w.next
	if next == nil {
		next = http.DefaultTransport
	}
	if w.origin != nil && sameOrigin(w.origin, req.URL) != nil {
		return nil, fmt.Errorf("refused a request to %s://%s: the server's credentials stay on its own origin", req.URL.Scheme, req.URL.Host)
	}
	rejected := ""
	for attempt := 0; ; attempt++ {
		r := req.Clone(req.Context())
		if attempt > 0 && req.GetBody != nil {
			body, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			r.Body = body
		}
		for k, v := range w.headers {
			r.Header.Set(k, v)
		}
		if w.tokens == nil {
			return next.RoundTrip(r)
		}
		token, err := w.tokens.Token(req.Context(), rejected)
		switch {
		case err != nil && signInRequired(err):
			resp, rerr := next.RoundTrip(r)
			if rerr == nil && challenged(resp) {
				resp.Body.Close()
				return nil, err
			}
			return resp, rerr
		case err != nil:
			return nil, err
		}
		r.Header.Set("Authorization", "Bearer "+token)
		resp, err := next.RoundTrip(r)
		if err != nil || resp.StatusCode != http.StatusUnauthorized || attempt > 0 || (req.Body != nil && req.GetBody == nil) {
			return resp, err
		}
		resp.Body.Close()
		rejected = token
	}
}

func probe(ctx context.Context, t mcp.Transport, started func() bool) (*Health, error) {
	client := mcp.NewClient(&mcp.Implementation{Name: "gatehouse-probe", Version: "1"}, nil)
	start := time.Now()
	cs, err := client.Connect(ctx, t, nil)
	if err != nil {
		if !started() {
			return nil, err
		}
		return nil, fmt.Errorf("handshake: %w", err)
	}
	defer cs.Close()
	h := &Health{ConnectTime: time.Since(start)}
	if res := cs.InitializeResult(); res != nil {
		h.ProtocolVersion = res.ProtocolVersion
		if res.ServerInfo != nil {
			h.ServerName, h.ServerVersion = res.ServerInfo.Name, res.ServerInfo.Version
		}
		if res.Capabilities == nil || res.Capabilities.Tools == nil {
			return h, nil // a server without tools is healthy
		}
	}
	start = time.Now()
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				return h, fmt.Errorf("tools/list: no answer in time: %w", err)
			}
			return h, fmt.Errorf("tools/list: %w", err)
		}
		h.Tools = append(h.Tools, ToolInfo{Name: tool.Name, Description: tool.Description})
	}
	h.ListTime = time.Since(start)
	return h, nil
}
