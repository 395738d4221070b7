package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/mcptest"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// The test binary doubles as a small MCP server over stdio: its one tool's
// description holds the value of $TOKEN, so a test sees what the server was
// started with.
const roleEnv = "GATEHOUSE_DOWNSTREAM_TEST_ROLE"

func TestMain(m *testing.M) {
	if os.Getenv(roleEnv) == "server" {
		serve()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func serve() {
	desc, _ := json.Marshal("token " + os.Getenv("TOKEN"))
	mcptest.Serve(os.Stdin, os.Stdout, map[string]string{
		"initialize": `{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"token-server","version":"1.0"}}`,
		"tools/list": `{"tools":[{"name":"whoami","description":` + string(desc) + `,"inputSchema":{"type":"object"}}]}`,
	})
}

// fakeSecrets is a keychain in a map.
type fakeSecrets map[string]string

func (f fakeSecrets) ResolveEnv(env []string) ([]string, map[string]string, error) {
	out := slices.Clone(env)
	values := map[string]string{}
	for i, kv := range out {
		k, v, _ := strings.Cut(kv, "=")
		if id, ok := vault.ParseRef(v); ok {
			val, ok := f[id]
			if !ok {
				return nil, nil, fmt.Errorf("%s: secret %s: %w", k, id, vault.ErrNotFound)
			}
			out[i] = k + "=" + val
			values[id] = val
		}
	}
	return out, values, nil
}

func testServer() store.Server {
	return store.Server{
		Name: "tokens", Transport: store.TransportStdio, Command: os.Args[0],
		Env: map[string]string{roleEnv: "server", "TOKEN": vault.Ref("tokens.TOKEN")},
	}
}

func TestCommandResolvesSecrets(t *testing.T) {
	cmd, values, err := Command(testServer(), fakeSecrets{"tokens.TOKEN": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(cmd.Env, "TOKEN=s3cret") || cmd.Path != os.Args[0] {
		t.Errorf("Command = %+v, want the resolved TOKEN in its environment", cmd)
	}
	if values["tokens.TOKEN"] != "s3cret" {
		t.Errorf("values = %v, want the value resolved, for redaction", values)
	}
	if _, _, err := Command(testServer(), fakeSecrets{}); !errors.Is(err, vault.ErrNotFound) || !strings.Contains(err.Error(), "tokens") {
		t.Errorf("Command with the secret missing = %v, want an error naming the server and wrapping ErrNotFound", err)
	}
}

func TestRemoteResolvesHeaders(t *testing.T) {
	srv := store.Server{Name: "remote", Transport: store.TransportHTTP, URL: "https://mcp.example.com/mcp",
		Headers: map[string]string{"Authorization": vault.Ref("remote.Authorization"), "X-Team": "blue"}}
	r, values, err := Remote(srv, fakeSecrets{"remote.Authorization": "Bearer t0k"})
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != srv.URL || r.Headers["Authorization"] != "Bearer t0k" || r.Headers["X-Team"] != "blue" {
		t.Errorf("Remote = %+v, want the URL and the headers resolved", r)
	}
	if len(values) != 1 {
		t.Errorf("values = %v, want the one secret", values)
	}
}

func TestProbe(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	h, err := Probe(ctx, testServer(), fakeSecrets{"tokens.TOKEN": "s3cret"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if h.ServerName != "token-server" || len(h.Tools) != 1 || h.Tools[0].Description != "token s3cret" {
		t.Errorf("Probe = %+v, want token-server with one tool that saw the resolved secret", h)
	}

	missing := testServer()
	missing.Command = "/nonexistent/mcp-server"
	if _, err := Probe(ctx, missing, fakeSecrets{"tokens.TOKEN": "x"}, nil); err == nil {
		t.Error("Probe of a command that does not exist = nil, want an error")
	}
	if _, err := Probe(ctx, testServer(), fakeSecrets{}, nil); !errors.Is(err, vault.ErrNotFound) {
		t.Errorf("Probe with a secret missing = %v, want ErrNotFound before anything starts", err)
	}
}
