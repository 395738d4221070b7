// Package bench measures what the Gatehouse proxy costs an MCP client: the
// throughput and latency of tool calls, and the time to start.
//
// By default the measured server is [ServeEcho], a small MCP server written
// with the MCP Go SDK and run as `gatehouse bench-echo-server`. [Run] talks
// to it with the SDK's client in two ways:
//
//   - direct: the client starts `gatehouse bench-echo-server` itself;
//   - proxy: the client starts `gatehouse proxy bench-echo --home HOME
//     --pass-through`, which starts the same server and relays every message.
//
// With --pass-through the proxy relays tools/call without deciding on it or
// recording it: the figures are the relay's. [Config.Governed] measures the
// proxy as MCP clients run it, with the gate on every call.
//
// [Config.Server] and [Config.Direct] measure another registered server the
// same way, calling one of its tools ([Config.Tool]) with a string argument
// ([Config.Arg]) that it is expected to echo.
//
// # Reading the figures
//
// Shared and laptop machines are noisy, so the two are never measured apart:
// calls run in rounds that alternate direct, proxy, proxy, direct, ... on
// long-lived sessions, and start-up samples alternate the same way, so that
// a burst of load from elsewhere falls on both. The figure to read is the
// ratio of the two, measured side by side; the absolute numbers say more
// about the machine than about Gatehouse.
//
// Start-up is the time from spawning the process to the answer to
// initialize, pinned to protocol 2025-11-25 so that no server/discover probe
// is counted.
//
// The `gatehouse bench` command prepares a temporary home with the server
// registered and prints a [Report]; docs/performance.md has the figures and
// how to reproduce them.
package bench

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The goals the proxy is held to (see docs/performance.md).
const (
	// GoalThroughput is the least share of direct throughput the proxy keeps.
	GoalThroughput = 0.80
	// GoalStartup bounds the proxy's start-up, spawn to initialize answer.
	GoalStartup = 20 * time.Millisecond
)

// callTimeout bounds one call, so that a stalled call ends the run with
// an error instead of hanging it.
const callTimeout = 30 * time.Second

// directStopGrace is how long the client waits for a registered server it
// runs itself to exit after closing its input, before SIGTERM: the grace
// the proxy gives its server (gateway.Options.StopGrace). Some servers
// never exit on their own (server-everything, once it has asked the client
// for its roots).
const directStopGrace = 2 * time.Second

// Config says what [Run] measures. Zero values take the defaults shown.
type Config struct {
	// Gatehouse is the path of the gatehouse binary. Required.
	Gatehouse string `json:"-"`
	// Home is the home folder in which Server is registered. Required.
	Home string `json:"-"`

	// Server is the server the proxy runs: `Gatehouse proxy Server --home
	// Home`. Empty means [ServerName], registered in Home to run the
	// built-in echo server (`Gatehouse bench-echo-server`, [ServeCommand]).
	Server string `json:"server,omitempty"`
	// Direct is how the client runs that same server itself: required with
	// Server, and empty without it (the built-in echo server is then run
	// directly). It may hold secrets, so reports leave it out.
	Direct Direct `json:"-"`
	// Governed runs the proxy as MCP clients do, deciding on and recording
	// every tools/call: Home's policy must allow Tool, and the keychain must
	// hold the evidence log's signing key. Otherwise the proxy runs with
	// --pass-through, and the figures are the relay's alone.
	Governed bool `json:"governed"`
	// Tool is the tool called, with one argument, Arg, holding the message.
	// An answer is correct when its text content contains the message; the
	// built-in server must return it exactly.
	Tool string `json:"tool"` // "echo"
	Arg  string `json:"arg"`  // "message"

	Calls       int `json:"calls"`       // calls per mode; 2000
	Concurrency int `json:"concurrency"` // callers sharing one session; 1
	Starts      int `json:"starts"`      // start-up samples per mode; 30
	Payload     int `json:"payload"`     // bytes of each message; 100
	Rounds      int `json:"rounds"`      // rounds per mode the calls are split into; 10
	// Proxies, when more than 1, also measures that many proxies making
	// calls at once (Calls in all, one caller each), all writing to the
	// home's one database: governed, the contention of their receipts.
	Proxies int `json:"proxies,omitempty"`
}

// The tool called by default and its argument: the built-in server's, which
// @modelcontextprotocol/server-everything has too.
const (
	defaultTool = "echo"
	defaultArg  = "message"
)

// Direct is a server's command line, run by the client itself: a registered
// server's Command and Args, Env and Cwd.
type Direct struct {
	Argv []string // program and arguments; a program without a separator is looked up in PATH
	Env  []string // KEY=VALUE pairs added to this process's environment
	Dir  string   // working folder; empty means this process's
}

