package store

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"

	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
)

// ownerOnly are the permission bits no file or folder of the home may have:
// every bit for the group and for others.
const ownerOnly fs.FileMode = 0o077

// A ModeError is [Open]'s refusal of a home folder other users can reach,
// or of a file in it that is open to them and that Gatehouse cannot make
// owner-only. Fix is the command that makes it the user's alone.
type ModeError struct {
	Path string
	Home bool // Path is the home folder itself
	Mode fs.FileMode
	Fix  string
}

func (e *ModeError) Error() string {
	what := "file"
	switch {
	case e.Home:
		what = "home folder"
	case e.Mode.IsDir():
		what = "folder"
	}
	return fmt.Sprintf("%s %s is open to other users (mode %04o): it holds every governed call's arguments and results; make it yours alone with: %s",
		what, e.Path, e.Mode.Perm(), e.Fix)
}

// checkHome keeps the home folder dir its user's alone, as ssh keeps
// ~/.ssh. A home folder that belongs to another user MUST be refused; so
// MUST one with anything in it and any permission bit for the group or
// for others, the command that fixes it in the error (a [*ModeError]).
// An empty folder open to others (one made by hand, or by mktemp, for
// Gatehouse to use) has held nothing yet: it is made owner-only, logged.
//
// In an owner-only home folder, every file and folder in it (the database
// and its -wal and -shm, logs, backups, exports, sockets, locks) with such
// bits, as earlier versions left the database, is made owner-only, each
// change logged; one that cannot be changed (another user's) is refused.
// What is deeper is out of reach through them. Symbolic links are not
// followed.
// Nothing is checked on Windows, whose files have no such mode bits: there
// the home folder lives in the user's profile, which its ACLs keep the
// user's.
func checkHome(dir string, log *slog.Logger) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("open home folder: %w", err)
	}
	if uid, foreign := foreignOwner(fi); foreign {
		return fmt.Errorf("open home folder: %s belongs to uid %d, not to the user Gatehouse runs as (uid %d): run Gatehouse as its owner, or choose another home folder", dir, uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&ownerOnly != 0 {
		betweenLooks(dir)
		empty, err := isEmpty(dir)
		if err != nil {
			return fmt.Errorf("open home folder: %w", err)
		}
		switch {
		case empty:
			// An empty folder (made by hand or by mktemp for Gatehouse) has
			// held nothing: it becomes the new home, the user's alone.
			if err := os.Chmod(dir, perm&^ownerOnly); err != nil {
				return &ModeError{Path: dir, Home: true, Mode: fi.Mode(), Fix: "chmod 700 " + shellwords.Quote(dir)}
			}
			log.Info("made the new home folder owner-only", slog.String("path", dir),
				slog.String("was", fmt.Sprintf("%04o", perm)), slog.String("now", fmt.Sprintf("%04o", perm&^ownerOnly)))
			return nil
		case !privateNow(dir):
			return &ModeError{Path: dir, Home: true, Mode: fi.Mode(), Fix: "chmod 700 " + shellwords.Quote(dir)}
		}
		// Another process of this user took the empty folder between the
		// look at its mode and the look inside (several proxies started
		// at once on a new home): it is owner-only now, and its entries
		// are checked as any owner-only home's.
	}
	// What is under the home folder is out of others' reach while the
	// folder is owner-only; its entries are made owner-only too, so that a
	// folder opened later by mistake does not expose them. Only its own
	// entries are read: a proxy opens the home at every start, and the
	// folders below it (backups, exports) hold many files.
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("check home folder: %w", err)
	}
	for _, d := range entries {
		if d.Type()&fs.ModeSymlink != 0 {
			continue
		}
		path := filepath.Join(dir, d.Name())
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed by another process meanwhile
		}
		if err != nil {
			return fmt.Errorf("check home folder: %w", err)
		}
		mode := info.Mode()
		if mode.Perm()&ownerOnly == 0 {
			continue
		}
		err = os.Chmod(path, mode.Perm()&^ownerOnly)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return &ModeError{Path: path, Mode: mode, Fix: "chmod go-rwx " + shellwords.Quote(path)}
		}
		log.Warn("made a file of the home folder owner-only", slog.String("path", path),
			slog.String("was", fmt.Sprintf("%04o", mode.Perm())), slog.String("now", fmt.Sprintf("%04o", mode.Perm()&^ownerOnly)))
	}
	return nil
}

// betweenLooks runs between the look at the home folder's mode and the
// look inside it: where another process can act (a test's seam).
var betweenLooks = func(dir string) {}

// privateNow reports whether the folder dir is, now, owner-only.
func privateNow(dir string) bool {
	fi, err := os.Stat(dir)
	return err == nil && fi.Mode().Perm()&ownerOnly == 0
}

// isEmpty reports whether the folder dir holds nothing.
func isEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, err
	}
	defer f.Close()
	_, err = f.Readdirnames(1)
	if errors.Is(err, io.EOF) {
		return true, nil
	}
	return false, err
}

// createDatabase creates the database file, owner-only, unless it exists:
// SQLite would create it with mode 0644 less the umask, and it creates the
// -wal and -shm files with the database file's mode.
func createDatabase(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return f.Close()
}
