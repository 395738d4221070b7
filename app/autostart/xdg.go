//go:build linux || freebsd || openbsd || netbsd || dragonfly

package autostart

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
)

// Path returns the file that enables e: ID.desktop in the XDG autostart
// folder.
func (e *Entry) Path() (string, error) {
	dir := os.Getenv("XDG_CONFIG_HOME")
	if dir == "" || !filepath.IsAbs(dir) {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("autostart: locate the config folder: %w", err)
		}
		dir = filepath.Join(home, ".config")
	}
	return filepath.Join(dir, "autostart", e.ID+".desktop"), nil
}

func (e *Entry) enable() error {
	path, err := e.Path()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	// Whole or not at all: a session starting meanwhile reads the old entry
	// or the new one.
	if err := atomicfile.Write(path, e.desktopEntry(), 0o644); err != nil {
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
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("autostart: %w", err)
	}
	// A session's settings turn an entry off with Hidden=true, or with
	// X-GNOME-Autostart-enabled=false, rather than deleting it.
	sc := bufio.NewScanner(bytes.NewReader(data))
	inEntry := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			inEntry = line == "[Desktop Entry]"
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !inEntry || !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "Hidden":
			if strings.TrimSpace(v) == "true" {
				return false, nil
			}
		case "X-GNOME-Autostart-enabled":
			if strings.TrimSpace(v) == "false" {
				return false, nil
			}
		}
	}
	return true, nil
}

// desktopEntry is e as an XDG desktop entry.
func (e *Entry) desktopEntry() []byte {
	var b bytes.Buffer
	b.WriteString("[Desktop Entry]\nType=Application\n")
	fmt.Fprintf(&b, "Name=%s\n", escapeValue(e.Name))
	if e.Comment != "" {
		fmt.Fprintf(&b, "Comment=%s\n", escapeValue(e.Comment))
	}
	exec := []string{quoteExecArg(e.Exec)}
	for _, a := range e.Args {
		exec = append(exec, quoteExecArg(a))
	}
	fmt.Fprintf(&b, "Exec=%s\n", strings.Join(exec, " "))
	if e.Icon != "" {
		fmt.Fprintf(&b, "Icon=%s\n", escapeValue(e.Icon))
	}
	b.WriteString("Terminal=false\nX-GNOME-Autostart-enabled=true\n")
	return b.Bytes()
}

// escapeValue escapes a string value of a desktop entry.
func escapeValue(s string) string {
	return strings.NewReplacer(`\`, `\\`, "\t", `\t`).Replace(s)
}

// quoteExecArg quotes an argument of the Exec key, as the Desktop Entry
// Specification says: arguments with reserved characters go in double
// quotes, inside which ", `, $ and \ are escaped with a backslash; a
// literal % is doubled. The value is then escaped as any string value, which
// doubles the backslashes again.
func quoteExecArg(a string) string {
	a = strings.ReplaceAll(a, "%", "%%")
	if a != "" && !strings.ContainsAny(a, " \t\"'\\><~|&;$*?#()`=") {
		return a
	}
	q := strings.NewReplacer(`"`, `\"`, "`", "\\`", `$`, `\$`, `\`, `\\`).Replace(a)
	return escapeValue(`"` + q + `"`)
}
