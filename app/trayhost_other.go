//go:build !linux

package app

// trayHostRunning reports whether a tray host runs: on Windows and macOS
// the taskbar and the menu bar always do. (The BSDs' desktops are treated
// alike; their tray is not checked.)
func trayHostRunning() bool { return true }