// builtin reports whether c measures the built-in echo server.
func (c *Config) builtin() bool { return c.Server == "" }

func (c *Config) setDefaults() error {
	if c.Gatehouse == "" {
		return errors.New("bench: no gatehouse binary")
	}
	if c.Home == "" {
		return errors.New("bench: no home folder")
	}
	switch {
	case c.Server != "" && len(c.Direct.Argv) == 0:
		return fmt.Errorf("bench: no direct command line for server %s", c.Server)
	case c.Server == "" && len(c.Direct.Argv) > 0:
		return errors.New("bench: a direct command line needs the name of its server")
	}
	c.Tool = cmp.Or(c.Tool, defaultTool)
	c.Arg = cmp.Or(c.Arg, defaultArg)
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&c.Calls, 2000)
	def(&c.Concurrency, 1)
	def(&c.Starts, 30)
	def(&c.Payload, 100)
	def(&c.Rounds, 10)
	c.Rounds = min(c.Rounds, c.Calls)
	return nil
}

// A Report holds the figures of one [Run].
type Report struct {
	Machine Machine `json:"machine"`
	Config  Config  `json:"config"`

	Direct Calls `json:"direct"`
	Proxy  Calls `json:"proxy"`
	// Ratio is the proxy's calls/s over direct calls/s.
	Ratio float64 `json:"ratio"`
	// RoundRatios are the ratios of each pair of rounds, in order: their
	// spread shows how noisy the machine was.
	RoundRatios []float64 `json:"round_ratios"`

	StartDirect Startup `json:"start_direct"`
	StartProxy  Startup `json:"start_proxy"`
	// StartAdded is what the proxy adds to start-up: the difference of the
	// two medians.
	StartAdded time.Duration `json:"start_added_ns"`

	// ProxyMemory is the proxy process's memory (Linux).
	ProxyMemory Memory `json:"proxy_memory"`
	// Fleet are the figures of Config.Proxies proxies at once; nil when
	// not measured.
	Fleet *Fleet `json:"fleet,omitempty"`

	// Governed runs also measure, side by side with the governed proxy,
	// the relay alone (--pass-through), and one fsync of a small write in
	// the home folder: what a governed call must wait for at least.
	Relay      *Calls   `json:"relay,omitempty"`
	StartRelay *Startup `json:"start_relay,omitempty"`
	Fsync      *Fsync   `json:"fsync,omitempty"`
	// Phases are the governed calls' own figures, from the proxies' log:
	// deciding, and waiting for the receipt to be durable.
	Phases      *Phases `json:"phases,omitempty"`
	FleetPhases *Phases `json:"fleet_phases,omitempty"`
	// Load is the machine's load average (1, 5, 15 minutes) at the start
	// and at the end of the run (Linux).
	Load [2][3]float64 `json:"load"`
}

// Calls are the throughput and latency figures of one mode.
type Calls struct {
	Calls     int           `json:"calls"`
	Elapsed   time.Duration `json:"elapsed_ns"` // wall time of all rounds
	PerSecond float64       `json:"calls_per_second"`
	P50       time.Duration `json:"p50_ns"`
	P90       time.Duration `json:"p90_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
	// Rounds are the calls/s of each round, in the order they ran.
	Rounds []float64 `json:"rounds"`
}

// Startup are the start-up figures of one mode: spawn to initialize answer.
type Startup struct {
	Samples int           `json:"samples"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
	Min     time.Duration `json:"min_ns"`
	Max     time.Duration `json:"max_ns"`
}

// ThroughputMet reports whether the proxy kept [GoalThroughput].
func (r *Report) ThroughputMet() bool { return r.Ratio >= GoalThroughput }

// StartupMet reports whether the proxy's median start-up is under
// [GoalStartup]. For a server other than the built-in one
// ([Config.Server]), whose own start-up is not the proxy's doing, it reports
// whether the proxy adds less than that ([Report.StartAdded]).
func (r *Report) StartupMet() bool {
	if !r.Config.builtin() {
		return r.StartAdded < GoalStartup
	}
	return r.StartProxy.P50 < GoalStartup
}

// mode is one way of reaching the server: a command line, and what to call.
type mode struct {
	name string
	argv []string
	env  []string // added to this process's environment
	dir  string
	call call
	// term: the server may need SIGTERM to stop, after directStopGrace.
	// Not for the proxy, which must exit by itself when its input closes.
	term bool
	// connect, when set, reaches a server that runs already (over HTTP)
	// instead of spawning argv; stderr is that server's, to explain a
	// failure.
	connect func(context.Context) (*mcp.ClientSession, error)
	stderr  *tail
}

