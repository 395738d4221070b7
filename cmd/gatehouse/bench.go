package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"

	"github.com/gatehouse-dev/gatehouse/gateway/bench"
	"github.com/gatehouse-dev/gatehouse/store"
)

var benchCmd = &command{
	name:    "bench",
	usage:   "[--calls N] [--concurrency N] [--starts N] [--payload BYTES] [--rounds N] [--json]",
	summary: "measure the proxy: calls/s and latency, direct and through the gate; start-up time",
	help: `
Runs a small MCP server with one echo tool and calls it both directly and
through 'gatehouse proxy', in alternating rounds so that other load on the
machine falls on both alike; then starts each repeatedly and times the
answer to initialize. The server is registered in a temporary home folder
that is removed afterwards: --home is not used.

Read the proxy/direct ratio rather than the absolute figures, which depend
on the machine. docs/performance.md has the figures and what they mean.`,
	flags: func(fs *flag.FlagSet) {
		fs.Int("calls", 2000, "echo calls per mode (direct, proxy)")
		fs.Int("concurrency", 1, "`n` callers sharing one session")
		fs.Int("starts", 30, "start-up samples per mode")
		fs.Int("payload", 100, "`bytes` of each echo message")
		fs.Int("rounds", 10, "interleaved rounds per mode the calls are split into")
		fs.Bool("json", false, "print the report as JSON")
	},
	run: runBench,
}

func runBench(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("bench: unexpected argument %q", pos[0])
	}
	get := func(name string) int {
		n, _ := fs.Lookup(name).Value.(flag.Getter).Get().(int)
		return n
	}
	cfg := bench.Config{
		Calls:       get("calls"),
		Concurrency: get("concurrency"),
		Starts:      get("starts"),
		Payload:     get("payload"),
		Rounds:      get("rounds"),
	}
	for _, f := range []string{"calls", "concurrency", "starts", "payload", "rounds"} {
		if get(f) < 1 {
			return usagef("bench: --%s must be at least 1", f)
		}
	}
	asJSON, _ := fs.Lookup("json").Value.(flag.Getter).Get().(bool)

	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("bench: find the gatehouse binary: %w", err)
	}
	home, err := os.MkdirTemp("", "gatehouse-bench-")
	if err != nil {
		return fmt.Errorf("bench: create a temporary home: %w", err)
	}
	defer os.RemoveAll(home)
	cfg.Home = home
	if err := registerBenchServer(ctx, home, cfg.Gatehouse); err != nil {
		return err
	}

	fmt.Fprintf(c.stderr, "gatehouse bench: %d echo calls and %d starts per mode, direct and through the proxy...\n",
		cfg.Calls, cfg.Starts)
	rep, err := bench.Run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	if asJSON {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return rep.WriteText(c.stdout)
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
