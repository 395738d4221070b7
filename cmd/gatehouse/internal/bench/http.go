package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Over HTTP.
//
// [RunHTTP] measures tool calls over MCP's streamable HTTP transport, side
// by side, two ways:
//
//   - direct: the echo server of [ServeEcho], built with the MCP Go SDK,
//     behind the SDK's own streamable HTTP handler on loopback;
//   - serve: `gatehouse serve` on loopback in front of the registered echo
//     server ([ServerName], started on stdio for the session), each call
//     with a client's bearer token and through the gate: policy, a signed
//     receipt durable before the call, a signed outcome after.
//
// Both are reached by the SDK's client, in rounds that alternate the two.

// HTTPConfig says what [RunHTTP] measures. Zero values take the defaults
// shown.
type HTTPConfig struct {
	// Gatehouse is the path of the gatehouse binary. Required.
	Gatehouse string `json:"-"`
	// Home is a home folder in which [ServerName] is registered, its echo
	// tool allowed by the policy, and whose evidence log has its signing
	// key. Required.
	Home string `json:"-"`

	Calls       int `json:"calls"`       // calls per mode; 2000
	Rounds      int `json:"rounds"`      // interleaved rounds per mode; 10
	Payload     int `json:"payload"`     // bytes of each message; 100
	Concurrency int `json:"concurrency"` // callers sharing one session; 1
}

func (c *HTTPConfig) setDefaults() error {
	if c.Gatehouse == "" || c.Home == "" {
		return errors.New("bench: --http needs a gatehouse binary and a home folder")
	}
	if c.Calls <= 0 {
		c.Calls = 2000
	}
	if c.Rounds <= 0 {
		c.Rounds = 10
	}
	c.Rounds = min(c.Rounds, c.Calls)
	if c.Payload <= 0 {
		c.Payload = 100
	}
	if c.Concurrency <= 0 {
		c.Concurrency = 1
	}
	return nil
}

// An HTTPReport holds the figures of one [RunHTTP].
type HTTPReport struct {
	Machine Machine    `json:"machine"`
	Config  HTTPConfig `json:"config"`
	Direct  Calls      `json:"direct"`
	Serve   Calls      `json:"serve"`
	// Ratio is serve's calls/s over direct calls/s.
	Ratio       float64   `json:"ratio"`
	RoundRatios []float64 `json:"round_ratios"`
	// Load is the machine's load average (1, 5, 15 minutes) at the start
	// and at the end of the run (Linux).
	Load [2][3]float64 `json:"load"`
}

// RunHTTP measures calls over HTTP, direct and through gatehouse serve.
func RunHTTP(ctx context.Context, cfg HTTPConfig) (*HTTPReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &HTTPReport{Machine: DescribeMachine(), Config: cfg}
	r.Load[0] = loadAverage()

	direct, err := serveEchoHTTP()
	if err != nil {
		return nil, err
	}
	defer direct.Close()
	front, err := startServe(ctx, cfg.Gatehouse, cfg.Home)
	if err != nil {
		return nil, err
	}
	defer front.stop()

	echo := call{tool: "echo", arg: "message", exact: true}
	ways := []mode{
		{name: "direct", call: echo, connect: httpConnect("http://"+direct.Addr+"/mcp", "")},
		{name: "serve", call: echo, connect: httpConnect(front.url+"/mcp/"+ServerName, front.token), stderr: front.stderr},
	}
	var calls Report
	if err := calls.measureCalls(ctx, &Config{Calls: cfg.Calls, Rounds: cfg.Rounds, Payload: cfg.Payload, Concurrency: cfg.Concurrency}, ways, nil); err != nil {
		return nil, err
	}
	r.Direct, r.Serve, r.Ratio, r.RoundRatios = calls.Direct, calls.Proxy, calls.Ratio, calls.RoundRatios
	r.Load[1] = loadAverage()
	return r, nil
}

// echoHTTP is the direct side: [ServeEcho]'s server behind the SDK's
// streamable HTTP handler.
type echoHTTP struct {
	Addr string
	srv  *http.Server
}

func (e *echoHTTP) Close() { e.srv.Close() }

