package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// TransportStdio is a server Gatehouse starts as a child process and speaks to
// over its stdin and stdout.
const TransportStdio = "stdio"

// TransportHTTP is a remote server Gatehouse reaches over MCP's streamable
// HTTP transport at URL.
const TransportHTTP = "http"

// TransportSSE is a remote server Gatehouse reaches over the HTTP+SSE
// transport of protocol version 2024-11-05: URL is its event stream.
const TransportSSE = "sse"

// Remote reports whether s is a remote server (streamable HTTP or SSE).
func (s *Server) Remote() bool {
	return s.Transport == TransportHTTP || s.Transport == TransportSSE
}

// clientEnvPrefix starts a registration's value that the MCP client
// expands: the whole value is a reference to the variable of the proxy's
// environment that the client sets, from the governed entry's env.
const clientEnvPrefix = "client-env://"

// clientEnvRE is the variables such a reference may name: nothing else of
// the proxy's environment reaches a registration.
var clientEnvRE = regexp.MustCompile(`^GATEHOUSE_(ARG_[1-9][0-9]{0,3}|CWD|URL|HEADER_[1-9][0-9]{0,3})$`)

// ClientEnvRef is the reference to the proxy's environment variable name
// (GATEHOUSE_ARG_N, GATEHOUSE_CWD, GATEHOUSE_URL, GATEHOUSE_HEADER_N), held
// in the slot of a registration whose value the MCP client expands.
func ClientEnvRef(name string) string {
	if !clientEnvRE.MatchString(name) {
		panic("store: not a client-expanded variable: " + name)
	}
	return clientEnvPrefix + name
}

// ParseClientEnvRef returns the variable a whole value refers to, when it
// is a client-expanded reference.
func ParseClientEnvRef(v string) (string, bool) {
	name, ok := strings.CutPrefix(v, clientEnvPrefix)
	if !ok || !clientEnvRE.MatchString(name) {
		return "", false
	}
	return name, true
}

// AuthNone is a remote server reached with its headers only.
const AuthNone = ""

// AuthOAuth is a remote server Gatehouse signs in to with OAuth 2.1 (the
// MCP authorization specification); tokens live in the keychain.
const AuthOAuth = "oauth"

// A Server is an MCP server registered with Gatehouse: what `gatehouse proxy
// NAME` starts and relays to.
type Server struct {
	Name      string
	Transport string            // TransportStdio, TransportHTTP or TransportSSE
	Command   string            // stdio: program to run
	Args      []string          // stdio: its arguments
	Env       map[string]string // stdio: added to the environment it inherits
	Cwd       string            // stdio: working folder; empty means the proxy's
	URL       string            // http: the server's MCP endpoint
	Headers   map[string]string // http: sent with every request
	// Auth is how Gatehouse signs in to a remote server: AuthNone (its
	// headers, if any) or AuthOAuth.
	Auth string
	// OAuthClientID is the client id registered in advance with the
	// server's authorization server; empty means Gatehouse registers
	// itself (RFC 7591) where the authorization server offers it.
	OAuthClientID string
	// OAuthScopes are the scopes to ask for; empty means those the server
	// names.
	OAuthScopes []string
	// Trusted says the user trusts the server's tool annotations: its
	// read-only hints may then lower a tool's risk (untrusted hints can
	// only raise it).
	Trusted bool
	// Confine starts a stdio server confined to what it needs (package
	// gateway/confine): its install, the system, a private temporary
	// folder, the paths its command line names, and AllowRead, AllowWrite
	// and AllowNet. A server to be confined where confinement cannot be
	// applied does not start, unless UnconfinedOK.
	Confine      bool
	AllowRead    []string // folders and files it may also read
	AllowWrite   []string // folders and files it may also write
	AllowNet     []string // TCP ports it may connect to, or "*"
	UnconfinedOK bool     // start it unconfined, saying so, where confinement cannot be applied
	// Quarantined holds every call to the server for a person's approval
	// until the user reviews it (gatehouse server review).
	Quarantined bool
	// Pack is the capability pack the server matched when it was
	// registered, or when its command or URL last changed ("filesystem@1";
	// empty: none). Its tools are classified by the pack.
	Pack      string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// nameRE is what a server name may be: it becomes part of capability names
// (mcp.<server>.<tool>), so it holds no dots or spaces.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]{0,63}$`)

// ValidateName reports whether name can name a server.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("invalid server name %q: use 1-64 letters, digits, '-' or '_', starting with a letter or digit", name)
	}
	return nil
}

