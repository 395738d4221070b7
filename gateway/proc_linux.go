package gateway

import (
	"os/exec"
	"syscall"
)

// setProcAttr puts the server in its own process group, and asks the kernel
// to kill it if the proxy dies without cleaning up (kill -9, an OOM kill):
// a proxy killed mid-call must not leave its server running. Pdeathsig fires
// when the thread that started the child exits; Go keeps that thread alive
// for the life of the process unless it was locked, which we never do here.
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
