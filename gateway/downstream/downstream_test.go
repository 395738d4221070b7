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

func (f fakeSecrets) Secret(id string) (string, error) {
	v, ok := f[id]
	if !ok {
		return "", fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
	}
	return v, nil
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

// An argument or a remote URL that is a reference is the secret's value when
// the server starts; a value that starts like a reference but is not one is
// refused, not passed on as it is.
func TestArgumentsAndURLResolve(t *testing.T) {
	secrets := fakeSecrets{"pg.arg3": "postgresql://app:pw-0123@db/app", "r.url": "https://u:pw-4567@mcp.example.com/mcp"}
	srv := store.Server{Name: "pg", Transport: store.TransportStdio, Command: "/usr/bin/pg-mcp",
		Args: []string{"-y", "pkg", vault.Ref("pg.arg3")}}
	cmd, values, err := Command(srv, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"-y", "pkg", "postgresql://app:pw-0123@db/app"}; !slices.Equal(cmd.Args, want) {
		t.Errorf("Args = %q, want %q", cmd.Args, want)
	}
	if srv.Args[2] != vault.Ref("pg.arg3") {
		t.Errorf("Command changed the registration's arguments: %q", srv.Args)
	}
	if values["pg.arg3"] != secrets["pg.arg3"] {
		t.Errorf("values = %v, want the argument's value, for redaction", values)
	}
	srv.Args[2] = "vault://secret/"
	if _, _, err := Command(srv, secrets); err == nil || !strings.Contains(err.Error(), "argument 3") {
		t.Errorf("Command with a broken reference = %v, want an error naming argument 3", err)
	}
	remote := store.Server{Name: "r", Transport: store.TransportHTTP, URL: vault.Ref("r.url")}
	r, values, err := Remote(remote, secrets)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != secrets["r.url"] || values["r.url"] != secrets["r.url"] {
		t.Errorf("Remote = %+v, %v; want the URL from the keychain", r, values)
	}
	secrets["r.url"] = "file:///etc/passwd"
	if _, _, err := Remote(remote, secrets); err == nil || strings.Contains(err.Error(), "passwd") {
		t.Errorf("Remote with a non-HTTP URL = %v, want an error that does not quote it", err)
	}
}

// Only the slots a registration marks as client-expanded are filled, each
// with one whole value, from the variables the client sets; a variable of
// the environment named anywhere else, or by a value that is not a
// marker, reaches nothing.
func TestExpandClient(t *testing.T) {
	env := map[string]string{
		"GATEHOUSE_ARG_2":    "/home/dev/project with spaces; rm -rf /",
		"GATEHOUSE_CWD":      "/home/dev/project",
		"GATEHOUSE_URL":      "https://mcp.example.com/mcp",
		"GATEHOUSE_HEADER_1": "Bearer t0ken",
		"HOME":               "/home/dev",
	}
	getenv := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	srv := store.Server{Name: "s", Transport: store.TransportStdio, Command: "/usr/bin/node",
		Args: []string{"client-env://HOME", store.ClientEnvRef("GATEHOUSE_ARG_2"), "${GATEHOUSE_ARG_2}"},
		Cwd:  store.ClientEnvRef("GATEHOUSE_CWD")}
	cmd, _, err := Command(srv, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ExpandClient(srv, &cmd, nil, getenv); err != nil {
		t.Fatal(err)
	}
	want := []string{"client-env://HOME", "/home/dev/project with spaces; rm -rf /", "${GATEHOUSE_ARG_2}"}
	if !slices.Equal(cmd.Args, want) || cmd.Dir != "/home/dev/project" {
		t.Errorf("ExpandClient = %q in %q, want %q in /home/dev/project", cmd.Args, cmd.Dir, want)
	}

	remote := store.Server{Name: "r", Transport: store.TransportHTTP, URL: store.ClientEnvRef("GATEHOUSE_URL"),
		Headers: map[string]string{"Authorization": store.ClientEnvRef("GATEHOUSE_HEADER_1"), "X-Plain": "client-env://HOME"}}
	r, _, err := Remote(remote, nil)
	if err != nil {
		t.Fatal(err)
	}
	secret, err := ExpandClient(remote, nil, &r, getenv)
	if err != nil {
		t.Fatal(err)
	}
	if r.URL != "https://mcp.example.com/mcp" || r.Headers["Authorization"] != "Bearer t0ken" || r.Headers["X-Plain"] != "client-env://HOME" {
		t.Errorf("ExpandClient = %s %v", r.URL, r.Headers)
	}
	if !slices.Equal(secret, []string{"Bearer t0ken"}) {
		t.Errorf("values to redact = %q", secret)
	}
	delete(env, "GATEHOUSE_CWD")
	if _, err := ExpandClient(srv, &cmd, nil, getenv); err == nil || !strings.Contains(err.Error(), "GATEHOUSE_CWD") {
		t.Errorf("ExpandClient without the client's variable = %v, want an error naming it", err)
	}
	env["GATEHOUSE_URL"] = "file:///etc/passwd"
	if _, err := ExpandClient(remote, nil, &r, getenv); err == nil {
		t.Error("ExpandClient took a URL that is not http or https")
	}
}
