package app

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// status is how the gate stands, as the sidebar and the tray menu say it.
type status struct {
	loaded   bool
	servers  int // registered in the home folder
	paused   bool
	pausedAt time.Time
	agents   agentCounts
	today    int64  // calls since midnight; -1 when unknown (no log yet)
	waiting  int    // approval requests in the window
	held     int    // tools held for review: their definition changed
	serving  string // where the app serves over HTTP, or why it does not; empty: it is off
	err      error  // the last read's, if it failed
}

// agentCounts is what the MCP clients' configs say of the servers they
// launch: Gatehouse protects a server only when an agent's config runs it
// through gatehouse proxy, and a proxy has run it since.
type agentCounts struct {
	total    int   // entries that could run through Gatehouse (governed or not)
	governed int   // entries that run gatehouse proxy
	seen     int   // governed entries whose server a proxy has run (its tools are pinned)
	err      error // the configs could not be read: protection is not known
}

// A tone is how a status is coloured: its dot in the sidebar, its badge on
// the tray icon.
type tone int

const (
	toneIdle tone = iota // grey: starting, or nothing to protect yet
	toneGood             // green: every server the agents run goes through Gatehouse
	toneWarn             // amber: paused, or some servers bypass Gatehouse
	toneBad              // red: nothing the agents run goes through Gatehouse
)

// headline is the state in a few words, for the sidebar's title, and its
// tone.
func (s status) headline() (string, tone) {
	a := s.agents
	switch {
	case !s.loaded:
		return "Starting…", toneIdle
	case s.paused:
		return "Paused", toneWarn
	case a.err != nil:
		return "Protection unknown", toneWarn
	case a.total == 0 && s.servers == 0:
		return "No servers yet", toneIdle
	case a.seen > 0 && a.seen == a.total:
		return "Protecting " + countServers(a.seen), toneGood
	case a.seen > 0:
		return fmt.Sprintf("Protecting %d of %s", a.seen, countServers(a.total)), toneWarn
	case a.governed > 0:
		return "Not protecting yet", toneWarn
	}
	return "Not protecting", toneBad
}

// why says what the headline means, or what to do: empty when every
// server the agents run goes through Gatehouse.
func (s status) why() string {
	a := s.agents
	switch {
	case !s.loaded || s.paused:
		return ""
	case a.err != nil:
		return "Could not read your agents' configs: " + sentence(a.err)
	case a.total == 0 && s.servers == 0:
		return ""
	case a.total == 0:
		return fmt.Sprintf("%s registered, but no agent's config runs them through Gatehouse.", countServers(s.servers))
	}
	var parts []string
	if open := a.total - a.governed; open > 0 {
		parts = append(parts, fmt.Sprintf("%d of %s run through Gatehouse.", a.governed, countServers(a.total)))
	}
	if unseen := a.governed - a.seen; unseen > 0 {
		parts = append(parts, fmt.Sprintf("%s not seen running through Gatehouse yet: restart your agents.", plural(unseen, "server is", "servers are")))
	}
	return strings.Join(parts, " ")
}

// trayLine is the state as the tray menu's first line says it.
func (s status) trayLine() string {
	a := s.agents
	h, _ := s.headline()
	switch {
	case !s.loaded:
		return "Gatehouse"
	case s.paused:
		return "Paused: every tool call is denied"
	case a.err != nil:
		return "Protection unknown: your agents' configs could not be read"
	case a.total == 0 && s.servers == 0:
		return "No servers protected yet"
	case a.total == 0:
		return "Not protecting: no agent runs your servers through Gatehouse"
	case a.seen == a.total:
		return h
	case a.seen > 0:
		return fmt.Sprintf("%s: %d %s not", h, a.total-a.seen, map[bool]string{true: "is", false: "are"}[a.total-a.seen == 1])
	case a.governed > 0:
		return h + ": restart your agents"
	}
	return fmt.Sprintf("%s: %d of %s run through Gatehouse", h, a.governed, countServers(a.total))
}

// summary is the line under the state: calls today, approvals waiting.
func (s status) summary() string {
	var parts []string
	if s.today >= 0 && s.loaded {
		parts = append(parts, callsToday(s.today))
	}
	if s.waiting > 0 {
		parts = append(parts, approvalsWaiting(s.waiting))
	}
	if s.held > 0 {
		parts = append(parts, plural(s.held, "changed tool held", "changed tools held"))
	}
	if s.err != nil {
		parts = append(parts, "state unknown: "+explain("read the state", s.err).title)
	}
	if s.serving != "" {
		parts = append(parts, s.serving)
	}
	return strings.Join(parts, " · ")
}

