package oauth_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/oauth"
)

// fakeAS is a resource and its authorization server on one origin, each
// step of which a case can make misbehave.
type fakeAS struct {
	srv *httptest.Server
	mu  sync.Mutex
	// challenge is the PKCE challenge of the last authorization request.
	challenge string
	// refresh is the refresh token now valid; spent ones are refused.
	refresh string
	n       int

	resourceMetadata func(base string) string // WWW-Authenticate's resource_metadata
	prm              func(base string) string // the metadata's JSON
	asm              func(base string) string
	authorize        func(w http.ResponseWriter, r *http.Request, redirect, state string)
	token            func(w http.ResponseWriter, r *http.Request) bool // true: handled
	revoked          []string                                          // hint=token, guarded by mu
}

func newFakeAS(t *testing.T) *fakeAS {
	f := &fakeAS{}
	f.resourceMetadata = func(base string) string { return base + "/.well-known/oauth-protected-resource/mcp" }
	f.prm = func(base string) string {
		return fmt.Sprintf(`{"resource":%q,"authorization_servers":[%q]}`, base+"/mcp", base)
	}
	f.asm = func(base string) string {
		return fmt.Sprintf(`{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"revocation_endpoint":%q,"code_challenge_methods_supported":["S256"]}`,
			base, base+"/authorize", base+"/token", base+"/revoke")
	}
	f.authorize = func(w http.ResponseWriter, r *http.Request, redirect, state string) {
		http.Redirect(w, r, redirect+"?code=good-code&state="+url.QueryEscape(state), http.StatusFound)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("WWW-Authenticate", fmt.Sprintf(`Bearer resource_metadata=%q`, f.resourceMetadata(f.srv.URL)))
		w.WriteHeader(http.StatusUnauthorized)
	})
	mux.HandleFunc("/.well-known/oauth-protected-resource/mcp", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, f.prm(f.srv.URL))
	})
	mux.HandleFunc("/.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, f.asm(f.srv.URL))
	})
	mux.HandleFunc("/authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		f.mu.Lock()
		f.challenge = q.Get("code_challenge")
		f.mu.Unlock()
		if q.Get("code_challenge_method") != "S256" || q.Get("resource") != f.srv.URL+"/mcp" {
			http.Error(w, "no PKCE or resource", http.StatusBadRequest)
			return
		}
		f.authorize(w, r, q.Get("redirect_uri"), q.Get("state"))
	})
	mux.HandleFunc("/token", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		if f.token != nil && f.token(w, r) {
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		bad := func() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":"invalid_grant"}`)
		}
		switch r.PostForm.Get("grant_type") {
		case "authorization_code":
			sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
			if r.PostForm.Get("code") != "good-code" || base64.RawURLEncoding.EncodeToString(sum[:]) != f.challenge {
				bad()
				return
			}
		case "refresh_token":
			if r.PostForm.Get("refresh_token") != f.refresh || r.PostForm.Get("resource") != f.srv.URL+"/mcp" {
				bad()
				return
			}
		default:
			bad()
			return
		}
		f.n++
		f.refresh = fmt.Sprintf("refresh-%d", f.n)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"access_token":"access-%d","token_type":"Bearer","expires_in":3600,"refresh_token":%q}`, f.n, f.refresh)
	})
	mux.HandleFunc("/revoke", func(w http.ResponseWriter, r *http.Request) {
		r.ParseForm()
		f.mu.Lock()
		f.revoked = append(f.revoked, r.PostForm.Get("token_type_hint")+"="+r.PostForm.Get("token"))
		f.mu.Unlock()
	})
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// follow plays the browser: it follows the authorization URL and its
// redirects, to the loopback listener.
func follow(authURL string) {
	go func() {
		if resp, err := http.Get(authURL); err == nil {
			resp.Body.Close()
		}
	}()
}

func (f *fakeAS) client(kc oauth.Keychain) *oauth.Client {
	return oauth.New("fake", f.srv.URL+"/mcp", kc, &oauth.Options{ClientID: "gatehouse", Timeout: 500 * time.Millisecond})
}

func TestMisbehavingServersStoreNothing(t *testing.T) {
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{}`)
	}))
	defer other.Close()
	tests := []struct {
		name  string
		setup func(f *fakeAS)
		want  string
	}{
		{"the answer's state is not the sign-in's", func(f *fakeAS) {
			f.authorize = func(w http.ResponseWriter, r *http.Request, redirect, state string) {
				http.Redirect(w, r, redirect+"?code=good-code&state=forged", http.StatusFound)
			}
		}, "state that is not this sign-in's"},
		{"a code issued for another PKCE challenge", func(f *fakeAS) {
			f.authorize = func(w http.ResponseWriter, r *http.Request, redirect, state string) {
				f.mu.Lock()
				f.challenge = "an-attackers-challenge"
				f.mu.Unlock()
				http.Redirect(w, r, redirect+"?code=good-code&state="+url.QueryEscape(state), http.StatusFound)
			}
		}, "did not exchange the code"},
		{"the answer names another issuer", func(f *fakeAS) {
			f.authorize = func(w http.ResponseWriter, r *http.Request, redirect, state string) {
				http.Redirect(w, r, redirect+"?code=good-code&iss=https%3A%2F%2Fevil.example&state="+url.QueryEscape(state), http.StatusFound)
			}
		}, "another issuer"},
		{"resource metadata on another origin", func(f *fakeAS) {
			f.resourceMetadata = func(string) string { return other.URL + "/.well-known/oauth-protected-resource/mcp" }
		}, "another origin"},
		{"resource metadata for another resource", func(f *fakeAS) {
			f.prm = func(base string) string {
				return fmt.Sprintf(`{"resource":"https://elsewhere.example/mcp","authorization_servers":[%q]}`, base)
			}
		}, "another resource"},
		{"metadata redirected to another host", func(f *fakeAS) {
			f.resourceMetadata = func(base string) string { return base + "/moved" }
			f.srv.Config.Handler.(*http.ServeMux).HandleFunc("/moved", func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, other.URL+"/prm", http.StatusFound)
			})
		}, "another origin"},
		{"authorization server metadata with another issuer", func(f *fakeAS) {
			f.asm = func(base string) string {
				return fmt.Sprintf(`{"issuer":"https://evil.example","authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"]}`,
					base+"/authorize", base+"/token")
			}
		}, "does not match"},
		{"an authorization server without S256", func(f *fakeAS) {
			f.asm = func(base string) string {
				return fmt.Sprintf(`{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["plain"]}`,
					base, base+"/authorize", base+"/token")
			}
		}, "S256"},
		{"the token endpoint errs", func(f *fakeAS) {
			f.token = func(w http.ResponseWriter, r *http.Request) bool {
				http.Error(w, "boom", http.StatusInternalServerError)
				return true
			}
		}, "HTTP 500"},
		{"the token endpoint does not answer", func(f *fakeAS) {
			f.token = func(w http.ResponseWriter, r *http.Request) bool {
				select {
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
				return true
			}
		}, "deadline exceeded"},
		{"the token endpoint redirects", func(f *fakeAS) {
			f.token = func(w http.ResponseWriter, r *http.Request) bool {
				http.Redirect(w, r, other.URL+"/token", http.StatusTemporaryRedirect)
				return true
			}
		}, "refused a redirect"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFakeAS(t)
			tt.setup(f)
			kc := newKeychain()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := f.client(kc).Login(ctx, follow)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Login = %v, want an error saying %q", err, tt.want)
			}
			if len(kc.m) != 0 {
				t.Errorf("the keychain holds %d items after a refused sign-in", len(kc.m))
			}
		})
	}
}

