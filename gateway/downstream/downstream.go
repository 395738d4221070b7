// Package downstream is how Gatehouse reaches a registered MCP server: the
// command it starts ([Command]) or the URL it posts to ([Remote]), with the
// credentials the server's entry refers to (vault://secret/ID in an
// environment variable or a header) resolved from the keychain, and a
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
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// Secrets resolves the secret references among KEY=VALUE pairs
// (*vault.Vault is one): each value that is vault://secret/ID becomes the
// secret's value, and the values resolved are returned by secret id.
type Secrets interface {
	ResolveEnv(env []string) (resolved []string, values map[string]string, err error)
}

// Command returns how to start the stdio server srv, with the secrets its
// environment refers to resolved, and the values resolved. An error names
// the variable and the secret that could not be resolved (it wraps
// vault.ErrNotFound or vault.ErrUnavailable).
func Command(srv store.Server, s Secrets) (gateway.Command, map[string]string, error) {
	cmd := gateway.Command{Path: srv.Command, Args: srv.Args, Env: srv.EnvList(), Dir: srv.Cwd}
	env, values, err := s.ResolveEnv(cmd.Env)
	if err != nil {
		return gateway.Command{}, nil, fmt.Errorf("cannot start server %s: %w", srv.Name, err)
	}
	cmd.Env = env
	return cmd, values, nil
}

// Remote returns how to reach the remote server srv, with the secrets its
// headers refer to resolved, and the values resolved.
func Remote(srv store.Server, s Secrets) (gateway.Remote, map[string]string, error) {
	list := make([]string, 0, len(srv.Headers))
	for k, v := range srv.Headers {
		list = append(list, k+"="+v)
	}
	resolved, values, err := s.ResolveEnv(list)
	if err != nil {
		return gateway.Remote{}, nil, fmt.Errorf("cannot reach server %s: %w", srv.Name, err)
	}
	headers := make(map[string]string, len(resolved))
	for _, kv := range resolved {
		k, v, _ := strings.Cut(kv, "=")
		headers[k] = v
	}
	return gateway.Remote{URL: srv.URL, Headers: headers}, values, nil
}

// Probe starts the server srv (or reaches it, when remote), completes the
// MCP handshake and lists its tools, within ctx. What a stdio server prints
// on its stderr goes to stderr (nil discards it).
func Probe(ctx context.Context, srv store.Server, s Secrets, stderr io.Writer) (*gateway.Health, error) {
	if srv.Transport == store.TransportHTTP {
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
