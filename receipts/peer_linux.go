package receipts

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer refuses the other end of a connection to or from the home's
// writer when it runs as another user, by the credentials the kernel
// recorded when the connection was made (SO_PEERCRED).
func checkPeer(nc net.Conn) error {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return fmt.Errorf("peer credentials: %w", cerr)
	}
	if int(cred.Uid) != os.Geteuid() {
		return fmt.Errorf("peer runs as user %d, not %d", cred.Uid, os.Geteuid())
	}
	return nil
}
