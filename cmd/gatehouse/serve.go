package main

import (
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// DefaultServeAddr is where gatehouse serve listens by default: loopback
// only.
const defaultServeAddr = "127.0.0.1:7391"

// serveFlags are the flags of gatehouse serve.
type serveFlags struct {
	listen          string
	allowedHosts    listFlag
	allowedOrigins  listFlag
	tlsCert, tlsKey string
	plainHTTP       bool
	maxSessions     int
	maxMessageBytes int
	approvalWait    time.Duration
	callTimeout     time.Duration
	exports         streamFlags
}

var serveCmd = &command{
	name:    "serve",
	usage:   "[--listen HOST:PORT] [--tls-cert FILE --tls-key FILE] [--allowed-host NAME]... [--allowed-origin URL]...",
	summary: "serve the registered servers over MCP's streamable HTTP, each call through the gate",
	help: `
Serves every registered server NAME at /mcp/NAME over MCP's streamable HTTP
transport, for clients on other machines or that speak only HTTP:

  claude mcp add --transport http github http://127.0.0.1:7391/mcp/github \
    --header "Authorization: Bearer $TOKEN"

Each call goes through the same gate as with gatehouse proxy: policy,
approvals, a signed receipt before the call and a signed outcome after.
Each MCP session starts its own server, as a stdio client's proxy would.

Every request needs a client's token (Authorization: Bearer TOKEN), made
with 'gatehouse serve token add CLIENT': the client's rules apply and its
receipts name it. A token in the URL's query string is refused. Requests
whose Host is not this server's (DNS rebinding), or whose Origin is neither
their own host nor an --allowed-origin, get 403.

Bounds: a body over --max-message-bytes gets 413, one that trickles in for
more than 30 s gets 408, headers must arrive within 10 s, and at most
--max-sessions sessions are open at once (503 beyond, which says so). A
session idle for 30 minutes ends.

It listens on loopback unless --listen says otherwise; on any other
address it needs --tls-cert and --tls-key (or --plain-http, behind a proxy
that terminates TLS), and the names clients reach it by, --allowed-host.

GET /health answers {"status":"ok"} without a token; GET /metrics, with a
token, gives calls by decision and outcome, approval waits, decision and
receipt commit times, sessions, errors and the export lag in the Prometheus
text format.

--export-otlp and --export-syslog send every receipt and outcome of the
evidence log, as it grows, to an OpenTelemetry collector and a syslog
receiver (see gatehouse export-stream --help: the same, on its own).

Settings: with no --listen, it listens where the home's setting
serve.listen says; with neither --export-otlp nor --export-syslog, it
exports to the destinations of the settings export.otlp and export.syslog
(the app's Settings set them). A flag given wins over its setting.

Tokens: 'gatehouse serve token add CLIENT' prints a new token once and keeps
it in the OS keychain; 'token list' lists them (never the token);
'token revoke CLIENT' ends one at once.`,
	flags: flagged(declareServeFlags, runServe),
}

func declareServeFlags(fs *flag.FlagSet, f *serveFlags) {
	fs.StringVar(&f.listen, "listen", defaultServeAddr, "the `HOST:PORT` to listen on")
	fs.Var(&f.allowedHosts, "allowed-host", "a host `NAME` clients reach this server by, besides loopback (repeatable)")
	fs.Var(&f.allowedOrigins, "allowed-origin", "an `ORIGIN` (scheme://host[:port]) whose browser pages may call (repeatable)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "serve HTTPS with the certificate chain in `FILE` (PEM)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "the private key of --tls-cert, in `FILE` (PEM)")
	fs.BoolVar(&f.plainHTTP, "plain-http", false, "serve plain HTTP on a non-loopback address (only behind a proxy that terminates TLS)")
	fs.IntVar(&f.maxSessions, "max-sessions", httpfront.DefaultMaxSessions, "the most MCP sessions open at once (`n`); each runs its own server")
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", gateway.DefaultMaxMessageBytes, "refuse request bodies larger than `n` bytes")
	fs.DurationVar(&f.approvalWait, "approval-wait", gate.DefaultApprovalWait, "how long one call waits for a person's approval")
	fs.DurationVar(&f.callTimeout, "call-timeout", envDuration("GATEHOUSE_CALL_TIMEOUT", gateway.DefaultCallTimeout),
		"how long an allowed call waits for the server's answer before it ends with outcome UNKNOWN")
	declareExportFlags(fs, &f.exports)
}

func runServe(ctx context.Context, c *cli, fs *flag.FlagSet, f *serveFlags, args []string) error {
	if err := noArgs(fs, args); err != nil {
		return err
	}
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	c.approvalWait = f.approvalWait // the setting's, unless the flag was given
	c.applySettings(ctx, st, fs)
	applyServeSettings(ctx, st, fs, f)
	host, _, err := net.SplitHostPort(f.listen)
	if err != nil {
		return usagef("serve: --listen %q: %v", f.listen, err)
	}
	tlsOn := f.tlsCert != "" || f.tlsKey != ""
	if tlsOn && (f.tlsCert == "" || f.tlsKey == "") {
		return usagef("serve: --tls-cert and --tls-key go together")
	}
	loopback := isLoopback(host)
	if !loopback && !tlsOn && !f.plainHTTP {
		return withHint(fmt.Errorf("serve: %s is not a loopback address, and tokens would cross the network in clear", f.listen),
			"give --tls-cert FILE --tls-key FILE, or --plain-http behind a proxy that terminates TLS")
	}
	log, closeLog := c.logger(st.LogPath(), "serve")
	defer closeLog()
	v := vaultFor(st)
	tokens, err := httpfront.OpenTokens(ctx, st, v)
	if err != nil {
		return err
	}
	metrics := httpfront.NewMetrics()
	sv := &server{c: c, st: st, log: log, metrics: metrics, flags: f}
	sv.openLog(ctx)
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if !loopback && host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	hosts = append(hosts, f.allowedHosts...)
	front := httpfront.New(sv.open, tokens, &httpfront.Options{
		Logger:          log,
		MaxMessageBytes: f.maxMessageBytes,
		MaxSessions:     f.maxSessions,
		AllowedHosts:    hosts,
		AllowedOrigins:  f.allowedOrigins,
		Metrics:         metrics,
	})
	defer front.Close()
	srv := front.HTTPServer()
	if tlsOn {
		cert, err := tls.LoadX509KeyPair(f.tlsCert, f.tlsKey)
		if err != nil {
			return fmt.Errorf("serve: load the TLS certificate: %w", err)
		}
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	scheme := "http"
	if tlsOn {
		scheme = "https"
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	waitExports, err := startExports(ctx, c, st, &f.exports, metrics, log)
	if err != nil {
		ln.Close()
		return err
	}
	defer func() { cancel(); waitExports() }()
	fmt.Fprintf(c.stderr, "gatehouse serve: serving %s://%s/mcp/NAME for the registered servers\n", scheme, ln.Addr())
	if live, err := tokens.List(ctx); err == nil && !anyLive(live) {
		fmt.Fprintf(c.stderr, "hint: no client has a token yet: gatehouse serve token add CLIENT\n")
	}
	done := make(chan error, 1)
	go func() {
		if tlsOn {
			done <- srv.ServeTLS(ln, "", "")
		} else {
			done <- srv.Serve(ln)
		}
	}()
	select {
	case err := <-done:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		front.Close()
		srv.Shutdown(sctx)
		return nil
	}
}

// applyServeSettings takes the listening address and the export
// destinations from the home's settings wherever no flag names them.
// Settings that cannot be read leave the defaults.
func applyServeSettings(ctx context.Context, st *store.Store, fs *flag.FlagSet, f *serveFlags) {
	set, err := st.Settings(ctx)
	if err != nil {
		return
	}
	if !flagGiven(fs, "listen") && set.ServeListen != "" {
		f.listen = set.ServeListen
	}
	exportSettings(set, fs, &f.exports)
}

func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

func anyLive(ts []httpfront.TokenInfo) bool {
	for _, t := range ts {
		if t.Revoked.IsZero() {
			return true
		}
	}
	return false
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// server opens the sessions of gatehouse serve: each one's relay, with a
// gate of its own (approvals for the session stay in the session) over
// the one evidence log.
type server struct {
	c       *cli
	st      *store.Store
	log     *slog.Logger
	metrics *httpfront.Metrics
	flags   *serveFlags
	elog    *receipts.Log // nil when it could not be opened
	elogErr error
}

// openLog opens the evidence log once, for every session's gate. When it
// cannot be opened every call is refused with the reason, and the
// server still answers everything else.
func (s *server) openLog(ctx context.Context) {
	key, err := vaultFor(s.st).SigningKey()
	if err != nil {
		s.elogErr = fmt.Errorf("the evidence log's signing key is unavailable: %w", err)
		s.log.Error("the gate is closed: every tool call will be refused", slog.Any("err", s.elogErr))
		return
	}
	l, err := receipts.Open(ctx, s.st, key)
	if errors.Is(err, receipts.ErrForeignKey) {
		err = fmt.Errorf("%w (%s)", err, foreignKeyHint)
	}
	if err != nil {
		s.elogErr = err
		s.log.Error("the gate is closed: every tool call will be refused", slog.Any("err", err))
		return
	}
	l.FollowKeys(vaultFor(s.st).SigningKey)
	startWitnessing(ctx, s.st, l, s.log)
	s.elog = l
}

func (s *server) open(ctx context.Context, name, client string) (httpfront.Relay, error) {
	srv, err := s.st.Server(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", httpfront.ErrUnknownServer, name)
	}
	if err != nil {
		return nil, err
	}
	log := s.log.With(slog.String("client", client))
	var (
		cmd     gateway.Command
		remote  gateway.Remote
		secrets map[string]string
	)
	if srv.Remote() {
		remote, secrets, err = downstream.Remote(srv, vaultFor(s.st))
	} else {
		cmd, secrets, err = downstream.Command(srv, vaultFor(s.st))
	}
	if err != nil {
		// The relay refuses every request with the reason, as a stdio
		// proxy does.
		log.Error("server not started", slog.String("server", name), slog.Any("err", err))
		return refusing{fmt.Errorf("%w (the server's credentials live in the OS keychain; store them with: gatehouse secret set ID)", err)}, nil
	}
	var gov gateway.Governor = closedGate{s.elogErr}
	if s.elog != nil {
		g, err := s.gate(ctx, srv, client, log)
		if err != nil {
			log.Error("the gate is closed for this session: every tool call will be refused", slog.Any("err", err))
			gov = closedGate{err}
		} else {
			gov = g
		}
	}
	opts := &gateway.Options{
		Logger:          log,
		Stderr:          s.c.stderr,
		MaxMessageBytes: s.flags.maxMessageBytes,
		Secrets:         secrets,
		CallTimeout:     s.flags.callTimeout,
		Governor:        s.metrics.Govern(gov, name, client),
	}
	if srv.Remote() {
		return gateway.NewRemote(name, remote, opts), nil
	}
	return gateway.New(name, cmd, opts), nil
}

func (s *server) gate(ctx context.Context, srv store.Server, client string, log *slog.Logger) (*gate.Gate, error) {
	policies, err := policy.Open(ctx, s.st, &policy.Options{Recorder: policyRecorder(s.elog)})
	if err != nil {
		return nil, err
	}
	socket := approval.SocketPath(s.st.Dir())
	return gate.New(ctx, gate.Config{
		Server:     srv.Name,
		Client:     client,
		Trusted:    srv.Trusted,
		LocalFiles: srv.Transport == store.TransportStdio,
		Home:       s.st.Dir(),
		Log:        s.elog,
		Policies:   policies,
		Pins:       s.st,
		Ask: func(ctx context.Context, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error) {
			start := time.Now()
			d, err := approval.Ask(ctx, socket, req, wait, progress)
			answer := "error"
			if err == nil {
				answer = string(d.Scope)
			}
			s.metrics.Waited(ctx, time.Since(start), answer)
			return d, err
		},
		Secrets:      vaultFor(s.st),
		ApprovalWait: s.c.approvalWait,
		Logger:       log,
	})
}

// refusing is a relay for a session whose server cannot start: it answers
// every request with why.
type refusing struct{ err error }

func (r refusing) Serve(ctx context.Context, in io.Reader, out io.Writer) error {
	gateway.Refuse(ctx, in, out, r.err)
	return nil
}

// serveTokenAddFlags are the flags of gatehouse serve token add.
type serveTokenAddFlags struct {
	servers listFlag
}

var serveTokenAddCmd = &command{
	name:    "serve token add",
	usage:   "CLIENT [--server NAME]...",
	summary: "make a client's token for gatehouse serve, shown once",
	help: `
Prints a new token for CLIENT on stdout, once, and keeps it in the OS
keychain; the database keeps only its hash. The client sends it as
Authorization: Bearer TOKEN. Its receipts name CLIENT, and the policy's
rules for CLIENT apply to its calls. A client has one live token: revoke it
to make another.

With --server, the token reaches only the named servers' endpoints
(/mcp/NAME); elsewhere, and at /metrics, it gets 403. Without, it reaches
every registered server, those added later too.`,
	flags: flagged(func(fs *flag.FlagSet, f *serveTokenAddFlags) {
		fs.Var(&f.servers, "server", "the token reaches only the registered server `NAME` (repeatable); without, every server")
	}, runServeTokenAdd),
}

func runServeTokenAdd(ctx context.Context, c *cli, fs *flag.FlagSet, f *serveTokenAddFlags, args []string) error {
	client, err := oneClient(fs, args)
	if err != nil {
		return err
	}
	st, tokens, err := c.openTokens(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, name := range f.servers {
		if _, err := st.Server(ctx, name); errors.Is(err, store.ErrNotFound) {
			return withHint(usagef("serve token add: --server %q is not a registered server", name), "see them with: gatehouse server list")
		} else if err != nil {
			return err
		}
	}
	token, err := tokens.Add(ctx, client, f.servers...)
	if errors.Is(err, httpfront.ErrTokenExists) {
		return withHint(err, "end it first: gatehouse serve token revoke %s", client)
	}
	if errors.Is(err, vault.ErrUnavailable) {
		return withHint(err, "tokens are kept in the OS keychain; make it reachable and retry")
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(c.stdout, token)
	reach := "every server"
	if len(f.servers) > 0 {
		reach = "only " + strings.Join(f.servers, ", ")
	}
	fmt.Fprintf(c.stderr, "gatehouse serve: token for %s made, reaching %s; it is shown only this once (the keychain keeps it)\n", client, reach)
	return nil
}

var serveTokenListCmd = &command{
	name:    "serve token list",
	aliases: []string{"ls"},
	summary: "list the clients' tokens for gatehouse serve (never the tokens)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, tokens, err := c.openTokens(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		list, err := tokens.List(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "CLIENT\tTOKEN\tSERVERS\tCREATED\tSTATE")
		for _, t := range list {
			state := "live"
			if !t.Revoked.IsZero() {
				state = "revoked " + t.Revoked.Format(time.DateTime)
			}
			fmt.Fprintf(tw, "%s\t%s…\t%s\t%s\t%s\n", t.Client, t.Hint, httpfront.Reach(t.Servers), t.Created.Format(time.DateTime), state)
		}
		return tw.Flush()
	},
}

var serveTokenRevokeCmd = &command{
	name:    "serve token revoke",
	usage:   "CLIENT",
	summary: "end a client's token for gatehouse serve at once",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		client, err := oneClient(fs, args)
		if err != nil {
			return err
		}
		st, tokens, err := c.openTokens(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := tokens.Revoke(ctx, client); err != nil {
			if errors.Is(err, httpfront.ErrNoToken) {
				return withHint(err, "see the tokens with: gatehouse serve token list")
			}
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse serve: the token of %s is revoked; its next request gets 401\n", client)
		return nil
	},
}

func oneClient(fs *flag.FlagSet, args []string) (string, error) {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return "", err
	}
	if len(pos) != 1 {
		return "", usagef("want exactly one CLIENT")
	}
	if err := vault.ValidateSecretID(pos[0]); err != nil {
		return "", usagef("CLIENT %q: use 1-128 letters, digits, '.', '-' or '_'", pos[0])
	}
	return pos[0], nil
}

func (c *cli) openTokens(ctx context.Context) (*store.Store, *httpfront.Tokens, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	t, err := httpfront.OpenTokens(ctx, st, vaultFor(st))
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, t, nil
}
