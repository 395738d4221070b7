package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// shortHome returns a new home folder whose socket path fits the OS's limit
// (t.TempDir's may not).
func shortHome(tb testing.TB) string {
	tb.Helper()
	base := ""
	if runtime.GOOS != "windows" {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "gh-")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func approvalCall(args string) approval.Request {
	return approval.Request{
		Server: "github", Tool: "create_issue", Client: "claude-code",
		Risk: "high", Rule: "risk.high", Session: "s1",
		Args:        json.RawMessage(args),
		Description: "Create an issue.",
	}
}

// The real binary, as a demo runs it: --auto answers, a second approver is
// refused, Ctrl-C stops it and removes the socket.
func TestApprovalsAuto(t *testing.T) {
	if runtime.GOOS == "windows" {
		t.Skip("no SIGINT to send on Windows")
	}
	home := shortHome(t)
	socket := approval.SocketPath(home)
	cmd := exec.Command(gatehouseBin, "approvals", "--auto", "once")
	cmd.Env = append(os.Environ(), "GATEHOUSE_HOME="+home)
	stdout := &transcript{}
	cmd.Stdout = stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	errLines := make(chan string, 16)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			errLines <- sc.Text()
		}
		close(errLines)
	}()
	if line := <-errLines; line != "gatehouse approvals: listening on "+socket {
		t.Fatalf("first line on stderr: %q, want the socket it listens on", line)
	}

	d, err := approval.Ask(context.Background(), socket, approvalCall(`{"title":"Crash"}`), time.Minute, nil)
	if err != nil {
		t.Fatalf("Ask = %v", err)
	}
	if d.Scope != approval.ScopeOnce || d.Approver != "terminal" || d.Via != approval.ViaAutomatic {
		t.Errorf("decision = %+v, want once from terminal, automatic", d)
	}
	stdout.expect(t, `(?s)#1  claude-code → github\.create_issue.*"title": "Crash".*→ #1 approved once \(--auto\)`)

	second := exec.Command(gatehouseBin, "approvals")
	second.Env = cmd.Env
	out, err := second.CombinedOutput()
	var xerr *exec.ExitError
	if !errors.As(err, &xerr) || xerr.ExitCode() != 1 {
		t.Errorf("second approver: %v, want exit status 1", err)
	}
	if want := fmt.Sprintf("gatehouse: another approver is running: pid %d\nhint: ", cmd.Process.Pid); !strings.HasPrefix(string(out), want) {
		t.Errorf("second approver said %q, want %q...", out, want)
	}

	cmd.Process.Signal(os.Interrupt)
	if err := cmd.Wait(); err != nil {
		t.Errorf("approvals after Ctrl-C: %v, want exit status 0", err)
	}
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Ctrl-C: %v, want it removed", err)
	}
	if _, err := approval.Ask(context.Background(), socket, approvalCall(`{}`), time.Minute, nil); !errors.Is(err, approval.ErrNoApprover) {
		t.Errorf("Ask after the approver stopped = %v, want ErrNoApprover", err)
	}
}

