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
// the BSDs, PowerShell on Windows) whether Claude Desktop runs, and since
// when. When it cannot tell, it says so with an error, and the caller fails
// closed.
func claudeDesktopRunning() (bool, time.Time, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if runtime.GOOS == "windows" {
		out, err := exec.CommandContext(ctx, "powershell", "-NoProfile", "-NonInteractive", "-Command",
			"Get-Process -ErrorAction SilentlyContinue | ForEach-Object { $_.ProcessName + \"`t\" + $_.Path + \"`t\" + $(if ($_.StartTime) { $_.StartTime.ToUniversalTime().ToString('o') }) }").Output()
		if err != nil {
			return false, time.Time{}, err
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Split(strings.TrimSpace(line), "\t")
			if len(f) >= 2 && claudeDesktopProcess(f[0], f[1]) {
				var started time.Time
				if len(f) >= 3 {
					started, _ = time.Parse(time.RFC3339Nano, f[2])
				}
				return true, started, nil
			}
		}
		return false, time.Time{}, nil
	}
	// lstart is 24 characters wide: "Sat Nov 29 19:12:56 2026".
	out, err := exec.CommandContext(ctx, "ps", "-axo", "lstart=,comm=").Output()
	if err != nil {
		return false, time.Time{}, err
	}
	for _, line := range strings.Split(string(out), "\n") {
		if len(line) < 25 {
			continue
		}
		path := strings.TrimSpace(line[24:])
		if claudeDesktopProcess(path[strings.LastIndex(path, "/")+1:], path) {
			started, _ := time.ParseInLocation("Mon Jan _2 15:04:05 2006", strings.TrimSpace(line[:24]), time.Local)
			return true, started, nil
		}
	}
	return false, time.Time{}, nil
}
