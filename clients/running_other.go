//go:build !linux

package clients

import (
	"context"
	"os/exec"
	"runtime"
	"strings"
	"time"
)

// claudeDesktopRunning asks the system's process list (ps on macOS and
// the BSDs, PowerShell on Windows) whether Claude Desktop runs. When it
// cannot tell, it says so with an error, and the caller fails closed.
func claudeDesktopRunning() (bool, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var cmd *exec.Cmd
	if runtime.GOOS == "windows" {
		cmd = exec.CommandContext(ctx, "powershell", "-NoProfile", "-NonInteractive", "-Command",
			"Get-Process -ErrorAction SilentlyContinue | ForEach-Object { $_.ProcessName + \"`t\" + $_.Path }")
	} else {
		cmd = exec.CommandContext(ctx, "ps", "-axo", "comm=")
	}
	out, err := cmd.Output()
	if err != nil {
		return false, time.Time{}, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		line = strings.TrimSpace(line)
		name, path, ok := strings.Cut(line, "\t")
		if !ok {
			name, path = line[strings.LastIndex(line, "/")+1:], line
		}
		if claudeDesktopProcess(name, path) {
			return true, time.Time{}, nil
		}
	}
	return false, time.Time{}, nil
}
