//go:build !linux && !freebsd && !openbsd && !netbsd && !dragonfly && !darwin && !windows

package autostart

// Path returns "" and ErrUnsupported: this system has no known autostart
// mechanism.
func (e *Entry) Path() (string, error) { return "", ErrUnsupported }

func (e *Entry) enable() error          { return ErrUnsupported }
func (e *Entry) disable() error         { return ErrUnsupported }
func (e *Entry) enabled() (bool, error) { return false, ErrUnsupported }
