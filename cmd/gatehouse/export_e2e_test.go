package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A served is a running gatehouse serve.
type served struct {
	URL  string // http://127.0.0.1:PORT
	cmd  *exec.Cmd
	once sync.Once
}

// startServed starts gatehouse serve on a free loopback port; Stop (also
// at cleanup) interrupts it and waits for it to end.
func startServed(t *testing.T, home string, args ...string) *served {
	t.Helper()
	cmd := exec.Command(gatehouseBin, append([]string{"--home", home, "serve", "--listen", "127.0.0.1:0"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd}
	t.Cleanup(s.Stop)
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		re := regexp.MustCompile(`serving (http://[0-9.:]+)/mcp/NAME`)
		for sc.Scan() {
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case s.URL = <-found:
		return s
	case <-time.After(30 * time.Second):
		t.Fatal("gatehouse serve did not start")
		return nil
	}
}

func (s *served) Stop() {
	s.once.Do(func() {
		s.cmd.Process.Signal(os.Interrupt)
		s.cmd.Wait()
	})
}

// bearer adds a client's token to every request.
type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

// connectHTTP opens an MCP session with the Go SDK over streamable HTTP.
func connectHTTP(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer(token)}}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", url, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callTools makes n calls of echo and one of get-sum (which the tests'
// policy denies) in the session.
func callTools(t *testing.T, cs *mcp.ClientSession, phase string, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range n {
		msg := fmt.Sprintf("%s %d", phase, i)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": msg}})
		if err != nil || res.IsError || !strings.Contains(contentText(res), msg) {
			t.Fatalf("echo %q: %v %+v", msg, err, res)
		}
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get-sum", Arguments: map[string]any{"a": 1, "b": 2}})
	if err != nil || !res.IsError {
		t.Fatalf("get-sum: %v %+v, want a refusal", err, res)
	}
}

// An exported is what a receiver must hold of one receipt or outcome.
type exported struct {
	Kind, Receipt, LeafHash string
}

// evidence returns every receipt and outcome of home's log, by entry id.
func evidence(t *testing.T, home string) map[string]exported {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := receipts.OpenReader(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	size, err := r.Size(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]exported{}
	for s, err := range r.Entries(ctx, 0, size) {
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(s.Data)
		if err != nil {
			t.Fatal(err)
		}
		x := exported{Kind: string(e.Kind), Receipt: e.ID, LeafHash: entry.FormatTreeHash(entry.LeafHash(s.Data))}
		switch e.Kind {
		case entry.KindReceipt:
		case entry.KindOutcome:
			var o entry.Outcome
			if err := json.Unmarshal(e.Body, &o); err != nil {
				t.Fatal(err)
			}
			x.Receipt = o.Receipt
		default:
			continue
		}
		want[e.ID] = x
	}
	return want
}

// evidenceOf waits until home's log holds n receipts and outcomes, and
// returns them.
func evidenceOf(t *testing.T, home string, n int) map[string]exported {
	t.Helper()
	var got map[string]exported
	waitUntil(t, 30*time.Second, fmt.Sprintf("%d receipts and outcomes in the log", n), func() bool {
		got = evidence(t, home)
		return len(got) >= n
	})
	if len(got) != n {
		t.Fatalf("the log holds %d receipts and outcomes, want %d", len(got), n)
	}
	return got
}

// A collector is the test build of the OpenTelemetry Collector
// (testdata/otelcol: the OTLP receiver and the file exporter), running.
type collector struct {
	cmd  *exec.Cmd
	done chan struct{}
	out  *syncBuffer
}

var otelcol struct {
	once sync.Once
	path string
	err  error
}

// otelcolBin builds testdata/otelcol once per test binary (the Go build
// cache keeps its packages between runs: only the first build on a
// machine compiles the collector).
func otelcolBin(t *testing.T) string {
	t.Helper()
	otelcol.once.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-otelcol-")
		if err != nil {
			otelcol.err = err
			return
		}
		otelcol.path = filepath.Join(dir, "otelcol")
		cmd := exec.Command("go", "build", "-o", otelcol.path, ".")
		cmd.Dir = filepath.Join("testdata", "otelcol")
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=")
		if out, err := cmd.CombinedOutput(); err != nil {
			otelcol.err = fmt.Errorf("build the test collector: %v\n%s", err, out)
		}
	})
	if otelcol.err != nil {
		t.Fatal(otelcol.err)
	}
	return otelcol.path
}

// startCollector runs the collector with an OTLP/HTTP receiver on addr
// and a file exporter writing to file, and waits until it listens. With a
// token, the receiver takes only requests with Authorization: Bearer
// token (the bearertokenauth extension).
func startCollector(t *testing.T, addr, file string, token ...string) *collector {
	t.Helper()
	auth, ext := "", ""
	if len(token) > 0 {
		auth = "\n        auth:\n          authenticator: bearertokenauth"
		ext = fmt.Sprintf("extensions:\n  bearertokenauth:\n    token: %q\n", token[0])
	}
	config := ext + fmt.Sprintf(`receivers:
  otlp:
    protocols:
      http:
        endpoint: %s%s
exporters:
  file:
    path: %s
    flush_interval: 100ms
service:%s
  telemetry:
    metrics:
      level: none
  pipelines:
    logs:
      receivers: [otlp]
      exporters: [file]
    traces:
      receivers: [otlp]
      exporters: [file]
`, addr, auth, file, map[bool]string{true: "\n  extensions: [bearertokenauth]"}[ext != ""])
	cfg := file + ".yaml"
	if err := os.WriteFile(cfg, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	c := &collector{cmd: exec.Command(otelcolBin(t), "--config", "file:"+cfg), done: make(chan struct{}), out: &syncBuffer{}}
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { c.cmd.Wait(); close(c.done) }()
	t.Cleanup(c.Stop)
	deadline := time.Now().Add(30 * time.Second)
	for {
		conn, err := net.Dial("tcp", addr)
		if err == nil {
			conn.Close()
			return c
		}
		select {
		case <-c.done:
			t.Fatalf("the collector exited:\n%s", c.out)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("the collector does not listen on %s:\n%s", addr, c.out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop shuts the collector down as a service manager would (SIGTERM),
// and waits for it: what it took is in its file by then.
func (c *collector) Stop() {
	select {
	case <-c.done:
		return
	default:
	}
	c.cmd.Process.Signal(os.Interrupt)
	<-c.done
}

// received reads the records the file exporter wrote (OTLP JSON, one
// request a line): the log records and the spans, by entry id, and how
// many of each arrived.
func received(t *testing.T, files ...string) (logs map[string]exported, spans map[string]bool, count int) {
	t.Helper()
	logs, spans = map[string]exported{}, map[string]bool{}
	type kv struct {
		Key   string `json:"key"`
		Value struct {
			StringValue string `json:"stringValue"`
		} `json:"value"`
	}
	attrs := func(list []kv) map[string]string {
		m := map[string]string{}
		for _, a := range list {
			m[a.Key] = a.Value.StringValue
		}
		return m
	}
	var line struct {
		ResourceLogs []struct {
			ScopeLogs []struct {
				LogRecords []struct {
					Attributes []kv `json:"attributes"`
				} `json:"logRecords"`
			} `json:"scopeLogs"`
		} `json:"resourceLogs"`
		ResourceSpans []struct {
			ScopeSpans []struct {
				Spans []struct {
					Attributes []kv `json:"attributes"`
				} `json:"spans"`
			} `json:"scopeSpans"`
		} `json:"resourceSpans"`
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		for l := range strings.Lines(string(b)) {
			if strings.TrimSpace(l) == "" {
				continue
			}
			line.ResourceLogs, line.ResourceSpans = nil, nil
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				continue // a line being written
			}
			for _, rl := range line.ResourceLogs {
				for _, sl := range rl.ScopeLogs {
					for _, lr := range sl.LogRecords {
						a := attrs(lr.Attributes)
						logs[a["gatehouse.entry.id"]] = exported{Kind: a["gatehouse.entry.kind"], Receipt: a["gatehouse.receipt.id"],
							LeafHash: a["gatehouse.entry.leaf_hash"]}
						count++
					}
				}
			}
			for _, rs := range line.ResourceSpans {
				for _, ss := range rs.ScopeSpans {
					for _, sp := range ss.Spans {
						spans[attrs(sp.Attributes)["gatehouse.entry.id"]] = true
					}
				}
			}
		}
	}
	return logs, spans, count
}

// metricsText reads gatehouse serve's /metrics.
func metricsText(t *testing.T, base, token string) string {
	t.Helper()
	resp, err := (&http.Client{Transport: bearer(token)}).Get(base + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("/metrics: %v %s", err, resp.Status)
	}
	return string(b)
}

// freeAddr returns a loopback address no one listens on now.
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// A real OpenTelemetry Collector receives every receipt and outcome of an
// agent's MCP session through gatehouse serve --export-otlp, including
// those made while it was stopped, and while gatehouse serve was stopped
// too: each arrives, as a log record with its entry id and leaf hash (and
// a span for each call that ended or was refused), at least once.
func TestOTelCollectorGetsEveryRecord(t *testing.T) {
	t.Parallel()
	nm := npmPeers(t)
	otelcolBin(t) // the first build takes minutes: not inside the deadlines below
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.echo")
	denyRule(t, home, "mcp.everything.get-sum")
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "agent"))

	dir := t.TempDir()
	addr := freeAddr(t)
	files := []string{filepath.Join(dir, "run1.json"), filepath.Join(dir, "run2.json")}
	col := startCollector(t, addr, files[0])
	srv := startServed(t, home, "--export-otlp", "http://"+addr)
	cs := connectHTTP(t, srv.URL+"/mcp/everything", token)
	// 4 calls a phase: 3 allowed (a receipt and an outcome each) and 1
	// refused; an outcome is written as its answer goes out.
	const perPhase = 3*2 + 1
	callTools(t, cs, "collector up", 3)
	before := evidenceOf(t, home, perPhase)
	waitUntil(t, 60*time.Second, "the first calls' records at the collector", func() bool {
		logs, _, _ := received(t, files[0])
		return containsAll(logs, before)
	})

	// The collector goes down; the agent goes on; then Gatehouse stops too.
	col.Stop()
	callTools(t, cs, "collector down", 3)
	// /metrics shows what waits for the collector.
	lag := regexp.MustCompile(`(?m)^gatehouse_export_lag_entries\{sink="otlp:http://` + regexp.QuoteMeta(addr) + `"\} (\d+)$`)
	waitUntil(t, 60*time.Second, "an export lag on /metrics", func() bool {
		m := lag.FindStringSubmatch(metricsText(t, srv.URL, token))
		return m != nil && m[1] != "0"
	})
	cs.Close()
	srv.Stop()
	down := evidenceOf(t, home, 2*perPhase)
	for id := range before {
		delete(down, id)
	}

	// Both come back; the agent goes on.
	startCollector(t, addr, files[1])
	srv = startServed(t, home, "--export-otlp", "http://"+addr)
	cs = connectHTTP(t, srv.URL+"/mcp/everything", token)
	callTools(t, cs, "both back", 3)
	cs.Close()
	want := evidenceOf(t, home, 3*perPhase)
	var logs map[string]exported
	var spans map[string]bool
	var n int
	waitUntil(t, 60*time.Second, "every record at the collector", func() bool {
		logs, spans, n = received(t, files...)
		return containsAll(logs, want)
	})
	waitUntil(t, 30*time.Second, "no export lag on /metrics", func() bool {
		m := lag.FindStringSubmatch(metricsText(t, srv.URL, token))
		return m != nil && m[1] == "0"
	})
	for id, w := range want {
		if got := logs[id]; got != w {
			t.Errorf("entry %s at the collector = %+v, want %+v", id, got, w)
		}
		if (w.Kind == "outcome" || refused(want, id)) && !spans[id] {
			t.Errorf("no span for %s %s", w.Kind, id)
		}
	}
	// What was made while the collector was down reached its second run.
	logs2, _, _ := received(t, files[1])
	if len(down) == 0 || !containsAll(logs2, down) {
		t.Errorf("the records made while the collector was down (%d) did not all reach its second run", len(down))
	}
	t.Logf("%d receipts and outcomes, %d log records received (%d duplicates)", len(want), n, n-len(want))
}

// refused: a receipt with no outcome is a call that was refused, which
// has a span of its own.
func refused(want map[string]exported, id string) bool {
	if want[id].Kind != "receipt" {
		return false
	}
	for _, w := range want {
		if w.Kind == "outcome" && w.Receipt == id {
			return false
		}
	}
	return true
}

func containsAll(got, want map[string]exported) bool {
	for id, w := range want {
		if got[id] != w {
			return false
		}
	}
	return true
}

// waitUntil polls cond until it holds, or fails the test after d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
