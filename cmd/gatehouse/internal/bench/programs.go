package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse-dev/gatehouse/gateway/programs"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// Governed programs.
//
// [RunPrograms] measures a governed program (`gatehouse programs`, its
// run_program tool) side by side with the same steps called one by one by
// a client through the governed proxy (`gatehouse proxy`): each step is
// an echo call, decided by the policy, with its signed receipt durable
// before it runs and its signed outcome after, in both modes; a program's
// run also records each step in its trace, durably, before the next. Then
// it replays every trace the programs made ([programs.Runner.Replay]) and
// checks that every step named its receipt.

// The goals of governed programs (docs/performance.md).
const (
	// GoalPrograms is how many programs of GoalProgramSteps steps must run
	// in a second, one after another.
	GoalPrograms     = 30
	GoalProgramSteps = 30
	// GoalReplay is how many steps a second a replay must go through.
	GoalReplay = 1300
)

// ProgramsConfig says what [RunPrograms] measures. Zero values take the
// defaults shown.
type ProgramsConfig struct {
	// Gatehouse is the path of the gatehouse binary. Required.
	Gatehouse string `json:"-"`
	// Home is a home folder in which [ServerName] is registered, its echo
	// tool allowed by the policy, and whose evidence log has its signing
	// key. Required.
	Home string `json:"-"`

	Sizes    []int `json:"sizes"`    // steps of each program; 4 and 30
	Programs int   `json:"programs"` // programs per size and mode; 60
	Rounds   int   `json:"rounds"`   // interleaved rounds per size and mode; 6
	Payload  int   `json:"payload"`  // bytes of each step's message; 100
}

func (c *ProgramsConfig) setDefaults() error {
	if c.Gatehouse == "" || c.Home == "" {
		return fmt.Errorf("bench: programs need a gatehouse binary and a home folder")
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int{4, GoalProgramSteps}
	}
	for _, n := range c.Sizes {
		if n < 1 || n > programs.MaxSteps {
			return fmt.Errorf("bench: a program has from 1 to %d steps, not %d", programs.MaxSteps, n)
		}
	}
	if c.Programs <= 0 {
		c.Programs = 60
	}
	if c.Rounds <= 0 {
		c.Rounds = 6
	}
	c.Rounds = min(c.Rounds, c.Programs)
	if c.Payload <= 0 {
		c.Payload = 100
	}
	return nil
}

// A ProgramsReport holds the figures of one [RunPrograms].
type ProgramsReport struct {
	Machine Machine        `json:"machine"`
	Config  ProgramsConfig `json:"config"`
	Sizes   []ProgramSize  `json:"sizes"`
	Replay  Replay         `json:"replay"`
	// Load is the machine's load average (1, 5, 15 minutes) at the start
	// and at the end of the run (Linux).
	Load [2][3]float64 `json:"load"`
}

// ProgramSize are the figures of programs of one size.
type ProgramSize struct {
	Steps   int      `json:"steps"`
	Client  Programs `json:"client"`  // the steps called one by one through the governed proxy
	Program Programs `json:"program"` // one run_program
}

// Programs are the throughput and latency of whole programs in one mode.
type Programs struct {
	Programs     int           `json:"programs"`
	PerSecond    float64       `json:"programs_per_second"`
	StepsPerSec  float64       `json:"steps_per_second"`
	P50          time.Duration `json:"p50_ns"`
	P90          time.Duration `json:"p90_ns"`
	P99          time.Duration `json:"p99_ns"`
	StepP50      time.Duration `json:"step_p50_ns"` // P50 over the steps
	Elapsed      time.Duration `json:"elapsed_ns"`
	RoundsPerSec []float64     `json:"rounds"`
}

// Replay are the figures of replaying the programs' traces.
type Replay struct {
	Traces      int           `json:"traces"`
	Steps       int           `json:"steps"`
	StepsPerSec float64       `json:"steps_per_second"`
	P50         time.Duration `json:"p50_ns"`   // one trace's replay
	Matched     bool          `json:"matched"`  // every replay made the same transitions
	Receipts    int           `json:"receipts"` // steps whose record names their receipt
}

// ProgramsMet reports whether programs of GoalProgramSteps steps ran at
// GoalPrograms a second; false if none was measured.
func (r *ProgramsReport) ProgramsMet() bool {
	for _, s := range r.Sizes {
		if s.Steps == GoalProgramSteps {
			return s.Program.PerSecond >= GoalPrograms
		}
	}
	return false
}

// ReplayMet reports whether replay went through GoalReplay steps a second.
func (r *ProgramsReport) ReplayMet() bool { return r.Replay.StepsPerSec >= GoalReplay }

