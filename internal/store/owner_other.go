//go:build !unix

package store

import "io/fs"

// foreignOwner reports no other owner: on Windows (and other systems
// without Unix file owners) the home folder's custody is not checked.
func foreignOwner(fs.FileInfo) (uid int, foreign bool) { return 0, false }
