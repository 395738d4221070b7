package approval

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
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

// approverConn reads the approver's messages with the credentials the
// kernel attaches to each of them (SO_PASSCRED, SCM_CREDENTIALS), and
// refuses any byte sent by a process that fails check: so an answer counts
// only when the process that wrote it is a Gatehouse approver, not merely
// the one that listened. (A program that listens on the socket, hands the
// connection to a process of its own and then runs a Gatehouse program in
// the listening process passes the check at connect time, SO_PEERCRED;
// what its other process writes is refused here.)
//
// An unprivileged sender can only name itself in the credentials it sends,
// and the kernel fills them in when it sends none; a stream socket never
// returns in one read bytes sent with different credentials.
type approverConn struct {
	*net.UnixConn
	check func(pid int32, uid uint32) error
	oob   []byte
	known map[int32]bool // pids already checked; the approver is one process
}

// verifiedReads returns nc, reading through an approverConn when it is a
// Unix socket and the asking program checks its approver (checkApprover).
// nc MUST have been dialled with passCredentials.
func verifiedReads(nc net.Conn) (net.Conn, error) {
	uc, ok := nc.(*net.UnixConn)
	if !ok {
		return nc, nil
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("this program's path: %w", err)
	}
	if !isGatehouseProgram(strings.TrimSuffix(self, " (deleted)")) {
		return nc, nil
	}
	return withCredentials(uc, func(pid int32, uid uint32) error {
		if err := sameUser(int(uid), os.Geteuid()); err != nil {
			return err
		}
		exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
		if err != nil {
			return fmt.Errorf("the program that wrote the answer (pid %d): %w", pid, err)
		}
		return approverProgram(exe, self)
	})
}

// passCredentials asks the kernel for the sender's credentials with every
// message the socket receives (SO_PASSCRED). The dialer sets it before it
// connects, so that no byte the approver sends comes without them.
func passCredentials(network, address string, raw syscall.RawConn) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_PASSCRED, 1)
	}); err != nil {
		return fmt.Errorf("pass credentials: %w", err)
	}
	if serr != nil {
		return fmt.Errorf("pass credentials: %w", serr)
	}
	return nil
}

// withCredentials returns uc, which passCredentials set up, reading
// through check.
func withCredentials(uc *net.UnixConn, check func(pid int32, uid uint32) error) (*approverConn, error) {
	return &approverConn{UnixConn: uc, check: check, oob: make([]byte, syscall.CmsgSpace(syscall.SizeofUcred)*4), known: map[int32]bool{}}, nil
}

// errUncredentialed is a read of bytes the kernel gave no sender's
// credentials for: with SO_PASSCRED on, that does not happen on Linux, and
// is refused if it does.
var errUncredentialed = errors.New("the approver's answer came without the sender's credentials")

func (c *approverConn) Read(p []byte) (int, error) {
	n, oobn, _, _, err := c.ReadMsgUnix(p, c.oob)
	if n <= 0 {
		// A read that failed (a deadline passed) reports n as -1: it read
		// nothing, and its error is the reader's to see.
		return 0, err
	}
	msgs, perr := syscall.ParseSocketControlMessage(c.oob[:oobn])
	if perr != nil {
		return 0, fmt.Errorf("approver's credentials: %w", perr)
	}
	var cred *syscall.Ucred
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SCM_CREDENTIALS {
			if cred, perr = syscall.ParseUnixCredentials(&m); perr != nil {
				return 0, fmt.Errorf("approver's credentials: %w", perr)
			}
		}
	}
	if cred == nil {
		return 0, errUncredentialed
	}
	if !c.known[cred.Pid] {
		if cerr := c.check(cred.Pid, cred.Uid); cerr != nil {
			return 0, fmt.Errorf("%w: %v", errForgedAnswer, cerr)
		}
		c.known[cred.Pid] = true
	}
	return n, err
}
