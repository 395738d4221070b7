// Package instance keeps one Gatehouse app per home folder.
//
// The app is the home folder's approver: two of them would fight over the
// approval socket, and the second would tell the user that "another
// approver" runs when that is the first app, hidden. So the first app to
// start [Claim]s the home folder: it holds an exclusive lock on app.pid
// (with its process id in it) and listens on app.sock, beside the approval
// socket. A second start finds the lock taken and, with [Raise], asks the
// first over app.sock to bring its window forward, then exits.
//
// The socket takes one line, "show" or "show VIEW", and answers "ok". Only
// the user can reach it: it lives in the home folder, which the store keeps
// to its owner (mode 0700), and the request can do nothing but show a
// window.
package instance

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
)

// The files in the home folder.
const (
	SocketFile = "app.sock"
	LockFile   = "app.pid"
)

// ErrRunning is returned by [Claim] while another app holds the home
// folder; the error is a [*RunningError] with its process id.
var ErrRunning = errors.New("the Gatehouse app already runs for this home folder")

// A RunningError says which process holds the home folder.
type RunningError struct {
	PID int // 0 when the lock file does not say
}

func (e *RunningError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%v (pid %d)", ErrRunning, e.PID)
	}
	return ErrRunning.Error()
}

func (e *RunningError) Unwrap() error { return ErrRunning }

// An Instance is the home folder held by this process, from [Claim].
type Instance struct {
	ln    net.Listener
	lock  *os.File
	close sync.Once
}

// Claim takes the home folder for this process: it returns a
// [*RunningError] while another process holds it. The hold ends with
// [Instance.Close], or with the process.
func Claim(home string) (*Instance, error) {
	lockPath := filepath.Join(home, LockFile)
	lock, err := filelock.TryLock(lockPath)
	if errors.Is(err, filelock.ErrLocked) {
		return nil, &RunningError{PID: readPID(lockPath)}
	}
	if err != nil {
		return nil, fmt.Errorf("claim the home folder: %w", err)
	}
	sock := filepath.Join(home, SocketFile)
	// The lock is ours, so a socket file left is a dead app's.
	os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		lock.Close()
		return nil, fmt.Errorf("claim the home folder: %w", err)
	}
	lock.Truncate(0)
	if _, err := lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		ln.Close()
		lock.Close()
		return nil, fmt.Errorf("claim the home folder: write %s: %w", lockPath, err)
	}
	return &Instance{ln: ln, lock: lock}, nil
}

func readPID(path string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

// maxLine bounds a request.
const maxLine = 256

// Serve answers the requests of later starts until ctx ends or the
// instance is closed: for each, show runs with the view asked for ("" for
// the window as it was). show is called on Serve's goroutine.
func (in *Instance) Serve(ctx context.Context, show func(view string)) error {
	stop := context.AfterFunc(ctx, func() { in.ln.Close() })
	defer stop()
	for {
		c, err := in.ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("serve the home folder's app socket: %w", err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		line, err := bufio.NewReader(io.LimitReader(c, maxLine)).ReadString('\n')
		verb, view, _ := strings.Cut(strings.TrimSpace(line), " ")
		if err == nil && verb == "show" {
			show(view)
			io.WriteString(c, "ok\n")
		}
		c.Close()
	}
}

// Close lets go of the home folder: another app may claim it.
func (in *Instance) Close() error {
	var err error
	in.close.Do(func() {
		err = in.ln.Close() // removes the socket file
		// Emptied, not removed: removing a locked file would let two apps
		// lock two different files of the same name.
		in.lock.Truncate(0)
		in.lock.Close()
	})
	return err
}

// Raise asks the app that holds home to show its window, on view when
// view is not empty. It tries until ctx ends: the app that holds the lock
// may not listen yet, when both started at once.
func Raise(ctx context.Context, home, view string) error {
	sock := filepath.Join(home, SocketFile)
	var d net.Dialer
	for {
		c, err := d.DialContext(ctx, "unix", sock)
		if err == nil {
			defer c.Close()
			if dl, ok := ctx.Deadline(); ok {
				c.SetDeadline(dl)
			}
			if _, err := io.WriteString(c, strings.TrimSpace("show "+view)+"\n"); err != nil {
				return fmt.Errorf("ask the running app to show its window: %w", err)
			}
			line, err := bufio.NewReader(io.LimitReader(c, maxLine)).ReadString('\n')
			if err != nil || strings.TrimSpace(line) != "ok" {
				return fmt.Errorf("ask the running app to show its window: no answer (%v)", err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("ask the running app to show its window: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
