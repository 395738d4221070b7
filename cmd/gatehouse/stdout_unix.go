//go:build unix

package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// isolateStdout duplicates the stdout file descriptor for the caller's sole
// use and points fd 1 (and os.Stdout) at stderr.
func isolateStdout() (*os.File, error) {
	fd, err := unix.Dup(1)
	if err != nil {
		return nil, err
	}
	unix.CloseOnExec(fd)
	if err := unix.Dup2(2, 1); err != nil {
		unix.Close(fd)
		return nil, err
	}
	os.Stdout = os.Stderr
	return os.NewFile(uintptr(fd), "/dev/stdout"), nil
}