// Validate reports whether s can be registered.
func (s *Server) Validate() error {
	if err := ValidateName(s.Name); err != nil {
		return err
	}
	switch s.Transport {
	case TransportStdio:
		if s.Command == "" {
			return fmt.Errorf("server %s: no command", s.Name)
		}
		if s.URL != "" || len(s.Headers) > 0 || s.Auth != AuthNone || s.OAuthClientID != "" || len(s.OAuthScopes) > 0 {
			return fmt.Errorf("server %s: a stdio server has no URL, headers or sign-in", s.Name)
		}
	case TransportHTTP, TransportSSE:
		// A URL that holds a credential is kept in the keychain, and the
		// registration refers to it (vault://secret/ID); the proxy checks
		// the URL it resolves.
		u, err := url.Parse(s.URL)
		_, expanded := ParseClientEnvRef(s.URL)
		if !strings.HasPrefix(s.URL, "vault://secret/") && !expanded && (err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "") {
			return fmt.Errorf("server %s: URL %q is not an http or https address", s.Name, s.URL)
		}
		if s.Command != "" || len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" {
			return fmt.Errorf("server %s: an http server has no command, arguments, environment or folder", s.Name)
		}
		if s.Confine || len(s.AllowRead) > 0 || len(s.AllowWrite) > 0 || len(s.AllowNet) > 0 || s.UnconfinedOK {
			return fmt.Errorf("server %s: a remote server is not started by Gatehouse, so it cannot be confined", s.Name)
		}
		switch s.Auth {
		case AuthNone, AuthOAuth:
		default:
			return fmt.Errorf("server %s: unknown auth %q", s.Name, s.Auth)
		}
		if s.Auth != AuthOAuth && (s.OAuthClientID != "" || len(s.OAuthScopes) > 0) {
			return fmt.Errorf("server %s: an OAuth client id or scopes need auth %q", s.Name, AuthOAuth)
		}
		for _, sc := range s.OAuthScopes {
			if sc == "" || strings.ContainsAny(sc, " \"\x00\r\n") {
				return fmt.Errorf("server %s: invalid OAuth scope %q", s.Name, sc)
			}
		}
		for k, v := range s.Headers {
			if k == "" || strings.ContainsAny(k, " :\r\n\x00") || strings.ContainsAny(v, "\r\n\x00") {
				return fmt.Errorf("server %s: invalid header %q", s.Name, k)
			}
		}
	default:
		return fmt.Errorf("server %s: unknown transport %q", s.Name, s.Transport)
	}
	for k := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("server %s: invalid environment variable name %q", s.Name, k)
		}
	}
	return nil
}

