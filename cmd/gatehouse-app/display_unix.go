//go:build linux || freebsd || openbsd || netbsd || dragonfly

package main

import (
	"errors"
	"os"
)

// checkDisplay fails when there is no X11 or Wayland display to connect to.
// Fyne's GLFW driver would otherwise panic at start with an error about
// DISPLAY that says nothing about how to run the app.
func checkDisplay() error {
	if os.Getenv("DISPLAY") == "" && os.Getenv("WAYLAND_DISPLAY") == "" {
		return errors.New("no display: DISPLAY and WAYLAND_DISPLAY are unset")
	}
	return nil
}
