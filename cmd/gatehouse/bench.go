package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/bench"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/gateway/programs"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// benchFlags are the flags of gatehouse bench.
type benchFlags struct {
	server      string
	tool        string
	arg         string
	governed    bool
	calls       int
	concurrency int
	starts      int
	payload     int
	rounds      int
	proxies     int
	json        bool
	programs    bool
	http        bool
	runs        int
	steps       string
}

var benchCmd = &command{
	name:    "bench",
	usage:   "[--server NAME [--tool TOOL] [--arg ARG]] [--governed] [--calls N] [--concurrency N] [--proxies N] [--starts N] [--payload BYTES] [--rounds N] [--json] | --programs [--steps LIST] [--runs N] [--rounds N] [--payload BYTES] [--json]",
	summary: "measure the proxy: calls/s and latency, direct and through the gate; start-up time; governed programs",
	help: `
Runs a small MCP server with one echo tool and calls it both directly and
through 'gatehouse proxy --pass-through', in alternating rounds so that
other load on the machine falls on both alike; then starts each repeatedly
and times the answer to initialize. The server is registered in a temporary
home folder that is removed afterwards: --home is not used. With
--pass-through the proxy relays tool calls without deciding on or
recording them: the figures are the relay's.

With --server NAME, measures instead server NAME of the home folder (--home
or $GATEHOUSE_HOME apply): directly, as its registered command, and through
'gatehouse proxy NAME'. The calls go to its tool TOOL with one string
argument ARG, and an answer must contain the message sent; the defaults fit
the echo tool of @modelcontextprotocol/server-everything. Each start of the
proxy writes a few lines to the home folder's log. --governed runs the
proxy as MCP clients do, the policy deciding on every call and the evidence
log recording it: the policy must allow the tool (gatehouse policy set
mcp.NAME.TOOL ALLOW), and every call measured leaves a receipt.

--governed without --server measures the built-in server through the gate:
the temporary home's policy allows its echo tool, and its signing key is
made in the keychain and removed afterwards. --proxies N also starts N
proxies at once, each making its share of --calls one at a time, all writing
to the home's one database. The report gives the proxy's memory (resident,
once started and at most under the calls) on Linux.

--programs measures governed programs instead: programs of --steps echo
steps each (4 and 30) run with run_program of 'gatehouse programs', side by
side with the same steps called one by one through the governed proxy,
--runs programs of each size each way in alternating rounds; then every
trace made is replayed. Each step is a governed call in both modes: its
signed receipt durable before it runs, its signed outcome after. Like
--governed, it needs the keychain for the temporary home's signing key.

Read the proxy/direct ratio rather than the absolute figures, which depend
on the machine. docs/performance.md has the figures and what they mean.`,
	flags: flagged(func(fs *flag.FlagSet, f *benchFlags) {
		fs.StringVar(&f.server, "server", "", "measure the registered server `NAME` instead of the built-in echo server")
		fs.StringVar(&f.tool, "tool", "echo", "with --server, the `tool` to call")
		fs.StringVar(&f.arg, "arg", "message", "with --server, the tool's string `argument` that carries the message")
		fs.BoolVar(&f.governed, "governed", false, "measure the proxy with the gate (policy and receipts), not --pass-through")
		fs.IntVar(&f.calls, "calls", 2000, "calls per mode (direct, proxy)")
		fs.IntVar(&f.concurrency, "concurrency", 1, "`n` callers sharing one session")
		fs.IntVar(&f.starts, "starts", 30, "start-up samples per mode")
		fs.IntVar(&f.payload, "payload", 100, "`bytes` of each message")
		fs.IntVar(&f.rounds, "rounds", 10, "interleaved rounds per mode the calls are split into")
		fs.IntVar(&f.proxies, "proxies", 0, "also measure `n` proxies making calls at once (--calls in all), writing to one database")
		fs.BoolVar(&f.json, "json", false, "print the report as JSON")
		fs.BoolVar(&f.programs, "programs", false, "measure governed programs, and the same steps called one by one")
		fs.BoolVar(&f.http, "http", false, "measure calls over MCP's streamable HTTP, direct and through gatehouse serve")
		fs.IntVar(&f.runs, "runs", 60, "with --programs, `n` programs of each size each way")
		fs.StringVar(&f.steps, "steps", "4,30", "with --programs, the steps of each program, a comma-separated `list`")
	}, runBench),
}

