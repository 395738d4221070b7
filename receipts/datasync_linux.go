package receipts

import (
	"os"
	"syscall"
)

// datasync makes f's data durable: fdatasync, which, for a file whose size
// does not change, writes no metadata.
func datasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}