// call is the tool a session calls, and how its answers are checked.
type call struct {
	tool, arg string
	exact     bool // the answer is the message, not merely contains it
}

// relayMode is the proxy with --pass-through, measured beside a governed
// one.
func relayMode(c *Config) mode {
	_, p := modes(&Config{Gatehouse: c.Gatehouse, Home: c.Home, Server: c.Server, Tool: c.Tool, Arg: c.Arg, Direct: c.Direct})
	p.name = "relay"
	return p
}

func modes(c *Config) (direct, proxy mode) {
	cl := call{tool: cmp.Or(c.Tool, defaultTool), arg: cmp.Or(c.Arg, defaultArg), exact: c.builtin()}
	proxy = mode{name: "proxy", argv: []string{c.Gatehouse, "proxy", cmp.Or(c.Server, ServerName), "--home", c.Home}, call: cl}
	if !c.Governed {
		proxy.argv = append(proxy.argv, "--pass-through")
	}
	if c.builtin() {
		return mode{name: "direct", argv: []string{c.Gatehouse, ServeCommand}, call: cl}, proxy
	}
	return mode{name: "direct", argv: c.Direct.Argv, env: c.Direct.Env, dir: c.Direct.Dir, call: cl, term: true}, proxy
}

// Run measures calls and start-up, direct and through the proxy. It fails
// if any call fails or does not echo its message.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	direct, proxy := modes(&cfg)
	r := &Report{Machine: DescribeMachine(), Config: cfg}
	r.Load[0] = loadAverage()
	ms := []mode{direct, proxy}
	var fs *fsyncer
	if cfg.Governed {
		ms = append(ms, relayMode(&cfg))
		var err error
		if fs, err = newFsyncer(cfg.Home); err != nil {
			return nil, err
		}
		defer fs.close()
	}
	logAt := logSize(cfg.Home)
	if err := r.measureCalls(ctx, &cfg, ms, fs); err != nil {
		return nil, err
	}
	if cfg.Governed {
		r.Phases = readPhases(cfg.Home, logAt)
	}
	if err := r.measureStartup(ctx, &cfg, ms); err != nil {
		return nil, err
	}
	if cfg.Proxies > 1 {
		logAt := logSize(cfg.Home)
		if err := r.measureFleet(ctx, &cfg, proxy); err != nil {
			return nil, fmt.Errorf("%d proxies at once: %w", cfg.Proxies, err)
		}
		if cfg.Governed {
			r.FleetPhases = readPhases(cfg.Home, logAt)
		}
	}
	r.Load[1] = loadAverage()
	return r, nil
}