func runBench(ctx context.Context, c *cli, fs *flag.FlagSet, f *benchFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("bench: unexpected argument %q", pos[0])
	}
	if f.programs {
		return c.benchPrograms(ctx, fs, f)
	}
	if f.http {
		return c.benchHTTP(ctx, fs, f)
	}
	cfg := bench.Config{
		Calls:       f.calls,
		Concurrency: f.concurrency,
		Starts:      f.starts,
		Payload:     f.payload,
		Rounds:      f.rounds,
	}
	for _, n := range []struct {
		name  string
		value int
	}{{"calls", f.calls}, {"concurrency", f.concurrency}, {"starts", f.starts}, {"payload", f.payload}, {"rounds", f.rounds}} {
		if n.value < 1 {
			return usagef("bench: --%s must be at least 1", n.name)
		}
	}
	asJSON := f.json
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	server := f.server
	if server == "" && (set["tool"] || set["arg"]) {
		return usagef("bench: --tool and --arg need --server: the built-in server has only echo(message)")
	}
	cfg.Governed = f.governed
	if cfg.Proxies = f.proxies; cfg.Proxies < 0 {
		return usagef("bench: --proxies must not be negative")
	}

	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("bench: find the gatehouse binary: %w", err)
	}
	if server != "" {
		if err := c.benchServer(ctx, &cfg, server, f.tool, f.arg); err != nil {
			return err
		}
	} else {
		home, done, err := benchHome(ctx, cfg.Gatehouse, cfg.Governed)
		if err != nil {
			return err
		}
		defer done()
		cfg.Home = home
	}

	prefix, tool := "gatehouse bench: ", "echo"
	if server != "" {
		prefix, tool = "gatehouse bench: server "+server+": ", cfg.Tool
	}
	fmt.Fprintf(c.stderr, "%s%d %s calls and %d starts per mode, direct and through the proxy...\n",
		prefix, cfg.Calls, tool, cfg.Starts)
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return c.writeBenchReport(asJSON, rep)
}

// writeBenchReport writes a bench report to stdout, as JSON or as text.
func (c *cli) writeBenchReport(asJSON bool, rep interface{ WriteText(io.Writer) error }) error {
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(c.stdout)
}

// benchHome makes a temporary home folder with the built-in echo server
// registered, run by the gatehouse binary at exe; with allow, its policy
// allows the echo tool. done removes the home, and its signing key from the
// keychain.
func benchHome(ctx context.Context, exe string, allow bool) (home string, done func(), err error) {
	if home, err = os.MkdirTemp("", "gatehouse-bench-"); err != nil {
		return "", nil, fmt.Errorf("bench: create a temporary home: %w", err)
	}
	done = func() { os.RemoveAll(home) }
	if err := registerBenchServer(ctx, home, exe); err != nil {
		done()
		return "", nil, err
	}
	if allow {
		purge, err := allowBenchEcho(ctx, home)
		if err != nil {
			done()
			return "", nil, err
		}
		done = func() { purge(); os.RemoveAll(home) }
	}
	return home, done, nil
}

// onlyFlags refuses any flag set in fs that is not one of mode's: names,
// and the global --home.
func onlyFlags(fs *flag.FlagSet, mode string, names ...string) error {
	var bad string
	fs.Visit(func(fl *flag.Flag) {
		if fl.Name != "home" && fl.Name != mode && !slices.Contains(names, fl.Name) {
			bad = fl.Name
		}
	})
	if bad != "" {
		return usagef("bench: --%s is not a flag of --%s", bad, mode)
	}
	return nil
}

// benchServer sets cfg to measure the registered server name, calling tool
// with its argument arg.
func (c *cli) benchServer(ctx context.Context, cfg *bench.Config, name, tool, arg string) error {
	if tool == "" || arg == "" {
		return usagef("bench: --tool and --arg must not be empty")
	}
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := lookupServer(ctx, st, name)
	if err != nil {
		return err
	}
	if srv.Transport != store.TransportStdio {
		return fmt.Errorf("bench: server %s: transport %q cannot be measured", name, srv.Transport)
	}
	// Run directly, the server gets what the proxy gives it: its secrets
	// resolved from the keychain.
	cmd, _, err := downstream.Command(srv, vaultFor(st))
	if err != nil {
		return withHint(fmt.Errorf("bench: %w", err), "store it with: gatehouse secret set ID")
	}
	cfg.Home = st.Dir()
	cfg.Server = name
	cfg.Direct = bench.Direct{Argv: append([]string{cmd.Path}, cmd.Args...), Env: cmd.Env, Dir: cmd.Dir}
	cfg.Tool, cfg.Arg = tool, arg
	return nil
}

