// Package atomicfile replaces files whole or not at all: what a reader (or a
// process starting after a crash) finds at the path is the old content or
// the new, never a part.
//
// The content goes to a temporary file in the target's folder, is synced,
// and is renamed over the target; the folder is then synced so that the
// rename itself survives a crash. A symbolic link at the path is replaced,
// not followed: callers that mean the file it points to pass that path.
package atomicfile

import (
	"io/fs"
	"os"
	"path/filepath"
)

// A File is the replacement of one file, being written. Write to it, then
// [File.Commit] to put it in place, or [File.Abort] to leave the target as
// it was; Abort after Commit does nothing, so it can be deferred.
type File struct {
	*os.File
	path string
	done bool
}

// Create starts the replacement of the file at path, with permission bits
// perm (the umask does not apply). Errors are the os package's, naming the
// file.
func Create(path string, perm fs.FileMode) (*File, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(perm); err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, err
	}
	return &File{File: f, path: path}, nil
}

// Commit makes what was written durable and puts it in place of the target.
// On an error the target is as it was and the temporary file is gone.
func (f *File) Commit() error {
	if f.done {
		return fs.ErrClosed
	}
	err := f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), f.path)
	}
	f.done = true
	if err != nil {
		os.Remove(f.Name())
		return err
	}
	syncDir(filepath.Dir(f.path))
	return nil
}

// Abort drops the replacement; the target is left as it was.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	f.Close()
	os.Remove(f.Name())
}

// Write replaces the file at path with data, with permission bits perm.
func Write(path string, data []byte, perm fs.FileMode) error {
	f, err := Create(path, perm)
	if err != nil {
		return err
	}
	defer f.Abort()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Commit()
}

// syncDir makes a rename in dir durable, where the system can (Windows
// cannot open a folder to sync it, and its renames need no such step).
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
}
