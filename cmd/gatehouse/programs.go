package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/programs"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// governedTools runs programs' tool steps as governed calls: for each
// (server, client), a proxy of its own in this process, with its gate,
// relaying to the server it starts, and an MCP client speaking to it.
type governedTools struct {
	c   *cli
	st  *store.Store
	log *slog.Logger
	ctx context.Context

	mu    sync.Mutex
	conns map[string]*serverConn    // by server and client; guarded by mu
	plans map[string]approval.Scope // plan key -> a person's lasting answer; guarded by mu
	steps map[string]*stepCall      // the calls in flight, by tag; guarded by mu
}

var _ programs.Tools = (*governedTools)(nil)

// serverConn is one governed connection to a server. Many steps (of
// concurrent runs) may call through it at once.
type serverConn struct {
	session *mcp.ClientSession
	stop    func()
}

// A stepCall is one tool step in flight. Its request carries its tag in
// _meta ([gateway.TagMeta]); the gate finds the step by it, for the
// receipt and the plan approval, and leaves its decision here.
type stepCall struct {
	tc programs.ToolCall

	mu   sync.Mutex
	auth *gateway.Authorization // guarded by mu
	wait bool                   // the gate asked, and the answer is pending; guarded by mu
}

func (s *stepCall) decided(a *gateway.Authorization, wait bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.auth, s.wait = a, s.wait || wait
}

func (s *stepCall) decision() (*gateway.Authorization, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth, s.wait
}

// stepKey is the context key of the step a gate's Authorize decides.
type stepKey struct{}

func stepOf(ctx context.Context) *stepCall {
	s, _ := ctx.Value(stepKey{}).(*stepCall)
	return s
}

func newGovernedTools(ctx context.Context, c *cli, st *store.Store, log *slog.Logger) *governedTools {
	return &governedTools{c: c, st: st, log: log, ctx: ctx, conns: map[string]*serverConn{}, plans: map[string]approval.Scope{},
		steps: map[string]*stepCall{}}
}

func (g *governedTools) close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, sc := range g.conns {
		sc.stop()
	}
}

func (g *governedTools) Call(ctx context.Context, tc programs.ToolCall) (programs.ToolResult, error) {
	sc, err := g.conn(tc.Server, tc.Client)
	if err != nil {
		return programs.ToolResult{}, err
	}
	var args any
	if err := json.Unmarshal(tc.Args, &args); err != nil {
		return programs.ToolResult{}, err
	}
	// The step travels with its call: the gate reads it by the tag, so
	// calls of concurrent runs on one connection are never mixed up, and
	// one the runner gave up on is refused rather than taken for another.
	step := &stepCall{tc: tc}
	tag := "st_" + rand.Text()
	g.mu.Lock()
	g.steps[tag] = step
	g.mu.Unlock()
	defer func() {
		g.mu.Lock()
		delete(g.steps, tag)
		g.mu.Unlock()
	}()
	res, err := sc.session.CallTool(ctx, &mcp.CallToolParams{Meta: mcp.Meta{gateway.TagMeta: tag}, Name: tc.Tool, Arguments: args})
	if err != nil {
		return programs.ToolResult{}, fmt.Errorf("call %s on %s: %w", tc.Tool, tc.Server, err)
	}
	out := programs.ToolResult{}
	if a, wait := step.decision(); a != nil {
		out.Receipt = a.Receipt
		if !a.Allow {
			out.Message = a.Message
			out.Denied, out.Pending = !wait, wait
			return out, nil
		}
	} else {
		return out, errors.New("the call was not decided by the gate")
	}
	out.Result, err = json.Marshal(res)
	return out, err
}

