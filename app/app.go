// Package app is the Gatehouse desktop interface: a tray icon, a main
// window with the views a user lives in, and the approval window where a
// person answers the tool calls a policy holds for approval.
//
// The interface is a thin client over the core packages: [store] (servers,
// settings), [receipts] (the evidence log), [policy], [gate] (tools, pins,
// pause), [vault] (through a [Keychain]) and [autostart]. It reads, it does
// not keep its own copy of anything, and every change made elsewhere (with
// the gatehouse CLI, or by a proxy) shows up at the next refresh.
//
// # Views
//
// The main window has a sidebar with the state of the gate (protecting N
// servers, or paused) and a button to pause every tool call and resume, and
// these views:
//
//   - Servers: the registered MCP servers, each with its tools, their risk,
//     what the policy decides for them and whether their definition changed
//     since it was accepted; add, edit, remove a server, its credentials
//     typed into password fields and kept in the keychain; test a
//     connection.
//   - Policy: the defaults by risk, the rules, and an explanation of the
//     decision on a sample call.
//   - History: every call, decision and outcome of the evidence log,
//     searched as the user types, filtered by time, server, decision and
//     status, in a list that pages through a million entries, with a chart
//     of calls over time and, for the entry selected, the signed entry, its
//     verification (signature, inclusion in the log's tree) and its payload
//     or the tombstone it left when erased. New calls appear as they happen.
//   - Export: an auditor's bundle of the entries a filter chooses, written
//     to a folder and verified offline at once.
//   - Settings: how long proxies wait for an approval, the home folder,
//     the signing keys (rotate, export the public keys), the log level and
//     starting at login.
//
// When a read fails, the view says why and what to do (a keychain to unlock,
// a database another program holds locked) and tries again by itself.
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
// same window ("1 of 3 waiting"), one per proxy session at a time (the
// approval server holds a session's next request until its turn, so that
// one agent's many calls do not bury another's); one whose proxy went away
// leaves it, and the window says so. A countdown says when the proxy stops
// waiting (as the request says, else 45 seconds, the gate's default) and
// tells the agent to retry; it stops as soon as the person touches the
// window, and the request stays: an answer given later applies to the
// agent's next identical call.
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
// icon whose menu says how things stand (servers protected, calls today,
// approvals waiting), pauses and resumes, opens the history, the settings
// or the window, and quits. The icon shows the same state as the sidebar: a
// badge when some servers bypass Gatehouse, and another while an approval
// waits. A server is protected when an agent's config runs it through
// gatehouse proxy and a proxy has run it since; a server registered in
// Gatehouse and launched directly by the agent is not.
//
// Closing the window hides it while a tray icon is on screen, and says so
// once. On a Linux desktop without a tray host the icon is nowhere to be
// seen, so closing asks: keep running without a window (a second start of
// Gatehouse brings the window back, see [UI.Raise]) or quit. Quit is in the
// tray menu, at the foot of the sidebar and on Ctrl+Q. A driver with no
// tray at all quits when the window closes.
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
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/theme"

	"github.com/gatehouse-dev/gatehouse/assets"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// Title is the main window's title.
const Title = "Gatehouse"

// AddServerCommand is the CLI command that registers a server, as the empty
// window shows it.
const AddServerCommand = "gatehouse server add NAME -- COMMAND [ARGS...]"

// readTimeout bounds one read of the store. Reads do not wait for writers
// (the database runs in WAL mode), so this only guards against a stuck file
// system or a lock held by a program that does not play by SQLite's rules.
const readTimeout = 15 * time.Second

// pollEvery is how often the window looks for new calls and a change of
// the pause, when Options.Poll does not say.
const pollEvery = time.Second

