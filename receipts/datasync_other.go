//go:build !linux

package receipts

import "os"

// datasync makes f's data durable (fsync; F_FULLFSYNC on macOS).
func datasync(f *os.File) error { return f.Sync() }
