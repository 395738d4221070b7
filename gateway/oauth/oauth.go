// Package oauth signs Gatehouse in to remote MCP servers that ask for OAuth
// 2.1, as the MCP authorization specification has it, and gives the proxy
// the access token each request carries.
//
// # Signing in
//
// [Client.Login] finds the server's authorization server: the server
// answers a request without a token with HTTP 401, whose WWW-Authenticate
// header names its protected-resource metadata (RFC 9728; else the
// well-known addresses on the server's own origin), which names the
// authorization server, whose own metadata (RFC 8414, or OpenID Connect
// discovery) names its endpoints. Gatehouse then registers itself as a
// client (RFC 7591) where the authorization server offers it, or uses the
// client id registered in advance, and runs the authorization-code flow
// with PKCE (S256) and the resource indicator (RFC 8707): the user signs in
// in the system browser, which comes back to a listener on 127.0.0.1 on a
// port of its own. One sign-in per server runs at a time, however many
// processes of the home ask: the others wait for it.
//
// # Tokens
//
// The access token, the refresh token and the registered client live in
// the keychain, under the server's name, and nowhere else. [Client.Token]
// refreshes an expired token without asking anyone, one process at a time
// (the others use what it stored), keeps the refresh token the
// authorization server rotates in, and forgets a refresh token the
// authorization server refuses: then, and when there never was a sign-in,
// it answers with a [SignInError] that says what to run. A proxy never
// opens a browser by itself.
//
// # What is refused
//
// Metadata that is not on the origin it describes (a resource's metadata
// on another origin, an authorization server whose metadata names another
// issuer), a redirect to another origin while discovering or exchanging,
// an authorization server without PKCE S256, an answer to the browser
// whose state does not match or that names another issuer (RFC 9207). A
// refused sign-in stores nothing.
package oauth

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/vault"
	"github.com/modelcontextprotocol/go-sdk/auth"
	"github.com/modelcontextprotocol/go-sdk/oauthex"
	"golang.org/x/oauth2"
)

// Keychain holds what a sign-in keeps (*vault.Vault is one).
type Keychain interface {
	// OAuthGrant returns what is held for server, or an error wrapping
	// vault.ErrNotFound.
	OAuthGrant(server string) (string, error)
	SetOAuthGrant(server, grant string) error
	DeleteOAuthGrant(server string) error
}

var _ Keychain = (*vault.Vault)(nil)

// ErrSignInRequired is wrapped by every [SignInError].
var ErrSignInRequired = errors.New("sign-in required")

// A SignInError says that the server needs the user to sign in (again).
type SignInError struct {
	Server string
	Reason string // why, for people
}

func (e *SignInError) Error() string {
	return fmt.Sprintf("%s; sign in again: gatehouse server login %s", e.Reason, e.Server)
}

func (e *SignInError) Unwrap() error { return ErrSignInRequired }

// SignInRequired reports true: the proxy then reaches the server without
// a token until the server asks for one (gateway.Remote's Tokens).
func (e *SignInError) SignInRequired() bool { return true }

// Options configure [New]. Nil options mean the defaults.
type Options struct {
	// ClientID is the client id registered in advance with the
	// authorization server; empty means register dynamically.
	ClientID string
	// Scopes to ask for; empty means those the server names.
	Scopes []string
	// HTTPClient makes the requests; nil means one that bounds connecting.
	// Redirects to another origin are refused whatever it says.
	HTTPClient *http.Client
	// LockDir holds the lock files the home's processes share, so that
	// one sign-in and one refresh per server run at a time. Empty means
	// the processes of this one only.
	LockDir string
	// Timeout bounds each request to the authorization server; zero
	// means 30 seconds.
	Timeout time.Duration
	// SignInWait bounds how long Token waits for a sign-in under way in
	// another process; zero means two minutes.
	SignInWait time.Duration
	// Logger gets what happens (never a token); nil discards it.
	Logger *slog.Logger
}

