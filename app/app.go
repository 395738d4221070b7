// Package app is the Gatehouse desktop interface: a tray icon and a main
// window that show what the Gatehouse home folder holds.
//
// The interface is a thin client over [store]: it reads, it does not keep its
// own copy of anything, and every change made elsewhere (with the gatehouse
// CLI, or by another process) shows up at the next refresh. The window
// refreshes when it is opened, when the app comes to the foreground, and when
// the user presses Refresh.
//
// # Wiring
//
// The package takes a [fyne.App] instead of creating one, so that it never
// imports fyne.io/fyne/v2/app (which pulls in the OpenGL driver and cgo). A
// program creates the app and hands it over:
//
//	a := fyneapp.NewWithID("dev.gatehouse.app")
//	ui := app.New(a, st, &app.Options{Version: version})
//	ui.ShowMain()
//	a.Run()
//	ui.Close()
//
// Tests pass the app from fyne.io/fyne/v2/test instead, and run without a
// display, without OpenGL and with CGO_ENABLED=0.
//
// # Tray and window
//
// When the driver supports a system tray ([desktop.App]), [New] adds a tray
// icon whose menu opens the window or quits. Closing the window then only
// hides it; Gatehouse keeps running in the tray until Quit. Without a tray,
// closing the window quits, since nothing could bring it back.
//
// # Threads
//
// Methods of [UI] run on the Fyne thread: call them before [fyne.App.Run],
// from widget callbacks, or through [fyne.Do]. Reads from the store run on
// goroutines the UI owns; their results reach the widgets through [fyne.Do].
// [UI.Close] stops them.
package app

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/gatehouse-dev/gatehouse/assets"
	"github.com/gatehouse-dev/gatehouse/store"
)

// Title is the main window's title.
const Title = "Gatehouse"

// AddServerCommand is the CLI command that registers a server, as the empty
// window shows it.
const AddServerCommand = "gatehouse server add NAME -- COMMAND [ARGS...]"

// readTimeout bounds one read of the server list. Reads do not wait for
// writers (the database runs in WAL mode), so this only guards against a
// stuck file system.
const readTimeout = 15 * time.Second

// Options configure [New]. Nil options mean the defaults.
type Options struct {
	// Version is shown in the window's footer, for example "0.1.0".
	// Empty shows none.
	Version string

	// Logger records errors that the window also shows. Nil discards them.
	Logger *slog.Logger
}

// A UI is the Gatehouse interface on one [fyne.App]: its tray icon and its
// main window.
type UI struct {
	app  fyne.App
	st   *store.Store
	log  *slog.Logger
	tray bool // a tray icon was set up, so closing the window hides it

	ctx    context.Context // cancelled by Close; parent of every store read
	cancel context.CancelFunc
	reads  sync.WaitGroup // store reads in flight

	// The fields below belong to the Fyne thread.
	win   fyne.Window
	view  *mainView
	gen   uint64 // counts refreshes; only the latest one's result is shown
	shown bool   // the window has been shown at least once

	// refreshed, when set, runs on the Fyne thread after a refresh's result
	// reaches the window. Tests use it to wait without sleeping.
	refreshed func()
}

