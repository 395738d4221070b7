// Command gatehouse-app is the Gatehouse desktop app: a tray icon, a
// window listing the MCP servers registered in the Gatehouse home folder,
// and the approver of their tool calls.
//
// Usage:
//
//	gatehouse-app [--home DIR] [--hidden] [--open VIEW]
//	gatehouse-app --version
//
// The home folder is --home, else $GATEHOUSE_HOME, else the "gatehouse"
// folder in the user's config folder. The app shows its window at start
// (on Protect my agents the first time, while no server is registered);
// with --hidden it starts in the system tray only, and with --open VIEW it
// opens on that view (servers, agents, policy, history, export, settings).
// Closing the window leaves the app in the tray; on a desktop without a
// tray host it asks whether to keep running without a window or to quit.
// Quit, in the tray menu, the window's sidebar or on Ctrl+Q, ends it.
//
// One app runs per home folder. Started again for the same folder, the app
// asks the one that runs to bring its window forward (on VIEW, with
// --open), says so on stderr and exits with status 0.
//
// While it runs, the app is the approver for the home folder's proxies: a
// tool call that the policy holds for approval comes up in an approval
// window, in front, and waits there for an answer. Only one approver runs
// at a time: when `gatehouse approvals` already runs in a terminal, or the
// home folder is open to other users, the main window says so and the app
// runs on without answering approvals. Quitting stops it; calls still
// waiting are then denied.
//
// On Linux and the BSDs the app needs a graphical session (X11 or Wayland).
// Without one it says so and exits with status 1; the gatehouse CLI does
// everything the app shows, without a display.
//
// Build with the gles tag, which compiles far faster than desktop OpenGL and
// draws the same:
//
//	go build -tags gles -o bin/gatehouse-app ./cmd/gatehouse-app
//
// Set the version at link time with -ldflags "-X main.version=0.1.0".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"fyne.io/fyne/v2"
	fyneapp "fyne.io/fyne/v2/app"

	"github.com/gatehouse-dev/gatehouse/app"
	"github.com/gatehouse-dev/gatehouse/app/instance"
	"github.com/gatehouse-dev/gatehouse/assets"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// version is the app's version, set at link time.
var version = "dev"

// appID identifies the app to the desktop: preferences, notifications and
// the single settings folder Fyne keeps for it.
const appID = "dev.gatehouse.app"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole program; it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	flags := flag.NewFlagSet("gatehouse-app", flag.ContinueOnError)
	flags.SetOutput(stderr)
	home := flags.String("home", "", "use `DIR` as the Gatehouse home folder (overrides $"+store.EnvHome+")")
	hidden := flags.Bool("hidden", false, "start in the system tray without opening the window")
	open := flags.String("open", "", "open the window on `VIEW`: "+strings.Join(app.Views, ", "))
	showVersion := flags.Bool("version", false, "print the version and exit")
	flags.Usage = func() {
		fmt.Fprintf(flags.Output(), "Usage: gatehouse-app [--home DIR] [--hidden] [--open VIEW]\n       gatehouse-app --version\n\n")
		fmt.Fprintf(flags.Output(), "The Gatehouse desktop app: a tray icon, the approver of your agents' tool calls, and a window\nwith your MCP servers, policy, history and settings.\n\n")
		flags.PrintDefaults()
	}
	if err := flags.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if flags.NArg() > 0 {
		fmt.Fprintf(stderr, "gatehouse-app: unexpected argument %q\n", flags.Arg(0))
		fmt.Fprintf(stderr, "hint: run gatehouse-app --help for usage\n")
		return 2
	}
	if *showVersion {
		fmt.Fprintf(stdout, "gatehouse-app %s\n", version)
		return 0
	}
	if *open != "" && !slices.Contains(app.Views, *open) {
		fmt.Fprintf(stderr, "gatehouse-app: --open %q: no such view\n", *open)
		fmt.Fprintf(stderr, "hint: the views are %s\n", strings.Join(app.Views, ", "))
		return 2
	}

	if err := checkDisplay(); err != nil {
		fmt.Fprintf(stderr, "gatehouse-app: %v\n", err)
		// The program as it was started (bin/gatehouse-app from make run,
		// gatehouse-app from PATH): the hint is a command that works.
		fmt.Fprintf(stderr, "hint: run it from a desktop session, or under a virtual display: xvfb-run -a %s (the gatehouse CLI works without a display)\n", shellwords.Quote(os.Args[0]))
		return 1
	}

	// Quit cleanly on SIGINT and SIGTERM (a logout, a service manager). Fyne
	// installs its own handler only once Run is under way; a signal before
	// that would kill the app without closing the store.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()

	level := new(slog.LevelVar)
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
	storeOptions := &store.Options{BusyTimeout: storeBusyTimeout, Logger: log}
	st, err := store.Open(ctx, *home, storeOptions)
	if err != nil && !store.IsLocked(err) {
		fmt.Fprintf(stderr, "gatehouse-app: %v\n", err)
		var merr *store.ModeError
		if errors.As(err, &merr) {
			fmt.Fprintf(stderr, "hint: %s\n", merr.Fix)
		} else {
			fmt.Fprintf(stderr, "hint: choose another home folder with --home DIR or $%s\n", store.EnvHome)
		}
		return 1
	}

	// One app per home folder: a second start brings the first one's
	// window forward and ends.
	homeDir := *home
	if st != nil {
		homeDir = st.Dir()
	} else if homeDir == "" {
		homeDir, _ = store.DefaultDir()
	}
	inst, cerr := instance.Claim(homeDir)
	var already *instance.RunningError
	if errors.As(cerr, &already) {
		if st != nil {
			st.Close()
		}
		return raiseRunning(ctx, homeDir, *open, already, stderr)
	}
	if cerr != nil {
		// The app still runs; a second start would not find it.
		log.Warn("could not claim the home folder for this app", "err", cerr)
	}
	stopInstance := func() {}

	a := fyneapp.NewWithID(appID)
	a.SetIcon(fyne.NewStaticResource("gatehouse.png", assets.IconPNG(256)))
	var ui *app.UI
	stopApprovals := func() {}
	start := func(s *store.Store) {
		st = s
		if set, err := st.Settings(ctx); err == nil && set.LogLevel != nil {
			level.Set(*set.LogLevel)
		}
		ui = app.New(a, st, &app.Options{Version: version, Logger: log, LogLevel: level})
		stopApprovals = serveApprovals(ui, st.Dir(), log)
		if inst != nil {
			stopInstance = serveInstance(inst, ui, log)
		}
		switch {
		case *open != "":
			ui.Open(*open)
		case !*hidden || !ui.HasTray():
			// A first run, with no server yet, starts where the user
			// protects the agents they already have.
			if servers, err := st.Servers(ctx); err == nil && len(servers) == 0 {
				ui.Open("agents")
			} else {
				ui.ShowMain()
			}
		}
	}
	stopWaiting := func() {}
	if err != nil {
		// Another program holds the database locked: say so, and start
		// once it lets go.
		log.Warn("the database is locked: waiting", "err", err)
		stopWaiting = app.WaitForStore(a, err, func(ctx context.Context) (*store.Store, error) {
			return store.Open(ctx, *home, storeOptions)
		}, start)
	} else {
		start(st)
	}

	ran := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			fyne.Do(func() {
				if ui != nil {
					ui.Quit()
				} else {
					a.Quit()
				}
			})
		case <-ran:
		}
	}()
	// Once the event loop runs, Fyne's own handler quits on SIGINT and
	// SIGTERM; ours would quit a second time, late, on a driver already
	// torn down (a panic in GLFW). It only covers the time before.
	signal.Stop(sigs)
	// A signal must end the app even if the driver does not (a quit that
	// lands while the window is being mapped or torn down can leave GLFW's
	// loop waiting): past terminateWait the process exits at once. The
	// store needs no goodbye: every write is a committed transaction.
	term := make(chan os.Signal, 1)
	signal.Notify(term, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(term)
	exited := make(chan struct{})
	defer close(exited)
	go func() {
		select {
		case <-term:
		case <-exited:
			return
		}
		select {
		case <-time.After(terminateWait):
			log.Warn("still running after a request to quit: exiting", "waited", terminateWait)
			os.Exit(1)
		case <-exited:
		}
	}()
	a.Run()
	close(ran)
	stopWaiting()
	if ui != nil {
		ui.Close()
	}
	stopApprovals()
	stopInstance()
	if inst != nil {
		inst.Close()
	}
	if st != nil {
		st.Close()
	}
	return 0
}

