//go:build unix

package receipts

import (
	"net"
	"os"
	"time"
)

const socketsSupported = true

// listenWriter listens on the writer's socket at path, which only this
// user may connect to.
func listenWriter(path string) (net.Listener, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, err
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false) // the next writer replaces it
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

func dialWriter(path string) (net.Conn, error) {
	nc, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		return nil, err
	}
	if err := checkPeer(nc); err != nil {
		nc.Close()
		return nil, err
	}
	return nc, nil
}
