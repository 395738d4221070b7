package app

import (
	"github.com/godbus/dbus/v5"
)

// trayHostRunning reports whether a tray host runs. On Linux the tray icon
// is a StatusNotifierItem, which shows only where a panel runs the
// StatusNotifierWatcher on the session bus: GNOME without its AppIndicator
// extension has none, nor has a bare window manager. Without one the icon
// is nowhere to be seen, so closing the window must not hide the app
// silently.
func trayHostRunning() bool {
	conn, err := dbus.SessionBusPrivate()
	if err != nil {
		return false
	}
	defer conn.Close()
	if err := conn.Auth(nil); err != nil {
		return false
	}
	if err := conn.Hello(); err != nil {
		return false
	}
	var has bool
	err = conn.BusObject().Call("org.freedesktop.DBus.NameHasOwner", 0, "org.kde.StatusNotifierWatcher").Store(&has)
	return err == nil && has
}
