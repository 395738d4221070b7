package approval

import (
	"errors"
	"fmt"
)

// errLocked is lockFile's answer while another process holds the lock.
var errLocked = errors.New("locked")

// sameUser is the peer check: the other end of the socket must run as the
// user this process runs as. Root is another user too.
func sameUser(peer, self int) error {
	if peer != self {
		return fmt.Errorf("the other end runs as uid %d, not as uid %d", peer, self)
	}
	return nil
}
