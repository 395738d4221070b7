package main

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/bench"
	"github.com/gatehouse-dev/gatehouse/gateway/programs"
)

// BenchmarkProgramRun runs governed programs of echo steps on the built-in
// server inside this process: the runner, the gate of each step, the
// evidence log and the trace (the server is a child process). A CPU
// profile of it (-cpuprofile) shows where a step's time goes; `gatehouse
// bench --programs` measures the same beside a client's calls. Run it in
// a keychain session (.ci/keyring-session.sh): the home's log signs.
func BenchmarkProgramRun(b *testing.B) {
	for _, n := range []int{4, 30} {
		b.Run(map[int]string{4: "4-steps", 30: "30-steps"}[n], func(b *testing.B) {
			home := shortHome(b)
			gatehouse(b, home, "server", "add", "--no-quarantine", bench.ServerName, "--", gatehouseBin, bench.ServeCommand)
			gatehouse(b, home, "policy", "set", "mcp."+bench.ServerName+".echo", "ALLOW")
			ctx := context.Background()
			c := &cli{home: home, stdin: nil, stdout: io.Discard, stderr: io.Discard}
			r, done, err := c.openRunner(ctx, false)
			if err != nil {
				b.Fatal(err)
			}
			defer done()
			body := bench.ProgramBody(n, "hello")
			run := func() {
				t, err := r.Run(ctx, body, programs.RunOptions{Client: "bench"})
				if err != nil {
					b.Fatal(err)
				}
				if t.Status != programs.StatusSuccess || len(t.Steps) != n {
					b.Fatalf("Run = %s after %d steps (%s), want SUCCESS after %d", t.Status, len(t.Steps), t.Error, n)
				}
			}
			run() // starts the server and pins its tool
			start := time.Now()
			for b.Loop() {
				run()
			}
			el := time.Since(start)
			b.ReportMetric(float64(b.N)/el.Seconds(), "programs/s")
			b.ReportMetric(float64(b.N*n)/el.Seconds(), "steps/s")
		})
	}
}