func serveEchoHTTP() (*echoHTTP, error) {
	s := newEchoServer()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("bench: listen for the direct HTTP server: %w", err)
	}
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	return &echoHTTP{Addr: ln.Addr().String(), srv: srv}, nil
}

// front is a `gatehouse serve` process and a client's token for it.
type front struct {
	cmd    *exec.Cmd
	url    string // http://127.0.0.1:PORT
	token  string
	stderr *tail
}

var servingRE = regexp.MustCompile(`serving (http://[0-9.:]+)/mcp/NAME`)

// startServe makes a token for the client "bench" in home and starts
// gatehouse serve on a free loopback port, waiting until it serves.
func startServe(ctx context.Context, exe, home string) (*front, error) {
	var out, errb bytes.Buffer
	tok := exec.CommandContext(ctx, exe, "--home", home, "serve", "token", "add", "bench")
	tok.Stdout, tok.Stderr = &out, &errb
	if err := tok.Run(); err != nil {
		return nil, fmt.Errorf("bench: gatehouse serve token add: %w: %s", err, strings.TrimSpace(errb.String()))
	}
	f := &front{token: strings.TrimSpace(out.String()), stderr: &tail{}}
	f.cmd = exec.Command(exe, "--home", home, "serve", "--listen", "127.0.0.1:0")
	pr, pw := io.Pipe()
	f.cmd.Stderr = io.MultiWriter(pw, f.stderr)
	if err := f.cmd.Start(); err != nil {
		return nil, fmt.Errorf("bench: start gatehouse serve: %w", err)
	}
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := servingRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
				break
			}
		}
		io.Copy(io.Discard, pr) // keep serve's stderr flowing
	}()
	exited := make(chan error, 1)
	go func() { exited <- f.cmd.Wait(); pw.Close() }()
	select {
	case f.url = <-found:
		go func() { <-exited }()
		return f, nil
	case err := <-exited:
		return nil, f.stderr.annotate(fmt.Errorf("bench: gatehouse serve exited before serving: %v", err))
	case <-time.After(30 * time.Second):
		f.cmd.Process.Kill()
		return nil, f.stderr.annotate(errors.New("bench: gatehouse serve did not serve within 30s"))
	}
}

func (f *front) stop() { f.cmd.Process.Kill() }

// httpConnect connects to a streamable HTTP endpoint, with a bearer token
// when one is given.
func httpConnect(endpoint, token string) func(context.Context) (*mcp.ClientSession, error) {
	return func(ctx context.Context) (*mcp.ClientSession, error) {
		hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
		client := mcp.NewClient(&mcp.Implementation{Name: "gatehouse-bench", Version: "1"}, nil)
		return client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: endpoint, HTTPClient: hc, MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	}
}

// bearer adds an Authorization header to each request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.token == "" {
		return b.next.RoundTrip(req)
	}
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(req)
}

// WriteText writes the report for people.
func (r *HTTPReport) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "gatehouse bench --http: %d calls per mode, %d rounds, %d-byte messages, %d caller(s)\n",
		r.Config.Calls, r.Config.Rounds, r.Config.Payload, r.Config.Concurrency)
	fmt.Fprintf(&b, "machine: %s; load %.2f %.2f %.2f -> %.2f %.2f %.2f\n\n", r.Machine,
		r.Load[0][0], r.Load[0][1], r.Load[0][2], r.Load[1][0], r.Load[1][1], r.Load[1][2])
	fmt.Fprintf(&b, "%-8s %10s %9s %9s %9s\n", "mode", "calls/s", "p50", "p90", "p99")
	for _, row := range []struct {
		name string
		c    Calls
	}{{"direct", r.Direct}, {"serve", r.Serve}} {
		fmt.Fprintf(&b, "%-8s %10.0f %9s %9s %9s\n", row.name, row.c.PerSecond, ms(row.c.P50), ms(row.c.P90), ms(row.c.P99))
	}
	fmt.Fprintf(&b, "\nserve keeps %s of direct calls/s (each call governed: a signed receipt durable before it runs)\n", pct(r.Ratio))
	_, err := io.WriteString(w, b.String())
	return err
}
