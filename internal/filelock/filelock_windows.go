package filelock

import (
	"errors"
	"os"

	"golang.org/x/sys/windows"
)

// Supported says whether a Mutex excludes other processes on this system.
const Supported = true

func tryLock(f *os.File) (bool, error) {
	err := lockFileEx(f, windows.LOCKFILE_EXCLUSIVE_LOCK|windows.LOCKFILE_FAIL_IMMEDIATELY)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return false, nil
	}
	return err == nil, err
}

func waitLock(f *os.File) error { return lockFileEx(f, windows.LOCKFILE_EXCLUSIVE_LOCK) }

// Windows locks byte ranges, and a locked range cannot be read by anyone
// else: the lock is on one byte far beyond any content (locking past the end
// of a file is allowed), so a pid file stays readable.
const lockOffsetHigh = 0x7fffffff

func unlockFile(f *os.File) {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, 1, 0, &ol)
}

func lockFileEx(f *os.File, flags uint32) error {
	ol := windows.Overlapped{OffsetHigh: lockOffsetHigh}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, 1, 0, &ol)
}
