// Package install knows how Gatehouse is laid out once installed: which
// binaries it has and where the running one finds the others.
//
// Gatehouse ships two programs side by side: gatehouse, the command line and
// the stdio proxy that MCP clients start, and gatehouse-app, the tray app.
// Every package puts them in one folder:
//
//	Linux (.deb, .rpm)  /usr/bin/gatehouse, /usr/bin/gatehouse-app
//	Linux (.tar.gz)     gatehouse-VERSION-linux-amd64/{gatehouse,gatehouse-app}
//	Windows             %LOCALAPPDATA%\Programs\Gatehouse\{gatehouse.exe,gatehouse-app.exe}
//	macOS               Gatehouse.app/Contents/MacOS/{gatehouse,gatehouse-app}
//	a source build      bin/{gatehouse,gatehouse-app}
//
// [ProxyPath] finds the proxy from whichever of them runs, so that the
// client configs Gatehouse writes name the installed proxy by its absolute
// path, the one the packages install.
//
// # Starting at login
//
// The packages also carry what starts the app when the user signs in, off
// until the user turns it on: on Linux the desktop entry [AutostartTemplate],
// which the app copies into the user's autostart folder
// ($XDG_CONFIG_HOME/autostart, usually ~/.config/autostart) under the same
// name; on Windows the value [WindowsRunValue] under
// HKCU\Software\Microsoft\Windows\CurrentVersion\Run, which the installer
// writes when its "Start at sign-in" option is chosen, holding the quoted path
// of gatehouse-app.exe followed by --hidden.
package install

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
)

// ProxyName is the file name of the command line and proxy on this system:
// "gatehouse", or "gatehouse.exe" on Windows.
var ProxyName = exeName("gatehouse", runtime.GOOS)

// AppName is the file name of the tray app on this system: "gatehouse-app",
// or "gatehouse-app.exe" on Windows.
var AppName = exeName("gatehouse-app", runtime.GOOS)

// AppID is the app's identifier: the reverse-DNS name of its desktop entry,
// icon, macOS bundle and preferences.
const AppID = "dev.gatehouse.app"

// AutostartTemplate is where the Linux packages install the desktop entry
// that starts the app, in the tray only, at login. Copying it into the
// user's autostart folder under its own base name turns autostart on;
// removing the copy turns it off.
const AutostartTemplate = "/usr/share/gatehouse/autostart/" + AppID + ".desktop"

// WindowsRunValue is the name of the value the Windows installer writes under
// HKCU\Software\Microsoft\Windows\CurrentVersion\Run when the user chooses to
// start Gatehouse at sign-in.
const WindowsRunValue = "Gatehouse"

// ErrProxyNotFound means that no gatehouse executable was found next to the
// running program nor on PATH.
var ErrProxyNotFound = errors.New("gatehouse proxy not found")

// ProxyPath returns the absolute path of the gatehouse executable (the proxy
// that MCP client configs launch) that belongs with the running program.
//
// It looks, in order, in the folder of the running executable as it was
// started, then in the folder it resolves to once symbolic links are followed
// (a link in ~/bin to an unpacked archive), and last on PATH. A path found in
// the running executable's folder is returned as it is, links and all: a
// package manager's stable link (/opt/homebrew/bin/gatehouse) outlives the
// versioned folder it points into, and a config should name the former.
//
// When none holds an executable file of that name, the error wraps
// [ErrProxyNotFound] and names the folders it looked in.
func ProxyPath() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find gatehouse proxy: locate the running program: %w", err)
	}
	return proxyPath(exe, ProxyName, exec.LookPath)
}

// proxyPath is ProxyPath for the program at exe, looking for the file name
// and searching PATH with lookPath.
func proxyPath(exe, name string, lookPath func(string) (string, error)) (string, error) {
	exe, err := filepath.Abs(exe)
	if err != nil {
		return "", fmt.Errorf("find gatehouse proxy: %w", err)
	}
	dirs := []string{filepath.Dir(exe)}
	if resolved, err := filepath.EvalSymlinks(exe); err == nil {
		if d := filepath.Dir(resolved); d != dirs[0] {
			dirs = append(dirs, d)
		}
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		if isExecutable(p) {
			return p, nil
		}
	}
	p, err := lookPath(name)
	if err == nil {
		if p, err = filepath.Abs(p); err == nil && isExecutable(p) {
			return p, nil
		}
	}
	where := dirs[0]
	if len(dirs) > 1 {
		where += " or " + dirs[1]
	}
	return "", fmt.Errorf("find gatehouse proxy: no %s in %s nor on PATH: %w", name, where, ErrProxyNotFound)
}

// isExecutable reports whether path is a regular file (after links) that
// this system would run: on Windows any such file, elsewhere one with an
// execute bit set.
func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false
	}
	return runtime.GOOS == "windows" || fi.Mode().Perm()&0o111 != 0
}

// exeName is the file name of the program base on goos.
func exeName(base, goos string) string {
	if goos == "windows" {
		return base + ".exe"
	}
	return base
}