// A Client signs in to one remote server and gives its access tokens.
type Client struct {
	server   string
	resource string
	kc       Keychain
	opts     Options
	http     *http.Client
	log      *slog.Logger
	signIn   *filelock.Mutex // nil without LockDir
	refresh  *filelock.Mutex // nil without LockDir
	mu       sync.Mutex      // one refresh at a time in this process
	signMu   sync.Mutex      // one sign-in at a time in this process
	now      func() time.Time
	hostName string
}

// New returns the client that signs in to the server called server, whose
// MCP endpoint is resource.
func New(server, resource string, kc Keychain, opts *Options) *Client {
	c := &Client{server: server, resource: resource, kc: kc, now: time.Now}
	if opts != nil {
		c.opts = *opts
	}
	if c.opts.Timeout == 0 {
		c.opts.Timeout = 30 * time.Second
	}
	if c.opts.SignInWait == 0 {
		c.opts.SignInWait = 2 * time.Minute
	}
	c.log = c.opts.Logger
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.http = c.opts.HTTPClient
	if c.http == nil {
		c.http = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if c.opts.LockDir != "" {
		c.signIn = filelock.New(filepath.Join(c.opts.LockDir, "oauth-"+server+".signin.lock"))
		c.refresh = filelock.New(filepath.Join(c.opts.LockDir, "oauth-"+server+".lock"))
	}
	if u, err := url.Parse(resource); err == nil {
		c.hostName = u.Host
	}
	return c
}

// grant is what the keychain holds for a server.
type grant struct {
	Resource      string           `json:"resource"` // the resource indicator signed in for
	Issuer        string           `json:"issuer"`
	ClientID      string           `json:"client_id"`
	ClientSecret  string           `json:"client_secret,omitempty"`
	AuthStyle     oauth2.AuthStyle `json:"auth_style"`
	AuthURL       string           `json:"authorization_endpoint"`
	TokenURL      string           `json:"token_endpoint"`
	RevocationURL string           `json:"revocation_endpoint,omitempty"`
	Scopes        []string         `json:"scopes,omitempty"`
	AccessToken   string           `json:"access_token"`
	TokenType     string           `json:"token_type,omitempty"`
	RefreshToken  string           `json:"refresh_token,omitempty"`
	Expiry        time.Time        `json:"expiry,omitzero"`
}

func (g *grant) config() *oauth2.Config {
	return &oauth2.Config{
		ClientID:     g.ClientID,
		ClientSecret: g.ClientSecret,
		Endpoint:     oauth2.Endpoint{AuthURL: g.AuthURL, TokenURL: g.TokenURL, AuthStyle: g.AuthStyle},
		Scopes:       g.Scopes,
	}
}

// load returns the grant the keychain holds, nil when there is none.
func (c *Client) load() (*grant, error) {
	s, err := c.kc.OAuthGrant(c.server)
	if errors.Is(err, vault.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var g grant
	if err := json.Unmarshal([]byte(s), &g); err != nil || g.AccessToken == "" || g.TokenURL == "" {
		return nil, nil // unreadable: as good as none; a sign-in replaces it
	}
	return &g, nil
}

func (c *Client) save(g *grant) error {
	b, err := json.Marshal(g)
	if err != nil {
		return err
	}
	return c.kc.SetOAuthGrant(c.server, string(b))
}

// SignedIn reports whether the keychain holds a sign-in to the server.
func (c *Client) SignedIn() (bool, error) {
	g, err := c.load()
	return g != nil && g.Resource == c.resource, err
}

// fresh reports whether g's access token can still be used.
func (c *Client) fresh(g *grant) bool {
	return g.AccessToken != "" && (g.Expiry.IsZero() || c.now().Add(30*time.Second).Before(g.Expiry))
}

// Token returns the access token for the server: the one stored while it
// is fresh and not rejected, else a refreshed one. rejected, when not
// empty, is a token the server refused. It MUST NOT open a browser or ask
// anyone: when only a sign-in can help it returns a [SignInError] (after
// waiting, bounded, for a sign-in under way in another process). A refresh
// token the authorization server refuses MUST be removed from the keychain;
// a refresh that fails otherwise (the authorization server errs or does
// not answer) changes nothing stored.
func (c *Client) Token(ctx context.Context, rejected string) (string, error) {
	g, err := c.load()
	if err != nil {
		return "", err
	}
	if g == nil {
		if !c.waitForSignIn(ctx) {
			return "", &SignInError{Server: c.server, Reason: fmt.Sprintf("%s needs you to sign in", c.hostName)}
		}
		if g, err = c.load(); err != nil {
			return "", err
		}
		if g == nil {
			return "", &SignInError{Server: c.server, Reason: fmt.Sprintf("%s needs you to sign in", c.hostName)}
		}
	}
	if g.Resource != c.resource {
		return "", &SignInError{Server: c.server, Reason: "the server's URL changed since you signed in"}
	}
	if c.fresh(g) && g.AccessToken != rejected {
		return g.AccessToken, nil
	}
	return c.refreshToken(ctx, rejected)
}

// waitForSignIn waits, bounded, for a sign-in under way in another process,
// and reports whether there was one.
func (c *Client) waitForSignIn(ctx context.Context) bool {
	if c.signIn == nil {
		return false
	}
	f, err := filelock.TryLock(c.signInPath())
	if err == nil {
		f.Close()
		return false
	}
	if !errors.Is(err, filelock.ErrLocked) {
		return false
	}
	c.log.Info("waiting for a sign-in under way", slog.String("server", c.server))
	wctx, cancel := context.WithTimeout(ctx, c.opts.SignInWait)
	defer cancel()
	unlock, err := c.signIn.Lock(wctx)
	if err != nil {
		return false
	}
	unlock()
	return true
}

func (c *Client) signInPath() string {
	return filepath.Join(c.opts.LockDir, "oauth-"+c.server+".signin.lock")
}

// lockRefresh takes the lock under which the stored grant is read, refreshed
// and written.
func (c *Client) lockRefresh(ctx context.Context) (func(), error) {
	c.mu.Lock()
	if c.refresh == nil {
		return c.mu.Unlock, nil
	}
	lctx, cancel := context.WithTimeout(ctx, c.opts.Timeout+10*time.Second)
	defer cancel()
	unlock, err := c.refresh.Lock(lctx)
	if err != nil {
		c.mu.Unlock()
		return nil, fmt.Errorf("wait for another Gatehouse process refreshing the sign-in to %s: %w", c.server, err)
	}
	return func() { unlock(); c.mu.Unlock() }, nil
}

func (c *Client) refreshToken(ctx context.Context, rejected string) (string, error) {
	unlock, err := c.lockRefresh(ctx)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Another process may have refreshed while this one waited.
	g, err := c.load()
	if err != nil {
		return "", err
	}
	if g == nil || g.Resource != c.resource {
		return "", &SignInError{Server: c.server, Reason: fmt.Sprintf("%s needs you to sign in", c.hostName)}
	}
	if c.fresh(g) && g.AccessToken != rejected {
		return g.AccessToken, nil
	}
	if g.RefreshToken == "" {
		return "", &SignInError{Server: c.server, Reason: "the access token expired, and the authorization server gave no refresh token"}
	}
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	ctx = context.WithValue(ctx, oauth2.HTTPClient, c.tokenClient(g.TokenURL))
	tok, err := g.config().TokenSource(ctx, &oauth2.Token{RefreshToken: g.RefreshToken, Expiry: time.Unix(1, 0)}).Token()
	if err != nil {
		var re *oauth2.RetrieveError
		if errors.As(err, &re) && refused(re) {
			c.log.Warn("the authorization server refused the refresh token; the sign-in is removed", slog.String("server", c.server), slog.String("error", re.ErrorCode))
			if derr := c.kc.DeleteOAuthGrant(c.server); derr != nil {
				return "", derr
			}
			return "", &SignInError{Server: c.server, Reason: fmt.Sprintf("the authorization server refused to renew the sign-in (%s: revoked, expired or already used)", re.ErrorCode)}
		}
		return "", fmt.Errorf("renew the sign-in to %s: %w", c.server, tokenErr(err))
	}
	g.AccessToken, g.TokenType, g.Expiry = tok.AccessToken, tok.TokenType, tok.Expiry
	if tok.RefreshToken != "" {
		g.RefreshToken = tok.RefreshToken // rotated: the old one is spent
	}
	if err := c.save(g); err != nil {
		return "", err
	}
	c.log.Info("renewed the sign-in", slog.String("server", c.server))
	return g.AccessToken, nil
}

// refused reports whether the token endpoint refused the grant itself
// (rather than failing): only a sign-in helps then.
func refused(re *oauth2.RetrieveError) bool {
	switch re.ErrorCode {
	case "invalid_grant", "invalid_client", "unauthorized_client":
		return true
	}
	return re.ErrorCode == "" && re.Response != nil && (re.Response.StatusCode == http.StatusBadRequest || re.Response.StatusCode == http.StatusUnauthorized)
}

// tokenErr words a failed token request without its body.
func tokenErr(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.Response != nil {
		if re.ErrorCode != "" {
			return fmt.Errorf("the authorization server answered HTTP %d %s", re.Response.StatusCode, re.ErrorCode)
		}
		return fmt.Errorf("the authorization server answered HTTP %d", re.Response.StatusCode)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// tokenClient is the client for requests to the token endpoint: it follows
// no redirect, and adds the resource indicator to refresh requests.
func (c *Client) tokenClient(tokenURL string) *http.Client {
	hc := *c.http
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		return fmt.Errorf("refused a redirect from the token endpoint to %s", req.URL.Host)
	}
	next := hc.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	hc.Transport = withResource{next: next, tokenURL: tokenURL, resource: c.resource}
	return &hc
}

// withResource adds the resource indicator (RFC 8707) to token requests
// that lack it: x/oauth2 takes none for a refresh.
type withResource struct {
	next     http.RoundTripper
	tokenURL string
	resource string
}

func (w withResource) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPost || req.URL.String() != w.tokenURL || req.Body == nil {
		return w.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	req.Body.Close()
	if err != nil {
		return nil, err
	}
	form, err := url.ParseQuery(string(body))
	if err == nil && form.Get("resource") == "" {
		form.Set("resource", w.resource)
		body = []byte(form.Encode())
	}
	r := req.Clone(req.Context())
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.ContentLength = int64(len(body))
	return w.next.RoundTrip(r)
}

// sameOrigin reports whether a and b have the same scheme, host and port.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) && strings.EqualFold(a.Host, b.Host)
}

// discoveryClient follows redirects on the origin of the first request only.
func (c *Client) discoveryClient() *http.Client {
	hc := *c.http
	hc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if !sameOrigin(via[0].URL, req.URL) {
			return fmt.Errorf("refused a redirect from %s to another origin (%s)", via[0].URL.Host, req.URL.Host)
		}
		if len(via) >= 5 {
			return errors.New("too many redirects")
		}
		return nil
	}
	return &hc
}

// metadata is what discovery found.
type metadata struct {
	resource string // the resource indicator
	scopes   []string
	as       *oauthex.AuthServerMeta
}

// discover finds the server's authorization server.
func (c *Client) discover(ctx context.Context) (*metadata, error) {
	ru, err := url.Parse(c.resource)
	if err != nil || ru.Host == "" {
		return nil, fmt.Errorf("%q is not an http or https URL", c.resource)
	}
	hc := c.discoveryClient()
	ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()

	// A request without a token: its 401 names the metadata.
	var challenges []oauthex.Challenge
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.resource,
		strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"ping"}`))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reach %s: %w", ru.Host, tokenErr(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode == http.StatusUnauthorized {
		challenges, _ = oauthex.ParseWWWAuthenticate(resp.Header.Values("WWW-Authenticate"))
	}
	var candidates []struct{ url, resource string }
	named := false
	for _, ch := range challenges {
		if m := ch.Params["resource_metadata"]; m != "" {
			mu, err := ru.Parse(m)
			if err != nil || !sameOrigin(ru, mu) {
				return nil, fmt.Errorf("%s names protected-resource metadata on another origin (%s): refused", ru.Host, hostOf(m))
			}
			candidates = append(candidates, struct{ url, resource string }{mu.String(), c.resource})
			named = true
			break
		}
	}
	wk := *ru
	wk.RawQuery, wk.Fragment = "", ""
	if p := strings.Trim(ru.Path, "/"); p != "" {
		wk.Path = "/.well-known/oauth-protected-resource/" + p
		candidates = append(candidates, struct{ url, resource string }{wk.String(), c.resource})
	}
	wk.Path = "/.well-known/oauth-protected-resource"
	root := *ru
	root.Path, root.RawQuery, root.Fragment = "", "", ""
	candidates = append(candidates, struct{ url, resource string }{wk.String(), root.String()})

	var prm *oauthex.ProtectedResourceMetadata
	var lastErr error
	for i, cand := range candidates {
		p, err := oauthex.GetProtectedResourceMetadata(ctx, cand.url, cand.resource, hc)
		if err != nil {
			if i == 0 && named {
				// The server said where its metadata is: no guessing.
				if strings.Contains(err.Error(), "want") {
					return nil, fmt.Errorf("%s's protected-resource metadata is for another resource: refused (%v)", ru.Host, err)
				}
				return nil, fmt.Errorf("%s's protected-resource metadata: %w", ru.Host, tokenErr(err))
			}
			lastErr = err
			continue
		}
		if p != nil {
			prm = p
			break
		}
	}
	if prm == nil {
		return nil, fmt.Errorf("%s publishes no protected-resource metadata (RFC 9728): %v", ru.Host, lastErr)
	}
	if len(prm.AuthorizationServers) == 0 {
		return nil, fmt.Errorf("%s's protected-resource metadata names no authorization server", ru.Host)
	}
	issuer := prm.AuthorizationServers[0]
	as, err := auth.GetAuthServerMetadata(ctx, issuer, hc)
	if err != nil {
		return nil, fmt.Errorf("authorization server %s: %w", hostOf(issuer), err)
	}
	if as == nil {
		return nil, fmt.Errorf("authorization server %s publishes no metadata (RFC 8414 or OpenID Connect discovery)", hostOf(issuer))
	}
	if !slices.Contains(as.CodeChallengeMethodsSupported, "S256") {
		return nil, fmt.Errorf("authorization server %s does not offer PKCE with S256: refused", hostOf(issuer))
	}
	if as.AuthorizationEndpoint == "" || as.TokenEndpoint == "" {
		return nil, fmt.Errorf("authorization server %s names no authorization or token endpoint", hostOf(issuer))
	}
	m := &metadata{resource: prm.Resource, as: as, scopes: c.opts.Scopes}
	if len(m.scopes) == 0 {
		for _, ch := range challenges {
			if ch.Scheme == "bearer" && ch.Params["scope"] != "" {
				m.scopes = strings.Fields(ch.Params["scope"])
			}
		}
	}
	if len(m.scopes) == 0 {
		m.scopes = prm.ScopesSupported
	}
	if slices.Contains(as.ScopesSupported, "offline_access") && !slices.Contains(m.scopes, "offline_access") {
		m.scopes = append(slices.Clone(m.scopes), "offline_access")
	}
	return m, nil
}

func hostOf(u string) string {
	if p, err := url.Parse(u); err == nil && p.Host != "" {
		return p.Host
	}
	return u
}

// ErrSignInUnderWay is Login's answer while another sign-in to the same
// server runs.
var ErrSignInUnderWay = errors.New("a sign-in to this server is already under way")

// Login signs in to the server: it discovers the authorization server,
// registers (or uses the configured client id), and calls show with the
// URL the user opens in a browser, then waits, until ctx ends, for the
// browser to come back. The sign-in is stored only when every check
// passed: the answer's state and issuer, PKCE, and the code's exchange.
// One Login per server runs at a time in the home: another one fails with
// [ErrSignInUnderWay].
func (c *Client) Login(ctx context.Context, show func(authURL string)) error {
	if !c.signMu.TryLock() {
		return ErrSignInUnderWay
	}
	defer c.signMu.Unlock()
	if c.signIn != nil {
		f, err := filelock.TryLock(c.signInPath())
		if errors.Is(err, filelock.ErrLocked) {
			return ErrSignInUnderWay
		}
		if err != nil {
			return err
		}
		defer f.Close()
	}
	m, err := c.discover(ctx)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("listen for the browser's answer: %w", err)
	}
	defer ln.Close()
	redirect := fmt.Sprintf("http://127.0.0.1:%d/callback", ln.Addr().(*net.TCPAddr).Port)

	g := &grant{Resource: c.resource, Issuer: m.as.Issuer, AuthURL: m.as.AuthorizationEndpoint,
		TokenURL: m.as.TokenEndpoint, RevocationURL: m.as.RevocationEndpoint, Scopes: m.scopes}
	if err := c.register(ctx, m.as, redirect, g); err != nil {
		return err
	}
	cfg := g.config()
	cfg.RedirectURL = redirect
	state := rand.Text()
	verifier := oauth2.GenerateVerifier()
	authURL := cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", m.resource))

	code, err := c.awaitCode(ctx, ln, state, m.as, func() { show(authURL) })
	if err != nil {
		return err
	}
	xctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	xctx = context.WithValue(xctx, oauth2.HTTPClient, c.tokenClient(g.TokenURL))
	tok, err := cfg.Exchange(xctx, code, oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", m.resource))
	if err != nil {
		return fmt.Errorf("the authorization server did not exchange the code for a token: %w; nothing was stored", tokenErr(err))
	}
	if tok.AccessToken == "" {
		return errors.New("the authorization server answered without an access token; nothing was stored")
	}
	g.AccessToken, g.TokenType, g.RefreshToken, g.Expiry = tok.AccessToken, tok.TokenType, tok.RefreshToken, tok.Expiry
	if err := c.storeLocked(ctx, g); err != nil {
		return err
	}
	c.log.Info("signed in", slog.String("server", c.server), slog.String("issuer", g.Issuer))
	return nil
}

// storeLocked stores g under the refresh lock.
func (c *Client) storeLocked(ctx context.Context, g *grant) error {
	unlock, err := c.lockRefresh(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return c.save(g)
}

// register sets g's client: the configured one, or one registered now.
func (c *Client) register(ctx context.Context, as *oauthex.AuthServerMeta, redirect string, g *grant) error {
	if c.opts.ClientID != "" {
		g.ClientID, g.AuthStyle = c.opts.ClientID, oauth2.AuthStyleInParams
		return nil
	}
	if as.RegistrationEndpoint == "" {
		return fmt.Errorf("authorization server %s offers no dynamic client registration: register Gatehouse with it (redirect URI http://127.0.0.1/callback, any port) and give the client id with --oauth-client-id", hostOf(as.Issuer))
	}
	rctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
	defer cancel()
	reg, err := oauthex.RegisterClient(rctx, as.RegistrationEndpoint, &oauthex.ClientRegistrationMetadata{
		RedirectURIs:            []string{redirect},
		TokenEndpointAuthMethod: "none",
		GrantTypes:              []string{"authorization_code", "refresh_token"},
		ResponseTypes:           []string{"code"},
		ClientName:              "Gatehouse",
		ApplicationType:         "native",
	}, c.discoveryClient())
	if err != nil {
		return fmt.Errorf("register with authorization server %s: %w", hostOf(as.Issuer), err)
	}
	g.ClientID, g.ClientSecret = reg.ClientID, reg.ClientSecret
	g.AuthStyle = oauth2.AuthStyleInParams
	if reg.TokenEndpointAuthMethod == "client_secret_basic" {
		g.AuthStyle = oauth2.AuthStyleInHeader
	}
	return nil
}

// awaitCode serves the loopback redirect until the browser comes back with
// the answer to the sign-in started by start, and returns its code.
func (c *Client) awaitCode(ctx context.Context, ln net.Listener, state string, as *oauthex.AuthServerMeta, start func()) (string, error) {
	type answer struct {
		code string
		err  error
	}
	got := make(chan answer, 1)
	var once sync.Once
	deliver := func(a answer) { once.Do(func() { got <- a }) }
	mux := http.NewServeMux()
	mux.HandleFunc("/callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var a answer
		switch {
		case q.Get("state") != state:
			a.err = errors.New("the browser came back with a state that is not this sign-in's: refused, nothing was stored")
		case q.Get("error") != "":
			a.err = fmt.Errorf("the authorization server refused the sign-in: %s %s", printable(q.Get("error")), printable(q.Get("error_description")))
		case q.Get("iss") != "" && q.Get("iss") != as.Issuer,
			q.Get("iss") == "" && as.AuthorizationResponseIssParameterSupported:
			a.err = errors.New("the browser came back from another issuer than the authorization server's (RFC 9207): refused, nothing was stored")
		case q.Get("code") == "":
			a.err = errors.New("the browser came back without a code")
		default:
			a.code = q.Get("code")
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if a.err != nil {
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprintf(w, "Gatehouse: sign-in to %s failed: %v\n", c.server, a.err)
		} else {
			fmt.Fprintf(w, "Gatehouse: signed in to %s. You can close this tab.\n", c.server)
		}
		deliver(a)
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()
	start()
	select {
	case a := <-got:
		return a.code, a.err
	case <-ctx.Done():
		return "", fmt.Errorf("no answer from the browser: %w", ctx.Err())
	}
}

// printable keeps what an authorization server says short and plain.
func printable(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// Logout revokes the sign-in at the authorization server where it offers
// revocation (RFC 7009): the refresh token, then the access token, and
// removes it from the keychain whatever the authorization server answered.
// The error, if any, says what could not be revoked.
func (c *Client) Logout(ctx context.Context) error {
	g, err := c.load()
	if err != nil {
		return err
	}
	var revokeErr error
	if g != nil && g.RevocationURL != "" {
		ctx, cancel := context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
		for _, t := range []struct{ token, hint string }{{g.RefreshToken, "refresh_token"}, {g.AccessToken, "access_token"}} {
			if t.token == "" {
				continue
			}
			if err := c.revoke(ctx, g, t.token, t.hint); err != nil && revokeErr == nil {
				revokeErr = err
			}
		}
	}
	if err := c.kc.DeleteOAuthGrant(c.server); err != nil {
		return err
	}
	return revokeErr
}

func (c *Client) revoke(ctx context.Context, g *grant, token, hint string) error {
	form := url.Values{"token": {token}, "token_type_hint": {hint}}
	if g.AuthStyle != oauth2.AuthStyleInHeader {
		form.Set("client_id", g.ClientID)
		if g.ClientSecret != "" {
			form.Set("client_secret", g.ClientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, g.RevocationURL, strings.NewReader(form.Encode()))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if g.AuthStyle == oauth2.AuthStyleInHeader {
		req.SetBasicAuth(url.QueryEscape(g.ClientID), url.QueryEscape(g.ClientSecret))
	}
	resp, err := c.tokenClient("").Do(req)
	if err != nil {
		return fmt.Errorf("revoke the %s at %s: %w", strings.ReplaceAll(hint, "_", " "), hostOf(g.RevocationURL), tokenErr(err))
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("revoke the %s at %s: HTTP %d", strings.ReplaceAll(hint, "_", " "), hostOf(g.RevocationURL), resp.StatusCode)
	}
	return nil
}
