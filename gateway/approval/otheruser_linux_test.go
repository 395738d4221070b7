package approval

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// A process of another user that reaches the socket (its folder opened up
// on purpose here) is refused by the approver, and Ask in that process
// refuses the approver. This needs root, to run a helper as nobody.
func TestOtherUserRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root on Linux to run a process as another user; TestSameUser covers the check")
	}
	_, ui, path := startServer(t, nil)
	os.Chmod(filepath.Dir(path), 0o711)
	os.Chmod(path, 0o666)
	// The test binary, where nobody can run it.
	bin, err := os.MkdirTemp("", "appr-bin-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	os.Chmod(bin, 0o755)
	exe, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	helperBin := filepath.Join(bin, "approval.test")
	if err := os.WriteFile(helperBin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	for mode, want := range map[string]string{
		// The approver's answer to a request from uid 65534.
		"raw": `"error":"refused: the other end runs as uid 65534, not as uid 0"`,
		// Ask, as uid 65534, about an approver that runs as root.
		"ask": "no approver is running (the approver's socket: the other end runs as uid 0, not as uid 65534)",
	} {
		out, err := runAs(t, helperBin, 65534, mode, path)
		if err != nil {
			t.Fatalf("helper %s: %v\n%s", mode, err, out)
		}
		if !strings.Contains(out, want) {
			t.Errorf("helper %s said %q, want %q", mode, out, want)
		}
	}
	none(t, ui.shown)
}

// runAs runs the test binary bin as uid, in helper mode, and returns what
// it printed.
func runAs(tb testing.TB, bin string, uid int, mode, path string) (string, error) {
	tb.Helper()
	cmd := exec.Command(bin)
	cmd.Dir = "/"
	cmd.Env = append(os.Environ(), "APPROVAL_TEST_HELPER="+mode, "APPROVAL_TEST_SOCKET="+path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid)}}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