// New builds the interface for a on the store st: it applies the Gatehouse
// theme, creates the main window (hidden) and, when the driver supports it,
// the tray icon and menu. It takes a's OnEnteredForeground hook, to refresh
// the window. It does not read the store; [UI.ShowMain] does.
func New(a fyne.App, st *store.Store, opts *Options) *UI {
	if a == nil || st == nil {
		panic("app.New: nil fyne.App or store")
	}
	if opts == nil {
		opts = &Options{}
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &UI{
		app:    a,
		st:     st,
		log:    log.WithGroup("app"),
		ctx:    ctx,
		cancel: cancel,
	}

	a.Settings().SetTheme(newTheme(a.Settings().Theme()))

	u.win = a.NewWindow(Title)
	u.win.SetIcon(iconResource)
	u.view = newMainView(u, st.Dir(), opts.Version)
	u.win.SetContent(u.view.content)
	u.win.Resize(fyne.NewSize(760, 480))

	u.tray = u.setupTray()
	if u.tray {
		u.win.SetCloseIntercept(u.win.Hide) // Quit is in the tray menu
	} else {
		u.win.SetMaster()
	}
	a.Lifecycle().SetOnEnteredForeground(func() {
		if u.shown {
			u.Refresh()
		}
	})
	return u
}

// iconResource is the app icon as a Fyne resource.
var iconResource = fyne.NewStaticResource("gatehouse.svg", assets.IconSVG)

// trayIconResource is the tray icon. Tray hosts want a bitmap, and on
// Linux and Windows they draw it in colour on panels that may be dark or
// light, which the coloured shield reads well on.
var trayIconResource = fyne.NewStaticResource("gatehouse-64.png", assets.IconPNG(64))

// setupTray adds the tray icon and its menu, and reports whether the driver
// supports a tray. The menu ends with a Quit item marked IsQuit, which stops
// Fyne from appending a second one.
func (u *UI) setupTray() bool {
	d, ok := u.app.(desktop.App)
	if !ok {
		return false
	}
	quit := fyne.NewMenuItem("Quit", u.Quit)
	quit.IsQuit = true
	open := fyne.NewMenuItem("Open Gatehouse", u.ShowMain)
	d.SetSystemTrayMenu(fyne.NewMenu(Title, open, fyne.NewMenuItemSeparator(), quit))
	d.SetSystemTrayIcon(trayIconResource)
	// Where the tray host supports it (Windows, macOS, most Linux panels), a
	// click on the icon opens the window and the menu is on the other button.
	d.SetSystemTrayWindow(u.win)
	return true
}

// HasTray reports whether Gatehouse has a tray icon, so that the main window
// can be hidden and opened again from the tray.
func (u *UI) HasTray() bool { return u.tray }

// Window returns the main window.
func (u *UI) Window() fyne.Window { return u.win }

// ShowMain shows the main window, brings it to the front and refreshes it.
func (u *UI) ShowMain() {
	if !u.shown {
		u.shown = true
		u.win.CenterOnScreen()
	}
	u.win.Show()
	u.win.RequestFocus()
	u.Refresh()
}

// Refresh reads the server list again and shows it. The read runs on its own
// goroutine; a read that finishes after a newer one started is dropped.
func (u *UI) Refresh() {
	if u.ctx.Err() != nil {
		return
	}
	u.gen++
	gen := u.gen
	u.reads.Add(1)
	go func() {
		defer u.reads.Done()
		ctx, cancel := context.WithTimeout(u.ctx, readTimeout)
		defer cancel()
		servers, err := u.st.Servers(ctx)
		if u.ctx.Err() != nil {
			return // closed: the window may be gone
		}
		if err != nil {
			u.log.Error("refresh server list", "err", err)
		}
		fyne.Do(func() {
			if gen != u.gen {
				return
			}
			u.view.show(servers, err)
			if u.refreshed != nil {
				u.refreshed()
			}
		})
	}()
}

// Close stops the reads in flight and waits for them. Call it after
// [fyne.App.Run] returns; the UI shows nothing new afterwards.
func (u *UI) Close() {
	u.cancel()
	u.reads.Wait()
}

// Quit hides the window, then stops the app once the event loop has drained
// what the window had queued. Quitting with the window mapped can crash the
// GLFW driver: a pointer event handled while the window is closing makes it
// set the cursor on a window it has already released (fyne-io/fyne#5981).
// Call it on the Fyne thread.
func (u *UI) Quit() {
	u.win.Hide()
	time.AfterFunc(quitDrain, func() { fyne.Do(u.app.Quit) })
}

// quitDrain is how long Quit lets the event loop run with the window hidden.
const quitDrain = 150 * time.Millisecond