// Options configure [New]. Nil options mean the defaults.
type Options struct {
	// Version is shown in the sidebar, for example "0.1.0". Empty shows
	// none.
	Version string

	// Logger records errors that the window also shows. Nil discards them.
	Logger *slog.Logger

	// Keychain holds the signing key and the servers' credentials. Nil
	// means the OS keychain, under the home folder's service
	// ([store.Store.KeychainService]).
	Keychain Keychain

	// Poll is how often the window looks for new calls (one cheap read of
	// the log's size) and for a pause made elsewhere. Zero means every
	// second; a negative value turns polling off (tests poll by hand).
	Poll time.Duration

	// Executable is the path of the app's program, for starting at login.
	// Empty means the running program's.
	Executable string

	// LogLevel, when set, is the level of Logger's handler: the Settings
	// view changes it along with the setting the proxies read.
	LogLevel *slog.LevelVar
}

// A UI is the Gatehouse interface on one [fyne.App]: its tray icon, its
// main window and its approval window.
type UI struct {
	app  fyne.App
	st   *store.Store
	core *core
	log  *slog.Logger
	tray bool // the driver has a tray: an icon and menu were set up
	// trayHost reports whether a tray host shows the icon now: without
	// one, closing the window asks instead of hiding it.
	trayHost func() bool
	poll     time.Duration
	exe      string
	version  string
	level    *slog.LevelVar

	ctx    context.Context // cancelled by Close; parent of every store read
	cancel context.CancelFunc
	reads  sync.WaitGroup // store reads in flight; joined by startRead only
	// readsMu orders startRead's Add before Close's Wait (a WaitGroup's
	// Add from zero must come before its Wait): once closed is set, no
	// read starts.
	readsMu sync.Mutex
	closed  bool // guarded by readsMu
	// inflight counts the reads whose result has not reached the window
	// yet. Tests wait for it to drop to zero.
	inflight atomic.Int64

	// The fields below belong to the Fyne thread.
	win        fyne.Window
	shell      *shell
	view       *serversPage
	history    *historyPage
	policy     *policyPage
	export     *exportPage
	settings   *settingsPage
	agents     *agentsPage
	serve      *serving // the HTTP front the app runs, when on
	shown      bool     // the window has been shown at least once
	approvals  *approvals
	foreground bool       // one of the app's windows has the focus
	status     status     // what the sidebar and the tray say
	statusGen  uint64     // counts status reads; only the latest is shown
	trayShown  trayLook   // the tray icon on the panel; guarded by trayMu
	trayMu     sync.Mutex // held while the tray's menu and icon are set
	stopPoll   func() bool
	polling    bool          // startPolling ran
	dbInfo     os.FileInfo   // the database file as it was opened
	toldHidden bool          // a notification said the window went to the tray
	closing    dialog.Dialog // the question closing the window asks, while shown

	// clock runs the views' timers (retries, debounce, polling).
	clock clock

	// refreshed, when set, runs on the Fyne thread after a refresh's result
	// reaches the window. Tests use it to wait without sleeping.
	refreshed func()
	// statusShown, when set, runs after a status read reached the sidebar
	// and the tray. Tests use it.
	statusShown func()
	quitMu      sync.Mutex
	quitTimer   *time.Timer // guarded by quitMu: the Quit on its way

	// doFn, when set, replaces fyne.Do. Fyne's test driver runs fyne.Do on
	// the calling goroutine, so tests serialize the UI's callbacks with it
	// as the real driver's main thread does.
	doFn func(func())
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
	kc := opts.Keychain
	if kc == nil {
		kc = vault.New(&vault.Options{
			Service: st.KeychainService(),
			KeyLock: filelock.New(filepath.Join(st.Dir(), vault.KeyLockFile)),
		})
	}
	poll := opts.Poll
	if poll == 0 {
		poll = pollEvery
	}
	ctx, cancel := context.WithCancel(context.Background())
	u := &UI{
		app:      a,
		st:       st,
		core:     newCore(ctx, st, kc, log.WithGroup("app")),
		log:      log.WithGroup("app"),
		poll:     poll,
		exe:      opts.Executable,
		version:  opts.Version,
		level:    opts.LogLevel,
		ctx:      ctx,
		cancel:   cancel,
		clock:    systemClock{},
		status:   status{today: -1},
		trayHost: trayHostRunning,
	}
	u.dbInfo, _ = os.Stat(st.DatabasePath())

	a.Settings().SetTheme(newTheme(a.Settings().Theme()))

	// The approval window first: Fyne's test driver places objects as if
	// they were in the window made last, and tests measure the main one.
	u.approvals = newApprovals(u, systemClock{})
	u.win = a.NewWindow(Title)
	u.win.SetIcon(iconResource)
	u.serve = newServing(u, kc)
	u.view = newServersPage(u)
	u.history = newHistoryPage(u)
	u.policy = newPolicyPage(u)
	u.export = newExportPage(u)
	u.settings = newSettingsPage(u)
	u.agents = newAgentsPage(u)
	u.shell = newShell(u, st.Dir(), opts.Version)
	// The window pads its content by the theme's padding on each side.
	pad := 2 * theme.Padding()
	u.win.SetContent(container.New(&atLeast{windowMinSize.SubtractWidthHeight(pad, pad)}, u.shell.content))
	u.win.Resize(windowDefaultSize)

	u.tray = u.setupTray()
	if u.tray {
		u.win.SetCloseIntercept(u.closeWindow)
	} else {
		u.win.SetMaster()
	}
	u.addShortcuts()
	u.serve.startWithApp()
	a.Lifecycle().SetOnEnteredForeground(func() {
		u.foreground = true
		if u.shown {
			u.Refresh()
		}
	})
	a.Lifecycle().SetOnExitedForeground(func() { u.foreground = false })
	// Once the event loop stopped, nothing is shown any more: reads that
	// land while the driver shuts down are dropped.
	a.Lifecycle().SetOnStopped(u.cancel)
	// Started hidden in the tray, the app still says how things stand.
	a.Lifecycle().SetOnStarted(func() {
		u.refreshStatus()
		u.startPolling()
	})
	return u
}

