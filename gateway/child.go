package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// A Command is a stdio MCP server: the program the proxy starts and relays to.
type Command struct {
	Path string   // program; looked up in PATH when it has no separator
	Args []string // arguments after the program
	Env  []string // KEY=VALUE pairs added to the proxy's own environment
	Dir  string   // working folder; empty means the proxy's
}

func (c Command) String() string {
	return strings.Join(append([]string{c.Path}, c.Args...), " ")
}

// child is a running stdio server.
type child struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout io.ReadCloser
	stderr *tailWriter

	waitOnce sync.Once
	done     chan struct{} // closed when the process has been reaped
	waitErr  error         // valid after done
}

// startChild starts c with its stderr copied to stderr (and its tail kept for
// error messages), with the secrets redact knows removed from it. The child
// runs in its own process group so that stopping it also stops what it
// started (npx starts node, uvx starts python).
func startChild(c Command, stderr io.Writer, secrets *secretSet) (*child, error) {
	cmd := exec.Command(c.Path, c.Args...)
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Dir = c.Dir
	setProcAttr(cmd)
	tail := &tailWriter{w: stderr, max: 2048, secrets: secrets}
	cmd.Stderr = tail
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	// Read the server's answers with plain blocking reads on a thread of
	// their own rather than through the runtime's poller: that takes about
	// a third off the proxy's added latency on 100 KB answers. Nothing needs
	// to interrupt this read: it ends when the server's process group exits.
	if f, ok := stdout.(*os.File); ok {
		f.Fd()
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	ch := &child{cmd: cmd, stdin: stdin, stdout: stdout, stderr: tail, done: make(chan struct{})}
	go ch.wait()
	return ch, nil
}

func (c *child) wait() {
	c.waitOnce.Do(func() {
		c.waitErr = c.cmd.Wait()
		c.stderr.flush()
		close(c.done)
	})
}

// stop ends the child the way the MCP stdio transport asks: close its stdin,
// wait up to grace for it to exit, then SIGTERM, wait grace again, then kill
// its process group. It returns when the process is gone; that is bounded
// even for a server that ignores EOF and SIGTERM.
func (c *child) stop(grace time.Duration) {
	c.stdin.Close()
	if c.exited(grace) {
		return
	}
	terminate(c.cmd)
	if c.exited(grace) {
		return
	}
	kill(c.cmd)
	<-c.done
}

func (c *child) exited(d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-c.done:
		return true
	case <-t.C:
		return false
	}
}

// exitError describes how the child ended, with the last line it wrote to
// stderr, which usually says why.
func (c *child) exitError() error {
	msg := "exited"
	var ee *exec.ExitError
	switch {
	case c.waitErr == nil:
		msg = "exited (status 0)"
	case errors.As(c.waitErr, &ee):
		msg = "exited (" + ee.ProcessState.String() + ")"
	default:
		msg = "exited (" + c.waitErr.Error() + ")"
	}
	if last := c.stderr.lastLine(); last != "" {
		msg += ": " + last
	}
	return errors.New(msg)
}

// awaitExit waits up to d for the child to be reaped after its stdout closed,
// and stops it if it lingers (a server that closed stdout is of no more use).
func (c *child) awaitExit(ctx context.Context, d time.Duration) {
	select {
	case <-c.done:
	case <-time.After(d):
		c.stop(d)
	case <-ctx.Done():
		c.stop(d)
	}
}

// tailWriter passes writes through and remembers the last max bytes. It
// passes whole lines only, each with the session's secrets replaced: a
// server's stderr ends up in the MCP client's logs, and its last line in
// what the client is told when the server exits. The set of secrets grows
// as calls resolve vault values, so lines are always held until they end.
type tailWriter struct {
	w       io.Writer
	max     int
	secrets *secretSet // nil: pass writes as they come

	mu      sync.Mutex
	tail    []byte // guarded by mu
	partial []byte // the start of a line not yet passed on; guarded by mu
}

// maxPartialLine bounds a line kept back for redaction: a longer one is
// passed on in pieces, each cut short of where a secret could still be
// completed by what follows.
const maxPartialLine = 64 << 10

func (t *tailWriter) Write(p []byte) (int, error) {
	if t.secrets == nil {
		t.pass(p)
		return len(p), nil
	}
	t.mu.Lock()
	t.partial = append(t.partial, p...)
	var out []byte
	if end := bytes.LastIndexByte(t.partial, '\n') + 1; end > 0 {
		out = []byte(t.secrets.redactor().redactText(string(t.partial[:end])))
		t.partial = append(t.partial[:0], t.partial[end:]...)
	}
	if len(t.partial) > maxPartialLine {
		// Redact what is held, pass on all but its last window: a
		// secret whose start is in the window is caught with the rest.
		red := t.secrets.redactor()
		held := []byte(red.redactText(string(t.partial)))
		keep := 0
		if red != nil {
			keep = min(len(held), red.window)
		}
		out = append(out, held[:len(held)-keep]...)
		t.partial = append(t.partial[:0], held[len(held)-keep:]...)
	}
	t.mu.Unlock()
	if len(out) > 0 {
		t.pass(out)
	}
	return len(p), nil
}

// flush passes on a last line without its newline.
func (t *tailWriter) flush() {
	if t.secrets == nil {
		return
	}
	t.mu.Lock()
	out := []byte(t.secrets.redactor().redactText(string(t.partial)))
	t.partial = nil
	t.mu.Unlock()
	if len(out) > 0 {
		t.pass(out)
	}
}

func (t *tailWriter) pass(p []byte) {
	t.mu.Lock()
	t.tail = append(t.tail, p...)
	if over := len(t.tail) - t.max; over > 0 {
		t.tail = append(t.tail[:0], t.tail[over:]...)
	}
	t.mu.Unlock()
	if t.w == nil {
		return
	}
	if _, err := t.w.Write(p); err != nil {
		// Losing our stderr must not stall the server: keep draining.
		t.w = nil
	}
}

// lastLine returns the last non-blank line written, trimmed to 300 bytes.
func (t *tailWriter) lastLine() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimSpace(string(t.tail)), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if len(last) > 300 {
		last = last[:300] + "…"
	}
	return last
}

// startError explains why a server could not be started, with a hint.
func startError(name string, c Command, err error) error {
	hint := "check the command with: gatehouse server test " + name
	if errors.Is(err, exec.ErrNotFound) || errors.Is(err, os.ErrNotExist) {
		hint = fmt.Sprintf("%q was not found; give an absolute path, or make sure it is in the PATH the MCP client passes to its servers", c.Path)
	} else if errors.Is(err, os.ErrPermission) {
		hint = fmt.Sprintf("%q is not executable", c.Path)
	}
	return fmt.Errorf("cannot start server %q (%s): %w; %s", name, c, err, hint)
}
