package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// openPTY returns the two ends of a new pseudo-terminal: what a terminal
// emulator holds, and the terminal a program reads and writes.
func openPTY(tb testing.TB) (emulator, tty *os.File) {
	tb.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		tb.Skipf("no pseudo-terminals here: %v", err)
	}
	tb.Cleanup(func() { m.Close() })
	if err := unix.IoctlSetPointerInt(int(m.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		tb.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(m.Fd()), unix.TIOCGPTN)
	if err != nil {
		tb.Fatal(err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.Close() })
	return m, s
}

// How a terminal approver's answers are recorded depends on what its stdin
// and stdout are: a key at a terminal only when both are one.
func TestApprovalsViaTerminal(t *testing.T) {
	tests := []struct {
		name          string
		stdinTTY, out bool // stdin a terminal; stdout the terminal too
		want          approval.Via
	}{
		{"stdin and stdout a terminal", true, true, approval.ViaTerminal},
		{"stdin a terminal, stdout elsewhere", true, false, approval.ViaPiped},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			home := shortHome(t)
			socket := approval.SocketPath(home)
			emulator, tty := openPTY(t)
			screen := &transcript{} // what the terminal shows
			go io.Copy(screen, emulator)
			var stdout io.Writer = screen
			if tt.out {
				stdout = tty
			}
			stderr := &transcript{}
			ctx, cancel := context.WithCancel(context.Background())
			code := make(chan int, 1)
			go func() { code <- run(ctx, []string{"--home", home, "approvals"}, tty, stdout, stderr) }()
			t.Cleanup(func() { cancel(); <-code })
			stderr.expect(t, `listening on `)
			got := make(chan error, 1)
			var d approval.Decision
			go func() {
				var err error
				d, err = approval.Ask(context.Background(), socket, approvalCall(`{"title":"Typed"}`), time.Minute, nil)
				got <- err
			}()
			// Typed once the request is on screen: a terminal's answers
			// typed before it answer nothing.
			screen.expect(t, `#1: \[o\]nce`)
			if _, err := io.WriteString(emulator, "o\n"); err != nil {
				t.Fatal(err)
			}
			if err := <-got; err != nil || d.Scope != approval.ScopeOnce || d.Via != tt.want {
				t.Fatalf("Ask = %+v, %v; want once via %s", d, err, tt.want)
			}
		})
	}
}
