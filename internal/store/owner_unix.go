//go:build unix

package store

import (
	"io/fs"
	"os"
	"syscall"
)

// foreignOwner returns the uid that owns fi when it is not the user this
// process runs as.
func foreignOwner(fi fs.FileInfo) (uid int, foreign bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || int(st.Uid) == os.Geteuid() {
		return 0, false
	}
	return int(st.Uid), true
}
