package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// proxyFlags are the flags of gatehouse proxy.
type proxyFlags struct {
	maxMessageBytes int
	passThrough     bool
	approvalWait    time.Duration
	callTimeout     time.Duration
	client          string
}

var proxyCmd = &command{
	name:    "proxy",
	usage:   "[--client ID] NAME",
	summary: "run server NAME behind the gate, speaking MCP on stdin and stdout",
	help: `
This is what MCP clients launch in place of the server itself: a client
config entry {"command": "/path/to/gatehouse", "args": ["proxy", "NAME"]}
reaches server NAME through Gatehouse. Stdout carries MCP messages only;
the proxy's log goes to stderr and to logs/gatehouse.log in the home folder.

MCP clients pass their servers only a few environment variables (HOME, PATH,
USER, ...): to use a home folder other than the default, put --home DIR in
the entry's args.

--client names the client whose config launches the proxy (claude-desktop,
cursor, ...): rules for a client match it, and receipts record it. Without
it, the name the client gives itself when it connects is used.

--call-timeout bounds how long an allowed call waits for the server: past
it the model is told the server did not answer, the server is sent a
cancellation, and the call's outcome is UNKNOWN.`,
	flags: flagged(declareProxyFlags, runProxy),
}

func declareProxyFlags(fs *flag.FlagSet, f *proxyFlags) {
	fs.IntVar(&f.maxMessageBytes, "max-message-bytes", gateway.DefaultMaxMessageBytes, "refuse JSON-RPC messages larger than `n` bytes")
	fs.BoolVar(&f.passThrough, "pass-through", false, "relay tools/call without deciding or recording them (for measuring the relay alone; never in a client's config)")
	fs.DurationVar(&f.approvalWait, "approval-wait", gate.DefaultApprovalWait, "how long one call waits for a person's approval before it is answered as pending")
	fs.DurationVar(&f.callTimeout, "call-timeout", envDuration("GATEHOUSE_CALL_TIMEOUT", gateway.DefaultCallTimeout),
		"how long an allowed call waits for the server's answer before it ends with outcome UNKNOWN (default from $GATEHOUSE_CALL_TIMEOUT)")
	fs.StringVar(&f.client, "client", "", "the `ID` of the client whose config launches this proxy (e.g. claude-desktop)")
}

// envDuration reads a duration from the environment variable name, or
// returns def when it is unset or not a positive duration.
func envDuration(name string, def time.Duration) time.Duration {
	if d, err := time.ParseDuration(os.Getenv(name)); err == nil && d > 0 {
		return d
	}
	return def
}

func runProxy(ctx context.Context, c *cli, fs *flag.FlagSet, f *proxyFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("proxy: want exactly one server NAME")
	}
	name := pos[0]
	if stop := cpuProfile(); stop != nil {
		defer stop()
	}
	c.approvalWait = f.approvalWait
	c.client = f.client

	// From here on, stdout carries protocol only. Anything else that writes
	// to the process's stdout (a stray print, a library) lands on stderr.
	out, err := c.protocolOut()
	if err != nil {
		return err
	}

	st, err := c.openStore(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "gatehouse proxy: %v\n", err)
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf("cannot open the home folder: %w", err))
		return &exitError{1}
	}
	c.applySettings(ctx, st, fs)
	log, closeLog := c.logger(st.LogPath(), "proxy")
	defer closeLog()
	defer st.Close()
	srv, err := lookupServer(ctx, st, name)
	if err != nil {
		log.Error("unknown server", slog.String("server", name), slog.Any("err", err))
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf(
			"no server named %q; register it with: gatehouse server add %s -- COMMAND [ARGS...]", name, name))
		return &exitError{1}
	}
	// Secrets in the server's environment (or a remote server's headers)
	// come from the keychain now, when the server starts, and nowhere else.
	var (
		cmd     gateway.Command
		remote  gateway.Remote
		secrets map[string]string
	)
	if srv.Remote() {
		remote, secrets, err = downstream.Remote(srv, vaultFor(st))
		if err == nil {
			err = expandClient(srv, nil, &remote, &secrets)
			srv.URL = remote.URL // the resource signed in to
		}
		if srv.Auth == store.AuthOAuth {
			// Never a browser from here: a sign-in that is needed is
			// answered in band, with what to run.
			remote.Tokens = downstream.SignIn(srv, vaultFor(st), st.Dir(), log)
		}
	} else {
		cmd, secrets, err = downstream.Command(srv, vaultFor(st))
		if err == nil {
			err = expandClient(srv, &cmd, nil, &secrets)
		}
	}
	if err != nil {
		log.Error("server not started", slog.Any("err", err))
		hint := "store it with: gatehouse secret set ID"
		if errors.Is(err, vault.ErrUnavailable) {
			hint = "the server's credentials live in the OS keychain, which this proxy cannot reach"
		}
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf("%w (%s)", err, hint))
		return &exitError{1}
	}
	if !srv.Remote() {
		var prep *confine.Prepared
		cmd, prep, c.confinement, err = confineServer(srv, cmd, st.Dir(), "gatehouse proxy", c.stderr)
		if err != nil {
			log.Error("server not started", slog.Any("err", err))
			hint := confineHint(name, err)
			fmt.Fprintf(c.stderr, "gatehouse proxy: %v\nhint: %s\n", err, hint)
			gateway.Refuse(ctx, c.stdin, out, fmt.Errorf("%w (%s)", err, hint))
			return &exitError{1}
		}
		defer prep.Cleanup()
	}
	max := f.maxMessageBytes
	opts := &gateway.Options{
		Logger:          log,
		Stderr:          c.stderr,
		MaxMessageBytes: max,
		Secrets:         secrets,
		CallTimeout:     f.callTimeout,
	}
	if !f.passThrough {
		g := c.lazyGovernor(ctx, st, srv, log)
		defer g.close()
		opts.Governor = g
	}
	p := gateway.New(name, cmd, opts)
	if srv.Remote() {
		p = gateway.NewRemote(name, remote, opts)
	}
	if err := p.Serve(ctx, c.stdin, out); err != nil {
		if !errors.Is(err, gateway.ErrServerExited) {
			fmt.Fprintf(c.stderr, "gatehouse proxy: %v\n", err)
		}
		return &exitError{1}
	}
	return nil
}

