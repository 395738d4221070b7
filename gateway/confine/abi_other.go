//go:build !linux

package confine

import (
	"fmt"
	"runtime"
)

// abi: Landlock is Linux's.
func abi() (int, error) {
	return 0, fmt.Errorf("there is no Landlock on %s: it is Linux's", runtime.GOOS)
}
