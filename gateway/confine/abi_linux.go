package confine

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// abi asks the kernel for its Landlock ABI version: landlock_create_ruleset
// with LANDLOCK_CREATE_RULESET_VERSION and no attributes returns it.
func abi() (int, error) {
	v, _, errno := unix.Syscall(unix.SYS_LANDLOCK_CREATE_RULESET, 0, 0, unix.LANDLOCK_CREATE_RULESET_VERSION)
	switch {
	case errno == unix.ENOSYS:
		return 0, errors.New("this kernel has no Landlock (Linux 5.13 or later, built with CONFIG_SECURITY_LANDLOCK)")
	case errno == unix.EOPNOTSUPP:
		return 0, errors.New("this kernel has Landlock built in but not enabled (add landlock to the lsm= boot parameter)")
	case errno != 0:
		return 0, fmt.Errorf("ask the kernel for its Landlock version: %w", errno)
	}
	return int(v), nil
}
