package app

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/widget"
)

// While Gatehouse runs it is the approver of the home folder's proxies:
// quitting it, or hiding it where nothing can bring it back, loses the one
// person who can say yes. So the window never goes away silently.
//
//   - With a tray icon on screen, closing the window hides it, and the first
//     time a notification says Gatehouse is still in the tray.
//   - Without one (a Linux desktop with no tray host), closing the window
//     asks: keep running without a window (the default, which keeps
//     answering approvals; starting Gatehouse again brings the window back),
//     or quit.
//   - Quit is in the tray menu, at the foot of the sidebar and on Ctrl+Q;
//     from the window it asks first.

// closeWindow is what closing the main window does.
func (u *UI) closeWindow() {
	if u.HasTray() {
		u.hideToTray()
		return
	}
	u.askOnClose()
}

// hideToTray hides the window; the first time, a notification says where
// Gatehouse went.
func (u *UI) hideToTray() {
	u.win.Hide()
	if !u.toldHidden {
		u.toldHidden = true
		u.app.SendNotification(&fyne.Notification{Title: "Gatehouse is still running",
			Content: "It keeps answering your agents' approval requests. Open it again from its icon in the tray."})
	}
}

// Labels of the closing question's answers.
const (
	labelKeepRunning = "Keep running without a window"
	labelQuit        = "Quit Gatehouse"
)

// askOnClose asks, with no tray to hide in, whether to keep running
// without a window or quit.
func (u *UI) askOnClose() {
	if u.closing != nil {
		return
	}
	// Broken by hand: a dialog gives a wrapping label no width to wrap at.
	msg := widget.NewLabel("There is no tray icon on this desktop to bring the window back from.\n" +
		"Gatehouse can keep running without a window, answering your agents'\n" +
		"approval requests: start Gatehouse again (from the applications menu,\n" +
		"or gatehouse-app) and this window comes back.\n\n" +
		"If you quit, tool calls that need approval are denied until Gatehouse\n" +
		"runs again.")
	keep := widget.NewButton(labelKeepRunning, nil)
	keep.Importance = widget.HighImportance
	quit := widget.NewButton(labelQuit, nil)
	quit.Importance = widget.DangerImportance
	cancel := widget.NewButton("Cancel", nil)
	body := container.NewVBox(msg, container.NewHBox(layout.NewSpacer(), cancel, quit, keep))
	d := dialog.NewCustomWithoutButtons("Close the Gatehouse window?", body, u.win)
	done := func(then func()) func() {
		return func() {
			u.closing = nil
			u.win.Canvas().SetOnTypedKey(nil)
			d.Hide()
			if then != nil {
				then()
			}
		}
	}
	keep.OnTapped = done(u.hideWithoutTray)
	quit.OnTapped = done(u.Quit)
	cancel.OnTapped = done(nil)
	u.closing = d
	// Return keeps the guard running; Escape leaves things as they were.
	u.win.Canvas().SetOnTypedKey(func(e *fyne.KeyEvent) {
		switch e.Name {
		case fyne.KeyReturn, fyne.KeyEnter:
			keep.OnTapped()
		case fyne.KeyEscape:
			cancel.OnTapped()
		}
	})
	d.Show()
}

// hideWithoutTray hides the window, with no tray icon to show it again
// from: a notification says how to get it back.
func (u *UI) hideWithoutTray() {
	u.win.Hide()
	u.app.SendNotification(&fyne.Notification{Title: "Gatehouse is still running",
		Content: "It keeps answering your agents' approval requests. Start Gatehouse again to open its window."})
}

// confirmQuit asks before quitting from the window.
func (u *UI) confirmQuit() {
	d := dialog.NewConfirm("Quit Gatehouse?",
		"While Gatehouse is not running, tool calls that need your approval are denied, and the window shows nothing new.",
		func(ok bool) {
			if ok {
				u.Quit()
			}
		}, u.win)
	d.SetConfirmText("Quit")
	d.SetConfirmImportance(widget.DangerImportance)
	d.Show()
}

// addShortcuts adds the main window's keyboard shortcuts: Ctrl+Q quits
// (after asking), Ctrl+W closes the window as its close button does, and
// Ctrl+F searches the history.
func (u *UI) addShortcuts() {
	cv := u.win.Canvas()
	cv.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyQ, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { u.confirmQuit() })
	cv.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyW, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { u.closeWindow() })
	cv.AddShortcut(&desktop.CustomShortcut{KeyName: fyne.KeyF, Modifier: fyne.KeyModifierShortcutDefault}, func(fyne.Shortcut) { u.searchHistory() })
}

// searchHistory opens the history with the keyboard in its search field.
func (u *UI) searchHistory() {
	u.Open(pageHistory)
	u.win.Canvas().Focus(u.history.search)
}

// Raise shows the main window in front, on view when it is not empty: what
// a second start of Gatehouse for the same home folder asks of the first.
// It may be called from any goroutine.
func (u *UI) Raise(view string) {
	u.do(func() {
		if view != "" {
			u.Open(view)
		} else {
			u.ShowMain()
		}
	})
}