// RunPrograms measures governed programs and the same steps called one by
// one, in rounds that alternate the two, then replays the programs'
// traces. It fails if a call fails, a program does not succeed, or a
// replay differs from its trace.
func RunPrograms(ctx context.Context, cfg ProgramsConfig) (*ProgramsReport, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	r := &ProgramsReport{Machine: DescribeMachine(), Config: cfg}
	r.Load[0] = loadAverage()
	client, program, err := startProgramSessions(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	defer client.close()
	defer program.close()
	for _, n := range cfg.Sizes {
		s, err := measureProgramSize(ctx, &cfg, n, client, program)
		if err != nil {
			return nil, err
		}
		r.Sizes = append(r.Sizes, s)
	}
	if err := errors.Join(client.close(), program.close()); err != nil {
		return nil, err
	}
	if r.Replay, err = ReplayAll(ctx, cfg.Home); err != nil {
		return nil, err
	}
	r.Load[1] = loadAverage()
	return r, nil
}

// startProgramSessions starts the two sides: the governed proxy of the
// echo server, and the programs server.
func startProgramSessions(ctx context.Context, cfg *ProgramsConfig) (client, program *programSession, err error) {
	cl := call{tool: defaultTool, arg: defaultArg, exact: true}
	cs, _, err := startSession(ctx, mode{name: "client", argv: []string{cfg.Gatehouse, "proxy", ServerName, "--home", cfg.Home}, call: cl})
	if err != nil {
		return nil, nil, fmt.Errorf("start the governed proxy: %w", err)
	}
	ps, _, err := startSession(ctx, mode{name: "program", argv: []string{cfg.Gatehouse, "programs", "--home", cfg.Home}})
	if err != nil {
		cs.close()
		return nil, nil, fmt.Errorf("start gatehouse programs: %w", err)
	}
	return &programSession{s: cs}, &programSession{s: ps}, nil
}

// A programSession is one side: a session, closed once.
type programSession struct {
	s      *session
	closed bool
}

func (p *programSession) close() error {
	if p.closed {
		return nil
	}
	p.closed = true
	return p.s.close()
}

// measureProgramSize runs cfg.Programs programs of n steps each way, in
// rounds that alternate which side goes first, after one of each to warm
// up.
func measureProgramSize(ctx context.Context, cfg *ProgramsConfig, n int, client, program *programSession) (ProgramSize, error) {
	body := ProgramBody(n, message(0, cfg.Payload))
	msg := message(0, cfg.Payload)
	sides := []struct {
		name string
		run  func() error
		lat  []time.Duration
		el   time.Duration
		rps  []float64
	}{
		{name: "client", run: func() error { return ClientSteps(ctx, client.s, n, msg) }},
		{name: "program", run: func() error { return RunProgram(ctx, program.s.cs, body, n) }},
	}
	for i := range sides {
		if err := sides[i].run(); err != nil {
			return ProgramSize{}, fmt.Errorf("%d steps, %s: warm-up: %w", n, sides[i].name, err)
		}
	}
	for round := range cfg.Rounds {
		k := cfg.Programs / cfg.Rounds
		if round == cfg.Rounds-1 {
			k = cfg.Programs - k*(cfg.Rounds-1)
		}
		order := []int{0, 1}
		if round%2 == 1 {
			order = []int{1, 0}
		}
		for _, i := range order {
			sd := &sides[i]
			start := time.Now()
			for range k {
				t0 := time.Now()
				if err := sd.run(); err != nil {
					return ProgramSize{}, fmt.Errorf("%d steps, %s: %w", n, sd.name, err)
				}
				sd.lat = append(sd.lat, time.Since(t0))
			}
			el := time.Since(start)
			sd.el += el
			sd.rps = append(sd.rps, float64(k)/el.Seconds())
		}
	}
	sum := func(i int) Programs {
		sd := sides[i]
		slices.Sort(sd.lat)
		return Programs{
			Programs:     len(sd.lat),
			PerSecond:    float64(len(sd.lat)) / sd.el.Seconds(),
			StepsPerSec:  float64(len(sd.lat)*n) / sd.el.Seconds(),
			P50:          percentile(sd.lat, 0.50),
			P90:          percentile(sd.lat, 0.90),
			P99:          percentile(sd.lat, 0.99),
			StepP50:      percentile(sd.lat, 0.50) / time.Duration(n),
			Elapsed:      sd.el,
			RoundsPerSec: sd.rps,
		}
	}
	return ProgramSize{Steps: n, Client: sum(0), Program: sum(1)}, nil
}

// ProgramBody is a program of n echo steps of the built-in server: the
// first echoes msg, each other one what the step before it answered.
func ProgramBody(n int, msg string) []byte {
	steps := make([]map[string]any, n)
	for i := range steps {
		m := msg
		if i > 0 {
			m = fmt.Sprintf("${steps.s%d.text}", i)
		}
		steps[i] = map[string]any{"name": fmt.Sprintf("s%d", i+1), "kind": programs.KindTool,
			"server": ServerName, "tool": defaultTool, "args": map[string]any{defaultArg: m}}
	}
	b, _ := json.Marshal(map[string]any{"name": fmt.Sprintf("bench-%d", n), "steps": steps})
	return b
}

// ClientSteps makes the n calls of a program of n steps one by one, as a
// client would without programs.
func ClientSteps(ctx context.Context, s *session, n int, msg string) error {
	for range n {
		if err := s.echo(ctx, msg); err != nil {
			return err
		}
	}
	return nil
}

// RunProgram runs program body, of n steps, with run_program, and checks
// that it succeeded with n steps.
func RunProgram(ctx context.Context, cs *mcp.ClientSession, body []byte, n int) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "run_program", Arguments: map[string]any{"program": json.RawMessage(body)}})
	if err != nil {
		return err
	}
	var out struct {
		Trace     string `json:"trace"`
		Status    string `json:"status"`
		StepCount int    `json:"step_count"`
		Error     string `json:"error"`
	}
	b, _ := json.Marshal(res.StructuredContent)
	if err := json.Unmarshal(b, &out); err != nil || res.IsError {
		return fmt.Errorf("run_program answered %.300s", text(res))
	}
	if out.Status != programs.StatusSuccess || out.StepCount != n {
		return fmt.Errorf("run_program: trace %s ended %s after %d steps, want SUCCESS after %d: %s", out.Trace, out.Status, out.StepCount, n, out.Error)
	}
	return nil
}

