package clients

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// claudeDesktopRunning looks through /proc for Claude Desktop's main
// process, and reads when it started.
func claudeDesktopRunning() (bool, time.Time, error) {
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return false, time.Time{}, err
	}
	for _, d := range dirs {
		pid := d.Name()
		if _, err := strconv.Atoi(pid); err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", pid, "comm"))
		if err != nil {
			continue
		}
		exe, _ := os.Readlink(filepath.Join("/proc", pid, "exe"))
		if !claudeDesktopProcess(strings.TrimSpace(string(comm)), exe) {
			continue
		}
		// Electron's helpers run the same program with --type=...; the
		// main process has none.
		cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline"))
		if bytes.Contains(cmdline, []byte("--type=")) {
			continue
		}
		return true, processStart(pid), nil
	}
	return false, time.Time{}, nil
}

// processStart is when process pid started (zero when unknown): its start
// in clock ticks after boot (field 22 of /proc/PID/stat), plus boot time.
func processStart(pid string) time.Time {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return time.Time{}
	}
	// The command name (field 2) may hold spaces and parentheses: fields
	// are counted after its last ')'.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return time.Time{}
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return time.Time{}
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	if err != nil {
		return time.Time{}
	}
	procStat, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for _, line := range strings.Split(string(procStat), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			boot, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			if err != nil {
				return time.Time{}
			}
			const hz = 100 // USER_HZ, 100 on every Linux architecture Go supports
			return time.Unix(boot, 0).Add(time.Duration(ticks) * time.Second / hz)
		}
	}
	return time.Time{}
}
