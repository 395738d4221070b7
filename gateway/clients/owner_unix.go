//go:build unix

package clients

import (
	"os"
	"syscall"
)

// sameOwner gives f the owner and group of the file fi describes, when
// running as root (sudo gatehouse ...): a user's file must stay theirs.
func sameOwner(f *os.File, fi os.FileInfo) error {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 {
		return nil
	}
	return f.Chown(int(st.Uid), int(st.Gid))
}
