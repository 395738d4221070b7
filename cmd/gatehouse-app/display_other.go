//go:build !(linux || freebsd || openbsd || netbsd || dragonfly)

package main

// checkDisplay has nothing to check on macOS and Windows, where a logged-in
// user always has a display.
func checkDisplay() error { return nil }
