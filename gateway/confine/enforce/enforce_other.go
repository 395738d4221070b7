//go:build !linux

package enforce

import (
	"fmt"
	"runtime"

	"github.com/gatehouse-dev/gatehouse/gateway/confine"
)

// Exec refuses: there is no Landlock on this OS, and a server meant to be
// confined is not started unconfined.
func Exec(p confine.Plan, argv, env []string) error {
	return fmt.Errorf("%w: there is no Landlock on %s", confine.ErrUnavailable, runtime.GOOS)
}
