//go:build unix

package approval

import (
	"fmt"
	"os"
	"syscall"
)

// checkFolder refuses a socket folder that another user owns or that other
// users may enter: through it they could reach, replace or impersonate the
// approver's socket.
func checkFolder(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("folder %s belongs to uid %d, not to you (uid %d)", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("folder %s is open to other users (mode %04o): make it private with chmod 700 %s", dir, perm, dir)
	}
	return nil
}