// measureCalls measures the calls of each mode (direct, proxy, and for a
// governed run the relay), in rounds whose order rotates, with fsyncs of
// the home folder's disk between them when fs is not nil.
func (r *Report) measureCalls(ctx context.Context, cfg *Config, ms []mode, fs *fsyncer) error {
	type side struct {
		mode
		s       *session
		lat     []time.Duration
		elapsed time.Duration
		rounds  []float64
	}
	sides := make([]*side, len(ms))
	for i, m := range ms {
		sides[i] = &side{mode: m}
	}
	for _, sd := range sides {
		s, _, err := startSession(ctx, sd.mode)
		if err != nil {
			return fmt.Errorf("start %s: %w", sd.name, err)
		}
		defer s.close()
		sd.s = s
		// Warm up: the first calls pay for page faults and lazy setup.
		if _, err := callRound(ctx, s, 50, cfg.Concurrency, cfg.Payload, 0); err != nil {
			return fmt.Errorf("%s: warm-up: %w", sd.name, err)
		}
	}
	proxyPID := 0
	if cmd := sides[1].s.cmd; cmd != nil {
		proxyPID = cmd.Process.Pid
		r.ProxyMemory.Idle, _, _ = procMemory(proxyPID)
	}
	var syncs []time.Duration
	next := 0 // number of the next call's message
	for round := range cfg.Rounds {
		n := cfg.Calls / cfg.Rounds
		if round == cfg.Rounds-1 {
			n = cfg.Calls - n*(cfg.Rounds-1)
		}
		// direct, proxy, proxy, direct, ... (and the relay, rotating): no
		// side always goes first.
		order := slices.Clone(sides)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		if len(order) > 2 {
			k := (round / 2) % len(order)
			order = slices.Concat(order[k:], order[:k])
		}
		for _, sd := range order {
			start := time.Now()
			lat, err := callRound(ctx, sd.s, n, cfg.Concurrency, cfg.Payload, next)
			el := time.Since(start)
			if err != nil {
				return fmt.Errorf("%s: %w", sd.name, err)
			}
			next += n
			sd.lat = append(sd.lat, lat...)
			sd.elapsed += el
			sd.rounds = append(sd.rounds, float64(n)/el.Seconds())
		}
		if fs != nil {
			d, err := fs.sample(fsyncsPerRound)
			if err != nil {
				return err
			}
			syncs = append(syncs, d...)
		}
	}
	if proxyPID != 0 {
		_, r.ProxyMemory.Peak, _ = procMemory(proxyPID)
	}
	for _, sd := range sides {
		if err := sd.s.close(); err != nil {
			return fmt.Errorf("stop %s: %w", sd.name, err)
		}
	}
	sum := func(sd *side) Calls {
		slices.Sort(sd.lat)
		return Calls{
			Calls:     len(sd.lat),
			Elapsed:   sd.elapsed,
			PerSecond: float64(len(sd.lat)) / sd.elapsed.Seconds(),
			P50:       percentile(sd.lat, 0.50),
			P90:       percentile(sd.lat, 0.90),
			P99:       percentile(sd.lat, 0.99),
			Max:       sd.lat[len(sd.lat)-1],
			Rounds:    sd.rounds,
		}
	}
	r.Direct, r.Proxy = sum(sides[0]), sum(sides[1])
	if len(sides) > 2 {
		relay := sum(sides[2])
		r.Relay = &relay
	}
	if len(syncs) > 0 {
		slices.Sort(syncs)
		r.Fsync = &Fsync{Samples: len(syncs), P50: percentile(syncs, 0.50), P90: percentile(syncs, 0.90)}
	}
	r.Ratio = r.Proxy.PerSecond / r.Direct.PerSecond
	for i := range r.Direct.Rounds {
		r.RoundRatios = append(r.RoundRatios, r.Proxy.Rounds[i]/r.Direct.Rounds[i])
	}
	return nil
}

func (r *Report) measureStartup(ctx context.Context, cfg *Config, ms []mode) (err error) {
	samples := make([][]time.Duration, len(ms))
	// Stopping is not counted, and may take seconds (directStopGrace, the
	// proxy's own grace) for a server that does not exit when its input
	// closes: sessions stop in the background while the next start is
	// measured, and all are stopped before Run returns.
	var stops stopper
	defer func() { err = errors.Join(err, stops.wait()) }()
	once := func(m mode) (time.Duration, error) {
		s, d, err := startSession(ctx, m)
		if err != nil {
			return 0, fmt.Errorf("start %s: %w", m.name, err)
		}
		stops.stop(m.name, s)
		return d, nil
	}
	// One start each that is not counted: it loads the binary into the page cache.
	for _, m := range ms {
		if _, err := once(m); err != nil {
			return err
		}
	}
	for i := range cfg.Starts {
		var order []int
		for k := range ms {
			order = append(order, (k+i)%len(ms))
		}
		if i%2 == 1 {
			slices.Reverse(order)
		}
		for _, k := range order {
			d, err := once(ms[k])
			if err != nil {
				return err
			}
			samples[k] = append(samples[k], d)
		}
	}
	sum := func(s []time.Duration) Startup {
		slices.Sort(s)
		return Startup{Samples: len(s), P50: percentile(s, 0.50), P90: percentile(s, 0.90),
			Min: s[0], Max: s[len(s)-1]}
	}
	r.StartDirect, r.StartProxy = sum(samples[0]), sum(samples[1])
	if len(ms) > 2 {
		relay := sum(samples[2])
		r.StartRelay = &relay
	}
	r.StartAdded = r.StartProxy.P50 - r.StartDirect.P50
	return nil
}

// percentile returns the nearest-rank p-quantile of sorted, which must not be
// empty.
func percentile(sorted []time.Duration, p float64) time.Duration {
	// The rank is ceil(n*p); the epsilon keeps 100*0.9 at 90 whatever the
	// rounding of 0.9.
	i := int(math.Ceil(float64(len(sorted))*p-1e-9)) - 1
	return sorted[max(0, min(i, len(sorted)-1))]
}

// A session is an MCP client session with a server process the client started.
type session struct {
	cs     *mcp.ClientSession
	cmd    *exec.Cmd // nil when the server was not started by the session
	stderr *tail
	call   call
	term   bool // an exit on SIGTERM is a normal stop
}

// stopper stops sessions in the background.
type stopper struct {
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error // guarded by mu
}

