package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// gatehouse is the path of a gatehouse binary built from this tree.
var gatehouse string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "gatehouse-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	gatehouse, err = buildGatehouse(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// buildGatehouse builds cmd/gatehouse into dir.
func buildGatehouse(dir string) (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(out)))
	bin := filepath.Join(dir, "gatehouse")
	build := exec.Command("go", "build", "-o", bin, "./cmd/gatehouse")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build gatehouse: %w\n%s", err, out)
	}
	return bin, nil
}

// npmPeers returns the node_modules folder of the pinned npm test peers
// (cmd/gatehouse/testdata/npm), which the test command installs.
func npmPeers(tb testing.TB) string {
	tb.Helper()
	// A test runs in its package's folder, cmd/gatehouse/internal/bench.
	nm, err := filepath.Abs(filepath.Join("..", "..", "testdata", "npm", "node_modules"))
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(nm, "@modelcontextprotocol", "server-everything", "dist", "index.js")); err != nil {
		tb.Fatalf("the npm test peers are not installed (%v)\nhint: run 'make test', or: cd cmd/gatehouse/testdata/npm && npm ci", err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		tb.Fatal("node is not on PATH; the npm test peers need Node.js 20 or later")
	}
	return nm
}

// mustHome returns a home folder with the echo server registered.
func mustHome(tb testing.TB) string {
	tb.Helper()
	dir := tb.TempDir()
	ctx := context.Background()
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	if err := st.AddServer(ctx, store.Server{Name: ServerName, Command: gatehouse, Args: []string{ServeCommand}}); err != nil {
		tb.Fatal(err)
	}
	return dir
}

func TestRun(t *testing.T) {
	cfg := Config{Gatehouse: gatehouse, Home: mustHome(t), Calls: 60, Concurrency: 3, Starts: 3, Payload: 500, Rounds: 2}
	r, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkReport(t, cfg, r)
}

// TestRunServer measures a real MCP server from npm, registered in a home
// folder as a user would: @modelcontextprotocol/server-everything, whose
// echo tool answers "Echo: MESSAGE".
func TestRunServer(t *testing.T) {
	argv := []string{"node", filepath.Join(npmPeers(t), "@modelcontextprotocol", "server-everything", "dist", "index.js")}
	home := t.TempDir()
	st, err := store.Open(t.Context(), home, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := store.Server{Name: "everything", Transport: store.TransportStdio, Command: argv[0], Args: argv[1:],
		Env: map[string]string{"GATEHOUSE_BENCH_TEST": "1"}, Cwd: t.TempDir()}
	err = st.AddServer(t.Context(), srv)
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Gatehouse: gatehouse, Home: home,
		Server: srv.Name,
		Direct: Direct{Argv: argv, Env: srv.EnvList(), Dir: srv.Cwd},
		Tool:   "echo", Arg: "message",
		Calls: 40, Concurrency: 4, Starts: 2, Payload: 300, Rounds: 2,
	}
	r, err := Run(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkReport(t, cfg, r)
	if r.Config.Server != "everything" {
		t.Errorf("report names server %q, want everything", r.Config.Server)
	}
	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"server: everything, tool echo, argument message", "proxy: relay only", "proxy adds < 20.00 ms to the server's start-up"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteText output lacks %q:\n%s", want, b.String())
		}
	}
	t.Logf("\n%s", b.String())
}

// TestRunServerWrongArgument checks that calls a server refuses end the run
// with its error: here the built-in server is measured as a registered one,
// with an argument name its echo tool does not take.
func TestRunServerWrongArgument(t *testing.T) {
	cfg := Config{
		Gatehouse: gatehouse, Home: mustHome(t),
		Server: ServerName,
		Direct: Direct{Argv: []string{gatehouse, ServeCommand}},
		Tool:   "echo", Arg: "text",
		Calls: 2, Starts: 1,
	}
	r, err := Run(t.Context(), cfg)
	if err == nil {
		t.Fatalf("Run = %+v, want an error", r)
	}
	if !strings.Contains(err.Error(), "echo answered with an error") {
		t.Errorf("Run error = %v, want it to say that echo answered with an error", err)
	}
	t.Logf("Run error: %v", err)
}