// expandClient fills in the values the MCP client that launched the proxy
// expanded (downstream.ExpandClient); the headers' values are redacted as
// secrets are.
func expandClient(srv store.Server, cmd *gateway.Command, remote *gateway.Remote, secrets *map[string]string) error {
	values, err := downstream.ExpandClient(srv, cmd, remote, os.LookupEnv)
	for i, v := range values {
		if *secrets == nil {
			*secrets = map[string]string{}
		}
		(*secrets)[fmt.Sprintf("%s.expanded%d", srv.Name, i+1)] = v
	}
	return err
}

// cpuProfile starts a CPU profile of this process when
// $GATEHOUSE_CPUPROFILE names a file (the process id is added to the name,
// as a client may start many proxies), and a profile of where its
// goroutines wait (channels, locks) in FILE.block.PID when
// $GATEHOUSE_BLOCKPROFILE names one; it returns the function that ends
// them, nil when there is none. For measuring (docs/performance.md).
func cpuProfile() (stop func()) {
	var stops []func()
	if path := os.Getenv("GATEHOUSE_CPUPROFILE"); path != "" {
		if f, err := os.Create(fmt.Sprintf("%s.%d", path, os.Getpid())); err == nil {
			if err := pprof.StartCPUProfile(f); err != nil {
				f.Close()
			} else {
				stops = append(stops, func() {
					pprof.StopCPUProfile()
					f.Close()
				})
			}
		}
	}
	if path := os.Getenv("GATEHOUSE_BLOCKPROFILE"); path != "" {
		runtime.SetBlockProfileRate(1)
		stops = append(stops, func() {
			if f, err := os.Create(fmt.Sprintf("%s.block.%d", path, os.Getpid())); err == nil {
				pprof.Lookup("block").WriteTo(f, 0)
				f.Close()
			}
		})
	}
	if len(stops) == 0 {
		return nil
	}
	return func() {
		for _, s := range stops {
			s()
		}
	}
}

// applySettings takes the home's settings (the tray app's Settings view):
// how long a call waits for an approval, and the log level, wherever
// neither a flag nor $GATEHOUSE_LOG_LEVEL says otherwise. Settings that
// cannot be read leave the defaults: a proxy starts without them.
func (c *cli) applySettings(ctx context.Context, st *store.Store, fs *flag.FlagSet) {
	set, err := st.Settings(ctx)
	if err != nil {
		return
	}
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	if !given["approval-wait"] && set.ApprovalWait > 0 {
		c.approvalWait = set.ApprovalWait
	}
	if !given["log-level"] && os.Getenv("GATEHOUSE_LOG_LEVEL") == "" && set.LogLevel != nil {
		c.logLevel = *set.LogLevel
	}
}

// lazyGovernor returns the gate for server srv, which it sets up in the
// background: reading the signing key from the keychain, opening the
// evidence log and the policy take longer than the server's own start, and
// the client's initialize need not wait for them. The first call waits.
// When the gate cannot be set up (the keychain that holds the signing key
// is unreachable, the database is damaged), every tools/call is refused
// with the reason: no call runs that the gate could not decide on and
// record.
func (c *cli) lazyGovernor(ctx context.Context, st *store.Store, srv store.Server, log *slog.Logger) *lazyGate {
	lg := &lazyGate{ready: make(chan struct{}), stop: func() {}}
	go func() {
		defer close(lg.ready)
		g, stop, err := c.newGate(ctx, st, srv, log, nil)
		if err != nil {
			log.Error("the gate is closed: every tool call will be refused", slog.Any("err", err))
			lg.g = closedGate{err}
			return
		}
		lg.g, lg.stop = g, stop
	}()
	return lg
}

