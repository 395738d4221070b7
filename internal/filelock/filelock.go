// Package filelock gives the processes of one home folder mutexes on files.
// A waiter is woken as soon as the holder lets go (no polling), and a
// process that dies lets go of its locks.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"os"
)

// ErrLocked is TryLock's answer while another holder has the lock.
var ErrLocked = errors.New("locked by another process")

// TryLock opens the file at path (creating it, mode 0600) and takes its lock
// without waiting, for as long as the returned file stays open: closing it,
// or the end of the process, lets go. It returns [ErrLocked] while another
// process, or another open of the file in this one, holds it. The lock
// covers none of the file's content, so others may read what the holder
// writes there (a process id, say). Where the system has no file locks
// ([Supported] is false) the file is returned open and unlocked.
func TryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	ok, err := tryLock(f)
	if err != nil || !ok {
		f.Close()
		if err == nil {
			err = ErrLocked
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return f, nil
}

// A Mutex is an exclusive lock on a file, shared with every process that
// locks the same path, and with the goroutines of this one that use this
// Mutex. The file is opened once, on first use, and kept open.
type Mutex struct {
	path string
	sem  chan *os.File // holds the open file (nil before first use) while the Mutex is free
}

// New returns the Mutex of the file at path (created when first locked).
func New(path string) *Mutex {
	m := &Mutex{path: path, sem: make(chan *os.File, 1)}
	m.sem <- nil
	return m
}

// Lock takes the lock, waiting while another goroutine or process holds
// it, until ctx ends, and returns the function that lets go. Where the
// system has no file locks (Supported is false), it excludes the
// goroutines of this process only.
func (m *Mutex) Lock(ctx context.Context) (unlock func(), err error) {
	var f *os.File
	select {
	case f = <-m.sem:
	case <-ctx.Done():
		return nil, fmt.Errorf("lock %s: %w", m.path, ctx.Err())
	}
	if f == nil && Supported {
		if f, err = os.OpenFile(m.path, os.O_RDWR|os.O_CREATE, 0o600); err != nil {
			m.sem <- nil
			return nil, fmt.Errorf("lock %s: %w", m.path, err)
		}
	}
	if !Supported {
		return func() { m.sem <- f }, nil
	}
	release := func() {
		unlockFile(f)
		m.sem <- f
	}
	ok, err := tryLock(f)
	if err != nil {
		m.drop(f)
		return nil, fmt.Errorf("lock %s: %w", m.path, err)
	}
	if ok {
		return release, nil
	}
	got := make(chan error, 1)
	go func() { got <- waitLock(f) }()
	select {
	case err := <-got:
		if err != nil {
			m.drop(f)
			return nil, fmt.Errorf("lock %s: %w", m.path, err)
		}
		return release, nil
	case <-ctx.Done():
		// The wait cannot be interrupted: the lock is let go of as soon
		// as it comes, and the Mutex freed then.
		go func() {
			if <-got == nil {
				release()
			} else {
				m.drop(f)
			}
		}()
		return nil, fmt.Errorf("lock %s: %w", m.path, ctx.Err())
	}
}

// drop closes a file that failed to lock; the next Lock opens it again.
func (m *Mutex) drop(f *os.File) {
	f.Close()
	m.sem <- nil
}
