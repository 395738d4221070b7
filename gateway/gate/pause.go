package gate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// pauseFile is the file in the home folder whose presence pauses every
// gate: while it exists, every tool call through every proxy of that home
// is denied. A file, not a database row, so that checking it costs one
// stat per call and works while the database is locked.
const pauseFile = "paused"

// Pause stops every tool call through the proxies of home until [Resume]:
// each is denied, with a receipt, and the model is told that the user
// paused Gatehouse. Pausing twice is no error.
func Pause(home string) error {
	path := filepath.Join(home, pauseFile)
	stamp := []byte(time.Now().UTC().Format(time.RFC3339) + "\n")
	if err := os.WriteFile(path, stamp, 0o600); err != nil {
		return fmt.Errorf("pause: %w", err)
	}
	return nil
}

// Resume lets tool calls through home's proxies be decided again.
func Resume(home string) error {
	if err := os.Remove(filepath.Join(home, pauseFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("resume: %w", err)
	}
	return nil
}

// Paused reports whether home is paused, and since when.
func Paused(home string) (bool, time.Time, error) {
	path := filepath.Join(home, pauseFile)
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, time.Time{}, nil
	case err != nil:
		return false, time.Time{}, fmt.Errorf("check whether Gatehouse is paused: %w", err)
	}
	return true, fi.ModTime(), nil
}