// A person at the keyboard (here, a pipe): requests queue, answers are
// checked, withdrawn requests leave the queue, and nothing a server says
// reaches the terminal raw.
func TestApprovalsInteractive(t *testing.T) {
	home := shortHome(t)
	socket := approval.SocketPath(home)
	stdin, typing := io.Pipe()
	stdout, stderr := &transcript{}, &transcript{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	code := make(chan int, 1)
	go func() { code <- run(ctx, []string{"--home", home, "approvals"}, stdin, stdout, stderr) }()
	stderr.expect(t, `listening on `+regexp.QuoteMeta(socket))
	type_ := func(s string) {
		t.Helper()
		if _, err := io.WriteString(typing, s+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	ask := func(ctx context.Context, req approval.Request) <-chan error {
		ch := make(chan error, 1)
		go func() {
			d, err := approval.Ask(ctx, socket, req, time.Minute, nil)
			if err == nil {
				err = fmt.Errorf("%s %d", d.Scope, d.Minutes)
			}
			ch <- err
		}()
		return ch
	}

	first := ask(context.Background(), approvalCall(`{"title":"Crash","labels":["bug"]}`))
	stdout.expect(t, `(?s)── #1  claude-code → github\.create_issue ─+\n`+
		`risk +high\nrule +risk\.high\nsession +s1\ndescription +Create an issue\.\n`+
		`arguments\n  \{\n    "labels": \[\n      "bug"\n    \],\n    "title": "Crash"\n  \}\n`+
		`#1: \[o\]nce \[s\]ession \[m\]inutes N \[a\]lways \[d\]eny \[D\] always deny\? $`)

	ctx2, leave := context.WithCancel(context.Background())
	// Another session's request queues behind the one on screen (one
	// session's next request waits for its turn instead).
	other := approvalCall(`{"title":"Other"}`)
	other.Session = "s2"
	second := ask(ctx2, other)
	stdout.expect(t, `\(queued #2: claude-code → github\.create_issue; 2 waiting\)`)

	type_("x")
	stdout.expect(t, `unknown answer "x": o, s, m N, a, d or D\n#1: \[o\]nce`)
	type_("m")
	stdout.expect(t, `#1: approve for how many minutes \(1-1440\)\? $`)
	type_("0")
	stdout.expect(t, `minutes must be a number from 1 to 1440, not "0"`)
	type_("15")
	if err := <-first; err.Error() != "minutes 15" {
		t.Errorf("first Ask: %v, want minutes 15", err)
	}
	stdout.expect(t, `→ #1 approved for 15 minutes\n\n── #2 `)

	leave() // the second proxy goes away
	<-second
	stdout.expect(t, `#2 withdrawn: the proxy went away or the request expired \(claude-code → github\.create_issue\)\n\nwaiting for requests\n`)

	// A changed tool whose description tries terminal escapes and a
	// right-to-left override.
	changed := approvalCall(`{}`)
	changed.Tool = "run"
	changed.Description = "Runs\x1b[2J a \u202ecommand"
	changed.Change = &approval.Change{
		Old: json.RawMessage(`{"name":"run","description":"Runs a command"}`),
		New: json.RawMessage(`{"name":"run","description":"Runs\u001b[2J a \u202ecommand"}`),
	}
	third := ask(context.Background(), changed)
	stdout.expect(t, `(?s)description +Runs\\x1b\[2J a \\u202ecommand\n.*`+
		`tool definition changed \(- as accepted, \+ as listed now\)\n`+
		`    \{\n  -   "description": "Runs a command",\n  \+   "description": "Runs\\u001b\[2J a \\u202ecommand",\n      "name": "run"\n    \}\n`)
	type_("D")
	if err := <-third; err.Error() != "always-deny 0" {
		t.Errorf("third Ask: %v, want always-deny", err)
	}
	if strings.ContainsAny(stdout.String(), "\x1b\u202e") {
		t.Error("a control character or bidi override reached the terminal raw")
	}

	typing.Close()
	if c := <-code; c != 0 {
		t.Errorf("exit status %d, want 0\n%s", c, stderr)
	}
	stderr.expect(t, `input ended; stopped\n$`)
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after the end of input: %v, want it removed", err)
	}
}

// Answers from a pipe may come before their requests: each answers the next
// request in turn, and the approver stops when they run out.
func TestApprovalsAnswersAhead(t *testing.T) {
	home := shortHome(t)
	socket := approval.SocketPath(home)
	stdout, stderr := &transcript{}, &transcript{}
	code := make(chan int, 1)
	go func() {
		code <- run(context.Background(), []string{"approvals", "--home", home},
			strings.NewReader("s\nd\n"), stdout, stderr)
	}()
	stderr.expect(t, `listening on `)
	for i, want := range []approval.Scope{approval.ScopeSession, approval.ScopeDeny} {
		d, err := approval.Ask(context.Background(), socket, approvalCall(fmt.Sprintf(`{"n":%d}`, i)), time.Minute, nil)
		if err != nil || d.Scope != want || d.Via != approval.ViaPiped {
			t.Fatalf("Ask %d = %+v, %v; want %s, piped\n%s\n%s", i+1, d, err, want, stdout, stderr)
		}
	}
	if c := <-code; c != 0 {
		t.Errorf("exit status %d, want 0\n%s", c, stderr)
	}
	stdout.expect(t, `(?s)#1: .*\? s\n→ #1 approved for this session\n.*#2: .*\? d\n→ #2 denied\n`)
	stderr.expect(t, `stdin or stdout is not a terminal: receipts will say the answers were piped`)
	if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after the answers ran out: %v, want it removed", err)
	}
}

func TestApprovalsParseAnswer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		scope   approval.Scope
		minutes int
		err     bool
	}{
		{"o", approval.ScopeOnce, 0, false},
		{"once", approval.ScopeOnce, 0, false},
		{"s", approval.ScopeSession, 0, false},
		{"m", approval.ScopeMinutes, 0, false},
		{"m 30", approval.ScopeMinutes, 30, false},
		{"m30", approval.ScopeMinutes, 30, false},
		{"minutes 1440", approval.ScopeMinutes, 1440, false},
		{"m 1441", "", 0, true},
		{"m x", "", 0, true},
		{"a", approval.ScopeAlways, 0, false},
		{"d", approval.ScopeDeny, 0, false},
		{"D", approval.ScopeAlwaysDeny, 0, false},
		{"always-deny", approval.ScopeAlwaysDeny, 0, false},
		{"always deny", approval.ScopeAlwaysDeny, 0, false},
		{"O", "", 0, true},
		{"o now", "", 0, true},
		{"yes", "", 0, true},
	}
	for _, tt := range tests {
		scope, n, err := parseAnswer(tt.in)
		if (err != nil) != tt.err || (err == nil && (scope != tt.scope || n != tt.minutes)) {
			t.Errorf("parseAnswer(%q) = %q, %d, %v; want %q, %d, error %v", tt.in, scope, n, err, tt.scope, tt.minutes, tt.err)
		}
	}
}

// A transcript collects a command's output, for tests that wait for what
// it prints.
type transcript struct {
	mu      sync.Mutex
	buf     strings.Builder
	matched int           // expect's offset: each match starts after the last
	changed chan struct{} // cap 1
}

func (w *transcript) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.changed == nil {
		w.changed = make(chan struct{}, 1)
	}
	select {
	case w.changed <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w *transcript) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// expect waits until the output after the last match matches re.
func (w *transcript) expect(tb testing.TB, re string) {
	tb.Helper()
	rx := regexp.MustCompile(re)
	timeout := time.After(10 * time.Second)
	for {
		w.mu.Lock()
		if w.changed == nil {
			w.changed = make(chan struct{}, 1)
		}
		out := w.buf.String()[w.matched:]
		changed := w.changed
		if loc := rx.FindStringIndex(out); loc != nil {
			w.matched += loc[1]
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		select {
		case <-changed:
		case <-timeout:
			tb.Fatalf("output does not match %s:\n%s", re, out)
		}
	}
}
