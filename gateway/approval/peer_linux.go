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
	cred, err := peerCred(nc)
	if err != nil || cred == nil {
		return err
	}
	return sameUser(int(cred.Uid), os.Geteuid())
}

// peerCred returns the credentials the kernel recorded for the other end of
// a Unix socket; nil for a connection that is not one (an in-memory pipe in
// a test).
func peerCred(nc net.Conn) (*syscall.Ucred, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nil, nil
	}
	raw, err := uc.SyscallConn()
	if err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return nil, fmt.Errorf("peer credentials: %w", err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("peer credentials: %w", cerr)
	}
	return cred, nil
}

// checkApprover refuses an approver that is not a Gatehouse program installed
// beside this one: the program of the process that listens on the socket
// (the kernel's record of its pid, and /proc/<pid>/exe) must be this
// program itself, or gatehouse or gatehouse-app in the same folder.
func checkApprover(nc net.Conn) error {
	cred, err := peerCred(nc)
	if err != nil || cred == nil {
		return err
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", cred.Pid))
	if err != nil {
		return fmt.Errorf("the approver's program (pid %d): %w", cred.Pid, err)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("this program's path: %w", err)
	}
	return approverProgram(exe, self)
}