// windowDefaultSize is the main window's size when it first opens.
var windowDefaultSize = fyne.NewSize(1120, 720)

// windowMinSize is the smallest the main window can be made. Every view
// fits it whole (a test under Xvfb checks it): what does not fit its width
// wraps or is elided, and what does not fit its height scrolls.
var windowMinSize = fyne.NewSize(800, 600)

// atLeast lays its objects out over its whole size, and asks for no less
// than min (the window's size limits follow its content's minimum).
type atLeast struct{ min fyne.Size }

func (l *atLeast) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Resize(size)
		o.Move(fyne.Position{})
	}
}

func (l *atLeast) MinSize(objs []fyne.CanvasObject) fyne.Size {
	min := l.min
	for _, o := range objs {
		min = min.Max(o.MinSize())
	}
	return min
}

// iconResource is the app icon as a Fyne resource.
var iconResource = fyne.NewStaticResource("gatehouse.svg", assets.IconSVG)

// trayIconResource is the tray icon. Tray hosts want a bitmap, and on
// Linux and Windows they draw it in colour on panels that may be dark or
// light, which the coloured shield reads well on.
var trayIconResource = fyne.NewStaticResource("gatehouse-64.png", assets.IconPNG(64))

// setupTray adds the tray icon and its menu, and reports whether the driver
// supports a tray.
func (u *UI) setupTray() bool {
	d, ok := u.app.(desktop.App)
	if !ok {
		return false
	}
	d.SetSystemTrayMenu(u.trayMenu())
	u.trayShown = u.status.trayLook()
	d.SetSystemTrayIcon(trayIcon(u.trayShown))
	// Where the tray host supports it (Windows, macOS, most Linux panels), a
	// click on the icon opens the window and the menu is on the other button.
	d.SetSystemTrayWindow(u.win)
	return true
}

// HasTray reports whether Gatehouse has a tray icon on screen, so that the
// main window can be hidden and opened again from the tray. On Linux that
// needs a tray host, which a desktop may lack.
func (u *UI) HasTray() bool { return u.tray && u.trayHost() }

// Window returns the main window.
func (u *UI) Window() fyne.Window { return u.win }

// ShowMain shows the main window, brings it to the front and refreshes it.
// It also starts watching for new calls and for a pause made elsewhere.
func (u *UI) ShowMain() {
	if !u.shown {
		u.shown = true
		u.win.CenterOnScreen()
	}
	u.startPolling()
	u.win.Show()
	u.win.RequestFocus()
	u.Refresh()
}

