//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package filelock

import (
	"errors"
	"os"
	"syscall"
)

// Supported says whether a Mutex excludes other processes on this system.
const Supported = true

// flock(2) locks belong to the open file, which each Mutex opens once.

func tryLock(f *os.File) (bool, error) {
	err := flock(f, syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}

func waitLock(f *os.File) error { return flock(f, syscall.LOCK_EX) }

func unlockFile(f *os.File) { flock(f, syscall.LOCK_UN) }

func flock(f *os.File, how int) error {
	for {
		err := syscall.Flock(int(f.Fd()), how)
		if err != syscall.EINTR {
			return err
		}
	}
}
