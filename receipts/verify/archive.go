package verify

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"strings"
	"time"
)

// ErrNotBundle is returned by [Open] and [ReadArchive] for something that is
// not a bundle's folder or archive.
var ErrNotBundle = errors.New("not an evidence bundle")

// Open returns the files of the bundle at name: a folder, or a gzipped tar
// archive of one. A folder's files are read as they are checked; an
// archive is unpacked into memory (about 1 GB for a million entries), so
// extract a large one and open the folder.
func Open(name string) (fs.FS, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	if fi.IsDir() {
		return os.DirFS(name), nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	fsys, err := ReadArchive(f)
	if err != nil {
		return nil, fmt.Errorf("open bundle %s: %w", name, err)
	}
	return fsys, nil
}

// maxArchive bounds what ReadArchive holds in memory.
const maxArchive = 8 << 30

// ReadArchive reads a gzipped tar archive of a bundle. The files may sit at
// the top of the archive or in one folder, which the archive may list as a
// folder member. It returns an error only for what cannot be read as one:
// not gzip, not tar, too large, or no regular file at all. Any other member
// (a link, another folder, a file nested deeper or in another folder, a
// path that leaves the archive, a name twice) is not a file of the bundle:
// the verifier reports each under [CheckManifest], and the bundle fails.
func ReadArchive(r io.Reader) (fs.FS, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%w: not gzip: %v", ErrNotBundle, err)
	}
	tr := tar.NewReader(zr)
	a := &archiveFS{memFS: memFS{}}
	prefix := "\x00"  // the folder every file is in; unset
	var dirs []string // folder members
	var total int64
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%w: tar: %v", ErrNotBundle, err)
		}
		name := h.Name
		clean := strings.TrimSuffix(name, "/")
		if !fs.ValidPath(clean) || clean == "." || strings.Contains(name, `\`) {
			a.problem(name, "a member whose path is not a relative path inside the archive")
			continue
		}
		switch h.Typeflag {
		case tar.TypeDir:
			dirs = append(dirs, clean+"/")
			continue
		case tar.TypeReg:
		case tar.TypeSymlink, tar.TypeLink:
			a.problem(name, fmt.Sprintf("a link (to %q), not a regular file: a bundle holds regular files only", h.Linkname))
			continue
		default:
			a.problem(name, "not a regular file: a bundle holds regular files only")
			continue
		}
		dir, base := path.Split(clean)
		if strings.Count(dir, "/") > 1 {
			a.problem(name, "nested more than one folder deep: not a file of the bundle")
			continue
		}
		if prefix == "\x00" {
			prefix = dir
		} else if dir != prefix {
			a.problem(name, fmt.Sprintf("in another folder than the bundle's files (%q): not a file of the bundle", prefix))
			continue
		}
		if _, dup := a.memFS[base]; dup {
			a.problem(name, "in the archive twice: which of them is the bundle's?")
			continue
		}
		if h.Size < 0 || total+h.Size > maxArchive {
			return nil, fmt.Errorf("%w: larger than %d bytes", ErrNotBundle, int64(maxArchive))
		}
		data, err := io.ReadAll(io.LimitReader(tr, h.Size))
		if err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrNotBundle, name, err)
		}
		total += int64(len(data))
		a.memFS[base] = data
	}
	if len(a.memFS) == 0 {
		return nil, fmt.Errorf("%w: the archive holds no file", ErrNotBundle)
	}
	for _, d := range dirs {
		if d != prefix {
			a.problem(d, "a folder: a bundle holds files only, all at the top of the archive or all in one folder")
		}
	}
	return a, nil
}

// An archiveFS is the files of an archive, and what else the archive held:
// members that are not files of the bundle, which the verifier reports.
type archiveFS struct {
	memFS
	problems []archiveProblem
}

type archiveProblem struct{ name, msg string }

func (a *archiveFS) problem(name, msg string) {
	a.problems = append(a.problems, archiveProblem{name, msg})
}

// memFS is a flat, read-only file system in memory.
type memFS map[string][]byte

var (
	_ fs.FS        = memFS(nil)
	_ fs.ReadDirFS = memFS(nil)
)

func (m memFS) Open(name string) (fs.File, error) {
	if name == "." {
		return &memDir{m: m}, nil
	}
	data, ok := m[name]
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
	return &memFile{info: memInfo{name: name, size: int64(len(data))}, r: bytes.NewReader(data)}, nil
}

func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if name != "." {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
	}
	var out []fs.DirEntry
	for _, n := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fs.FileInfoToDirEntry(memInfo{name: n, size: int64(len(m[n]))}))
	}
	return out, nil
}

type memFile struct {
	info memInfo
	r    *bytes.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Read(p []byte) (int, error) { return f.r.Read(p) }
func (f *memFile) Close() error               { return nil }

type memDir struct{ m memFS }

func (d *memDir) Stat() (fs.FileInfo, error) { return memInfo{name: ".", dir: true}, nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: ".", Err: fs.ErrInvalid}
}
func (d *memDir) Close() error { return nil }

type memInfo struct {
	name string
	size int64
	dir  bool
}

func (i memInfo) Name() string { return i.name }
func (i memInfo) Size() int64  { return i.size }
func (i memInfo) Mode() fs.FileMode {
	if i.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.dir }
func (i memInfo) Sys() any           { return nil }