func (st *stopper) stop(name string, s *session) {
	st.wg.Go(func() {
		if err := s.close(); err != nil {
			st.mu.Lock()
			st.errs = append(st.errs, fmt.Errorf("stop %s: %w", name, err))
			st.mu.Unlock()
		}
	})
}

// wait waits for the sessions to stop and returns the first error.
func (st *stopper) wait() error {
	st.wg.Wait()
	st.mu.Lock()
	defer st.mu.Unlock()
	if len(st.errs) > 0 {
		return st.errs[0]
	}
	return nil
}

// startSession spawns m's command and initializes an MCP session with it.
// It returns the time from spawning to the answer to initialize.
func startSession(ctx context.Context, m mode) (*session, time.Duration, error) {
	if m.connect != nil {
		t := m.stderr
		if t == nil {
			t = &tail{}
		}
		start := time.Now()
		cs, err := m.connect(ctx)
		if err != nil {
			return nil, 0, t.annotate(err)
		}
		return &session{cs: cs, stderr: t, call: m.call}, time.Since(start), nil
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "gatehouse-bench", Version: "1"}, nil)
	cmd := exec.Command(m.argv[0], m.argv[1:]...)
	if len(m.env) > 0 {
		cmd.Env = append(os.Environ(), m.env...)
	}
	cmd.Dir = m.dir
	t := &tail{}
	cmd.Stderr = t
	transport := &mcp.CommandTransport{Command: cmd}
	if m.term {
		transport.TerminateDuration = directStopGrace
	}
	start := time.Now()
	cs, err := client.Connect(ctx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	d := time.Since(start)
	if err != nil {
		return nil, 0, t.annotate(err)
	}
	return &session{cs: cs, cmd: cmd, stderr: t, call: m.call, term: m.term}, d, nil
}

// close ends the session and waits for the server process to exit.
func (s *session) close() error {
	err := s.cs.Close()
	if s.term && terminated(err) {
		return nil
	}
	return s.stderr.annotate(err)
}

// terminated reports whether err says that a process ended on SIGTERM.
func terminated(err error) bool {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM
}

// echo calls the session's tool with msg and checks that msg comes back.
func (s *session) echo(ctx context.Context, msg string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := s.cs.CallTool(ctx, &mcp.CallToolParams{
		Name:      s.call.tool,
		Arguments: map[string]any{s.call.arg: msg},
	})
	if err != nil {
		return s.stderr.annotate(err)
	}
	if res.IsError {
		return fmt.Errorf("%s answered with an error: %.200s", s.call.tool, text(res))
	}
	got := text(res)
	if s.call.exact && got != msg {
		return fmt.Errorf("%s answered %d bytes %.40q, want %d bytes %.40q", s.call.tool, len(got), got, len(msg), msg)
	}
	if !s.call.exact && !strings.Contains(got, msg) {
		return fmt.Errorf("%s answered %d bytes %.40q, which do not contain the %d bytes sent, %.40q",
			s.call.tool, len(got), got, len(msg), msg)
	}
	return nil
}

func text(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}

// message returns the payload of call i: its number, padded to size bytes.
func message(i, size int) string {
	s := strconv.Itoa(i)
	if len(s) >= size {
		return s
	}
	return s + strings.Repeat("x", size-len(s))
}

// callRound makes n calls on s from workers concurrent callers, with
// messages first, first+1, ..., and returns the latency of each call.
func callRound(ctx context.Context, s *session, n, workers, payload, first int) ([]time.Duration, error) {
	lat := make([]time.Duration, n)
	msgs := make([]string, n)
	for i := range msgs {
		msgs[i] = message(first+i, payload)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(workers, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				start := time.Now()
				if err := s.echo(ctx, msgs[i]); err != nil {
					cancel(fmt.Errorf("call %d: %w", first+i, err))
					return
				}
				lat[i] = time.Since(start)
			}
		})
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return lat, nil
}

// tail keeps the last bytes a server process wrote to stderr, to explain a
// failure.
type tail struct {
	mu  sync.Mutex
	buf []byte // guarded by mu
}

const tailMax = 2048

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - tailMax; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

// annotate adds the last line of stderr to a non-nil err.
func (t *tail) annotate(err error) error {
	if err == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := bytes.Split(bytes.TrimSpace(t.buf), []byte("\n"))
	if last := bytes.TrimSpace(lines[len(lines)-1]); len(last) > 0 {
		return fmt.Errorf("%w (stderr: %s)", err, last)
	}
	return err
}

var _ io.Writer = (*tail)(nil)
