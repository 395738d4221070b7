//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package approval

import (
	"errors"
	"os"
	"syscall"
)

// lockFile opens path and takes an exclusive flock on it, which the kernel
// drops when the process dies: a crashed approver never blocks the next one.
// flock conflicts between two opens of the file even in one process.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLocked
		}
		return nil, err
	}
	return f, nil
}

func unlockFile(f *os.File) { f.Close() } // closing the last descriptor drops the lock
