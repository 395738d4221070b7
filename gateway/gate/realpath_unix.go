//go:build unix

package gate

import (
	"errors"
	"syscall"
)

func isENOTDIR(err error) bool { return errors.Is(err, syscall.ENOTDIR) }
