package gateway

import "os/exec"

// setProcAttr leaves the defaults: Windows has no process groups to signal;
// the server sees its stdin close and, failing that, is killed.
func setProcAttr(*exec.Cmd) {}

// terminate has no gentle form on Windows (no SIGTERM for console-less
// children): kill.
func terminate(cmd *exec.Cmd) { cmd.Process.Kill() }

func kill(cmd *exec.Cmd) { cmd.Process.Kill() }
