package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"unicode"

	"golang.org/x/term"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/linediff"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// approvalsFlags are the flags of gatehouse approvals.
type approvalsFlags struct {
	auto string
}

var approvalsCmd = &command{
	name:    "approvals",
	usage:   "[--auto once|deny]",
	summary: "answer approval requests in this terminal",
	help: `
Proxies ask the approver when a call needs approval; without one, such calls
are denied. This command is the approver when the Gatehouse app is not
running: it prints each request (client, server, tool, risk, the rule that
asked, the arguments, the tool's description, and what changed in a changed
tool) and reads the answer, one per line:

  o  once          approve this call
  s  session       approve this tool for the proxy session
  m  minutes N     approve this tool for N minutes (at most 1440)
  a  always        approve this tool from now on
  d  deny          deny this call
  D  always-deny   deny this tool from now on

Requests that arrive meanwhile wait in a queue, one per proxy session at a
time: a session's next request joins it once the one before is answered or
withdrawn, so the sessions take turns. When stdin is not a terminal, lines
read ahead answer the next requests in turn. --auto answers every request by
itself (for demonstrations and tests) and prints each. Ctrl-C stops it;
calls still waiting are then denied.

Each receipt says how its answer came: typed at a terminal (stdin and stdout
both a terminal), piped (either is not: nobody is known to have read the
request), or automatic (--auto).`,
	flags: flagged(func(fs *flag.FlagSet, f *approvalsFlags) {
		fs.StringVar(&f.auto, "auto", "", "answer every request with `once` or deny, without asking")
	}, runApprovals),
}

func runApprovals(ctx context.Context, c *cli, fs *flag.FlagSet, f *approvalsFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("approvals: unexpected argument %q", pos[0])
	}
	var auto approval.Scope
	switch a := f.auto; a {
	case "":
	case "once", "deny":
		auto = approval.Scope(a)
	default:
		return usagef("approvals: --auto must be once or deny, not %q", a)
	}
	home := c.home
	if home == "" {
		if home, err = store.DefaultDir(); err != nil {
			return err
		}
	}
	home, err = filepath.Abs(home)
	if err != nil {
		return err
	}
	ln, err := approval.Listen(approval.SocketPath(home))
	switch {
	case errors.Is(err, approval.ErrApproverRunning):
		return withHint(err, "answer requests there, or stop it first")
	case err != nil:
		return withHint(err, "the approval socket needs a home folder only you can enter; choose one with --home or %s", store.EnvHome)
	}
	defer ln.Close()

	ui := &terminalUI{events: make(chan uiEvent), done: make(chan struct{})}
	srv := approval.NewServer(ui, &approval.Options{
		Approver: "terminal",
		Logger:   slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: c.logLevel})),
	})
	ctx, cancel := context.WithCancel(ctx)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	defer func() {
		close(ui.done) // the UI takes no more events
		cancel()
		<-served // Serve has closed ln: the socket is gone
	}()

	a := &approver{c: c, srv: srv, auto: auto, via: approval.ViaAutomatic}
	fmt.Fprintf(c.stderr, "gatehouse approvals: listening on %s\n", ln.Path())
	if auto != "" {
		fmt.Fprintf(c.stderr, "gatehouse approvals: answering every request with %q (Ctrl-C to stop)\n", auto)
	} else {
		fmt.Fprintf(c.stderr, "gatehouse approvals: waiting for requests (Ctrl-C to stop)\n")
	}

	// Lines from stdin. A read from a terminal cannot be interrupted: when
	// the command returns, this goroutine ends with the process (or, in
	// tests, when stdin is closed).
	var lines chan string
	if auto == "" {
		lines = make(chan string)
		a.terminal = isTerminal(c.stdin)
		// A key typed at a terminal that shows the requests may be a
		// person's; anything else is recorded as piped.
		a.via = approval.ViaPiped
		if a.terminal && isTerminal(c.stdout) {
			a.via = approval.ViaTerminal
		} else {
			fmt.Fprintf(c.stderr, "gatehouse approvals: stdin or stdout is not a terminal: receipts will say the answers were piped\n")
		}
		go func() {
			defer close(lines)
			sc := bufio.NewScanner(c.stdin)
			for sc.Scan() {
				select {
				case lines <- sc.Text():
				case <-ui.done:
					return
				}
			}
		}()
	}

	for {
		select {
		case <-ctx.Done():
			fmt.Fprintln(c.stderr, "\ngatehouse approvals: stopped")
			return nil
		case err := <-served:
			served <- err // for the deferred wait
			return err
		case ev := <-ui.events:
			if ev.withdrawn != "" {
				a.withdraw(ev.withdrawn)
			} else {
				a.show(ev.shown)
			}
		case line, ok := <-lines:
			if !ok {
				lines = nil
				a.inputEnded = true
			} else {
				a.input(line)
			}
		}
		a.answerAhead()
		if a.inputEnded && len(a.ahead) == 0 {
			fmt.Fprintln(c.stderr, "\ngatehouse approvals: input ended; stopped")
			if a.answered == 0 {
				fmt.Fprintln(c.stderr, "hint: to answer without a keyboard, use --auto once or --auto deny")
			}
			return nil
		}
	}
}