// AddServer registers s. It fails with [ErrExists] when the name is taken.
func (st *Store) AddServer(ctx context.Context, s Server) error {
	if s.Transport == "" {
		s.Transport = TransportStdio
	}
	if err := s.Validate(); err != nil {
		return err
	}
	args, err := json.Marshal(nonNil(s.Args))
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	env, err := json.Marshal(nonNilMap(s.Env))
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	headers, err := json.Marshal(nonNilMap(s.Headers))
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	c, err := confinementColumns(s)
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	scopes, err := json.Marshal(nonNil(s.OAuthScopes))
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	now := time.Now().UTC().Format(time.RFC3339Nano)
	_, err = st.db.ExecContext(ctx, `INSERT INTO servers (name, transport, command, args, env, cwd, url, headers, trusted,
		confine, allow_read, allow_write, allow_net, unconfined_ok, quarantined, auth, oauth_client_id, oauth_scopes, pack, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`, s.Name, s.Transport, s.Command, string(args), string(env), s.Cwd, s.URL, string(headers), s.Trusted,
		s.Confine, c.read, c.write, c.net, s.UnconfinedOK, s.Quarantined, s.Auth, s.OAuthClientID, string(scopes), s.Pack, now, now)
	var serr *sqlite.Error
	if errors.As(err, &serr) && serr.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY {
		return fmt.Errorf("add server %s: %w", s.Name, ErrExists)
	}
	if err != nil {
		return fmt.Errorf("add server %s: %w", s.Name, err)
	}
	return nil
}

