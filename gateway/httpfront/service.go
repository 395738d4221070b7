package httpfront

import (
	"context"
	"crypto/ed25519"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	evidence "github.com/gatehouse-dev/gatehouse/receipts/stream"
)

// DefaultListen is where a [Service] listens when its Config names no
// address: loopback only.
const DefaultListen = "127.0.0.1:7391"

// A Config says how a [Service] serves: the home's settings
// ([ConfigFromSettings]), which gatehouse serve's flags override.
type Config struct {
	Listen          string // HOST:PORT; empty means DefaultListen
	TLSCert, TLSKey string // PEM files; both empty means plain HTTP
	// PlainHTTP allows plain HTTP on a non-loopback address, behind a
	// proxy that terminates TLS.
	PlainHTTP bool
	// AllowedHosts are the Host names accepted besides loopback's and the
	// listening address's own.
	AllowedHosts    []string
	AllowedOrigins  []string
	MaxSessions     int           // zero means DefaultMaxSessions
	MaxMessageBytes int           // zero means gateway.DefaultMaxMessageBytes
	ApprovalWait    time.Duration // zero means the gate's default
	CallTimeout     time.Duration // zero means gateway.DefaultCallTimeout
	// Exports are where the evidence goes while the service runs.
	Exports evidence.Destinations
}

// ConfigFromSettings is the Config of the home's settings: the address,
// the TLS files, the approval wait and, unless export is off, the export
// destinations.
func ConfigFromSettings(s store.Settings) Config {
	c := Config{Listen: s.ServeListen, TLSCert: s.ServeTLSCert, TLSKey: s.ServeTLSKey, ApprovalWait: s.ApprovalWait}
	if !s.ExportOff {
		c.Exports = evidence.Destinations{OTLP: s.ExportOTLP, Syslog: s.ExportSyslog, OTLPHeaders: s.ExportOTLPHeaders}
	}
	return c
}

// ErrPlainNetwork is returned by [Config.Check] for a non-loopback address
// without TLS or PlainHTTP: tokens would cross the network in clear.
var ErrPlainNetwork = errors.New("not a loopback address, and tokens would cross the network in clear")

// TLS reports whether c serves HTTPS.
func (c Config) TLS() bool { return c.TLSCert != "" || c.TLSKey != "" }

func (c Config) listen() string {
	if c.Listen == "" {
		return DefaultListen
	}
	return c.Listen
}

// Check says what is wrong with c before anything listens: an address that
// is not HOST:PORT, half a TLS pair, a certificate or key that cannot be
// read or do not match, an OTLP header that is not a keychain reference,
// or a non-loopback address without TLS ([ErrPlainNetwork]).
func (c Config) Check() error {
	host, _, err := net.SplitHostPort(c.listen())
	if err != nil {
		return fmt.Errorf("the address %q is not HOST:PORT", c.listen())
	}
	if c.TLS() {
		if c.TLSCert == "" || c.TLSKey == "" {
			return errors.New("the TLS certificate and its key go together")
		}
		if _, err := c.certificate(); err != nil {
			return err
		}
	}
	for name, ref := range c.Exports.OTLPHeaders {
		if err := evidence.CheckHeader(name, ref); err != nil {
			return err
		}
	}
	if !IsLoopback(host) && !c.TLS() && !c.PlainHTTP {
		return fmt.Errorf("%s is %w", c.listen(), ErrPlainNetwork)
	}
	return nil
}

func (c Config) certificate() (tls.Certificate, error) {
	cert, err := tls.LoadX509KeyPair(c.TLSCert, c.TLSKey)
	if err != nil {
		return cert, fmt.Errorf("the TLS certificate %s or its key %s cannot be used: %w", c.TLSCert, c.TLSKey, err)
	}
	return cert, nil
}

// IsLoopback reports whether host names the loopback interface only.
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// A Keychain holds what a [Service] needs of the OS keychain
// (*vault.Vault is one): the evidence log's signing key, the servers'
// credentials and the OTLP headers' secrets, and the clients' tokens.
type Keychain interface {
	SigningKey() (ed25519.PrivateKey, error)
	Secret(id string) (string, error)
	Keeper
}

// ServiceOptions configure a [Service]. Nil options mean the defaults.
type ServiceOptions struct {
	Logger *slog.Logger
	// Stderr takes the servers' stderr; nil discards it.
	Stderr io.Writer
	// Version is the service.version of exported records.
	Version string
	// OpenedLog, when set, is called with the evidence log once it is open
	// (gatehouse serve submits its checkpoints to witnesses there).
	OpenedLog func(ctx context.Context, l *receipts.Log)
	// Exporting, when set, is told of each export destination as it
	// starts.
	Exporting func(sink string)
}