// conn returns the governed connection to server for client, starting it.
func (g *governedTools) conn(server, client string) (*serverConn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	key := server + "\x00" + client
	if sc, ok := g.conns[key]; ok {
		return sc, nil
	}
	ctx, cancel := context.WithCancel(g.ctx)
	sc := &serverConn{}
	srv, err := lookupServer(ctx, g.st, server)
	if err != nil {
		cancel()
		return nil, err
	}
	var (
		cmd     gateway.Command
		remote  gateway.Remote
		secrets map[string]string
		prep    *confine.Prepared
		conf    *entry.Confinement
	)
	if srv.Remote() {
		remote, secrets, err = downstream.Remote(srv, vaultFor(g.st))
	} else {
		cmd, secrets, err = downstream.Command(srv, vaultFor(g.st))
		if err == nil {
			cmd, prep, conf, err = confineServer(srv, cmd, g.st.Dir(), "gatehouse programs", g.c.stderr)
		}
	}
	if err != nil {
		cancel()
		return nil, err
	}
	gc := *g.c
	gc.client, gc.confinement = client, conf
	socket := approval.SocketPath(g.st.Dir())
	gt, stopGate, err := gc.newGate(ctx, g.st, srv, g.log, func(cfg *gate.Config) {
		cfg.Program = func(ctx context.Context, _ *gateway.Call) *entry.Program {
			step := stepOf(ctx)
			if step == nil {
				return nil
			}
			ref := step.tc.Ref
			return &ref
		}
		cfg.WithReceipt = func(ctx context.Context, _ *gateway.Call) receipts.TxWrite {
			step := stepOf(ctx)
			if step == nil {
				return nil
			}
			// The record of the run's step before this one: one commit
			// makes it and this receipt durable.
			if step.tc.Pending != nil {
				return step.tc.Pending.InTx
			}
			// The run's own rows written unflushed before its first tool
			// step (the store's start) are made durable by this
			// receipt's commit: so a program's receipt commits to the
			// database, never to the receipt journal alone, whose sync
			// does not flush the database's write-ahead log.
			return func(context.Context, *sql.Tx) error { return nil }
		}
		cfg.Ask = func(ctx context.Context, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error) {
			step := stepOf(ctx)
			if step == nil {
				return approval.Ask(ctx, socket, req, wait, progress)
			}
			// While a person decides, the trace shows the step before.
			if p := step.tc.Pending; p != nil {
				if err := p.Flush(ctx); err != nil {
					return approval.Decision{}, err
				}
			}
			d, err := g.ask(ctx, socket, &step.tc, req, wait, progress)
			if errors.Is(err, approval.ErrPending) {
				step.decided(nil, true)
			}
			return d, err
		}
	})
	if err != nil {
		cancel()
		prep.Cleanup()
		return nil, err
	}
	opts := &gateway.Options{Logger: g.log, Stderr: g.c.stderr, Secrets: secrets, CallTimeout: gateway.DefaultCallTimeout,
		Governor: recordingGovernor{gt, g}}
	p := gateway.New(server, cmd, opts)
	if srv.Remote() {
		p = gateway.NewRemote(server, remote, opts)
	}
	toProxy, fromClient := io.Pipe()
	toClient, fromProxy := io.Pipe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		p.Serve(ctx, toProxy, fromProxy)
		fromProxy.Close()
	}()
	mc := mcp.NewClient(&mcp.Implementation{Name: client, Version: version}, nil)
	session, err := mc.Connect(ctx, &mcp.IOTransport{Reader: toClient, Writer: fromClient}, nil)
	if err == nil {
		// The proxy learns the tools' definitions (and pins them) from a
		// listing, as it does for an agent.
		_, err = session.ListTools(ctx, nil)
	}
	sc.session = session
	sc.stop = func() {
		if session != nil {
			session.Close()
		}
		fromClient.Close()
		cancel()
		<-done
		stopGate()
		prep.Cleanup()
	}
	if err != nil {
		sc.stop()
		return nil, fmt.Errorf("start server %s: %w", server, err)
	}
	g.conns[key] = sc
	return sc, nil
}

// recordingGovernor is the gate, given each call's step and keeping its
// decision for the runner.
type recordingGovernor struct {
	g     *gate.Gate
	tools *governedTools
}

// errNoStep is a call that is no step in flight: the runner gave up on it
// before the gate had it (or it never was one).
var errNoStep = errors.New("the call is no step of a running program (the run gave up on it)")

func (r recordingGovernor) Authorize(ctx context.Context, c *gateway.Call, progress func(string)) (*gateway.Authorization, error) {
	r.tools.mu.Lock()
	step := r.tools.steps[c.Tag]
	r.tools.mu.Unlock()
	if step == nil {
		return nil, errNoStep
	}
	a, err := r.g.Authorize(context.WithValue(ctx, stepKey{}, step), c, progress)
	if err == nil {
		// Its receipt is written, and with it the step's pending record.
		if p := step.tc.Pending; p != nil {
			p.Committed()
		}
		step.decided(a, false)
	}
	return a, err
}

