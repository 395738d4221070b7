//go:build unix

package gateway

import (
	"os/exec"
	"syscall"
)

// terminate asks the server's whole process group to stop.
func terminate(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM); err != nil {
		cmd.Process.Signal(syscall.SIGTERM)
	}
}

// kill stops the server's whole process group.
func kill(cmd *exec.Cmd) {
	if err := syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL); err != nil {
		cmd.Process.Kill()
	}
}
