package autostart

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"golang.org/x/sys/windows/registry"
)

// runKey is where Windows keeps the programs it starts at the user's login.
const runKey = `Software\Microsoft\Windows\CurrentVersion\Run`

// Path returns where e is kept: the registry value ID under the user's Run
// key.
func (e *Entry) Path() (string, error) {
	return `HKEY_CURRENT_USER\` + runKey + `\` + e.ID, nil
}

func (e *Entry) enable() error {
	k, _, err := registry.CreateKey(registry.CURRENT_USER, runKey, registry.SET_VALUE)
	if err != nil {
		return fmt.Errorf("autostart: open the Run key: %w", err)
	}
	defer k.Close()
	if err := k.SetStringValue(e.ID, e.commandLine()); err != nil {
		return fmt.Errorf("autostart: %w", err)
	}
	return nil
}

func (e *Entry) disable() error {
	k, err := registry.OpenKey(registry.CURRENT_USER, runKey, registry.SET_VALUE)
	if errors.Is(err, registry.ErrNotExist) || errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("autostart: open the Run key: %w", err)
	}
	defer k.Close()
	if err := k.DeleteValue(e.ID); err != nil && !errors.Is(err, registry.ErrNotExist) && !errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return fmt.Errorf("autostart: %w", err)
	}
	return nil
}

func (e *Entry) enabled() (bool, error) {
	k, err := registry.OpenKey(registry.CURRENT_USER, runKey, registry.QUERY_VALUE)
	if errors.Is(err, registry.ErrNotExist) || errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("autostart: open the Run key: %w", err)
	}
	defer k.Close()
	_, _, err = k.GetStringValue(e.ID)
	if errors.Is(err, registry.ErrNotExist) || errors.Is(err, syscall.ERROR_FILE_NOT_FOUND) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("autostart: %w", err)
	}
	return true, nil
}

// commandLine is the program and its arguments as one command line, quoted
// as Windows programs parse it (syscall.EscapeArg).
func (e *Entry) commandLine() string {
	parts := []string{syscall.EscapeArg(e.Exec)}
	for _, a := range e.Args {
		parts = append(parts, syscall.EscapeArg(a))
	}
	return strings.Join(parts, " ")
}