func (r recordingGovernor) Complete(ctx context.Context, c *gateway.Call, a *gateway.Authorization, o *gateway.Outcome) {
	r.g.Complete(ctx, c, a, o)
}

func (r recordingGovernor) ToolsListed(ctx context.Context, tools []*gateway.Tool) {
	r.g.ToolsListed(ctx, tools)
}

// plan is the approval request for a whole program.
func plan(tc *programs.ToolCall) approval.Plan {
	p := approval.Plan{Program: tc.Program.Name, Hash: tc.Program.Hash()}
	for _, s := range tc.Program.Steps {
		ps := approval.PlanStep{Name: s.Name, Kind: s.Kind, Server: s.Server, Tool: s.Tool, Args: s.Args, Detail: s.Describe()}
		if s.Kind == programs.KindTool && len(ps.Args) == 0 {
			ps.Args = json.RawMessage("{}")
		}
		p.Steps = append(p.Steps, ps)
	}
	return p
}

// ask answers the gate's request for a person's approval of a program's
// step with the approval of the whole program (its plan), asked once and
// bound to the program's hash: a person who approved it approved every
// step as shown. A changed tool definition and a server in quarantine are
// still asked about call by call.
func (g *governedTools) ask(ctx context.Context, socket string, tc *programs.ToolCall, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error) {
	if tc == nil || req.Change != nil || req.Rule == "quarantine:unreviewed" {
		return approval.Ask(ctx, socket, req, wait, progress)
	}
	pl := plan(tc)
	shown, _ := json.Marshal(map[string]any{"program": pl.Program, "hash": pl.Hash, "steps": pl.Steps})
	preq := approval.Request{Server: "programs", Tool: tc.Program.Name, Client: tc.Client, Risk: req.Risk,
		Rule: "program:plan", Args: shown, Session: tc.Ref.Trace, Plan: &pl,
		Description: fmt.Sprintf("Approve program %s as a whole: its %d steps, in order, as shown. Step %s asks for approval (%s, rule %s).",
			pl.Program, len(pl.Steps), tc.Ref.Step, req.Server+"."+req.Tool, req.Rule)}
	key, err := approval.CallKey(preq)
	if err != nil {
		return approval.Decision{}, err
	}
	g.mu.Lock()
	scope, ok := g.plans[key+"\x00"+tc.Ref.Trace]
	if !ok {
		scope, ok = g.plans[key]
	}
	g.mu.Unlock()
	var d approval.Decision
	if ok {
		d = approval.Decision{Scope: scope, Approver: "plan", Decided: time.Now()}
	} else {
		d, err = approval.Ask(ctx, socket, preq, wait, progress)
		if err != nil {
			return d, err
		}
		if d.Key != key {
			return approval.Decision{}, fmt.Errorf("%w (an answer for another plan)", approval.ErrProtocol)
		}
		g.mu.Lock()
		switch d.Scope {
		case approval.ScopeAlways, approval.ScopeAlwaysDeny, approval.ScopeMinutes:
			// Lasts for this program (its hash), in this server's life.
			g.plans[key] = d.Scope
		default:
			g.plans[key+"\x00"+tc.Ref.Trace] = d.Scope
		}
		g.mu.Unlock()
	}
	// The gate records this step's answer as given for the plan; a "no"
	// is a no for this call only, so no rule is written for the tool.
	out := approval.Decision{ID: req.ID, Key: req.Key, Scope: approval.ScopeOnce, Approver: d.Approver, Via: approval.ViaPlan, Decided: d.Decided}
	if !d.Scope.Allows() {
		out.Scope = approval.ScopeDeny
	}
	return out, nil
}

// checkpoints asks a person at a program's approval step.
type checkpoints struct{ socket string }

func (c checkpoints) Checkpoint(ctx context.Context, tc programs.ToolCall, message string) (programs.Answer, string, error) {
	args, _ := json.Marshal(map[string]string{"message": message, "trace": tc.Ref.Trace, "step": tc.Ref.Step})
	d, err := approval.Ask(ctx, c.socket, approval.Request{Server: "programs", Tool: tc.Program.Name + ":" + tc.Ref.Step,
		Client: tc.Client, Rule: "program:checkpoint", Args: args, Session: tc.Ref.Trace, Description: message}, gate.DefaultApprovalWait, nil)
	switch {
	case errors.Is(err, approval.ErrPending):
		return programs.Waiting, "waiting for a person at this checkpoint; resume the run once they answered", nil
	case errors.Is(err, approval.ErrNoApprover):
		return programs.Refused, "no approver is running to answer this checkpoint (open the Gatehouse app or run `gatehouse approvals`)", nil
	case err != nil:
		return 0, "", err
	case !d.Scope.Allows():
		return programs.Refused, "a person stopped the program at this checkpoint", nil
	}
	return programs.Approved, "", nil
}

