package atomicfile

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

func TestWriteReplacesWhole(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config.json")
	if err := os.WriteFile(path, []byte("old"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := Write(path, []byte("new content"), 0o640); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(path)
	if err != nil || string(got) != "new content" {
		t.Fatalf("after Write: %q, %v", got, err)
	}
	if fi, _ := os.Stat(path); runtime.GOOS != "windows" && fi.Mode().Perm() != 0o640 {
		t.Errorf("mode %v, want 0640", fi.Mode().Perm())
	}
	assertOnly(t, dir, "config.json")
}

// A replacement given up leaves the old file and no temporary one.
func TestAbortLeavesTheTarget(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "f")
	os.WriteFile(path, []byte("old"), 0o600)
	f, err := Create(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("half")
	f.Abort()
	f.Abort()
	if err := f.Commit(); !errors.Is(err, fs.ErrClosed) {
		t.Errorf("Commit after Abort = %v, want ErrClosed", err)
	}
	if got, _ := os.ReadFile(path); string(got) != "old" {
		t.Errorf("after Abort: %q, want the old content", got)
	}
	assertOnly(t, dir, "f")
}

// A rename that cannot happen (the target is a folder) leaves the target
// and no temporary file.
func TestCommitFailureCleansUp(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "d")
	if err := os.Mkdir(path, 0o700); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(path, "x"), nil, 0o600)
	if err := Write(path, []byte("data"), 0o600); err == nil {
		t.Fatal("Write over a folder succeeded")
	}
	if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
		t.Fatalf("the folder is gone: %v", err)
	}
	assertOnly(t, dir, "d")
}

func assertOnly(t *testing.T, dir string, names ...string) {
	t.Helper()
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, de := range des {
		got = append(got, de.Name())
	}
	if len(got) != len(names) {
		t.Fatalf("folder holds %q, want %q", got, names)
	}
}
