//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package gate

import (
	"os"
	"syscall"
)

// lockServerBudgets takes an exclusive lock on path, waiting for it, and
// returns its release. The kernel drops it when the process dies.
func lockServerBudgets(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil // closing drops the lock
}
