// Package autostart starts a program when the user logs in, the way each
// desktop expects it:
//
//   - Linux and the BSDs: a desktop entry in the XDG autostart folder,
//     $XDG_CONFIG_HOME/autostart (~/.config/autostart), which GNOME, KDE,
//     Xfce and the other freedesktop.org sessions read at login;
//   - macOS: a LaunchAgent, ~/Library/LaunchAgents/ID.plist, with RunAtLoad;
//   - Windows: a value named after the entry under
//     HKEY_CURRENT_USER\Software\Microsoft\Windows\CurrentVersion\Run.
//
// Nothing needs administrator rights, and everything is the user's to undo
// from their desktop's own settings too. An [Entry] names the program by its
// absolute path, so it must be enabled again if the program moves.
//
//	e := autostart.Entry{ID: "dev.gatehouse.app", Name: "Gatehouse", Exec: exe, Args: []string{"--hidden"}}
//	if err := e.Enable(); err != nil { ... }
//	on, err := e.Enabled()
package autostart

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
)

// ErrUnsupported is returned on a system with no known autostart mechanism.
var ErrUnsupported = errors.New("starting at login is not supported on this system")

// An Entry is a program to start at login.
type Entry struct {
	// ID names the entry: a reverse domain name, such as the app's id
	// ("dev.gatehouse.app"). It is the file's name (Linux, macOS) or the
	// registry value's (Windows).
	ID string
	// Name is the program's name as people see it.
	Name string
	// Comment says what it is, in a few words (Linux only).
	Comment string
	// Icon is the icon's name in the icon theme, or an absolute path
	// (Linux only).
	Icon string
	// Exec is the absolute path of the program.
	Exec string
	// Args are its arguments.
	Args []string
}

// validate reports whether e can be written.
func (e *Entry) validate() error {
	if e.ID == "" || strings.ContainsAny(e.ID, `/\`+"\x00") || e.ID == "." || e.ID == ".." {
		return fmt.Errorf("autostart: invalid entry id %q", e.ID)
	}
	if !filepath.IsAbs(e.Exec) {
		return fmt.Errorf("autostart %s: the program's path %q is not absolute", e.ID, e.Exec)
	}
	for _, s := range append([]string{e.Name, e.Comment, e.Icon, e.Exec}, e.Args...) {
		if strings.ContainsAny(s, "\x00\r\n") {
			return fmt.Errorf("autostart %s: a field holds a line break or NUL", e.ID)
		}
	}
	return nil
}

// Enable makes the program start at login, replacing what an earlier
// Enable wrote for the same ID.
func (e *Entry) Enable() error {
	if err := e.validate(); err != nil {
		return err
	}
	return e.enable()
}

// Disable stops the program from starting at login. Disabling an entry that
// is not enabled is no error.
func (e *Entry) Disable() error {
	if err := e.validate(); err != nil {
		return err
	}
	return e.disable()
}

// Enabled reports whether the program starts at login: the entry exists and
// is not turned off (a desktop's settings may have set Hidden=true in an XDG
// entry).
func (e *Entry) Enabled() (bool, error) {
	if err := e.validate(); err != nil {
		return false, err
	}
	return e.enabled()
}