// terminateWait is how long the app may take to quit after SIGINT or
// SIGTERM before it exits without the driver.
const terminateWait = 8 * time.Second

// raiseRunning asks the app that already runs for home to show its
// window (on view, if set), and says so.
func raiseRunning(ctx context.Context, home, view string, running *instance.RunningError, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, raiseWait)
	defer cancel()
	if err := instance.Raise(ctx, home, view); err != nil {
		fmt.Fprintf(stderr, "gatehouse-app: %v, and did not answer: %v\n", running, err)
		fmt.Fprintf(stderr, "hint: if it hangs, stop that process, then start Gatehouse again\n")
		return 1
	}
	fmt.Fprintf(stderr, "gatehouse-app: %v: its window is brought forward\n", running)
	return 0
}

// raiseWait bounds how long a second start waits for the first to answer.
const raiseWait = 10 * time.Second

// serveInstance lets later starts of the app for the same home folder
// bring ui's window forward, until the returned function is called.
func serveInstance(inst *instance.Instance, ui *app.UI, log *slog.Logger) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		if err := inst.Serve(ctx, ui.Raise); err != nil {
			log.Warn("a second start of the app cannot bring this window forward", "err", err)
		}
	}()
	return func() {
		cancel()
		<-served
	}
}

// storeBusyTimeout is how long the app's store waits for another
// process's write. The app waits less than a proxy: what it writes are a
// person's actions, and a database held locked for seconds is better said
// than waited out.
const storeBusyTimeout = 3 * time.Second

// serveApprovals makes the app the approver of the proxies of the home
// folder home, and returns a function that stops it. When it cannot be
// (another approver runs, or the folder is open to other users, which is
// not the app's to change silently), the main window says why, and the app
// runs on without it.
func serveApprovals(ui *app.UI, home string, log *slog.Logger) (stop func()) {
	ln, err := approval.Listen(approval.SocketPath(home))
	if err != nil {
		ui.SetApproverError(err)
		return func() {}
	}
	srv := approval.NewServer(ui, &approval.Options{Approver: "tray", Logger: log})
	ui.SetDecider(srv)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		// Serve closes ln, which removes the socket.
		if err := srv.Serve(ctx, ln); err != nil {
			fyne.Do(func() { ui.SetApproverError(err) })
		}
	}()
	return func() {
		cancel()
		<-served
	}
}
