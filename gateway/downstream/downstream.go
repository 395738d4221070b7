// Package downstream is how Gatehouse reaches a registered MCP server: the
// command it starts ([Command]) or the URL it posts to ([Remote]), with the
// credentials the server's entry refers to (vault://secret/ID as the whole
// value of an environment variable, an argument, a header or the URL)
// resolved from the keychain, and a
// connection test ([Probe]) that starts or reaches the server and lists its
// tools, as `gatehouse server test` and the tray app's Test connection do.
//
// Resolved values are returned beside the command so that the caller can
// redact them from what the server sends back; they are never logged.
package downstream

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/oauth"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// Secrets holds the values that references name (*vault.Vault is one).
type Secrets interface {
	// Secret returns the value of secret id, or an error wrapping
	// vault.ErrNotFound or vault.ErrUnavailable.
	Secret(id string) (string, error)
}

// A resolver replaces the secret references of one registration with the
// secrets' values, and keeps the values it resolved, by secret id.
type resolver struct {
	s      Secrets
	values map[string]string
}

// resolve returns v, or the secret it refers to when it is a reference
// (vault://secret/ID, the whole value). where names v in errors.
func (r *resolver) resolve(v, where string) (string, error) {
	if !strings.HasPrefix(v, "vault://") {
		return v, nil
	}
	id, ok := vault.ParseRef(v)
	if !ok {
		return "", fmt.Errorf("%s: %q is not a reference to a secret (vault://secret/ID)", where, v)
	}
	val, err := r.s.Secret(id)
	if err != nil {
		return "", fmt.Errorf("%s: %w", where, err)
	}
	if r.values == nil {
		r.values = map[string]string{}
	}
	r.values[id] = val
	return val, nil
}

// Command returns how to start the stdio server srv, with the secrets its
// environment and arguments refer to resolved, and the values resolved, by
// secret id. An error names the variable or argument and the secret that
// could not be resolved (it wraps vault.ErrNotFound or
// vault.ErrUnavailable).
func Command(srv store.Server, s Secrets) (gateway.Command, map[string]string, error) {
	r := &resolver{s: s}
	cmd := gateway.Command{Path: srv.Command, Args: slices.Clone(srv.Args), Env: srv.EnvList(), Dir: srv.Cwd}
	for i, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		v, err := r.resolve(v, "environment variable "+k)
		if err != nil {
			return gateway.Command{}, nil, fmt.Errorf("cannot start server %s: %w", srv.Name, err)
		}
		cmd.Env[i] = k + "=" + v
	}
	for i, a := range cmd.Args {
		a, err := r.resolve(a, fmt.Sprintf("argument %d", i+1))
		if err != nil {
			return gateway.Command{}, nil, fmt.Errorf("cannot start server %s: %w", srv.Name, err)
		}
		cmd.Args[i] = a
	}
	return cmd, r.values, nil
}

// Remote returns how to reach the remote server srv, with the secrets its
// URL and headers refer to resolved, and the values resolved, by secret id.
func Remote(srv store.Server, s Secrets) (gateway.Remote, map[string]string, error) {
	r := &resolver{s: s}
	u, err := r.resolve(srv.URL, "its URL")
	if err != nil {
		return gateway.Remote{}, nil, fmt.Errorf("cannot reach server %s: %w", srv.Name, err)
	}
	if _, expanded := store.ParseClientEnvRef(u); expanded {
		// ExpandClient fills it in, and checks it.
	} else if p, err := url.Parse(u); err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
		// Not quoted: it may hold a credential.
		return gateway.Remote{}, nil, fmt.Errorf("cannot reach server %s: its URL is not an http or https address", srv.Name)
	}
	headers := make(map[string]string, len(srv.Headers))
	for k, v := range srv.Headers {
		if headers[k], err = r.resolve(v, "header "+k); err != nil {
			return gateway.Remote{}, nil, fmt.Errorf("cannot reach server %s: %w", srv.Name, err)
		}
	}
	return gateway.Remote{URL: u, Headers: headers, SSE: srv.Transport == store.TransportSSE}, r.values, nil
}

// SignIn returns the OAuth client of the remote server srv (registered
// with auth oauth): its tokens live in kc, and the home's processes share
// the lock files in dir. The proxy gives it to [gateway.Remote] as its
// token source; `gatehouse server login` and the app sign in with it.
func SignIn(srv store.Server, kc oauth.Keychain, dir string, log *slog.Logger) *oauth.Client {
	return oauth.New(srv.Name, srv.URL, kc, &oauth.Options{
		ClientID: srv.OAuthClientID,
		Scopes:   srv.OAuthScopes,
		LockDir:  dir,
		Logger:   log,
	})
}

// ExpandClient puts into cmd and remote (either may be nil) the values
// the MCP client expanded for the slots the registration srv marks as
// client-expanded (store.ClientEnvRef), read with getenv from the proxy's
// environment, which the client set from its entry's env. Only marked
// slots are filled, each with one whole value: an argument stays one
// argument. It returns the values put into headers, for redaction. A
// variable the client did not set is an error: the server was launched
// by something else than the client that expands it.
func ExpandClient(srv store.Server, cmd *gateway.Command, remote *gateway.Remote, getenv func(string) (string, bool)) ([]string, error) {
	get := func(ref, where string) (string, bool, error) {
		name, ok := store.ParseClientEnvRef(ref)
		if !ok {
			return "", false, nil
		}
		v, set := getenv(name)
		if !set {
			return "", true, fmt.Errorf("cannot start server %s: %s is expanded by the MCP client that launches it (%s), which is not set here: start it from that client", srv.Name, where, name)
		}
		return v, true, nil
	}
	if cmd != nil {
		for i := range cmd.Args {
			v, ok, err := get(srv.Args[i], fmt.Sprintf("argument %d", i+1))
			if err != nil {
				return nil, err
			}
			if ok {
				cmd.Args[i] = v
			}
		}
		v, ok, err := get(srv.Cwd, "its working folder")
		if err != nil {
			return nil, err
		}
		if ok {
			cmd.Dir = v
		}
	}
	var secret []string
	if remote != nil {
		v, ok, err := get(srv.URL, "its URL")
		if err != nil {
			return nil, err
		}
		if ok {
			if p, err := url.Parse(v); err != nil || p.Scheme != "http" && p.Scheme != "https" || p.Host == "" {
				return nil, fmt.Errorf("cannot reach server %s: the URL its client expanded is not an http or https address", srv.Name)
			}
			remote.URL = v
		}
		for k, ref := range srv.Headers {
			v, ok, err := get(ref, "header "+k)
			if err != nil {
				return nil, err
			}
			if ok {
				if strings.ContainsAny(v, "\r\n\x00") {
					return nil, fmt.Errorf("cannot reach server %s: the value its client expanded for header %s holds a line break", srv.Name, k)
				}
				remote.Headers[k] = v
				secret = append(secret, v)
			}
		}
	}
	return secret, nil
}

// Probe starts the server srv (or reaches it, when remote), completes the
// MCP handshake and lists its tools, within ctx. What a stdio server prints
// on its stderr goes to stderr (nil discards it).
func Probe(ctx context.Context, srv store.Server, s Secrets, stderr io.Writer) (*gateway.Health, error) {
	if srv.Remote() {
		r, _, err := Remote(srv, s)
		if err != nil {
			return nil, err
		}
		return gateway.ProbeRemote(ctx, r)
	}
	cmd, _, err := Command(srv, s)
	if err != nil {
		return nil, err
	}
	return gateway.Probe(ctx, cmd, stderr)
}