// UpdateServer replaces the registration of the server called s.Name, keeping
// its creation time. It fails with [ErrNotFound] when there is none.
func (st *Store) UpdateServer(ctx context.Context, s Server) error {
	if s.Transport == "" {
		s.Transport = TransportStdio
	}
	if err := s.Validate(); err != nil {
		return err
	}
	args, err := json.Marshal(nonNil(s.Args))
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	env, err := json.Marshal(nonNilMap(s.Env))
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	headers, err := json.Marshal(nonNilMap(s.Headers))
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	c, err := confinementColumns(s)
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	scopes, err := json.Marshal(nonNil(s.OAuthScopes))
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	res, err := st.db.ExecContext(ctx, `UPDATE servers SET transport = ?, command = ?, args = ?, env = ?, cwd = ?, url = ?, headers = ?, trusted = ?,
		confine = ?, allow_read = ?, allow_write = ?, allow_net = ?, unconfined_ok = ?, quarantined = ?,
		auth = ?, oauth_client_id = ?, oauth_scopes = ?, pack = ?, updated_at = ?
		WHERE name = ?`, s.Transport, s.Command, string(args), string(env), s.Cwd, s.URL, string(headers), s.Trusted,
		s.Confine, c.read, c.write, c.net, s.UnconfinedOK, s.Quarantined, s.Auth, s.OAuthClientID, string(scopes), s.Pack,
		time.Now().UTC().Format(time.RFC3339Nano), s.Name)
	if err != nil {
		return fmt.Errorf("update server %s: %w", s.Name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("server %s: %w", s.Name, ErrNotFound)
	}
	return nil
}

// Server returns the server called name, or an error wrapping [ErrNotFound].
func (st *Store) Server(ctx context.Context, name string) (Server, error) {
	row := st.db.QueryRowContext(ctx, `SELECT `+serverColumns+` FROM servers WHERE name = ?`, name)
	s, err := scanServer(row)
	if errors.Is(err, sql.ErrNoRows) {
		return Server{}, fmt.Errorf("server %s: %w", name, ErrNotFound)
	}
	if err != nil {
		return Server{}, fmt.Errorf("read server %s: %w", name, err)
	}
	return s, nil
}

// Servers returns every registered server, ordered by name.
func (st *Store) Servers(ctx context.Context) ([]Server, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT `+serverColumns+` FROM servers ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	defer rows.Close()
	var out []Server
	for rows.Next() {
		s, err := scanServer(rows)
		if err != nil {
			return nil, fmt.Errorf("list servers: %w", err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list servers: %w", err)
	}
	return out, nil
}

// RemoveServer deletes the server called name, or returns an error wrapping
// [ErrNotFound].
func (st *Store) RemoveServer(ctx context.Context, name string) error {
	res, err := st.db.ExecContext(ctx, `DELETE FROM servers WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("remove server %s: %w", name, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		return fmt.Errorf("server %s: %w", name, ErrNotFound)
	}
	return nil
}

const serverColumns = `name, transport, command, args, env, cwd, url, headers, trusted,
	confine, allow_read, allow_write, allow_net, unconfined_ok, quarantined, auth, oauth_client_id, oauth_scopes, pack, created_at, updated_at`

// confinement holds a server's confinement lists as the columns store them.
type confinement struct{ read, write, net string }

func confinementColumns(s Server) (confinement, error) {
	var c confinement
	for _, f := range []struct {
		dst *string
		v   []string
	}{{&c.read, s.AllowRead}, {&c.write, s.AllowWrite}, {&c.net, s.AllowNet}} {
		b, err := json.Marshal(nonNil(f.v))
		if err != nil {
			return c, err
		}
		*f.dst = string(b)
	}
	return c, nil
}

type scanner interface{ Scan(dest ...any) error }

func scanServer(row scanner) (Server, error) {
	var (
		s                Server
		args, env        string
		headers          string
		c                confinement
		scopes           string
		created, updated string
	)
	if err := row.Scan(&s.Name, &s.Transport, &s.Command, &args, &env, &s.Cwd, &s.URL, &headers, &s.Trusted,
		&s.Confine, &c.read, &c.write, &c.net, &s.UnconfinedOK, &s.Quarantined, &s.Auth, &s.OAuthClientID, &scopes, &s.Pack, &created, &updated); err != nil {
		return Server{}, err
	}
	for _, f := range []struct {
		name string
		src  string
		dst  *[]string
	}{{"allow_read", c.read, &s.AllowRead}, {"allow_write", c.write, &s.AllowWrite}, {"allow_net", c.net, &s.AllowNet}, {"oauth_scopes", scopes, &s.OAuthScopes}} {
		if err := json.Unmarshal([]byte(f.src), f.dst); err != nil {
			return Server{}, fmt.Errorf("server %s: %s: %w", s.Name, f.name, err)
		}
		if len(*f.dst) == 0 {
			*f.dst = nil
		}
	}
	if err := json.Unmarshal([]byte(args), &s.Args); err != nil {
		return Server{}, fmt.Errorf("server %s: args: %w", s.Name, err)
	}
	if err := json.Unmarshal([]byte(env), &s.Env); err != nil {
		return Server{}, fmt.Errorf("server %s: env: %w", s.Name, err)
	}
	if err := json.Unmarshal([]byte(headers), &s.Headers); err != nil {
		return Server{}, fmt.Errorf("server %s: headers: %w", s.Name, err)
	}
	if len(s.Headers) == 0 {
		s.Headers = nil // a stdio server has none
	}
	s.CreatedAt, _ = time.Parse(time.RFC3339Nano, created)
	s.UpdatedAt, _ = time.Parse(time.RFC3339Nano, updated)
	return s, nil
}

// EnvList returns s.Env as sorted KEY=VALUE strings, ready for [exec.Cmd].
func (s *Server) EnvList() []string {
	out := make([]string, 0, len(s.Env))
	for _, k := range slices.Sorted(maps.Keys(s.Env)) {
		out = append(out, k+"="+s.Env[k])
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// QuarantineCheck returns a function that reads whether server name still
// awaits the user's review, with its statement prepared once: a proxy asks
// at every call (a review made elsewhere applies at once), and reading the
// whole server with a statement parsed each time cost about 0.1 ms of CPU
// a call. The function fails with an error wrapping [ErrNotFound] once the
// server is removed.
func (st *Store) QuarantineCheck(ctx context.Context, name string) (func(context.Context) (bool, error), error) {
	q, err := st.db.PrepareContext(ctx, `SELECT quarantined FROM servers WHERE name = ?`)
	if err != nil {
		return nil, fmt.Errorf("read server %s: %w", name, err)
	}
	return func(ctx context.Context) (bool, error) {
		var quarantined bool
		err := q.QueryRowContext(ctx, name).Scan(&quarantined)
		if errors.Is(err, sql.ErrNoRows) {
			return false, fmt.Errorf("server %s: %w", name, ErrNotFound)
		}
		if err != nil {
			return false, fmt.Errorf("read server %s: %w", name, err)
		}
		return quarantined, nil
	}, nil
}
