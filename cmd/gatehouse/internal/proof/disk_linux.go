package proof

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// fillDisk makes every write of process pid past its first byte fail, as
// on a full disk, by lowering its file size limit (RLIMIT_FSIZE); Go
// programs ignore the SIGXFSZ this raises and see EFBIG. restore lifts it.
func fillDisk(pid int) (restore func() error, err error) {
	var old unix.Rlimit
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, nil, &old); err != nil {
		return nil, fmt.Errorf("read the proxy's file size limit: %w", err)
	}
	full := unix.Rlimit{Cur: 1, Max: old.Max}
	if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &full, nil); err != nil {
		return nil, fmt.Errorf("lower the proxy's file size limit: %w", err)
	}
	return func() error {
		if err := unix.Prlimit(pid, unix.RLIMIT_FSIZE, &old, nil); err != nil {
			return fmt.Errorf("restore the proxy's file size limit: %w", err)
		}
		return nil
	}, nil
}
