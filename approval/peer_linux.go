package approval

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// checkPeer refuses the other end of a Unix socket connection when it runs
// as another user. The kernel records the peer's credentials (SO_PEERCRED)
// when the connection is made: they are the connecting, or listening,
// process's effective user id at that moment.
func checkPeer(nc net.Conn) error {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil // not a socket of ours: an in-memory pipe in a test
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
	return sameUser(int(cred.Uid), os.Geteuid())
}
