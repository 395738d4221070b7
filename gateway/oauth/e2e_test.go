package oauth_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/oauth"
	"github.com/gatehouse-dev/gatehouse/vault"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
)

// memKeychain is a keychain in memory.
type memKeychain struct {
	mu sync.Mutex
	m  map[string]string
}

func newKeychain() *memKeychain { return &memKeychain{m: map[string]string{}} }

func (k *memKeychain) OAuthGrant(server string) (string, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	v, ok := k.m[server]
	if !ok {
		return "", fmt.Errorf("%s: %w", server, vault.ErrNotFound)
	}
	return v, nil
}

func (k *memKeychain) SetOAuthGrant(server, grant string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.m[server] = grant
	return nil
}

func (k *memKeychain) DeleteOAuthGrant(server string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.m, server)
	return nil
}

func (k *memKeychain) grant(t *testing.T, server string) map[string]any {
	t.Helper()
	s, err := k.OAuthGrant(server)
	if err != nil {
		return nil
	}
	var g map[string]any
	if err := json.Unmarshal([]byte(s), &g); err != nil {
		t.Fatal(err)
	}
	return g
}

// op is an OpenID provider (zitadel/oidc's op package, with its example
// storage and login page) on loopback.
type op struct {
	issuer   string
	codes    atomic.Int32 // authorization-code exchanges
	refreshs atomic.Int32 // refresh-token grants
}

func startOP(t *testing.T) *op {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &op{issuer: "http://" + ln.Addr().String()}
	st := storage.NewStorageWithClients(storage.NewUserStore(o.issuer), map[string]*storage.Client{
		"gatehouse": storage.NativeClient("gatehouse", "http://127.0.0.1/callback"),
	})
	h := exampleop.SetupServer(o.issuer, st, nil, false)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/oauth/token" {
			r.ParseForm()
			switch r.PostForm.Get("grant_type") {
			case "authorization_code":
				o.codes.Add(1)
			case "refresh_token":
				o.refreshs.Add(1)
			}
		}
		h.ServeHTTP(w, r)
	}))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)
	return o
}

// rs is a remote MCP server that takes the OP's tokens only (the Go SDK's
// RequireBearerToken, checking each token at the OP's userinfo endpoint).
type rs struct {
	url     string
	expired sync.Map // tokens it treats as expired
	seen    sync.Map // tokens it accepted
}

func startRS(t *testing.T, o *op) *rs {
	t.Helper()
	r := &rs{}
	server := mcp.NewServer(&mcp.Implementation{Name: "protected", Version: "1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct {
		Text string `json:"text"`
	}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
	})
	verify := func(ctx context.Context, token string, _ *http.Request) (*auth.TokenInfo, error) {
		if _, ok := r.expired.Load(token); ok {
			return nil, fmt.Errorf("%w: expired", auth.ErrInvalidToken)
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, o.issuer+"/userinfo", nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("%w: userinfo answered %d", auth.ErrInvalidToken, resp.StatusCode)
		}
		r.seen.Store(token, true)
		return &auth.TokenInfo{Expiration: time.Now().Add(time.Hour)}, nil
	}
	mux := http.NewServeMux()
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	r.url = srv.URL + "/mcp"
	mux.Handle("/.well-known/oauth-protected-resource/mcp", auth.ProtectedResourceMetadataHandler(&oauthex.ProtectedResourceMetadata{
		Resource: r.url, AuthorizationServers: []string{o.issuer}, ScopesSupported: []string{"openid"},
	}))
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil)
	mux.Handle("/mcp", auth.RequireBearerToken(verify, &auth.RequireBearerTokenOptions{
		ResourceMetadataURL: srv.URL + "/.well-known/oauth-protected-resource/mcp",
	})(mcpHandler))
	return r
}

