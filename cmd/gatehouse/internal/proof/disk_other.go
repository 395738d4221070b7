//go:build !linux

package proof

import "fmt"

// fillDisk needs prlimit, which only Linux has.
func fillDisk(int) (func() error, error) {
	return nil, fmt.Errorf("%w: filling the disk needs Linux (prlimit)", ErrSkip)
}