// openRunner opens the programs' store and a runner whose tool steps are
// governed calls. terminal is for the commands a person runs (all but the
// MCP server): their stderr gets warnings and errors, the log file the rest.
func (c *cli) openRunner(ctx context.Context, terminal bool) (*programs.Runner, func(), error) {
	c.terminal = terminal
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	log, closeLog := c.logger(st.LogPath(), "programs")
	ps, err := programs.OpenStore(ctx, st)
	if err != nil {
		closeLog()
		st.Close()
		return nil, nil, err
	}
	tools := newGovernedTools(ctx, c, st, log)
	r := programs.NewRunner(ps, &programs.Options{
		Tools: tools,
		// The gate writes a step's record with the next step's receipt
		// (cfg.WithReceipt in conn), or before it asks a person.
		PendingRecords: true,
		Checkpoints:    checkpoints{approval.SocketPath(st.Dir())},
		Registered: func(name string) bool {
			_, err := st.Server(ctx, name)
			return err == nil
		},
	})
	return r, func() { tools.close(); closeLog(); st.Close() }, nil
}

type programsFlags struct {
	client       string
	approvalWait time.Duration
}

var programsServeCmd = &command{
	name:    "programs",
	usage:   "[--client ID]",
	summary: "the governed programs MCP server, on stdin and stdout",
	help: `
An MCP server with the tools run_program, resume_program, get_trace,
list_programs, get_program and delete_program. Register it in a client like
any server: {"command": "/path/to/gatehouse", "args": ["programs"]}. Every
tool step of a program is a governed call, as the client's own calls through
gatehouse proxy are; the client is the one that runs the program.
See docs/programs.md.`,
	flags: flagged(func(fs *flag.FlagSet, f *programsFlags) {
		fs.StringVar(&f.client, "client", "", "the `ID` of the client whose config launches this server")
		fs.DurationVar(&f.approvalWait, "approval-wait", gate.DefaultApprovalWait, "how long one step waits for a person's approval before the run suspends")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *programsFlags, args []string) error {
		if _, err := parse(fs, args, 0); err != nil {
			return err
		}
		c.approvalWait = f.approvalWait
		out, err := c.protocolOut()
		if err != nil {
			return err
		}
		r, done, err := c.openRunner(ctx, false)
		if err != nil {
			fmt.Fprintf(c.stderr, "gatehouse programs: %v\n", err)
			return &exitError{1}
		}
		defer done()
		in := io.NopCloser(c.stdin)
		w, ok := out.(io.WriteCloser)
		if !ok {
			w = nopWriteCloser{out}
		}
		if err := programs.Serve(ctx, r, in, w, &programs.ServeOptions{Client: f.client, Version: version}); err != nil && ctx.Err() == nil {
			fmt.Fprintf(c.stderr, "gatehouse programs: %v\n", err)
			return &exitError{1}
		}
		return nil
	}),
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }

var programsListCmd = &command{
	name:    "programs list",
	usage:   "[QUERY]",
	summary: "list saved programs and recent runs (runs whose id, program, client, status or error holds QUERY)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		query := ""
		if len(args) > 0 {
			query = args[0]
		}
		if query == "" {
			ps, err := r.Store().Programs(ctx)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.stdout, "PROGRAM\tHASH\tSAVED")
			for _, p := range ps {
				fmt.Fprintf(c.stdout, "%s\t%s\t%s\n", p.Name, p.Hash[:19], p.Saved.Local().Format(time.DateTime))
			}
			fmt.Fprintln(c.stdout)
		}
		ts, err := r.Store().Traces(ctx, query, 50)
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout, "TRACE\tPROGRAM\tCLIENT\tSTATUS\tSTEPS\tSTARTED")
		for _, t := range ts {
			fmt.Fprintf(c.stdout, "%s\t%s\t%s\t%s\t%d\t%s\n", t.ID, t.Name, t.Client, t.Status, t.Steps, t.Started.Local().Format(time.DateTime))
		}
		return nil
	},
}

