// Package app is the Gatehouse desktop interface: a tray icon, a main
// window that shows what the Gatehouse home folder holds, and the approval
// window where a person answers the tool calls a policy holds for approval.
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
// # Approvals
//
// A [UI] is an [approval.UI]: the program makes it the approver by serving
// the approval socket with an [approval.Server] that shows its requests on
// the UI, and by handing the server back to the UI, which answers with it:
//
//	ln, err := approval.Listen(approval.SocketPath(st.Dir()))
//	if err != nil {
//		ui.SetApproverError(err) // another approver runs, or the folder is not private
//	} else {
//		srv := approval.NewServer(ui, &approval.Options{Approver: "tray"})
//		ui.SetDecider(srv)
//		go srv.Serve(ctx, ln)
//	}
//
// Each request comes up in the approval window, in front of the others
// (titled [ApprovalTitle]): who asks to run which tool on which server, its
// risk and the rule that asked, the arguments, the tool's description, and
// for a tool whose definition changed since the user accepted it, what
// changed. Six answers: deny, allow once, for the proxy session, for some
// minutes, always, always deny. Requests that arrive meanwhile queue in the
// same window ("1 of 3 waiting"); one whose proxy went away leaves it. A
// countdown says when the proxy stops waiting (45 seconds, the gate's
// default) and tells the agent to retry; it stops as soon as the person
// touches the window, and the request stays: an answer given later applies
// to the agent's next identical call.
// The answers stay disabled for a moment each time a request comes on
// screen, so a click meant for another window answers nothing.
//
// Everything in a request but the server's name comes from the MCP client
// or server, so it is shown as plain text with control, bidirectional and
// invisible characters written as escapes.
//
// When Gatehouse is not the application in front, a new request also
// raises a desktop notification; the tray menu and the main window say how
// many wait, and open them again once the approval window was closed.
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
// from widget callbacks, or through [fyne.Do]; only [UI.Show] and
// [UI.Withdraw], which the approval server calls, may be called from any
// goroutine. Reads from the store run on goroutines the UI owns; their
// results reach the widgets through [fyne.Do]. [UI.Close] stops them.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/gatehouse-dev/gatehouse/approval"
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
	win        fyne.Window
	view       *mainView
	gen        uint64 // counts refreshes; only the latest one's result is shown
	shown      bool   // the window has been shown at least once
	approvals  *approvals
	foreground bool // one of the app's windows has the focus

	// refreshed, when set, runs on the Fyne thread after a refresh's result
	// reaches the window. Tests use it to wait without sleeping.
	refreshed func()
}

var _ approval.UI = (*UI)(nil)

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

	// The approval window first: Fyne's test driver places objects as if
	// they were in the window made last, and tests measure the main one.
	u.approvals = newApprovals(u, systemClock{})
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
		u.foreground = true
		if u.shown {
			u.Refresh()
		}
	})
	a.Lifecycle().SetOnExitedForeground(func() { u.foreground = false })
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
	d.SetSystemTrayMenu(u.trayMenu(0))
	d.SetSystemTrayIcon(trayIconResource)
	// Where the tray host supports it (Windows, macOS, most Linux panels), a
	// click on the icon opens the window and the menu is on the other button.
	d.SetSystemTrayWindow(u.win)
	return true
}

// trayMenu returns the tray menu for n requests waiting: it says how many
// and opens them, and always opens the main window and quits.
func (u *UI) trayMenu(n int) *fyne.Menu {
	quit := fyne.NewMenuItem("Quit", u.Quit)
	quit.IsQuit = true
	open := fyne.NewMenuItem("Open Gatehouse", u.ShowMain)
	items := []*fyne.MenuItem{open, fyne.NewMenuItemSeparator(), quit}
	if n > 0 {
		count := fyne.NewMenuItem(approvalsWaiting(n), nil)
		count.Disabled = true
		items = append([]*fyne.MenuItem{count, fyne.NewMenuItem("Open approvals", u.ShowApprovals), fyne.NewMenuItemSeparator()}, items...)
	}
	return fyne.NewMenu(Title, items...)
}

