package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// maxLinks bounds the symbolic links followed in one path, as the kernel's
// own limit does (ELOOP).
const maxLinks = 40

// RealPath returns where an absolute path leads on this machine: each
// symbolic link along it followed, including a link whose target does not
// exist yet (a write through it creates the target); from the first part
// that does not exist on, the rest is appended as given. It is what a server
// on this machine opens for that path.
func RealPath(p string) (string, error) {
	if !filepath.IsAbs(p) {
		return "", fmt.Errorf("%q is not an absolute path", p)
	}
	todo := splitPath(p)
	done := filepath.VolumeName(p) + string(filepath.Separator)
	links := 0
	for len(todo) > 0 {
		part := todo[0]
		todo = todo[1:]
		switch part {
		case "", ".":
			continue
		case "..":
			done = filepath.Dir(done)
			continue
		}
		next := filepath.Join(done, part)
		fi, err := os.Lstat(next)
		switch {
		case errors.Is(err, fs.ErrNotExist) || isNotDir(err):
			return filepath.Join(append([]string{next}, todo...)...), nil
		case err != nil:
			return "", err
		case fi.Mode()&fs.ModeSymlink == 0:
			done = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("%q: too many symbolic links", p)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			done = filepath.VolumeName(target) + string(filepath.Separator)
		}
		todo = append(splitPath(target), todo...)
	}
	return filepath.Clean(done), nil
}

func splitPath(p string) []string {
	return strings.Split(filepath.ToSlash(p[len(filepath.VolumeName(p)):]), "/")
}

// isNotDir reports whether err says a part of a path is not a folder.
func isNotDir(err error) bool {
	var pe *fs.PathError
	return errors.As(err, &pe) && isENOTDIR(pe.Err)
}