var programsShowCmd = &command{
	name:    "programs show",
	usage:   "NAME",
	summary: "print a saved program",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usagef("programs show: want a program NAME")
		}
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		sp, err := r.Store().Program(ctx, args[0])
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "# %s %s\n%s\n", sp.Name, sp.Hash, sp.Body)
		return nil
	},
}

var programsDeleteCmd = &command{
	name:    "programs delete",
	usage:   "NAME",
	summary: "delete a saved program (its traces stay)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usagef("programs delete: want a program NAME")
		}
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		return r.Store().Delete(ctx, args[0])
	},
}

type programsRunFlags struct {
	client, key  string
	approvalWait time.Duration
}

var programsRunCmd = &command{
	name:    "programs run",
	usage:   "[--client ID] [--key KEY] FILE",
	summary: "run the program in FILE (- for stdin), governed, and print its trace",
	flags: flagged(func(fs *flag.FlagSet, f *programsRunFlags) {
		fs.StringVar(&f.client, "client", "gatehouse-cli", "the `ID` of the client the run's calls are made for")
		fs.StringVar(&f.key, "key", "", "an idempotency `KEY`: a second run with it prints the first's trace")
		fs.DurationVar(&f.approvalWait, "approval-wait", gate.DefaultApprovalWait, "how long one step waits for a person's approval before the run suspends")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *programsRunFlags, args []string) error {
		pos, err := parse(fs, args, 1)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("programs run: want one FILE")
		}
		var body []byte
		if pos[0] == "-" {
			body, err = io.ReadAll(io.LimitReader(c.stdin, programs.MaxProgramBytes+1))
		} else {
			body, err = os.ReadFile(pos[0])
		}
		if err != nil {
			return err
		}
		c.approvalWait = f.approvalWait
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		t, err := r.Run(ctx, body, programs.RunOptions{Client: f.client, Key: f.key})
		if err != nil {
			return err
		}
		printTrace(c.stdout, t)
		return nil
	}),
}

var programsResumeCmd = &command{
	name:    "programs resume",
	usage:   "TRACE",
	summary: "continue a SUSPENDED run",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usagef("programs resume: want a TRACE id")
		}
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		t, err := r.Resume(ctx, args[0], programs.RunOptions{})
		if err != nil {
			return err
		}
		printTrace(c.stdout, t)
		return nil
	},
}

var programsTraceCmd = &command{
	name:    "programs trace",
	usage:   "TRACE",
	summary: "print a run step by step: status, receipt and state hash of each",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usagef("programs trace: want a TRACE id")
		}
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		t, err := r.Store().Trace(ctx, args[0])
		if err != nil {
			return err
		}
		printTrace(c.stdout, t)
		return nil
	},
}

var programsReplayCmd = &command{
	name:    "programs replay",
	usage:   "TRACE",
	summary: "run a trace again against its recorded results, and show that every transition is the same (or where it differs)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if len(args) != 1 {
			return usagef("programs replay: want a TRACE id")
		}
		r, done, err := c.openRunner(ctx, true)
		if err != nil {
			return err
		}
		defer done()
		rep, err := r.Replay(ctx, args[0])
		if err != nil {
			return err
		}
		if rep.Matched {
			fmt.Fprintf(c.stdout, "replay %s: %d steps, every transition the same (%s) in %s\n", rep.Trace, rep.Steps, rep.Status, rep.Took.Round(time.Microsecond))
			return nil
		}
		for _, d := range rep.Diffs {
			fmt.Fprintf(c.stdout, "replay %s: differs at step %d (%s): %s\n", rep.Trace, d.Seq, d.Step, d.Why)
		}
		return &exitError{1}
	},
}

func printTrace(w io.Writer, t *programs.Trace) {
	fmt.Fprintf(w, "trace %s  program %s (%s)  client %s\nstatus %s", t.ID, t.Name, t.Hash, t.Client, t.Status)
	if t.Error != "" {
		fmt.Fprintf(w, ": %s", t.Error)
	}
	fmt.Fprintln(w)
	for _, s := range t.Steps {
		fmt.Fprintf(w, "%3d  %-12s %-9s %-8s receipt=%s state=%s\n", s.Seq, s.Step, s.Kind, s.Status, s.Receipt, s.Hash)
		if s.Message != "" {
			fmt.Fprintf(w, "     %s\n", s.Message)
		}
	}
}
