package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/vault"
)

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
text format (a token made for some servers only gets 403 there).

--export-otlp and --export-syslog send every receipt and outcome of the
evidence log, as it grows, to an OpenTelemetry collector and a syslog
receiver (see gatehouse export-stream --help: the same, on its own).

Settings: the home's settings, which the app's Settings write, give what
no flag says: serve.listen (--listen), serve.tls_cert and serve.tls_key
(--tls-cert, --tls-key), and export.otlp, export.syslog and
export.otlp_headers, unless export.enabled is off (any export flag replaces
them all). A flag given wins over its setting. The tray app serves the
same way, in its own process, when its Settings turn serving on.

Tokens: 'gatehouse serve token add CLIENT' prints a new token once and keeps
it in the OS keychain; with --server NAME it reaches only those servers
(403 elsewhere). 'token list' lists them (never the token) with the servers
each reaches ("all" for a token made without --server); 'token revoke
CLIENT' ends one at once.`,
	flags: flagged(declareServeFlags, runServe),
}

func declareServeFlags(fs *flag.FlagSet, f *serveFlags) {
	fs.StringVar(&f.listen, "listen", httpfront.DefaultListen, "the `HOST:PORT` to listen on")
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
	cfg, err := serveConfig(ctx, st, fs, f)
	if err != nil {
		return err
	}
	cfg.ApprovalWait = c.approvalWait
	if err := cfg.Check(); err != nil {
		if errors.Is(err, httpfront.ErrPlainNetwork) {
			return withHint(fmt.Errorf("serve: %w", err), "give --tls-cert FILE --tls-key FILE, or --plain-http behind a proxy that terminates TLS")
		}
		return usagef("serve: %v", err)
	}
	log, closeLog := c.logger(st.LogPath(), "serve")
	defer closeLog()
	svc, err := httpfront.Start(ctx, st, vaultFor(st), cfg, &httpfront.ServiceOptions{
		Logger:    log,
		Stderr:    c.stderr,
		Version:   version,
		OpenedLog: func(ctx context.Context, l *receipts.Log) { startWitnessing(ctx, st, l, log) },
		Exporting: func(sink string) { fmt.Fprintf(c.stderr, "gatehouse: exporting receipts and outcomes to %s\n", sink) },
	})
	if err != nil {
		return fmt.Errorf("serve: %w", err)
	}
	fmt.Fprintf(c.stderr, "gatehouse serve: serving %s/mcp/NAME for the registered servers\n", svc.URL())
	if live, err := svc.Tokens().List(ctx); err == nil && !anyLive(live) {
		fmt.Fprintf(c.stderr, "hint: no client has a token yet: gatehouse serve token add CLIENT\n")
	}
	select {
	case <-svc.Done():
		return fmt.Errorf("serve: %w", svc.Err())
	case <-ctx.Done():
		svc.Stop()
		return nil
	}
}

// serveConfig is the home's settings (the address, the TLS files, the
// export destinations) with the flags given over them.
func serveConfig(ctx context.Context, st *store.Store, fs *flag.FlagSet, f *serveFlags) (httpfront.Config, error) {
	set, err := st.Settings(ctx)
	if err != nil {
		set = store.Settings{} // unreadable settings leave the defaults
	}
	cfg := httpfront.ConfigFromSettings(set)
	if flagGiven(fs, "listen") || cfg.Listen == "" {
		cfg.Listen = f.listen
	}
	if flagGiven(fs, "tls-cert") || flagGiven(fs, "tls-key") {
		cfg.TLSCert, cfg.TLSKey = f.tlsCert, f.tlsKey
	}
	if cfg.TLS() && (cfg.TLSCert == "" || cfg.TLSKey == "") {
		return cfg, usagef("serve: --tls-cert and --tls-key go together")
	}
	cfg.PlainHTTP = f.plainHTTP
	cfg.AllowedHosts = f.allowedHosts
	cfg.AllowedOrigins = f.allowedOrigins
	cfg.MaxSessions = f.maxSessions
	cfg.MaxMessageBytes = f.maxMessageBytes
	cfg.CallTimeout = f.callTimeout
	cfg.Exports, err = exportDestinations(set, fs, &f.exports)
	return cfg, err
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