// TestAnswerCheck checks which answers count as correct: the message itself
// from the built-in server; any text containing it from other servers.
func TestAnswerCheck(t *testing.T) {
	srv := mcp.NewServer(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	answer := func(f func(string) string) mcp.ToolHandlerFor[echoInput, any] {
		return func(ctx context.Context, req *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: f(in.Message)}}}, nil, nil
		}
	}
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, answer(func(m string) string { return m }))
	mcp.AddTool(srv, &mcp.Tool{Name: "prefixed"}, answer(func(m string) string { return "Echo: " + m }))
	mcp.AddTool(srv, &mcp.Tool{Name: "upper"}, answer(strings.ToUpper))
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(t.Context(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(t.Context(), ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tests := []struct {
		tool  string
		exact bool
		ok    bool
	}{
		{"echo", true, true},
		{"echo", false, true},
		{"prefixed", true, false},
		{"prefixed", false, true},
		{"upper", false, false},
		{"missing", false, false},
	}
	for _, tt := range tests {
		s := &session{cs: cs, stderr: &tail{}, call: call{tool: tt.tool, arg: "message", exact: tt.exact}}
		err := s.echo(t.Context(), "hello")
		if (err == nil) != tt.ok {
			t.Errorf("%s (exact %v): echo(hello) = %v, want ok %v", tt.tool, tt.exact, err, tt.ok)
		}
	}
}

// TestModes checks the command lines of the two modes: the proxy relays
// without the gate unless Governed asks for it.
func TestModes(t *testing.T) {
	tests := []struct {
		name               string
		cfg                Config
		wantDirect, wantPx string
	}{
		{"built-in", Config{Gatehouse: "gh", Home: "H"},
			"gh bench-echo-server", "gh proxy bench-echo --home H --pass-through"},
		{"server", Config{Gatehouse: "gh", Home: "H", Server: "ev", Direct: Direct{Argv: []string{"node", "ev.js"}}},
			"node ev.js", "gh proxy ev --home H --pass-through"},
		{"governed", Config{Gatehouse: "gh", Home: "H", Server: "ev", Direct: Direct{Argv: []string{"node", "ev.js"}}, Governed: true},
			"node ev.js", "gh proxy ev --home H"},
	}
	for _, tt := range tests {
		direct, proxy := modes(&tt.cfg)
		if got := strings.Join(direct.argv, " "); got != tt.wantDirect {
			t.Errorf("%s: direct = %q, want %q", tt.name, got, tt.wantDirect)
		}
		if got := strings.Join(proxy.argv, " "); got != tt.wantPx {
			t.Errorf("%s: proxy = %q, want %q", tt.name, got, tt.wantPx)
		}
	}
}

func TestConfigValidation(t *testing.T) {
	for _, cfg := range []Config{
		{Gatehouse: gatehouse, Home: t.TempDir(), Server: "everything"},
		{Gatehouse: gatehouse, Home: t.TempDir(), Direct: Direct{Argv: []string{"node", "server.js"}}},
	} {
		if r, err := Run(t.Context(), cfg); err == nil {
			t.Errorf("Run(server %q, direct %q) = %+v, want an error", cfg.Server, cfg.Direct.Argv, r)
		}
	}
}

// checkReport checks that r is the sane report of a run of cfg.
func checkReport(t *testing.T, cfg Config, r *Report) {
	t.Helper()
	for _, m := range []struct {
		name string
		c    Calls
	}{{"direct", r.Direct}, {"proxy", r.Proxy}} {
		c := m.c
		if c.Calls != cfg.Calls {
			t.Errorf("%s: %d calls measured, want %d", m.name, c.Calls, cfg.Calls)
		}
		if c.PerSecond <= 0 || c.Elapsed <= 0 {
			t.Errorf("%s: %v calls/s over %v, want > 0", m.name, c.PerSecond, c.Elapsed)
		}
		if !(0 < c.P50 && c.P50 <= c.P90 && c.P90 <= c.P99 && c.P99 <= c.Max) {
			t.Errorf("%s: latencies p50 %v, p90 %v, p99 %v, max %v: want 0 < p50 <= p90 <= p99 <= max",
				m.name, c.P50, c.P90, c.P99, c.Max)
		}
		if len(c.Rounds) != cfg.Rounds {
			t.Errorf("%s: %d rounds, want %d", m.name, len(c.Rounds), cfg.Rounds)
		}
	}
	if r.Ratio <= 0 || len(r.RoundRatios) != cfg.Rounds {
		t.Errorf("ratio %v, round ratios %v: want a positive ratio per round", r.Ratio, r.RoundRatios)
	}
	for _, m := range []struct {
		name string
		s    Startup
	}{{"direct", r.StartDirect}, {"proxy", r.StartProxy}} {
		s := m.s
		if s.Samples != cfg.Starts {
			t.Errorf("start-up %s: %d samples, want %d", m.name, s.Samples, cfg.Starts)
		}
		if !(0 < s.Min && s.Min <= s.P50 && s.P50 <= s.P90 && s.P90 <= s.Max) {
			t.Errorf("start-up %s: min %v, p50 %v, p90 %v, max %v: want 0 < min <= p50 <= p90 <= max",
				m.name, s.Min, s.P50, s.P90, s.Max)
		}
	}
	if r.Machine.CPUs < 1 || r.Machine.GoVersion == "" {
		t.Errorf("machine = %+v, want CPUs and a Go version", r.Machine)
	}

	var b bytes.Buffer
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"echo calls", "direct", "proxy", "calls/s", "p99", "start-up", "proxy/direct throughput", r.Machine.GoVersion} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("WriteText output lacks %q:\n%s", want, b.String())
		}
	}
}