// A Service serves the home's registered servers over MCP's streamable
// HTTP, each call through the gate, and streams the evidence to the
// configured destinations, until [Service.Stop]. gatehouse serve runs one;
// so does the tray app, when its Settings turn serving on.
type Service struct {
	cfg     Config
	url     string
	front   *Front
	srv     *http.Server
	metrics *Metrics
	tokens  *Tokens
	cancel  context.CancelFunc
	done    chan struct{} // closed once serving and exports have stopped
	err     error         // why serving stopped by itself; set before done closes
	stop    sync.Once
}

// Start checks cfg ([Config.Check]; [ErrPlainNetwork] unless
// cfg.PlainHTTP), listens, and serves in the background. It returns an
// error, and serves nothing, when the address is in use, the certificate
// cannot be read, or an export destination cannot be set up. A gate that
// cannot open (a locked keychain) does not stop it: every call is then
// refused with the reason, as a stdio proxy does.
func Start(ctx context.Context, st *store.Store, kc Keychain, cfg Config, opts *ServiceOptions) (*Service, error) {
	if opts == nil {
		opts = &ServiceOptions{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := cfg.Check(); err != nil {
		return nil, err
	}
	addr := cfg.listen()
	host, _, _ := net.SplitHostPort(addr)
	tokens, err := OpenTokens(ctx, st, kc)
	if err != nil {
		return nil, err
	}
	var cert tls.Certificate
	if cfg.TLS() {
		if cert, err = cfg.certificate(); err != nil {
			return nil, err
		}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	sinks, err := cfg.Exports.Sinks(ctx, kc, opts.Version)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("export: %w", err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		cancel()
		for _, s := range sinks {
			s.Close()
		}
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	metrics := NewMetrics()
	g := &gates{st: st, kc: kc, log: log, metrics: metrics, cfg: cfg, stderr: opts.Stderr}
	g.openLog(ctx, opts.OpenedLog)
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if !IsLoopback(host) && host != "" && host != "0.0.0.0" && host != "::" {
		hosts = append(hosts, host)
	}
	front := New(g.open, tokens, &Options{
		Logger:          log,
		MaxMessageBytes: cfg.MaxMessageBytes,
		MaxSessions:     cfg.MaxSessions,
		AllowedHosts:    append(hosts, cfg.AllowedHosts...),
		AllowedOrigins:  cfg.AllowedOrigins,
		Metrics:         metrics,
	})
	srv := front.HTTPServer()
	scheme := "http"
	if cfg.TLS() {
		scheme = "https"
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	for _, s := range sinks {
		if opts.Exporting != nil {
			opts.Exporting(s.Name())
		}
	}
	waitExports, err := evidence.Start(ctx, st, sinks, &evidence.Options{
		Logger: log.WithGroup("export"),
		Delivered: func(sink string, n int, err error, lag int64) {
			metrics.Set("gatehouse_export_lag_entries", float64(lag), "sink", sink)
			if err != nil {
				metrics.Add("gatehouse_export_errors_total", 1, "sink", sink)
				return
			}
			metrics.Add("gatehouse_export_records_total", float64(n), "sink", sink)
		},
	})
	if err != nil {
		cancel()
		ln.Close()
		front.Close()
		return nil, fmt.Errorf("export: %w", err)
	}
	s := &Service{cfg: cfg, url: scheme + "://" + ln.Addr().String(), front: front, srv: srv, metrics: metrics,
		tokens: tokens, cancel: cancel, done: make(chan struct{})}
	served := make(chan error, 1)
	go func() {
		if cfg.TLS() {
			served <- srv.ServeTLS(ln, "", "")
		} else {
			served <- srv.Serve(ln)
		}
	}()
	go func() {
		defer close(s.done)
		select {
		case err := <-served:
			s.err = err
		case <-ctx.Done():
		}
		cancel()
		front.Close()
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		srv.Shutdown(sctx)
		scancel()
		waitExports()
	}()
	return s, nil
}

// URL is where the service listens: scheme://HOST:PORT, with the port
// the system chose for port 0. A server NAME is at URL/mcp/NAME.
func (s *Service) URL() string { return s.url }

// Config is the configuration the service runs with.
func (s *Service) Config() Config { return s.cfg }

// Tokens are the clients' tokens the service checks.
func (s *Service) Tokens() *Tokens { return s.tokens }

// Sessions returns how many MCP sessions are open.
func (s *Service) Sessions() int { return s.front.Sessions() }

// Metrics are the service's counters, as /metrics shows them.
func (s *Service) Metrics() *Metrics { return s.metrics }

// Done is closed once the service has stopped: by [Service.Stop], or by
// itself ([Service.Err] says why).
func (s *Service) Done() <-chan struct{} { return s.done }

// Err says why the service stopped by itself; nil while it runs and after
// [Service.Stop].
func (s *Service) Err() error {
	select {
	case <-s.done:
		if errors.Is(s.err, http.ErrServerClosed) {
			return nil
		}
		return s.err
	default:
		return nil
	}
}

// Stop ends every session (stopping its server), stops listening and
// exporting, and returns once all have stopped.
func (s *Service) Stop() {
	s.stop.Do(s.cancel)
	<-s.done
}

// gates opens the sessions of a [Service]: each one's relay, with a gate
// of its own (approvals for the session stay in the session) over the one
// evidence log.
type gates struct {
	st      *store.Store
	kc      Keychain
	log     *slog.Logger
	metrics *Metrics
	cfg     Config
	stderr  io.Writer
	elog    *receipts.Log // nil when it could not be opened
	elogErr error
}

// openLog opens the evidence log once, for every session's gate. When it
// cannot be opened every call is refused with the reason, and the
// service still answers everything else.
func (g *gates) openLog(ctx context.Context, opened func(context.Context, *receipts.Log)) {
	key, err := g.kc.SigningKey()
	if err != nil {
		g.elogErr = fmt.Errorf("the evidence log's signing key is unavailable: %w", err)
		g.log.Error("the gate is closed: every tool call will be refused", slog.Any("err", g.elogErr))
		return
	}
	l, err := receipts.Open(ctx, g.st, key)
	if errors.Is(err, receipts.ErrForeignKey) {
		err = fmt.Errorf("%w (the keychain does not hold the key that signs this log; see gatehouse keys adopt --help)", err)
	}
	if err != nil {
		g.elogErr = err
		g.log.Error("the gate is closed: every tool call will be refused", slog.Any("err", err))
		return
	}
	l.FollowKeys(g.kc.SigningKey)
	if opened != nil {
		opened(ctx, l)
	}
	g.elog = l
}

func (g *gates) open(ctx context.Context, name, client string) (Relay, error) {
	srv, err := g.st.Server(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: %s", ErrUnknownServer, name)
	}
	if err != nil {
		return nil, err
	}
	log := g.log.With(slog.String("client", client))
	var (
		cmd     gateway.Command
		remote  gateway.Remote
		secrets map[string]string
	)
	if srv.Remote() {
		remote, secrets, err = downstream.Remote(srv, g.kc)
	} else {
		cmd, secrets, err = downstream.Command(srv, g.kc)
	}
	if err != nil {
		// The relay refuses every request with the reason, as a stdio
		// proxy does.
		log.Error("server not started", slog.String("server", name), slog.Any("err", err))
		return refusing{fmt.Errorf("%w (the server's credentials live in the OS keychain; store them with: gatehouse secret set ID)", err)}, nil
	}
	var gov gateway.Governor = closedGate{g.elogErr}
	if g.elog != nil {
		gt, err := g.gate(ctx, srv, client, log)
		if err != nil {
			log.Error("the gate is closed for this session: every tool call will be refused", slog.Any("err", err))
			gov = closedGate{err}
		} else {
			gov = gt
		}
	}
	stderr := g.stderr
	if stderr == nil {
		stderr = io.Discard
	}
	callTimeout := g.cfg.CallTimeout
	if callTimeout <= 0 {
		callTimeout = gateway.DefaultCallTimeout
	}
	opts := &gateway.Options{
		Logger:          log,
		Stderr:          stderr,
		MaxMessageBytes: g.cfg.MaxMessageBytes,
		Secrets:         secrets,
		CallTimeout:     callTimeout,
		Governor:        g.metrics.Govern(gov, name, client),
	}
	if srv.Remote() {
		return gateway.NewRemote(name, remote, opts), nil
	}
	return gateway.New(name, cmd, opts), nil
}

func (g *gates) gate(ctx context.Context, srv store.Server, client string, log *slog.Logger) (*gate.Gate, error) {
	policies, err := policy.Open(ctx, g.st, &policy.Options{Recorder: policy.RecorderFunc(func(ctx context.Context, version int64, hash string) error {
		_, err := g.elog.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: version, Hash: hash})
		return err
	})})
	if err != nil {
		return nil, err
	}
	socket := approval.SocketPath(g.st.Dir())
	wait := g.cfg.ApprovalWait
	if wait <= 0 {
		wait = gate.DefaultApprovalWait
	}
	return gate.New(ctx, gate.Config{
		Server:     srv.Name,
		Client:     client,
		Trusted:    srv.Trusted,
		LocalFiles: srv.Transport == store.TransportStdio,
		Home:       g.st.Dir(),
		Log:        g.elog,
		Policies:   policies,
		Pins:       g.st,
		Ask: func(ctx context.Context, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error) {
			start := time.Now()
			d, err := approval.Ask(ctx, socket, req, wait, progress)
			answer := "error"
			if err == nil {
				answer = string(d.Scope)
			}
			g.metrics.Waited(ctx, time.Since(start), answer)
			return d, err
		},
		Secrets:      g.kc,
		ApprovalWait: wait,
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

// closedGate refuses every call, saying why.
type closedGate struct{ err error }

func (g closedGate) Authorize(context.Context, *gateway.Call, func(string)) (*gateway.Authorization, error) {
	return nil, g.err
}

func (closedGate) Complete(context.Context, *gateway.Call, *gateway.Authorization, *gateway.Outcome) {
}
