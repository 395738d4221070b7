package clients

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
)

// backup copies data, what path held, to the backup folder:
// <backups>/<client>/<time>-<file name>, readable by the user alone. Only
// the newest few backups of each file are kept.
func (m *Manager) backup(id ID, path string, data []byte) (string, error) {
	dir := filepath.Join(m.backups, string(id))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	base := filepath.Base(path)
	name := filepath.Join(dir, m.now().UTC().Format("20060102T150405.000000000Z")+"-"+base)
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("back up %s: %w", path, err)
	}
	m.pruneBackups(dir, base)
	return name, nil
}

// keepBackups is how many backups of each file are kept.
const keepBackups = 20

func (m *Manager) pruneBackups(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	var mine []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), "Z-"+base) {
			mine = append(mine, e.Name())
		}
	}
	slices.Sort(mine) // oldest first: the names start with the time
	for len(mine) > keepBackups {
		os.Remove(filepath.Join(dir, mine[0]))
		mine = mine[1:]
	}
}

// writable checks, before anything else is done, that path can be
// replaced: a read-only file is the user's way of saying no.
func writable(path string) error {
	real, err := filepath.EvalSymlinks(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if fi.Mode().Perm()&0o200 == 0 {
		return fmt.Errorf("%s is %w: nothing written (make it writable to govern it)", path, ErrReadOnly)
	}
	return nil
}

// replaceFile puts new in place of the file at path (the file a symbolic
// link points to, when it is one), atomically ([atomicfile]), with the
// same mode (and owner, when running as root). When the file no longer
// holds old, nothing is written
// and the error wraps ErrChanged.
func (m *Manager) replaceFile(path string, old, new []byte) error {
	if err := writable(path); err != nil {
		return err
	}
	real, _ := filepath.EvalSymlinks(path)
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp, err := atomicfile.Create(real, fi.Mode().Perm())
	if err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("%s: the folder is %w: nothing written", path, ErrReadOnly)
		}
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer tmp.Abort()
	if _, err := tmp.Write(new); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := sameOwner(tmp.File, fi); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	// Durable before the check, so that the check is as close to the
	// rename as it can be.
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if m.beforeRename != nil {
		m.beforeRename(path)
	}
	// The client may have written the file since it was read: then this
	// change was made on bytes that are gone, and must not land.
	cur, err := os.ReadFile(real)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if !bytes.Equal(cur, old) {
		return fmt.Errorf("%s %w: nothing written; run the command again", path, ErrChanged)
	}
	if err := tmp.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}