// TestRunFailsWhenProxyCannotReachServer checks that a run whose calls fail
// is an error, not a report: here the proxy's home has no server registered.
func TestRunFailsWhenProxyCannotReachServer(t *testing.T) {
	cfg := Config{Gatehouse: gatehouse, Home: t.TempDir(), Calls: 4, Starts: 1}
	r, err := Run(t.Context(), cfg)
	if err == nil {
		t.Fatalf("Run = %+v, want an error", r)
	}
	if !strings.Contains(err.Error(), "proxy") {
		t.Errorf("Run error = %v, want it to name the proxy", err)
	}
	t.Logf("Run error: %v", err)
}

// TestEchoRoundTrip checks that messages come back unchanged, directly and
// through the proxy: the benchmark measures calls that really did their work.
func TestEchoRoundTrip(t *testing.T) {
	cfg := Config{Gatehouse: gatehouse, Home: mustHome(t)}
	direct, proxy := modes(&cfg)
	msgs := []string{
		"",
		"hello",
		`quotes " and \ backslashes, a newline` + "\n" + `and a tab` + "\t",
		"unicode: é, 漢字, 🙂, \u2028",
		strings.Repeat("0123456789abcdef", 64<<10/16), // 64 KiB
	}
	for _, m := range []mode{direct, proxy} {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			s, d, err := startSession(t.Context(), m)
			if err != nil {
				t.Fatal(err)
			}
			if d <= 0 {
				t.Errorf("start-up = %v, want > 0", d)
			}
			for _, msg := range msgs {
				if err := s.echo(t.Context(), msg); err != nil {
					t.Errorf("echo(%.20q): %v", msg, err)
				}
			}
			if err := s.close(); err != nil {
				t.Errorf("close: %v", err)
			}
		})
	}
}

// TestServeEchoExitsOnEOF checks that the server ends, without an error,
// when its client closes the server's input.
func TestServeEchoExitsOnEOF(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- ServeEcho(t.Context(), inR, outW)
		outW.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil)
	cs, err := client.Connect(t.Context(), &mcp.IOTransport{Reader: outR, Writer: inW}, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "ping"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := text(res); got != "ping" || res.IsError {
		t.Errorf("echo(ping) = %q (isError %v), want ping", got, res.IsError)
	}
	cs.Close() // closes inW: the server reads EOF
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ServeEcho after EOF = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ServeEcho still running 10s after its input closed")
	}
}

func TestPercentile(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var out []time.Duration
		for _, n := range ns {
			out = append(out, time.Duration(n)*time.Millisecond)
		}
		return out
	}
	hundred := make([]int, 100)
	for i := range hundred {
		hundred[i] = i + 1
	}
	tests := []struct {
		name   string
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		{"one sample p50", ms(7), 0.5, 7 * time.Millisecond},
		{"one sample p99", ms(7), 0.99, 7 * time.Millisecond},
		{"two samples p50", ms(1, 2), 0.5, 1 * time.Millisecond},
		{"two samples p90", ms(1, 2), 0.9, 2 * time.Millisecond},
		{"1..100 p50", ms(hundred...), 0.5, 50 * time.Millisecond},
		{"1..100 p90", ms(hundred...), 0.9, 90 * time.Millisecond},
		{"1..100 p99", ms(hundred...), 0.99, 99 * time.Millisecond},
		{"1..100 p100", ms(hundred...), 1, 100 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := percentile(tt.sorted, tt.p); got != tt.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", tt.sorted, tt.p, got, tt.want)
			}
		})
	}
}

func TestMessage(t *testing.T) {
	tests := []struct {
		i, size int
		want    string
	}{
		{7, 4, "7xxx"},
		{1234, 4, "1234"},
		{12345, 4, "12345"},
		{0, 1, "0"},
	}
	for _, tt := range tests {
		if got := message(tt.i, tt.size); got != tt.want {
			t.Errorf("message(%d, %d) = %q, want %q", tt.i, tt.size, got, tt.want)
		}
	}
}