// ReplayAll replays every trace of the home folder's programs and checks
// that each makes its recorded transitions and that every tool step named
// its receipt.
func ReplayAll(ctx context.Context, home string) (Replay, error) {
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		return Replay{}, err
	}
	defer st.Close()
	ps, err := programs.OpenStore(ctx, st)
	if err != nil {
		return Replay{}, err
	}
	ts, err := ps.Traces(ctx, "", 1<<30)
	if err != nil {
		return Replay{}, err
	}
	runner := programs.NewRunner(ps, nil)
	rep := Replay{Traces: len(ts), Matched: true}
	var took time.Duration
	var lat []time.Duration
	for _, ts := range ts {
		t, err := ps.Trace(ctx, ts.ID)
		if err != nil {
			return Replay{}, err
		}
		for _, s := range t.Steps {
			if s.Kind == programs.KindTool && s.Receipt != "" {
				rep.Receipts++
			}
		}
		start := time.Now()
		rr, err := runner.Replay(ctx, ts.ID)
		if err != nil {
			return Replay{}, fmt.Errorf("replay %s: %w", ts.ID, err)
		}
		d := time.Since(start)
		took += d
		lat = append(lat, d)
		rep.Steps += rr.Steps
		if !rr.Matched {
			rep.Matched = false
			return rep, fmt.Errorf("replay %s differs from its trace: %+v", ts.ID, rr.Diffs)
		}
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		rep.P50 = percentile(lat, 0.5)
		rep.StepsPerSec = float64(rep.Steps) / took.Seconds()
	}
	return rep, nil
}

// WriteText writes r as a table for people to read.
func (r *ProgramsReport) WriteText(w io.Writer) error {
	var b strings.Builder
	c := r.Config
	fmt.Fprintf(&b, "machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "programs of echo steps (%d-byte messages), each step governed: a signed receipt durable before it runs, a signed outcome after\n", c.Payload)
	fmt.Fprintf(&b, "%d programs per size and mode, %d interleaved rounds\n\n", c.Programs, c.Rounds)
	row := func(cells ...string) {
		fmt.Fprintf(&b, "%-34s", cells[0])
		for _, c := range cells[1:] {
			fmt.Fprintf(&b, "%12s", c)
		}
		b.WriteByte('\n')
	}
	row("", "programs/s", "steps/s", "p50", "p90", "p99", "per step")
	for _, s := range r.Sizes {
		row(fmt.Sprintf("%d steps", s.Steps))
		for _, m := range []struct {
			name string
			p    Programs
		}{{"  one by one, through the proxy", s.Client}, {"  one governed program", s.Program}} {
			row(m.name, fmt.Sprintf("%.1f", m.p.PerSecond), fmt.Sprintf("%.0f", m.p.StepsPerSec), ms(m.p.P50), ms(m.p.P90), ms(m.p.P99), ms(m.p.StepP50))
		}
	}
	rp := r.Replay
	fmt.Fprintf(&b, "\nreplay: %d traces, %d steps, %.0f steps/s (one trace p50 %s); every transition the same: %v; steps naming their receipt: %d\n",
		rp.Traces, rp.Steps, rp.StepsPerSec, ms(rp.P50), rp.Matched, rp.Receipts)
	if slices.Contains(c.Sizes, GoalProgramSteps) {
		fmt.Fprintf(&b, "goal: %d-step programs >= %d programs/s: %s\n", GoalProgramSteps, GoalPrograms, verdict(r.ProgramsMet()))
	}
	fmt.Fprintf(&b, "goal: replay >= %d steps/s: %s\n", GoalReplay, verdict(r.ReplayMet()))
	if l := r.Load; l[0][0] > 0 {
		fmt.Fprintf(&b, "load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end\n",
			l[0][0], l[0][1], l[0][2], l[1][0], l[1][1], l[1][2])
	}
	_, err := io.WriteString(w, b.String())
	return err
}
