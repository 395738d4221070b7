package approval

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
)

// SocketFile is the approver's socket's name in the home folder.
const SocketFile = "approvals.sock"

// SocketPath returns the approver's socket in the home folder home.
func SocketPath(home string) string { return filepath.Join(home, SocketFile) }

// pidPath returns the file beside the socket that holds the approver's
// process id, under lock while it runs.
func pidPath(socket string) string {
	return strings.TrimSuffix(socket, ".sock") + ".pid"
}

// maxSocketPath is the longest socket path the OS takes (sun_path holds 108
// bytes on Linux, 104 on macOS and the BSDs, with a terminating NUL).
var maxSocketPath = map[string]int{"linux": 107, "windows": 107}

// A Listener is an approver's socket, from [Listen].
type Listener struct {
	net.Listener
	path  string
	lock  *os.File
	close sync.Once
	err   error
}

// Listen makes the approver's socket at path and listens on it. It creates
// the socket's folder (mode 0700) when needed and refuses one that other users
// can enter or that another user owns; it refuses to start while another
// approver serves path ([ErrApproverRunning], with its process id), and
// replaces a socket file that nothing accepts on (left by an approver that
// died). Closing the listener removes the socket.
func Listen(path string) (*Listener, error) {
	path, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}
	limit, ok := maxSocketPath[runtime.GOOS]
	if !ok {
		limit = 103
	}
	if len(path) > limit {
		return nil, fmt.Errorf("listen for approvals: socket path %s is %d bytes long, more than the %d this system allows: choose a shorter home folder", path, len(path), limit)
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}
	if err := checkFolder(dir); err != nil {
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}

	pid := pidPath(path)
	// The lock dies with its process: a crashed approver never blocks the
	// next one.
	lock, err := filelock.TryLock(pid)
	if errors.Is(err, filelock.ErrLocked) {
		return nil, running(pid)
	}
	if err != nil {
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}
	l, err := listen(path, pid)
	if err != nil {
		lock.Close()
		return nil, err
	}
	l.lock = lock
	lock.Truncate(0)
	if _, err := lock.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		l.Close()
		return nil, fmt.Errorf("listen for approvals: write %s: %w", pid, err)
	}
	return l, nil
}

// listen replaces a stale socket at path and listens there.
func listen(path, pid string) (*Listener, error) {
	if fi, err := os.Lstat(path); err == nil {
		if nc, err := net.Dial("unix", path); err == nil {
			// Live, though the lock was free (an approver on a file system
			// without locks): still another approver.
			nc.Close()
			return nil, running(pid)
		}
		// On Windows a socket file reads as a reparse point, not a socket.
		if fi.Mode()&fs.ModeSocket == 0 && runtime.GOOS != "windows" {
			return nil, fmt.Errorf("listen for approvals: %s exists and is not a socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("listen for approvals: remove stale socket: %w", err)
		}
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}
	// The folder already keeps other users out; this is the socket's own
	// guard (connecting needs write permission on it).
	if err := os.Chmod(path, 0o600); err != nil && runtime.GOOS != "windows" {
		ln.Close()
		return nil, fmt.Errorf("listen for approvals: %w", err)
	}
	return &Listener{Listener: ln, path: path}, nil
}

// running returns a [*RunningError] with the process id the pid file holds.
func running(pid string) error {
	b, err := os.ReadFile(pid)
	if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil && n > 0 {
		return &RunningError{PID: n}
	}
	return &RunningError{}
}

// A RunningError is [ErrApproverRunning] with the approver's process id, as
// its pid file says it, so that a program can tell whether the approver is
// itself ([RunningError.Self]).
type RunningError struct {
	PID int // 0 when the pid file does not say
}

func (e *RunningError) Error() string {
	if e.PID > 0 {
		return fmt.Sprintf("%v: pid %d", ErrApproverRunning, e.PID)
	}
	return ErrApproverRunning.Error()
}

func (e *RunningError) Unwrap() error { return ErrApproverRunning }

// Self reports whether the approver that runs is this process: it
// listens already.
func (e *RunningError) Self() bool { return e.PID == os.Getpid() }

// Path returns the socket's path.
func (l *Listener) Path() string { return l.path }

// Close stops listening, removes the socket, and lets another approver
// start. It may be called more than once.
func (l *Listener) Close() error {
	l.close.Do(func() {
		l.err = l.Listener.Close() // removes the socket file
		if l.lock != nil {
			// Emptied, not removed: removing a locked file would let two
			// approvers lock two different files of the same name.
			l.lock.Truncate(0)
			l.lock.Close()
		}
	})
	return l.err
}