// BenchmarkEcho measures sequential echo calls on one long-lived session,
// directly and through the proxy.
func BenchmarkEcho(b *testing.B) {
	cfg := Config{Gatehouse: gatehouse, Home: mustHome(b), Payload: 100}
	direct, proxy := modes(&cfg)
	for _, m := range []mode{direct, proxy} {
		b.Run(m.name, func(b *testing.B) {
			s, _, err := startSession(b.Context(), m)
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			if _, err := callRound(b.Context(), s, 50, 1, cfg.Payload, 0); err != nil {
				b.Fatal(err)
			}
			// The CPU time of the processes on the far side, where Linux
			// tells it: the server, and the proxy in front of it.
			procs := map[string]int{"server": s.cmd.Process.Pid}
			if m.name == "proxy" {
				procs = map[string]int{"proxy": s.cmd.Process.Pid, "server": childPID(s.cmd.Process.Pid)}
			}
			cpu0 := map[string]time.Duration{}
			for name, pid := range procs {
				cpu0[name], _ = processCPU(pid)
			}
			msg := message(0, cfg.Payload)
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := s.echo(b.Context(), msg); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			b.StopTimer()
			reportLatencies(b, lat, 0.50, 0.99)
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
			for name, pid := range procs {
				if cpu, ok := processCPU(pid); ok {
					b.ReportMetric(float64(cpu-cpu0[name])/float64(time.Microsecond)/float64(b.N), name+"-cpu-us/op")
				}
			}
		})
	}
}

// BenchmarkRelay is BenchmarkEcho/proxy with the proxy run inside the test
// process ([gateway.Proxy.Serve] over OS pipes), so that a CPU profile
// (go test -bench Relay -cpuprofile cpu.out) shows the relay's own work next
// to the client's.
func BenchmarkRelay(b *testing.B) {
	toProxyR, toProxyW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	toClientR, toClientW, err := os.Pipe()
	if err != nil {
		b.Fatal(err)
	}
	defer toClientR.Close()
	p := gateway.New(ServerName, gateway.Command{Path: gatehouse, Args: []string{ServeCommand}}, nil)
	served := make(chan error, 1)
	go func() {
		served <- p.Serve(b.Context(), toProxyR, toClientW)
		toClientW.Close()
		toProxyR.Close()
	}()
	client := mcp.NewClient(&mcp.Implementation{Name: "gatehouse-bench", Version: "1"}, nil)
	cs, err := client.Connect(b.Context(), &mcp.IOTransport{Reader: toClientR, Writer: toProxyW},
		&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		b.Fatal(err)
	}
	s := &session{cs: cs, stderr: &tail{}, call: call{tool: "echo", arg: "message", exact: true}}
	if _, err := callRound(b.Context(), s, 50, 1, 100, 0); err != nil {
		b.Fatal(err)
	}
	msg := message(0, 100)
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		start := time.Now()
		if err := s.echo(b.Context(), msg); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat, 0.50, 0.99)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "calls/s")
	cs.Close() // closes the proxy's input: it stops the server and returns
	if err := <-served; err != nil {
		b.Errorf("Serve = %v, want nil", err)
	}
}

// BenchmarkStartup measures the time from spawning the server, or the proxy
// in front of it, to the answer to initialize.
func BenchmarkStartup(b *testing.B) {
	cfg := Config{Gatehouse: gatehouse, Home: mustHome(b)}
	direct, proxy := modes(&cfg)
	for _, m := range []mode{direct, proxy} {
		b.Run(m.name, func(b *testing.B) {
			var lat []time.Duration
			for range b.N {
				s, d, err := startSession(b.Context(), m)
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, d)
				b.StopTimer() // stopping the process is not start-up
				if err := s.close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
			reportLatencies(b, lat, 0.50, 0.90)
		})
	}
}

// reportLatencies reports the given percentiles of lat in milliseconds.
func reportLatencies(b *testing.B, lat []time.Duration, ps ...float64) {
	slices.Sort(lat)
	for _, p := range ps {
		b.ReportMetric(float64(percentile(lat, p))/float64(time.Millisecond), fmt.Sprintf("p%.0f-ms", 100*p))
	}
}

// processCPU returns the CPU time used so far by the threads of process pid,
// from /proc/PID/task/*/schedstat (nanoseconds on CPU). It reports false
// where there is no such file: on systems other than Linux, or for pid 0.
func processCPU(pid int) (time.Duration, bool) {
	if pid <= 0 {
		return 0, false
	}
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var total time.Duration
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue // the thread has exited
		}
		var ns int64
		if _, err := fmt.Sscan(string(b), &ns); err == nil {
			total += time.Duration(ns)
		}
	}
	return total, len(files) > 0
}

// childPID returns the first child of process pid, or 0 where Linux does not
// say (/proc/PID/task/*/children).
func childPID(pid int) int {
	files, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	for _, f := range files {
		b, _ := os.ReadFile(f)
		var child int
		if _, err := fmt.Sscan(string(b), &child); err == nil {
			return child
		}
	}
	return 0
}
