package app

import (
	"strings"
	"testing"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/test"
)

// shownWindow records whether the window is shown, which Fyne's test
// window does not.
type shownWindow struct {
	fyne.Window
	shown bool
}

func (w *shownWindow) Show() { w.shown = true; w.Window.Show() }
func (w *shownWindow) Hide() { w.shown = false; w.Window.Hide() }

// windowsApp is a tray app whose windows say whether they are shown.
type windowsApp struct {
	*trayApp
	wins []*shownWindow
}

func (a *windowsApp) NewWindow(title string) fyne.Window {
	w := &shownWindow{Window: a.trayApp.NewWindow(title)}
	a.wins = append(a.wins, w)
	return w
}

func newWindowsHarness(t *testing.T, trayHost bool) (*harness, *windowsApp, *shownWindow) {
	t.Helper()
	a := &windowsApp{trayApp: &trayApp{App: test.NewTempApp(t), quit: make(chan struct{}, 2)}}
	h := newHarness(t, a, everything)
	h.ui.trayHost = func() bool { return trayHost }
	main := h.ui.win.(*shownWindow)
	if !main.shown {
		t.Fatal("the main window is not shown after ShowMain")
	}
	return h, a, main
}

// TestCloseWithoutTrayHost: with no tray host, closing the window does not
// hide the approver silently: it asks, Return keeps Gatehouse running
// without a window and says how to bring it back, and a second start
// (Raise) brings it back.
func TestCloseWithoutTrayHost(t *testing.T) {
	h, a, main := newWindowsHarness(t, false)
	h.locked(h.ui.closeWindow)
	if !main.shown {
		t.Fatal("closing the window hid it before asking")
	}
	top := h.ui.win.Canvas().Overlays().Top()
	if top == nil {
		t.Fatal("closing the window asked nothing")
	}
	assertShows(t, objectText(top), "no tray icon", labelKeepRunning, labelQuit, "Cancel")

	// Escape leaves things as they were.
	h.locked(func() { h.ui.win.Canvas().OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyEscape}) })
	if !main.shown || h.ui.win.Canvas().Overlays().Top() != nil {
		t.Fatal("Escape did not cancel closing")
	}

	// Return keeps it running, hidden, and says where it went.
	h.locked(h.ui.closeWindow)
	h.locked(func() { h.ui.win.Canvas().OnTypedKey()(&fyne.KeyEvent{Name: fyne.KeyReturn}) })
	if main.shown {
		t.Fatal("Keep running did not hide the window")
	}
	if len(a.quit) != 0 {
		t.Fatal("Keep running quit")
	}
	if n := len(a.notes); n == 0 || !strings.Contains(a.notes[n-1].Content, "Start Gatehouse again") {
		t.Errorf("notifications = %v, want one saying how to bring the window back", a.notes)
	}

	// A second start of Gatehouse asks for the window.
	h.ui.Raise(pageHistory)
	if !main.shown || h.ui.shell.current.id != pageHistory {
		t.Errorf("Raise(history): shown %v on %q, want the window on the history", main.shown, h.ui.shell.current.id)
	}
}

// TestCloseWithTrayHost: with a tray icon on screen, closing hides the
// window and says, once, that Gatehouse is in the tray.
func TestCloseWithTrayHost(t *testing.T) {
	h, a, main := newWindowsHarness(t, true)
	for range 2 {
		h.locked(h.ui.closeWindow)
		if main.shown {
			t.Fatal("closing the window did not hide it")
		}
		h.locked(h.ui.ShowMain)
	}
	if len(a.notes) != 1 || !strings.Contains(a.notes[0].Content, "tray") {
		t.Errorf("notifications = %v, want one saying Gatehouse is in the tray", a.notes)
	}
}

// TestQuitFromWindow: the sidebar's Quit asks first, then quits.
func TestQuitFromWindow(t *testing.T) {
	h, a, _ := newWindowsHarness(t, false)
	assertShows(t, h.screen(), "Quit Gatehouse")
	test.Tap(h.ui.shell.quit)
	top := h.ui.win.Canvas().Overlays().Top()
	if top == nil || len(a.quit) != 0 {
		t.Fatal("Quit did not ask first")
	}
	assertShows(t, objectText(top), "Quit Gatehouse?", "denied")
	test.Tap(findButton(top, "Quit"))
	select {
	case <-a.quit:
	case <-time.After(10 * time.Second):
		t.Fatal("no Quit 10s after the confirmation")
	}
}

// TestCtrlFSearches: Ctrl+F opens the history with the search field
// focused, from any view.
func TestCtrlFSearches(t *testing.T) {
	h := newHarness(t, nil)
	h.ui.Open(pageSettings)
	h.locked(func() {
		h.ui.win.Canvas().(fyne.Shortcutable).TypedShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault})
	})
	if h.ui.shell.current.id != pageHistory {
		t.Errorf("Ctrl+F shows %s, want the history", h.ui.shell.current.id)
	}
	if h.ui.win.Canvas().Focused() != h.ui.history.search {
		t.Error("Ctrl+F did not put the keyboard in the search field")
	}
}
