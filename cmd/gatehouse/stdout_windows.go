package main

import "os"

// isolateStdout keeps the real stdout for the caller and points os.Stdout at
// stderr. (Windows has no cheap equivalent of dup2 on the standard handles
// that also covers code writing to the handle directly; nothing here does.)
func isolateStdout() (*os.File, error) {
	f := os.Stdout
	os.Stdout = os.Stderr
	return f, nil
}
