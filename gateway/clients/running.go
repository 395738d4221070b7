package clients

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// gitTracked reports whether git tracks path (false when git is missing or
// path is not in a repository).
func gitTracked(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "git", "ls-files", "--error-unmatch", "--", filepath.Base(path))
	cmd.Dir = filepath.Dir(path)
	return cmd.Run() == nil
}

// claudeDesktopProcess reports whether a process's command name or path is
// Claude Desktop's, and not Claude Code's (a program called claude too).
func claudeDesktopProcess(name, path string) bool {
	base := filepath.Base(strings.ReplaceAll(path, `\`, "/"))
	switch {
	case name == "Claude" || base == "Claude" || base == "Claude.exe":
		// macOS: Claude.app/Contents/MacOS/Claude; Windows: Claude.exe.
		return true
	case strings.HasPrefix(name, "claude-desktop") || strings.HasPrefix(base, "claude-desktop"):
		// Linux builds.
		return true
	case strings.Contains(path, "/Claude.app/Contents/MacOS/") && !strings.Contains(path, "Helper"):
		return true
	case strings.Contains(strings.ToLower(path), `\anthropicclaude\`) || strings.Contains(path, `\WindowsApps\Claude_`):
		return true
	}
	return false
}
