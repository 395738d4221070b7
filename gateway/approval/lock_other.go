//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package approval

import "os"

// lockFile cannot lock here (no flock in the standard library for this
// system): Listen then relies on connecting to the socket alone to find a
// running approver, which two approvers starting at the same instant can
// both pass.
func lockFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
}

func unlockFile(f *os.File) { f.Close() }
