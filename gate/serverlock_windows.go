package gate

import (
	"os"

	"golang.org/x/sys/windows"
)

// lockServerBudgets takes an exclusive lock on path, waiting for it, and
// returns its release. Windows drops it when the process dies.
func lockServerBudgets(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	var ol windows.Overlapped
	if err := windows.LockFileEx(windows.Handle(f.Fd()), windows.LOCKFILE_EXCLUSIVE_LOCK, 0, 1, 0, &ol); err != nil {
		f.Close()
		return nil, err
	}
	return func() { f.Close() }, nil
}