func callsToday(n int64) string {
	if n == 1 {
		return "1 call today"
	}
	return thousands(int(n)) + " calls today"
}

// approvalsWaiting says how many requests wait, as the tray menu says it.
func approvalsWaiting(n int) string {
	if n == 1 {
		return "1 approval waiting"
	}
	return fmt.Sprintf("%d approvals waiting", n)
}

// statusRead is what one status read finds.
type statusRead struct {
	servers  int
	paused   bool
	pausedAt time.Time
	agents   agentCounts
	held     int
}

// refreshStatus reads the gate's state (servers, pause, what the agents'
// configs run) and, apart, the calls of today, which need the evidence log
// and so the keychain: a keychain slow to answer does not hold the rest.
func (u *UI) refreshStatus() {
	u.statusGen++
	gen := u.statusGen
	home := u.st.Dir()
	now := u.clock.Now()
	goRead(u, func(ctx context.Context) (statusRead, error) {
		var r statusRead
		var err error
		r.paused, r.pausedAt, err = gate.Paused(home)
		if err != nil {
			return r, err
		}
		servers, err := u.st.Servers(ctx)
		if err != nil {
			return r, err
		}
		r.servers = len(servers)
		r.agents, r.held = u.readProtection(ctx, servers)
		return r, nil
	}, func(r statusRead, err error) {
		if gen != u.statusGen {
			return
		}
		u.status.loaded = true
		u.status.err = err
		if err == nil {
			u.status.servers, u.status.paused, u.status.pausedAt = r.servers, r.paused, r.pausedAt
			u.status.agents, u.status.held = r.agents, r.held
		}
		u.statusChanged()
		if u.statusShown != nil {
			u.statusShown()
		}
	})
	goRead(u, func(ctx context.Context) (int64, error) {
		l, err := u.core.reader(ctx)
		if err != nil {
			return -1, err
		}
		midnight := time.Date(now.Year(), now.Month(), now.Day(), 0, 0, 0, 0, now.Location())
		end := now.Add(time.Minute)
		b, err := l.Activity(ctx, midnight, end, end.Sub(midnight), "")
		if err != nil || len(b) != 1 {
			return -1, err
		}
		return b[0].Calls(), nil
	}, func(n int64, err error) {
		if gen != u.statusGen {
			return
		}
		u.status.today = n
		u.statusChanged()
	})
}

// readProtection counts the servers the agents' configs launch, those they
// launch through Gatehouse, and of those the ones a proxy has run (it
// pinned their tools when it listed them); and the tools of registered
// servers held for review. It runs on a read's goroutine.
func (u *UI) readProtection(ctx context.Context, servers []store.Server) (agentCounts, int) {
	var a agentCounts
	held := u.readHeld(ctx, servers)
	total := 0
	for _, n := range held {
		total += n
	}
	listed := u.readListed(ctx, servers)
	m, err := u.agents.scanner(ctx)
	if err != nil {
		a.err = err
		return a, total
	}
	cs, err := m.Scan(ctx)
	if err != nil {
		a.err = err
		return a, total
	}
	for _, c := range cs {
		for _, f := range c.Files {
			for _, e := range f.Entries {
				switch e.State {
				case clients.Governed:
					a.total++
					a.governed++
					if listed[e.Server] {
						a.seen++
					}
				default:
					if e.Open() {
						a.total++
					}
				}
			}
		}
	}
	return a, total
}

// readListed says, for each server, whether a proxy has listed its tools:
// they are pinned when first listed. It runs on a read's goroutine.
func (u *UI) readListed(ctx context.Context, servers []store.Server) map[string]bool {
	listed := map[string]bool{}
	ps, err := u.core.policies(ctx)
	if err != nil {
		return listed
	}
	pol, err := ps.Current(ctx)
	if err != nil {
		return listed
	}
	for _, s := range servers {
		if ts, err := gate.Tools(ctx, u.st, pol, s.Name, s.Trusted, policy.PackByRef(s.Pack)); err == nil && len(ts) > 0 {
			listed[s.Name] = true
		}
	}
	return listed
}

// countHeld counts the tools whose definition changed since it was
// accepted.
func countHeld(ts []gate.ToolStatus) int {
	n := 0
	for _, t := range ts {
		if t.Pin == gate.Changed {
			n++
		}
	}
	return n
}