// terminalUI passes the server's events to the command's loop.
type terminalUI struct {
	events chan uiEvent
	done   chan struct{} // closed when the loop no longer reads events
}

type uiEvent struct {
	shown     approval.Request
	withdrawn string
}

var _ approval.UI = (*terminalUI)(nil)

func (u *terminalUI) Show(req approval.Request) {
	select {
	case u.events <- uiEvent{shown: req}:
	case <-u.done:
	}
}

func (u *terminalUI) Withdraw(id string) {
	select {
	case u.events <- uiEvent{withdrawn: id}:
	case <-u.done:
	}
}

// approver is the terminal approver's state; only the command's loop uses
// it.
type approver struct {
	c          *cli
	srv        *approval.Server
	auto       approval.Scope
	via        approval.Via // how its answers come: automatic, terminal or piped
	terminal   bool         // stdin is a terminal: answers are never read ahead
	queue      []queued
	seen       int      // requests shown so far, for their numbers
	minutes    bool     // the next line is the number of minutes
	ahead      []string // lines read before their request came (not from a terminal)
	inputEnded bool
	answered   int
}

type queued struct {
	n   int
	req approval.Request
}

func (a *approver) show(req approval.Request) {
	a.seen++
	q := queued{n: a.seen, req: req}
	if a.auto != "" {
		printRequest(a.c.stdout, q, 0)
		a.decide(q, a.auto, 0)
		return
	}
	a.queue = append(a.queue, q)
	if len(a.queue) == 1 {
		a.present()
		return
	}
	fmt.Fprintf(a.c.stdout, "\n  (queued #%d: %s; %d waiting)\n", q.n, headline(req), len(a.queue))
	a.prompt()
}

func (a *approver) withdraw(id string) {
	for i, q := range a.queue {
		if q.req.ID != id {
			continue
		}
		a.queue = append(a.queue[:i], a.queue[i+1:]...)
		fmt.Fprintf(a.c.stdout, "\n  #%d withdrawn: the proxy went away or the request expired (%s)\n", q.n, headline(q.req))
		if i == 0 {
			a.minutes = false
			a.present()
		} else {
			a.prompt()
		}
		return
	}
}

// present prints the head of the queue and asks for its answer.
func (a *approver) present() {
	if len(a.queue) == 0 {
		fmt.Fprintln(a.c.stdout, "\nwaiting for requests")
		return
	}
	printRequest(a.c.stdout, a.queue[0], len(a.queue)-1)
	a.prompt()
}

func (a *approver) prompt() {
	switch {
	case len(a.queue) == 0:
	case a.minutes:
		fmt.Fprintf(a.c.stdout, "#%d: approve for how many minutes (1-%d)? ", a.queue[0].n, approval.MaxMinutes)
	default:
		fmt.Fprintf(a.c.stdout, "#%d: [o]nce [s]ession [m]inutes N [a]lways [d]eny [D] always deny? ", a.queue[0].n)
	}
}