// browser signs in at the OP as a person would: it follows the
// authorization URL to the login page, posts the test user's name and
// password, and follows the redirects back to the loopback listener.
func browser(t *testing.T) func(string) {
	return func(authURL string) {
		go func() {
			jar, _ := cookiejar.New(nil)
			hc := &http.Client{Jar: jar}
			resp, err := hc.Get(authURL)
			if err != nil {
				t.Errorf("open the authorization URL: %v", err)
				return
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			id := resp.Request.URL.Query().Get("authRequestID")
			if id == "" {
				t.Errorf("the authorization URL led to %s, not the login page", resp.Request.URL)
				return
			}
			login := *resp.Request.URL
			login.RawQuery = ""
			resp, err = hc.PostForm(login.String(), url.Values{"id": {id}, "username": {"test-user2"}, "password": {"verysecure"}})
			if err != nil {
				t.Errorf("log in: %v", err)
				return
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if !strings.Contains(string(body), "signed in to") {
				t.Errorf("the loopback listener answered %d %q", resp.StatusCode, body)
			}
		}()
	}
}

// proxy is an in-process gatehouse proxy for a remote server.
type proxy struct {
	in  *io.PipeWriter
	out *bufio.Scanner
	id  int
}

func startProxy(t *testing.T, ctx context.Context, url string, tokens gateway.TokenSource, log *slog.Logger) *proxy {
	t.Helper()
	px, init := openProxy(t, ctx, url, tokens, log)
	if init["result"] == nil {
		t.Fatalf("initialize through the proxy = %v", init)
	}
	return px
}

// openProxy starts a proxy and returns it with its answer to initialize.
func openProxy(t *testing.T, ctx context.Context, url string, tokens gateway.TokenSource, log *slog.Logger) (*proxy, map[string]any) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	p := gateway.NewRemote("protected", gateway.Remote{URL: url, Tokens: tokens}, &gateway.Options{Logger: log})
	go func() {
		p.Serve(ctx, inR, outW)
		outW.Close()
	}()
	t.Cleanup(func() { inW.Close() })
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 1<<20)
	px := &proxy{in: inW, out: sc}
	init := px.call(t, "initialize", `{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}`)
	fmt.Fprintf(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")
	return px, init
}

func (p *proxy) call(t *testing.T, method, params string) map[string]any {
	t.Helper()
	p.id++
	if _, err := fmt.Fprintf(p.in, `{"jsonrpc":"2.0","id":%d,"method":%q,"params":%s}`+"\n", p.id, method, params); err != nil {
		t.Fatalf("write %s: %v", method, err)
	}
	for p.out.Scan() {
		var m map[string]any
		if err := json.Unmarshal(p.out.Bytes(), &m); err != nil {
			t.Fatalf("proxy wrote %q", p.out.Bytes())
		}
		if id, ok := m["id"].(float64); ok && int(id) == p.id {
			return m
		}
	}
	t.Fatalf("proxy ended before answering %s", method)
	return nil
}

// echo calls the echo tool and returns the text of the result and whether
// it is an error.
func (p *proxy) echo(t *testing.T, text string) (string, bool) {
	t.Helper()
	m := p.call(t, "tools/call", fmt.Sprintf(`{"name":"echo","arguments":{"text":%q}}`, text))
	res, _ := m["result"].(map[string]any)
	if res == nil {
		b, _ := json.Marshal(m)
		return string(b), true
	}
	isErr, _ := res["isError"].(bool)
	content, _ := res["content"].([]any)
	var out []string
	for _, c := range content {
		if c, ok := c.(map[string]any); ok {
			out = append(out, fmt.Sprint(c["text"]))
		}
	}
	return strings.Join(out, "\n"), isErr
}

func TestMain(m *testing.M) {
	slog.SetDefault(slog.New(slog.DiscardHandler)) // the OP's example server logs every request
	os.Exit(m.Run())
}

func TestSignInWithARealProvider(t *testing.T) {
	o := startOP(t)
	r := startRS(t, o)
	home := t.TempDir()
	kc := newKeychain()
	logFile, err := os.Create(filepath.Join(home, "gatehouse.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	log := slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug}))
	newClient := func() *oauth.Client {
		return oauth.New("protected", r.url, kc, &oauth.Options{ClientID: "gatehouse", LockDir: home, Logger: log})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// Before sign-in: the proxy answers in band, and opens no browser.
	_, init := openProxy(t, ctx, r.url, newClient(), log)
	if b, _ := json.Marshal(init); !strings.Contains(string(b), "sign in again: gatehouse server login protected") {
		t.Fatalf("initialize before sign-in = %s, want the in-band sign-in instruction", b)
	}

	// Eight proxies start while the sign-in is under way: they wait for
	// it, and there is one sign-in.
	started := make(chan struct{})
	release := make(chan struct{})
	loginDone := make(chan error, 1)
	go func() {
		loginDone <- newClient().Login(ctx, func(authURL string) {
			close(started)
			<-release
			browser(t)(authURL)
		})
	}()
	<-started
	if err := newClient().Login(ctx, func(string) { t.Error("a second sign-in reached the browser") }); !errors.Is(err, oauth.ErrSignInUnderWay) {
		t.Fatalf("second Login = %v, want ErrSignInUnderWay", err)
	}
	var wg sync.WaitGroup
	results := make([]string, 8)
	for i := range 8 {
		wg.Go(func() {
			p := startProxy(t, ctx, r.url, newClient(), log)
			text, isErr := p.echo(t, fmt.Sprint("proxy ", i))
			if isErr {
				text = "error: " + text
			}
			results[i] = text
		})
	}
	time.Sleep(50 * time.Millisecond) // let them reach the wait; the assertion does not depend on it
	close(release)
	if err := <-loginDone; err != nil {
		t.Fatalf("Login: %v", err)
	}
	wg.Wait()
	for i, got := range results {
		if want := fmt.Sprint("echo: proxy ", i); got != want {
			t.Errorf("proxy %d echo = %q, want %q", i, got, want)
		}
	}
	if n := o.codes.Load(); n != 1 {
		t.Errorf("the OP exchanged %d authorization codes, want one sign-in", n)
	}
	g := kc.grant(t, "protected")
	if g["refresh_token"] == "" || g["access_token"] == "" {
		t.Fatalf("stored grant lacks tokens: %v", g != nil)
	}
	px := startProxy(t, ctx, r.url, newClient(), log)
	if text, isErr := px.echo(t, "after"); isErr || text != "echo: after" {
		t.Fatalf("echo through the first proxy after sign-in = %q (error %v)", text, isErr)
	}

	// The access token expires at the server: the proxy refreshes it
	// without a prompt, and the OP rotates the refresh token.
	oldAccess, oldRefresh := g["access_token"].(string), g["refresh_token"].(string)
	r.expired.Store(oldAccess, true)
	if text, isErr := px.echo(t, "refreshed"); isErr || text != "echo: refreshed" {
		t.Fatalf("echo with an expired token = %q (error %v), want it refreshed silently", text, isErr)
	}
	if n := o.refreshs.Load(); n != 1 {
		t.Errorf("the OP saw %d refreshes, want 1", n)
	}
	g = kc.grant(t, "protected")
	if g["access_token"] == oldAccess || g["refresh_token"] == oldRefresh {
		t.Errorf("after refresh the keychain holds the old tokens")
	}

	// Eight proxies start with an expired access token: one refresh.
	g["expiry"] = time.Now().Add(-time.Minute).Format(time.RFC3339)
	b, _ := json.Marshal(g)
	kc.SetOAuthGrant("protected", string(b))
	before := o.refreshs.Load()
	for i := range 8 {
		wg.Go(func() {
			p := startProxy(t, ctx, r.url, newClient(), log)
			if text, isErr := p.echo(t, "x"); isErr {
				t.Errorf("proxy %d with an expired token: %s", i, text)
			}
		})
	}
	wg.Wait()
	if n := o.refreshs.Load() - before; n != 1 {
		t.Errorf("eight proxies with an expired token made %d refreshes, want 1", n)
	}

	// The refresh token is revoked at the OP: the next refresh is refused,
	// the sign-in is forgotten, and the client is told in band.
	g = kc.grant(t, "protected")
	revoke(t, o, g["refresh_token"].(string))
	r.expired.Store(g["access_token"].(string), true)
	text, isErr := px.echo(t, "revoked")
	if !isErr || !strings.Contains(text, "sign in again: gatehouse server login protected") {
		t.Fatalf("echo after revocation = %q (error %v), want the in-band sign-in instruction", text, isErr)
	}
	if kc.grant(t, "protected") != nil {
		t.Errorf("the refused sign-in is still in the keychain")
	}

	// No token was written to any file.
	var tokens []string
	r.seen.Range(func(k, _ any) bool { tokens = append(tokens, k.(string)); return true })
	tokens = append(tokens, oldRefresh)
	if len(tokens) < 3 {
		t.Fatalf("the server saw %d tokens", len(tokens))
	}
	filepath.WalkDir(home, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		for _, tok := range tokens {
			if strings.Contains(string(b), tok) {
				t.Errorf("%s holds a token", path)
			}
		}
		return nil
	})
}

func revoke(t *testing.T, o *op, token string) {
	t.Helper()
	resp, err := http.PostForm(o.issuer+"/revoke", url.Values{"token": {token}, "client_id": {"gatehouse"}})
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("revoke at the OP: HTTP %d", resp.StatusCode)
	}
}