// approvalsWaiting says how many requests wait, as the tray menu says it.
func approvalsWaiting(n int) string {
	if n == 1 {
		return "1 approval waiting"
	}
	return fmt.Sprintf("%d approvals waiting", n)
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

// Show shows an approval request that a proxy sent: it joins the queue of
// the approval window, which comes to the front. It may be called from any
// goroutine; it is the [approval.UI] of the program's approval server.
func (u *UI) Show(req approval.Request) {
	u.do(func() {
		inFront := u.foreground
		u.approvals.add(req)
		u.approvalsChanged()
		if !inFront {
			u.app.SendNotification(notification(req))
		}
	})
}

// Withdraw removes the request with the given ID from the approval window:
// every proxy that asked went away. It may be called from any goroutine.
func (u *UI) Withdraw(id string) {
	u.do(func() {
		u.approvals.withdraw(id)
		u.approvalsChanged()
	})
}

// SetDecider sets what takes the person's answers: the [approval.Server]
// whose requests the UI shows. Call it before the server serves.
func (u *UI) SetDecider(d Decider) {
	u.approvals.decider = d
}

// SetApproverError shows in the main window why Gatehouse cannot answer
// approval requests: another approver runs ([approval.ErrApproverRunning]),
// or the approval socket could not be made (a home folder that other users
// may enter). Nil clears it.
func (u *UI) SetApproverError(err error) {
	if err != nil {
		u.log.Error("serve approvals", "err", err)
	}
	u.view.showApprover(err)
}

// ShowApprovals brings the approval window to the front, with the requests
// that wait, if any.
func (u *UI) ShowApprovals() {
	u.approvals.raise()
}

// ApprovalWindow returns the approval window.
func (u *UI) ApprovalWindow() fyne.Window { return u.approvals.win }

// approvalsChanged shows how many requests wait in the tray menu and the
// main window.
func (u *UI) approvalsChanged() {
	n := len(u.approvals.queue)
	u.view.showWaiting(n)
	if d, ok := u.app.(desktop.App); ok && u.tray {
		d.SetSystemTrayMenu(u.trayMenu(n))
	}
}

// notification announces a request on the desktop. Notification servers
// may read markup in the body, so the names lose the characters that make
// it.
func notification(r approval.Request) *fyne.Notification {
	client := r.Client
	if client == "" {
		client = "An MCP client"
	}
	risk := ""
	if r.Risk != "" {
		risk = " (" + r.Risk + " risk)"
	}
	return &fyne.Notification{
		Title:   "Approve a tool call?",
		Content: notificationText(fmt.Sprintf("%s asks to run %s on %s%s.", client, r.Tool, r.Server, risk)),
	}
}

// notificationReplacer swaps the characters of markup for look-alikes.
var notificationReplacer = strings.NewReplacer("<", "‹", ">", "›", "&", "+")

// notificationText makes s safe for a notification's body.
func notificationText(s string) string {
	return notificationReplacer.Replace(plainLine(s))
}

// do runs f on the Fyne thread, unless the UI was closed.
func (u *UI) do(f func()) {
	if u.ctx.Err() != nil {
		return
	}
	fyne.Do(func() {
		if u.ctx.Err() == nil {
			f()
		}
	})
}

// Close stops the reads in flight and waits for them. Call it after
// [fyne.App.Run] returns; the UI shows nothing new afterwards, and takes no
// more approval requests.
func (u *UI) Close() {
	u.cancel()
	u.reads.Wait()
	u.approvals.close()
}

// Quit hides the window, then stops the app once the event loop has drained
// what the window had queued. Quitting with the window mapped can crash the
// GLFW driver: a pointer event handled while the window is closing makes it
// set the cursor on a window it has already released (fyne-io/fyne#5981).
// Call it on the Fyne thread.
func (u *UI) Quit() {
	u.win.Hide()
	u.approvals.hide()
	time.AfterFunc(quitDrain, func() { fyne.Do(u.app.Quit) })
}

// quitDrain is how long Quit lets the event loop run with the window hidden.
const quitDrain = 150 * time.Millisecond
