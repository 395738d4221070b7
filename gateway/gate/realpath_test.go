package gate

import (
	"os"
	"path/filepath"
	"testing"
)

func TestRealPath(t *testing.T) {
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	allowed, outside := filepath.Join(root, "allowed"), filepath.Join(root, "outside")
	os.MkdirAll(filepath.Join(allowed, "sub"), 0o700)
	os.MkdirAll(outside, 0o700)
	os.WriteFile(filepath.Join(outside, "secret.txt"), []byte("x"), 0o600)
	os.WriteFile(filepath.Join(allowed, "file"), []byte("x"), 0o600)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(allowed, "out")))                                // a folder link out
	must(os.Symlink(filepath.Join(outside, "new.txt"), filepath.Join(allowed, "dangling"))) // a link to a file not there yet
	must(os.Symlink("../../outside/secret.txt", filepath.Join(allowed, "sub", "rel")))      // relative, via ..
	must(os.Symlink("sub", filepath.Join(allowed, "inside")))                               // stays inside
	must(os.Symlink("loop", filepath.Join(allowed, "loop")))

	tests := []struct{ in, want string }{
		{filepath.Join(allowed, "file"), filepath.Join(allowed, "file")},
		{filepath.Join(allowed, "not", "there"), filepath.Join(allowed, "not", "there")},
		{filepath.Join(allowed, "out", "secret.txt"), filepath.Join(outside, "secret.txt")},
		{filepath.Join(allowed, "out", "new", "deeper"), filepath.Join(outside, "new", "deeper")},
		{filepath.Join(allowed, "dangling"), filepath.Join(outside, "new.txt")},
		{filepath.Join(allowed, "sub", "rel"), filepath.Join(outside, "secret.txt")},
		{filepath.Join(allowed, "inside", "x"), filepath.Join(allowed, "sub", "x")},
		{filepath.Join(allowed, "file", "x"), filepath.Join(allowed, "file", "x")},
	}
	for _, tt := range tests {
		if got, err := RealPath(tt.in); err != nil || got != tt.want {
			t.Errorf("RealPath(%s) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
	if _, err := RealPath(filepath.Join(allowed, "loop")); err == nil {
		t.Error("RealPath of a link loop succeeded")
	}
	if _, err := RealPath("relative/path"); err == nil {
		t.Error("RealPath of a relative path succeeded")
	}
}