// registerBenchServer registers the echo server in the home folder dir, run
// by the gatehouse binary at exe.
func registerBenchServer(ctx context.Context, dir, exe string) error {
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer st.Close()
	if err := st.AddServer(ctx, store.Server{
		Name:      bench.ServerName,
		Transport: store.TransportStdio,
		Command:   exe,
		Args:      []string{bench.ServeCommand},
	}); err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return nil
}

// allowBenchEcho adds a rule allowing the built-in echo tool to the policy
// of the temporary home, and returns a function that removes the home's
// items from the keychain.
func allowBenchEcho(ctx context.Context, home string) (purge func(), err error) {
	c := &cli{home: home, stderr: io.Discard}
	st, l, err := c.openLog(ctx)
	if err != nil {
		return nil, fmt.Errorf("bench: --governed: %w", err)
	}
	defer st.Close()
	purge = func() { vaultFor(st).Purge() }
	ps, err := policy.Open(ctx, st, &policy.Options{Recorder: policyRecorder(l)})
	if err == nil {
		var p *policy.Policy
		if p, err = ps.Current(ctx); err == nil {
			p = p.Clone()
			p.Rules = append(p.Rules, policy.Rule{ID: "bench-echo", Capability: policy.Capability(bench.ServerName, "echo"), Decision: policy.Allow})
			_, err = ps.Save(ctx, p)
		}
	}
	if err != nil {
		purge()
		return nil, fmt.Errorf("bench: --governed: allow the echo tool: %w", err)
	}
	return purge, nil
}

var benchEchoServerCmd = &command{
	name:    bench.ServeCommand,
	summary: "run the MCP echo server that 'gatehouse bench' measures, on stdin and stdout",
	hidden:  true,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if _, err := parse(fs, args, 0); err != nil {
			return err
		}
		return bench.ServeEcho(ctx, c.stdin, c.stdout)
	},
}

// benchHTTP is bench --http: calls over streamable HTTP, direct and
// through gatehouse serve, in a temporary home.
func (c *cli) benchHTTP(ctx context.Context, fs *flag.FlagSet, f *benchFlags) error {
	if err := onlyFlags(fs, "http", "calls", "rounds", "payload", "concurrency", "json"); err != nil {
		return err
	}
	if f.calls < 1 || f.rounds < 1 || f.payload < 1 || f.concurrency < 1 {
		return usagef("bench: --calls, --rounds, --payload and --concurrency must be at least 1")
	}
	cfg := bench.HTTPConfig{Calls: f.calls, Rounds: f.rounds, Payload: f.payload, Concurrency: f.concurrency}
	var err error
	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("bench: find the gatehouse binary: %w", err)
	}
	home, done, err := benchHome(ctx, cfg.Gatehouse, true)
	if err != nil {
		return err
	}
	defer done()
	cfg.Home = home
	fmt.Fprintf(c.stderr, "gatehouse bench: %d calls over HTTP each way, direct and through gatehouse serve...\n", cfg.Calls)
	rep, err := bench.RunHTTP(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return c.writeBenchReport(f.json, rep)
}

// benchPrograms is bench --programs: governed programs, and the same steps
// called one by one, in a temporary home.
func (c *cli) benchPrograms(ctx context.Context, fs *flag.FlagSet, f *benchFlags) error {
	if err := onlyFlags(fs, "programs", "runs", "steps", "rounds", "payload", "json"); err != nil {
		return err
	}
	cfg := bench.ProgramsConfig{Programs: f.runs, Rounds: f.rounds, Payload: f.payload}
	for _, s := range strings.Split(f.steps, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > programs.MaxSteps {
			return usagef("bench: --steps %q: want numbers from 1 to %d, separated by commas", f.steps, programs.MaxSteps)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	if f.runs < 1 || f.rounds < 1 || f.payload < 1 {
		return usagef("bench: --runs, --rounds and --payload must be at least 1")
	}
	var err error
	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("bench: find the gatehouse binary: %w", err)
	}
	home, done, err := benchHome(ctx, cfg.Gatehouse, true)
	if err != nil {
		return err
	}
	defer done()
	cfg.Home = home
	fmt.Fprintf(c.stderr, "gatehouse bench: %d programs of %s steps each way, as programs and one call at a time...\n", cfg.Programs, f.steps)
	rep, err := bench.RunPrograms(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	return c.writeBenchReport(f.json, rep)
}