// lazyGate is a gate being set up: its methods wait until it is.
type lazyGate struct {
	ready chan struct{}    // closed once g is set
	g     gateway.Governor // the gate, or a closedGate
	stop  func()           // ends the gate's shared commits
}

var (
	_ gateway.Governor    = (*lazyGate)(nil)
	_ gateway.ToolWatcher = (*lazyGate)(nil)
)

func (lg *lazyGate) gate(ctx context.Context) (gateway.Governor, error) {
	select {
	case <-lg.ready:
		return lg.g, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (lg *lazyGate) Authorize(ctx context.Context, call *gateway.Call, progress func(string)) (*gateway.Authorization, error) {
	g, err := lg.gate(ctx)
	if err != nil {
		return nil, fmt.Errorf("the gate was not ready: %w", err)
	}
	return g.Authorize(ctx, call, progress)
}

func (lg *lazyGate) Complete(ctx context.Context, call *gateway.Call, a *gateway.Authorization, o *gateway.Outcome) {
	if g, err := lg.gate(ctx); err == nil {
		g.Complete(ctx, call, a, o)
	}
}

func (lg *lazyGate) ToolsListed(ctx context.Context, tools []*gateway.Tool) {
	if g, err := lg.gate(ctx); err == nil {
		if w, ok := g.(gateway.ToolWatcher); ok {
			w.ToolsListed(ctx, tools)
		}
	}
}

// close ends the gate's part in the home's shared commits, once it is set
// up: a writer answers the drafts it has and hands over.
func (lg *lazyGate) close() {
	<-lg.ready
	lg.stop()
}

// newGate builds the gate for server srv; adjust, when not nil, changes its
// configuration before it is made (the programs server's client, program
// steps and plan approvals).
func (c *cli) newGate(ctx context.Context, st *store.Store, srv store.Server, log *slog.Logger, adjust func(*gate.Config)) (*gate.Gate, func(), error) {
	key, err := vaultFor(st).SigningKey()
	if err != nil {
		return nil, nil, fmt.Errorf("the evidence log's signing key is unavailable: %w", err)
	}
	l, err := receipts.Open(ctx, st, key)
	if errors.Is(err, receipts.ErrForeignKey) {
		return nil, nil, fmt.Errorf("%w (%s)", err, foreignKeyHint)
	}
	if err != nil {
		return nil, nil, err
	}
	// A rotation made elsewhere (the app, gatehouse keys rotate) retires
	// the key this proxy holds: it signs on with the new one, from the
	// keychain.
	l.FollowKeys(vaultFor(st).SigningKey)
	// Witnesses cosign the log's checkpoints in the background: a call
	// never waits for one.
	startWitnessing(ctx, st, l, log)
	policies, err := policy.Open(ctx, st, &policy.Options{Recorder: policyRecorder(l)})
	if err != nil {
		return nil, nil, err
	}
	quarantined, err := st.QuarantineCheck(ctx, srv.Name)
	if err != nil {
		return nil, nil, err
	}
	// The home's proxies commit their receipts together.
	stop := l.ShareCommits()
	socket := approval.SocketPath(st.Dir())
	cfg := gate.Config{
		Server:      srv.Name,
		Client:      c.client,
		Trusted:     srv.Trusted,
		Pack:        policy.PackByRef(srv.Pack),
		Confinement: c.confinement,
		Quarantined: quarantined,
		LocalFiles:  srv.Transport == store.TransportStdio,
		Home:        st.Dir(),
		Log:         l,
		Policies:    policies,
		Pins:        st,
		Ask: func(ctx context.Context, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error) {
			return approval.Ask(ctx, socket, req, wait, progress)
		},
		Secrets:      vaultFor(st),
		ApprovalWait: c.approvalWait,
		Logger:       log,
	}
	if adjust != nil {
		adjust(&cfg)
	}
	g, err := gate.New(ctx, cfg)
	if err != nil {
		stop()
		return nil, nil, err
	}
	return g, stop, nil
}

// closedGate refuses every call, saying why.
type closedGate struct{ err error }

func (g closedGate) Authorize(context.Context, *gateway.Call, func(string)) (*gateway.Authorization, error) {
	return nil, g.err
}

func (closedGate) Complete(context.Context, *gateway.Call, *gateway.Authorization, *gateway.Outcome) {
}

// protocolOut returns the writer for protocol messages. When stdout is the
// process's real stdout, the file descriptor is moved aside and fd 1 is
// pointed at stderr, so that nothing but protocol can ever reach the client.
func (c *cli) protocolOut() (io.Writer, error) {
	if c.stdout != os.Stdout {
		return c.stdout, nil
	}
	f, err := isolateStdout()
	if err != nil {
		return nil, fmt.Errorf("isolate stdout: %w", err)
	}
	c.stdout = f
	return f, nil
}
