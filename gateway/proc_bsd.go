//go:build unix && !linux

package gateway

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, so that stopping it
// also stops what it started.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
