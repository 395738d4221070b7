package clients

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// errNoCommand is returned when a server's command is not found.
var errNoCommand = errors.New("command not found")

// isAbs reports whether path is absolute on goos (which need not be the
// system this runs on: tests look at Windows layouts on Linux).
func isAbs(goos, path string) bool {
	if goos == "windows" {
		return len(path) > 2 && path[1] == ':' && (path[2] == '\\' || path[2] == '/') ||
			strings.HasPrefix(path, `\\`) || strings.HasPrefix(path, "//")
	}
	return strings.HasPrefix(path, "/")
}

// lookPath finds file as a shell would on goos: an absolute path must
// exist; a bare name is looked for in each folder of path (with Windows'
// PATHEXT extensions). A relative path with a folder in it is refused: it
// would depend on the folder the client starts the proxy in.
func lookPath(goos, file, path, pathext string) (string, error) {
	if isAbs(goos, file) {
		if err := executable(goos, file); err != nil {
			return "", err
		}
		return file, nil
	}
	if strings.ContainsAny(file, `/\`) {
		return "", fmt.Errorf("%s: a relative path; use an absolute one: %w", file, errNoCommand)
	}
	exts := []string{""}
	if goos == "windows" {
		if pathext == "" {
			pathext = ".COM;.EXE;.BAT;.CMD"
		}
		if filepath.Ext(file) == "" {
			exts = nil
		}
		for _, e := range strings.Split(pathext, ";") {
			if e != "" {
				exts = append(exts, strings.ToLower(e))
			}
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		for _, e := range exts {
			p := filepath.Join(dir, file+e)
			if executable(goos, p) == nil {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("%s: not on PATH: %w", file, errNoCommand)
}

func executable(goos, path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, errNoCommand)
	}
	if fi.IsDir() {
		return fmt.Errorf("%s: a folder, not a program: %w", path, errNoCommand)
	}
	if goos != "windows" && fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s: not executable: %w", path, errNoCommand)
	}
	return nil
}

// systemDirs are folders every launcher's PATH holds; a command found
// elsewhere (nvm, Homebrew, ~/.local/bin) may need its folder on PATH to
// find its interpreter (#!/usr/bin/env node) when a GUI app starts it.
var systemDirs = map[string]bool{"/usr/bin": true, "/bin": true, "/usr/sbin": true, "/sbin": true}
