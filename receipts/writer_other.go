//go:build !unix

package receipts

import (
	"errors"
	"net"
)

// On Windows each process commits its own appends: the standard library
// has no named pipes, and a Unix socket there is protected by nothing but
// the folder's permissions.
const socketsSupported = false

func listenWriter(string) (net.Listener, error) { return nil, errors.ErrUnsupported }
func dialWriter(string) (net.Conn, error)       { return nil, errors.ErrUnsupported }
func checkPeer(net.Conn) error                  { return nil }
