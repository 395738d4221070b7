//go:build unix

package store

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// modes returns the permission bits of every file and folder under dir
// (dir itself as "."), by path relative to dir.
func modes(t *testing.T, dir string) map[string]fs.FileMode {
	t.Helper()
	got := map[string]fs.FileMode{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		got[rel] = fi.Mode().Perm()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// A new home is its user's alone whatever the umask: the folder 0700, the
// database and the -wal and -shm files SQLite makes beside it 0600.
func TestOpenNewHomeOwnerOnly(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	home := filepath.Join(t.TempDir(), "home")
	st, err := Open(context.Background(), home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.AddServer(context.Background(), Server{Name: "files", Command: "true"}); err != nil {
		t.Fatal(err)
	}
	want := map[string]fs.FileMode{
		".":                   0o700,
		DatabaseFile:          0o600,
		DatabaseFile + "-wal": 0o600,
		DatabaseFile + "-shm": 0o600,
	}
	got := modes(t, home)
	for name, mode := range want {
		if m, ok := got[name]; !ok || m != mode {
			t.Errorf("mode of %s after Open with umask 0 = %04o (present %v), want %04o", name, m, ok, mode)
		}
	}
	for name, mode := range got {
		if mode&0o077 != 0 {
			t.Errorf("mode of %s = %04o, want no bits for group or others", name, mode)
		}
	}
}

// A home folder other users can reach is refused, with the chmod that
// fixes it, and left as it is; its files are not touched. An empty one is
// a new home, made owner-only.
func TestOpenRefusesHomeOpenToOthers(t *testing.T) {
	for _, mode := range []fs.FileMode{0o755, 0o750, 0o711, 0o701, 0o720, 0o702, 0o777} {
		t.Run(mode.String(), func(t *testing.T) {
			home := filepath.Join(t.TempDir(), "my home")
			if err := os.Mkdir(home, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(home, DatabaseFile), nil, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(home, mode); err != nil {
				t.Fatal(err)
			}
			_, err := Open(context.Background(), home, nil)
			var merr *ModeError
			if !errors.As(err, &merr) {
				t.Fatalf("Open(home at %04o) = %v, want a *ModeError", mode, err)
			}
			if fix := "chmod 700 '" + home + "'"; merr.Fix != fix || !strings.Contains(err.Error(), fix) {
				t.Errorf("Open(home at %04o) = %q, want it to give the fix %q", mode, err, fix)
			}
			got := modes(t, home)
			if got["."] != mode || got[DatabaseFile] != 0o644 {
				t.Errorf("modes after the refusal = %v, want the folder at %04o and the database at 0644 as they were", got, mode)
			}
			if err := os.Chmod(home, 0o700); err != nil {
				t.Fatal(err)
			}
			st, err := Open(context.Background(), home, nil)
			if err != nil {
				t.Fatalf("Open after %s: %v", merr.Fix, err)
			}
			st.Close()

			empty := filepath.Join(t.TempDir(), "new")
			if err := os.Mkdir(empty, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(empty, mode); err != nil {
				t.Fatal(err)
			}
			if st, err = Open(context.Background(), empty, nil); err != nil {
				t.Fatalf("Open(empty folder at %04o) = %v, want it taken as a new home", mode, err)
			}
			st.Close()
			if got := modes(t, empty)["."]; got != mode&0o700 {
				t.Errorf("mode of the new home made from an empty folder at %04o = %04o, want %04o", mode, got, mode&0o700)
			}
		})
	}
}

// In an owner-only home, the files an earlier version left open to others
// are made owner-only, each change logged.
func TestOpenTightensOldHome(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]fs.FileMode{
		DatabaseFile:               0o644,
		DatabaseFile + "-wal":      0o644,
		"logs/gatehouse.log":       0o664,
		"backups/claude.json.orig": 0o640,
		"kept.txt":                 0o600,
	}
	for name, mode := range files {
		path := filepath.Join(home, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, nil, mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("/etc/passwd", filepath.Join(home, "link")); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(home, DatabaseFile+"-wal")) // a WAL of no database would be refused by SQLite
	var log bytes.Buffer
	st, err := Open(context.Background(), home, &Options{Logger: slog.New(slog.NewTextHandler(&log, nil))})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	// The home's own entries are made owner-only; what is below its
	// folders is out of others' reach through them, and is not read (a
	// proxy opens the home at every start).
	want := map[string]fs.FileMode{
		DatabaseFile:               0o600,
		"logs":                     0o700,
		"logs/gatehouse.log":       0o664,
		"backups":                  0o700,
		"backups/claude.json.orig": 0o640,
		"kept.txt":                 0o600,
	}
	got := modes(t, home)
	for name, mode := range want {
		if got[name] != mode {
			t.Errorf("mode of %s after Open = %04o, want %04o", name, got[name], mode)
		}
	}
	if fi, err := os.Stat("/etc/passwd"); err == nil && fi.Mode().Perm()&0o044 == 0 {
		t.Errorf("Open followed a symbolic link: /etc/passwd is %04o", fi.Mode().Perm())
	}
	for _, name := range []string{DatabaseFile, "logs", "backups"} {
		if !strings.Contains(log.String(), filepath.Join(home, name)) {
			t.Errorf("log = %q, want it to name %s, made owner-only", log.String(), name)
		}
	}
	if strings.Contains(log.String(), "kept.txt") {
		t.Errorf("log = %q, names kept.txt, which was owner-only already", log.String())
	}
}

// Several processes open a new home, an empty folder open to others, at
// once: one takes it (makes it owner-only and creates the database) after
// another saw it open and before that one looks inside. The second opens
// the home the first took; it does not refuse it for holding a file.
func TestOpenHomeTakenMeanwhile(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	betweenLooks = func(dir string) {
		if err := os.Chmod(dir, 0o700); err != nil {
			t.Error(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "gatehouse.db"), nil, 0o600); err != nil {
			t.Error(err)
		}
	}
	defer func() { betweenLooks = func(string) {} }()
	st, err := Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatalf("open a home another process took meanwhile: %v", err)
	}
	st.Close()
}
