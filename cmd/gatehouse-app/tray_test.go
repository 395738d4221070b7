package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/godbus/dbus/v5"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// watcher is a tray host as a desktop panel runs one: the
// StatusNotifierWatcher that tray icons register with.
type watcher struct {
	items chan string // the bus names of the icons that registered
}

func (w *watcher) RegisterStatusNotifierItem(sender dbus.Sender, _ string) *dbus.Error {
	w.items <- string(sender)
	return nil
}

// startWatcher runs a tray host on the session bus at addr.
func startWatcher(t *testing.T, addr string) (*dbus.Conn, *watcher) {
	t.Helper()
	conn, err := dbus.Connect(addr)
	if err != nil {
		t.Fatalf("connect to the session bus: %v", err)
	}
	t.Cleanup(func() { conn.Close() })
	w := &watcher{items: make(chan string, 4)}
	if err := conn.Export(w, "/StatusNotifierWatcher", "org.kde.StatusNotifierWatcher"); err != nil {
		t.Fatal(err)
	}
	if reply, err := conn.RequestName("org.kde.StatusNotifierWatcher", dbus.NameFlagDoNotQueue); err != nil || reply != dbus.RequestNameReplyPrimaryOwner {
		t.Fatalf("become the tray host: %v (%v)", reply, err)
	}
	return conn, w
}

// trayMenu returns the labels of the tray menu of the icon at name.
func trayMenu(conn *dbus.Conn, name string) ([]string, error) {
	var revision uint32
	var layout struct {
		ID       int32
		Props    map[string]dbus.Variant
		Children []dbus.Variant
	}
	err := conn.Object(name, "/StatusNotifierMenu").Call("com.canonical.dbusmenu.GetLayout", 0, int32(0), int32(-1), []string{"label"}).Store(&revision, &layout)
	if err != nil {
		return nil, err
	}
	var labels []string
	for _, c := range layout.Children {
		fields, ok := c.Value().([]any)
		if len(fields) != 3 || !ok {
			return nil, fmt.Errorf("a menu item reads %#v", c.Value())
		}
		props, _ := fields[1].(map[string]dbus.Variant)
		label, _ := props["label"].Value().(string)
		labels = append(labels, label)
	}
	return labels, nil
}

// trayPixels returns the tray icon's pixels as the icon at name offers
// them to the panel.
func trayPixels(conn *dbus.Conn, name string) ([]byte, error) {
	v, err := conn.Object(name, "/StatusNotifierItem").GetProperty("org.kde.StatusNotifierItem.IconPixmap")
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, "%v", v.Value()), nil
}

// TestTrayUnderXvfb: with a tray host on the bus, the real app's tray menu
// says that servers registered in Gatehouse but launched by no agent
// through it are not protected, and its icon changes while an approval
// waits.
func TestTrayUnderXvfb(t *testing.T) {
	dbusDaemon := need(t, "dbus-daemon", "dbus")
	bus := startDBus(t, dbusDaemon)
	conn, w := startWatcher(t, bus)

	userHome, err := os.MkdirTemp("", "gha")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(userHome) })
	home := filepath.Join(userHome, ".config", "gatehouse")
	st, err := store.Open(context.Background(), home, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"everything", "filesystem", "memory"} {
		if err := st.AddServer(context.Background(), store.Server{Name: name, Command: "npx", Args: []string{"-y", "@modelcontextprotocol/server-" + name}}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	proxyBinary(t)
	writeClientConfigs(t, userHome) // five servers of the agents' own, run directly

	r := startApp(t, userHome, home, bus, "^Gatehouse$")
	var item string
	select {
	case item = <-w.items:
	case <-time.After(30 * time.Second):
		t.Fatalf("the app's tray icon did not register with the tray host\nstderr:\n%s", r.stderr)
	}

	// waitMenu waits until the tray menu's labels hold want.
	waitMenu := func(want string) []string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			labels, err := trayMenu(conn, item)
			if err == nil && strings.Contains(strings.Join(labels, "\n"), want) {
				return labels
			}
			if time.Now().After(deadline) {
				t.Fatalf("the tray menu = %q (%v), want %q in it", labels, err, want)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	labels := waitMenu("Not protecting: 0 of 5 servers run through Gatehouse")
	if labels[0] != "Not protecting: 0 of 5 servers run through Gatehouse" {
		t.Errorf("the tray menu's first line = %q", labels[0])
	}
	if strings.Contains(strings.Join(labels, "\n"), "Protecting 3") {
		t.Errorf("the tray menu counts the registered servers as protected: %q", labels)
	}
	before, err := trayPixels(conn, item)
	if err != nil {
		t.Fatal(err)
	}

	// An approval waits: the menu and the icon say so.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go approval.Ask(ctx, approval.SocketPath(home), deleteBranch, 50*time.Second, nil)
	waitMenu("1 approval waiting")
	after, err := trayPixels(conn, item)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(before, after) {
		t.Error("the tray icon did not change while an approval waits")
	}
	r.stop()
}