// input takes one line from stdin.
func (a *approver) input(line string) {
	if len(a.queue) == 0 || len(a.ahead) > 0 {
		if a.terminal {
			// An answer typed before its request was shown answers nothing.
			if strings.TrimSpace(line) != "" {
				fmt.Fprintln(a.c.stdout, "nothing to answer yet")
			}
			return
		}
		a.ahead = append(a.ahead, line)
		return
	}
	a.answer(line)
}

// answerAhead answers what it can with the lines read ahead.
func (a *approver) answerAhead() {
	for len(a.ahead) > 0 && len(a.queue) > 0 {
		line := a.ahead[0]
		a.ahead = a.ahead[1:]
		a.answer(line)
	}
}

func (a *approver) answer(line string) {
	if !a.terminal {
		fmt.Fprintln(a.c.stdout, line) // a terminal shows what was typed
	}
	line = strings.TrimSpace(line)
	if line == "" {
		a.prompt()
		return
	}
	if a.minutes {
		n, err := parseMinutes(line)
		if err != nil {
			fmt.Fprintln(a.c.stdout, err)
			a.prompt()
			return
		}
		a.minutes = false
		a.decideHead(approval.ScopeMinutes, n)
		return
	}
	scope, n, err := parseAnswer(line)
	switch {
	case err != nil:
		fmt.Fprintln(a.c.stdout, err)
		a.prompt()
	case scope == approval.ScopeMinutes && n == 0:
		a.minutes = true
		a.prompt()
	default:
		a.decideHead(scope, n)
	}
}

func (a *approver) decideHead(scope approval.Scope, minutes int) {
	q := a.queue[0]
	a.queue = a.queue[1:]
	a.decide(q, scope, minutes)
	a.present()
}

func (a *approver) decide(q queued, scope approval.Scope, minutes int) {
	if err := a.srv.Decide(q.req, approval.Answer{Scope: scope, Minutes: minutes, Via: a.via}); err != nil {
		// Withdrawn between the prompt and the answer.
		fmt.Fprintf(a.c.stdout, "→ #%d: %v\n", q.n, err)
		return
	}
	a.answered++
	var what string
	switch scope {
	case approval.ScopeOnce:
		what = "approved once"
	case approval.ScopeSession:
		what = "approved for this session"
	case approval.ScopeMinutes:
		what = fmt.Sprintf("approved for %d minutes", minutes)
	case approval.ScopeAlways:
		what = "approved always"
	case approval.ScopeDeny:
		what = "denied"
	case approval.ScopeAlwaysDeny:
		what = "denied always"
	}
	if a.auto != "" {
		what += " (--auto)"
	}
	fmt.Fprintf(a.c.stdout, "→ #%d %s\n", q.n, what)
}

// isTerminal reports whether f is a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	return ok && term.IsTerminal(int(file.Fd()))
}

// parseAnswer reads an answer: a letter or a word, and for minutes maybe
// their number (0 when not given).
func parseAnswer(s string) (approval.Scope, int, error) {
	if s == "always deny" {
		return approval.ScopeAlwaysDeny, 0, nil
	}
	word, rest, _ := strings.Cut(s, " ")
	rest = strings.TrimSpace(rest)
	if n, ok := strings.CutPrefix(word, "m"); ok && n != "" && rest == "" {
		if _, err := strconv.Atoi(n); err == nil {
			word, rest = "m", n // m15
		}
	}
	var scope approval.Scope
	switch word {
	case "o", "once":
		scope = approval.ScopeOnce
	case "s", "session":
		scope = approval.ScopeSession
	case "m", "minutes":
		if rest == "" {
			return approval.ScopeMinutes, 0, nil
		}
		n, err := parseMinutes(rest)
		return approval.ScopeMinutes, n, err
	case "a", "always":
		scope = approval.ScopeAlways
	case "d", "deny":
		scope = approval.ScopeDeny
	case "D", "always-deny":
		scope = approval.ScopeAlwaysDeny
	default:
		return "", 0, fmt.Errorf("unknown answer %q: o, s, m N, a, d or D", s)
	}
	if rest != "" {
		return "", 0, fmt.Errorf("unknown answer %q: o, s, m N, a, d or D", s)
	}
	return scope, 0, nil
}

