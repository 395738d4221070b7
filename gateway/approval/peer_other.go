//go:build !linux

package approval

import (
	"net"
	"syscall"
)

// checkPeer checks nothing outside Linux: the socket's folder, private to
// the user, is the guard there (see the package documentation).
func checkPeer(nc net.Conn) error { return nil }

// checkApprover checks nothing outside Linux (see checkPeer).
func checkApprover(nc net.Conn) error { return nil }

// verifiedReads reads nc as it is outside Linux (see checkPeer).
func verifiedReads(nc net.Conn) (net.Conn, error) { return nc, nil }

// passCredentials is Linux's; nothing to set elsewhere.
func passCredentials(network, address string, raw syscall.RawConn) error { return nil }