func TestRefresh(t *testing.T) {
	signIn := func(t *testing.T) (*fakeAS, *memKeychain) {
		f := newFakeAS(t)
		kc := newKeychain()
		if err := f.client(kc).Login(context.Background(), follow); err != nil {
			t.Fatalf("Login: %v", err)
		}
		return f, kc
	}
	t.Run("rotation keeps the new refresh token", func(t *testing.T) {
		f, kc := signIn(t)
		tok, err := f.client(kc).Token(context.Background(), "access-1")
		if err != nil || tok != "access-2" {
			t.Fatalf("Token(rejected access-1) = %q, %v; want access-2", tok, err)
		}
		if g := kc.grant(t, "fake"); g["refresh_token"] != "refresh-2" {
			t.Errorf("stored refresh token = %v, want the rotated refresh-2", g["refresh_token"])
		}
	})
	t.Run("a refresh token reused after rotation", func(t *testing.T) {
		f, kc := signIn(t)
		spent := kc.m["fake"]
		if _, err := f.client(kc).Token(context.Background(), "access-1"); err != nil {
			t.Fatal(err)
		}
		kc.SetOAuthGrant("fake", spent) // as a copy restored from elsewhere would
		_, err := f.client(kc).Token(context.Background(), "access-1")
		var se *oauth.SignInError
		if !errors.As(err, &se) || !strings.Contains(err.Error(), "sign in again: gatehouse server login fake") {
			t.Fatalf("Token with a spent refresh token = %v, want a SignInError", err)
		}
		if _, ok := kc.m["fake"]; ok {
			t.Errorf("the refused sign-in is still in the keychain")
		}
	})
	t.Run("a token endpoint that fails keeps the sign-in", func(t *testing.T) {
		f, kc := signIn(t)
		before := kc.m["fake"]
		f.token = func(w http.ResponseWriter, r *http.Request) bool {
			http.Error(w, "down", http.StatusBadGateway)
			return true
		}
		_, err := f.client(kc).Token(context.Background(), "access-1")
		if err == nil || errors.Is(err, oauth.ErrSignInRequired) || !strings.Contains(err.Error(), "HTTP 502") {
			t.Fatalf("Token while the token endpoint fails = %v, want the failure, not a sign-in", err)
		}
		if kc.m["fake"] != before {
			t.Errorf("a failed refresh changed the keychain")
		}
	})
	t.Run("logout revokes and forgets", func(t *testing.T) {
		f, kc := signIn(t)
		if err := f.client(kc).Logout(context.Background()); err != nil {
			t.Fatalf("Logout: %v", err)
		}
		f.mu.Lock()
		b, _ := json.Marshal(f.revoked)
		f.mu.Unlock()
		if want := `["refresh_token=refresh-1","access_token=access-1"]`; string(b) != want {
			t.Errorf("revoked %s, want %s", b, want)
		}
		if len(kc.m) != 0 {
			t.Errorf("the keychain still holds the sign-in")
		}
	})
}