// statusChanged shows the status in the sidebar and the tray menu.
func (u *UI) statusChanged() {
	u.shell.showState(u.status)
	if d, ok := u.app.(desktop.App); ok && u.tray {
		// Normally on the Fyne thread; but while the driver shuts down it
		// runs what was queued on the goroutines that queued it, and the
		// tray does not take two menus at once.
		u.trayMu.Lock()
		defer u.trayMu.Unlock()
		d.SetSystemTrayMenu(u.trayMenu())
		if look := u.status.trayLook(); look != u.trayShown {
			u.trayShown = look
			d.SetSystemTrayIcon(trayIcon(look))
		}
	}
}

// trayMenu returns the tray menu: how things stand, the requests waiting,
// pause or resume, the window's views, and Quit. Quit is marked IsQuit,
// which stops Fyne from appending a second one.
func (u *UI) trayMenu() *fyne.Menu {
	info := func(s string) *fyne.MenuItem {
		it := fyne.NewMenuItem(s, nil)
		it.Disabled = true
		return it
	}
	sep := fyne.NewMenuItemSeparator
	var items []*fyne.MenuItem
	st := u.status
	items = append(items, info(st.trayLine()))
	if _, t := st.headline(); st.loaded && !st.paused && (t == toneWarn || t == toneBad) {
		items = append(items, fyne.NewMenuItem("Protect my agents…", func() { u.Open(pageAgents) }))
	}
	if st.loaded && st.today >= 0 {
		items = append(items, info(callsToday(st.today)))
	}
	if st.waiting > 0 {
		items = append(items, info(approvalsWaiting(st.waiting)), fyne.NewMenuItem("Open approvals", u.ShowApprovals))
	}
	if st.held > 0 {
		items = append(items, info(plural(st.held, "changed tool held for review", "changed tools held for review")),
			fyne.NewMenuItem("Review changed tools", func() { u.Open(pageServers) }))
	}
	pause := fyne.NewMenuItem("Pause all tool calls", u.togglePause)
	if st.paused {
		pause.Label = "Resume tool calls"
	}
	quit := fyne.NewMenuItem("Quit", u.Quit)
	quit.IsQuit = true
	items = append(items, sep(), pause, sep(),
		fyne.NewMenuItem("Open Gatehouse", u.ShowMain),
		fyne.NewMenuItem("Open history", u.ShowHistory),
		fyne.NewMenuItem("Open settings", u.ShowSettings),
		sep(), quit)
	return fyne.NewMenu(Title, items...)
}

// togglePause pauses every tool call of the home's proxies, or resumes
// them. The change is a file every proxy checks before each call, so it
// holds at once, whether or not the app keeps running.
func (u *UI) togglePause() {
	was := u.status.paused
	var err error
	if was {
		err = gate.Resume(u.st.Dir())
	} else {
		err = gate.Pause(u.st.Dir())
	}
	if err != nil {
		u.log.Error("pause or resume", "err", err)
		u.ShowMain()
		dialog.ShowError(err, u.win)
	} else {
		u.status.paused = !was
		u.status.pausedAt = u.clock.Now()
	}
	u.statusChanged()
	u.refreshStatus()
}

// startPolling watches, every u.poll, for a pause made elsewhere (gatehouse
// pause) and for new entries in the evidence log: the history shows them,
// the status counts them.
func (u *UI) startPolling() {
	if u.poll < 0 || u.polling {
		return
	}
	u.polling = true
	var tick func()
	tick = func() {
		u.do(func() {
			u.pollOnce()
			u.stopPoll = u.clock.AfterFunc(u.poll, tick)
		})
	}
	u.stopPoll = u.clock.AfterFunc(u.poll, tick)
}

// pollOnce looks once for a change of the pause and of the log's size.
// Neither read opens the log: with no log open yet (the keychain was not
// reached), there is nothing cheap to watch.
func (u *UI) pollOnce() {
	home := u.st.Dir()
	last := u.history.seenSize
	db := u.st.DatabasePath()
	goRead(u, func(ctx context.Context) (pollRead, error) {
		var r pollRead
		r.paused, _, _ = gate.Paused(home)
		fi, err := os.Stat(db)
		r.dbGone = err != nil || u.dbInfo != nil && !os.SameFile(fi, u.dbInfo)
		r.size = -1
		if l := u.core.openedReader(); l != nil {
			if n, err := l.Size(ctx); err == nil {
				r.size = n
			}
		}
		return r, nil
	}, func(r pollRead, _ error) {
		u.shell.showDatabaseGone(r.dbGone)
		if r.paused != u.status.paused || r.size >= 0 && r.size != last {
			u.refreshStatus()
		}
		if r.size >= 0 {
			u.history.logGrew(r.size)
		}
	})
}

type pollRead struct {
	paused bool
	size   int64
	dbGone bool // the database file was removed or replaced
}
