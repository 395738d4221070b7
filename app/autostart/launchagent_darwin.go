package autostart

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
)

// Path returns the file that enables e: the LaunchAgent ID.plist in
// ~/Library/LaunchAgents. launchd reads it at the next login; RunAtLoad
// starts the program then.
func (e *Entry) Path() (string, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("autostart: locate the home folder: %w", err)
	}
	return filepath.Join(home, "Library", "LaunchAgents", e.ID+".plist"), nil
}

func (e *Entry) enable() error {
	path, err := e.Path()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	if err := atomicfile.Write(path, e.plist(), 0o644); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	return nil
}

func (e *Entry) disable() error {
	path, err := e.Path()
	if err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("autostart: %w", err)
	}
	return nil
}

func (e *Entry) enabled() (bool, error) {
	path, err := e.Path()
	if err != nil {
		return false, err
	}
	_, err = os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("autostart: %w", err)
	}
	return true, nil
}

// plist is e as a LaunchAgent property list. ProcessType Interactive keeps
// launchd from throttling a GUI app; LimitLoadToSessionType Aqua starts it
// only in a graphical login, not over ssh.
func (e *Entry) plist() []byte {
	var b bytes.Buffer
	str := func(s string) {
		b.WriteString("\t\t<string>")
		xml.EscapeText(&b, []byte(s))
		b.WriteString("</string>\n")
	}
	b.WriteString(`<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
<plist version="1.0">
<dict>
	<key>Label</key>
	<string>`)
	xml.EscapeText(&b, []byte(e.ID))
	b.WriteString("</string>\n\t<key>ProgramArguments</key>\n\t<array>\n")
	str(e.Exec)
	for _, a := range e.Args {
		str(a)
	}
	b.WriteString(`	</array>
	<key>RunAtLoad</key>
	<true/>
	<key>ProcessType</key>
	<string>Interactive</string>
	<key>LimitLoadToSessionType</key>
	<string>Aqua</string>
</dict>
</plist>
`)
	return b.Bytes()
}