func parseMinutes(s string) (int, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil || n < 1 || n > approval.MaxMinutes {
		return 0, fmt.Errorf("minutes must be a number from 1 to %d, not %q", approval.MaxMinutes, s)
	}
	return n, nil
}

func headline(r approval.Request) string {
	client := r.Client
	if client == "" {
		client = "an unnamed client"
	}
	return clean(fmt.Sprintf("%s → %s.%s", client, r.Server, r.Tool))
}

// printRequest shows a request in full. Everything in it comes from an MCP
// client or server, so nothing is printed raw: control characters (terminal
// escapes) and bidirectional overrides are shown as escapes.
func printRequest(w io.Writer, q queued, more int) {
	r := q.req
	var b strings.Builder
	fmt.Fprintf(&b, "\n── #%d  %s ", q.n, headline(r))
	if more > 0 {
		fmt.Fprintf(&b, "(%d more waiting) ", more)
	}
	b.WriteString(strings.Repeat("─", 8) + "\n")
	field := func(name, value string) {
		if value != "" {
			fmt.Fprintf(&b, "%-12s %s\n", name, indent(clean(value), 13))
		}
	}
	field("risk", r.Risk)
	field("rule", r.Rule)
	field("session", r.Session)
	field("description", strings.TrimSpace(r.Description))
	if p := r.Plan; p != nil {
		fmt.Fprintf(&b, "plan         program %s (%s), %d steps, approved as one:\n", clean(p.Program), clean(p.Hash), len(p.Steps))
		for i, st := range p.Steps {
			what := clean(st.Detail)
			if st.Kind == "tool" {
				what = clean(st.Server) + "." + clean(st.Tool) + " " + clean(string(st.Args))
			}
			fmt.Fprintf(&b, "  %2d. %-12s %-9s %s\n", i+1, clean(st.Name), clean(st.Kind), what)
		}
	} else {
		b.WriteString("arguments\n")
		b.WriteString(prettyJSON(r.Args, r.ArgsTruncated, r.ArgsSize))
	}
	if c := r.Change; c != nil {
		b.WriteString("tool definition changed (- as accepted, + as listed now)\n")
		if c.Truncated {
			b.WriteString("  (cut: too large to show whole)\n")
		}
		b.WriteString(diffLines(prettyLines(c.Old), prettyLines(c.New)))
	}
	io.WriteString(w, b.String())
}

// prettyJSON indents JSON arguments for reading; cut ones are a JSON string
// holding their start.
func prettyJSON(raw json.RawMessage, cut bool, size int) string {
	if cut {
		var s string
		json.Unmarshal(raw, &s)
		return "  " + clean(s) + fmt.Sprintf("…\n  (cut: %d bytes in all)\n", size)
	}
	return "  " + strings.Join(prettyLines(raw), "\n  ") + "\n"
}

func prettyLines(raw json.RawMessage) []string {
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return []string{clean(string(raw))} // a cut definition: a JSON string
	}
	return strings.Split(clean(buf.String()), "\n")
}

// diffLines renders a line diff of a and b ([linediff.Lines]).
func diffLines(a, b []string) string {
	var out strings.Builder
	for _, l := range linediff.Lines(a, b) {
		out.WriteString([...]string{"    ", "  - ", "  + "}[l.Op] + l.Text + "\n")
	}
	return out.String()
}

// clean makes text from elsewhere safe to print on a terminal: control
// characters other than newline and tab, and bidirectional controls, are
// shown as escapes.
func clean(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '\n' || r == '\t':
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// indent indents the lines of s after the first by n spaces.
func indent(s string, n int) string {
	return strings.ReplaceAll(s, "\n", "\n"+strings.Repeat(" ", n))
}