// Views are the names of the main window's views, for [UI.Open].
var Views = []string{pageServers, pageAgents, pagePolicy, pageHistory, pageExport, pageSettings}

// Open shows the main window on the view called name (one of [Views]).
func (u *UI) Open(name string) {
	u.shell.open(name)
	u.ShowMain()
}

// ShowHistory shows the main window on the history view.
func (u *UI) ShowHistory() {
	u.shell.open(pageHistory)
	u.ShowMain()
}

// ShowSettings shows the main window on the settings view.
func (u *UI) ShowSettings() {
	u.shell.open(pageSettings)
	u.ShowMain()
}

// Refresh reads again what the view on screen shows, and the state in the
// sidebar and the tray. The reads run on their own goroutines; a read that
// finishes after a newer one started is dropped.
func (u *UI) Refresh() {
	if u.ctx.Err() != nil {
		return
	}
	u.refreshStatus()
	u.shell.refreshCurrent()
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
	u.shell.showApprover(err)
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
	u.status.waiting = len(u.approvals.queue)
	u.shell.showWaiting(u.status.waiting)
	u.statusChanged()
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
	run := fyne.Do
	if u.doFn != nil {
		run = u.doFn
	}
	run(func() {
		if u.ctx.Err() == nil {
			f()
		}
	})
}

// goRead runs read on a goroutine the UI owns, with a deadline, and hands
// its result to show on the Fyne thread, unless the UI closed meanwhile.
func goRead[T any](u *UI, read func(ctx context.Context) (T, error), show func(T, error)) {
	if !u.startRead() {
		return
	}
	go func() {
		defer u.reads.Done()
		ctx, cancel := context.WithTimeout(u.ctx, readTimeout)
		defer cancel()
		v, err := read(ctx)
		if u.ctx.Err() != nil {
			return // closed: the window may be gone
		}
		u.do(func() {
			defer u.inflight.Add(-1)
			show(v, err)
		})
	}()
}

// startRead counts a read in (reads and inflight) unless the UI is closed;
// the read calls u.reads.Done when it ends.
func (u *UI) startRead() bool {
	u.readsMu.Lock()
	defer u.readsMu.Unlock()
	if u.closed {
		return false
	}
	u.reads.Add(1)
	u.inflight.Add(1)
	return true
}

// Close stops the reads in flight and waits for them. Call it after
// [fyne.App.Run] returns; the UI shows nothing new afterwards, and takes no
// more approval requests.
//
// Reads that do not end within closeWait (a keychain that does not answer)
// are not waited for: the program is exiting, and they show nothing.
func (u *UI) Close() {
	u.serve.close()
	u.readsMu.Lock()
	u.closed = true
	u.readsMu.Unlock()
	u.cancel()
	u.quitMu.Lock()
	if u.quitTimer != nil {
		u.quitTimer.Stop()
	}
	u.quitMu.Unlock()
	if u.stopPoll != nil {
		u.stopPoll()
	}
	done := make(chan struct{})
	go func() {
		u.reads.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeWait):
		u.log.Warn("closing with reads still running", "reads", u.inflight.Load())
	}
	u.approvals.close()
	u.shell.close()
}

// closeWait bounds how long Close waits for the reads in flight.
const closeWait = 2 * time.Second

// Quit hides the window, then stops the app once the event loop has drained
// what the window had queued. Quitting with the window mapped can crash the
// GLFW driver: a pointer event handled while the window is closing makes it
// set the cursor on a window it has already released (fyne-io/fyne#5981).
// Call it on the Fyne thread.
func (u *UI) Quit() {
	u.win.Hide()
	u.approvals.hide()
	u.quitMu.Lock()
	defer u.quitMu.Unlock()
	if u.quitTimer == nil {
		u.quitTimer = time.AfterFunc(quitDrain, func() { u.do(u.app.Quit) })
	}
}

// quitDrain is how long Quit lets the event loop run with the window hidden.
const quitDrain = 150 * time.Millisecond
