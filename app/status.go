package app

import (
	"context"
	"fmt"
	"os"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
)

// status is how the gate stands, as the sidebar and the tray menu say it.
type status struct {
	loaded   bool
	servers  int
	paused   bool
	pausedAt time.Time
	today    int64 // calls since midnight; -1 when unknown (no log yet)
	waiting  int   // approval requests in the window
	err      error // the last read's, if it failed
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
	if s.err != nil {
		parts = append(parts, "state unknown: "+explain("read the state", s.err).title)
	}
	switch len(parts) {
	case 0:
		return ""
	case 1:
		return parts[0]
	}
	out := parts[0]
	for _, p := range parts[1:] {
		out += " · " + p
	}
	return out
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
}

// refreshStatus reads the gate's state (servers, pause) and, apart, the
// calls of today, which need the evidence log and so the keychain: a
// keychain slow to answer does not hold the rest.
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
		return r, nil
	}, func(r statusRead, err error) {
		if gen != u.statusGen {
			return
		}
		u.status.loaded = true
		u.status.err = err
		if err == nil {
			u.status.servers, u.status.paused, u.status.pausedAt = r.servers, r.paused, r.pausedAt
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

// statusChanged shows the status in the sidebar and the tray menu.
func (u *UI) statusChanged() {
	u.shell.showState(u.status)
	if d, ok := u.app.(desktop.App); ok && u.tray {
		d.SetSystemTrayMenu(u.trayMenu())
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
	switch {
	case !st.loaded:
		items = append(items, info("Gatehouse"))
	case st.paused:
		items = append(items, info("Paused: every tool call is denied"))
	case st.servers == 0:
		items = append(items, info("No servers protected yet"))
	default:
		items = append(items, info("Protecting "+countServers(st.servers)))
	}
	if st.loaded && st.today >= 0 {
		items = append(items, info(callsToday(st.today)))
	}
	if st.waiting > 0 {
		items = append(items, info(approvalsWaiting(st.waiting)), fyne.NewMenuItem("Open approvals", u.ShowApprovals))
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
