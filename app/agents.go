package app

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"os"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/app/install"
	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// agentsPage is the Protect my agents view: the MCP clients on this
// computer, their servers and whether Gatehouse governs them; one button to
// govern them, one to undo, each showing first exactly what changes.
type agentsPage struct {
	u       *UI
	content fyne.CanvasObject
	banner  *problemBanner
	retry   retrier
	gen     uint64

	desktop fyne.CanvasObject // Claude Desktop runs: quit it first
	restart fyne.CanvasObject // governed: restart the clients
	summary *widget.RichText
	govern  *widget.Button
	undo    *widget.Button
	list    *fyne.Container
	clients []clients.Client
	held    map[string]int // by Gatehouse server: its tools held for review

	// done, when set, runs after a scan or an apply reaches the view.
	// Tests use it to wait without sleeping.
	done func()

	// env, when set, is the machine the view looks at (tests); nil means
	// this one.
	env *clients.Env
	// proxy, when set, is the gatehouse program governed entries run
	// (tests); empty means the one installed beside the app.
	proxy string
}

func newAgentsPage(u *UI) *agentsPage {
	p := &agentsPage{u: u}
	p.retry = retrier{u: u, f: p.refresh}
	p.banner = newProblemBanner(p.refresh)

	refresh := widget.NewButtonWithIcon("Look again", theme.ViewRefreshIcon(), p.refresh)
	p.undo = widget.NewButtonWithIcon("Undo all", theme.ContentUndoIcon(), func() { p.plan(true, clients.Selection{}) })
	p.govern = widget.NewButtonWithIcon("Protect all", theme.ConfirmIcon(), func() { p.plan(false, clients.Selection{}) })
	p.govern.Importance = widget.HighImportance
	header := pageHeader("Protect my agents",
		"Gatehouse finds the MCP clients on this computer and rewrites their configs so that each server runs through gatehouse proxy. Undo puts every entry back exactly as it was.",
		refresh, p.govern)

	p.desktop = newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil,
		compact(text("Quit Claude Desktop first", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameWarning}),
			wrapLabel("Claude Desktop rewrites its config file while it runs, which would undo the change. Quit it (from its menu, not just its window), then protect it; start it again afterwards."))))
	p.desktop.Hide()
	p.restart = newPanel(theme.ColorNamePrimary, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewPrimaryThemedResource(theme.InfoIcon()))), nil,
		compact(text("Restart your agents", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}),
			wrapLabel("MCP clients read their config when they start: restart Claude Desktop (quit it from its menu), and start new sessions of Claude Code, Cursor and the others, for their servers to run through Gatehouse."))))
	p.restart.Hide()
	p.summary = text("", secondary)
	p.summary.Wrapping = fyne.TextWrapWord
	p.list = container.NewVBox()

	// Undo, rarely wanted, under the list rather than beside Protect all.
	undoRow := container.NewHBox(layout.NewSpacer(), p.undo)
	body := container.NewBorder(container.NewVBox(p.banner.content, p.desktop, p.restart, p.summary), undoRow, nil, nil, container.NewVScroll(p.list))
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(body))
	return p
}

func wrapLabel(s string) *widget.Label {
	l := widget.NewLabel(s)
	l.Wrapping = fyne.TextWrapWord
	return l
}

// manager returns the clients manager, or why there is none: the
// gatehouse proxy must be installed beside the app, since the configs name
// it by its absolute path.
func (p *agentsPage) manager(ctx context.Context) (*clients.Manager, error) {
	exe := p.proxy
	if exe == "" {
		var err error
		if exe, err = install.ProxyPath(); err != nil {
			return nil, err
		}
	}
	home := p.u.st.Dir()
	if sys, err := store.SystemDir(); err == nil && sys == home {
		home = ""
	}
	return clients.New(ctx, p.u.st, &clients.Options{Env: p.env, Keychain: p.u.core.kc, Executable: exe, Home: home})
}

// scanner returns a clients manager for reading the configs only: a
// scan never writes the proxy's path, so without a proxy beside the app
// it reads with the app's own path in its place, and the status can still
// say which servers run through Gatehouse.
func (p *agentsPage) scanner(ctx context.Context) (*clients.Manager, error) {
	m, err := p.manager(ctx)
	if !errors.Is(err, install.ErrProxyNotFound) {
		return m, err
	}
	self, xerr := os.Executable()
	if xerr != nil {
		return nil, err
	}
	return clients.New(ctx, p.u.st, &clients.Options{Env: p.env, Keychain: p.u.core.kc, Executable: self})
}

// refresh looks at the clients again.
func (p *agentsPage) refresh() {
	p.gen++
	gen := p.gen
	type read struct {
		cs   []clients.Client
		held map[string]int
	}
	goRead(p.u, func(ctx context.Context) (read, error) {
		m, err := p.manager(ctx)
		if err != nil {
			return read{}, err
		}
		cs, err := m.Scan(ctx)
		if err != nil {
			return read{}, err
		}
		var held map[string]int
		if servers, err := p.u.st.Servers(ctx); err == nil {
			held = p.u.readHeld(ctx, servers)
		}
		return read{cs, held}, nil
	}, func(r read, err error) {
		if gen != p.gen {
			return
		}
		cs := r.cs
		p.held = r.held
		if err != nil {
			pr := explain("look at your MCP clients", err)
			if errors.Is(err, install.ErrProxyNotFound) {
				pr.title = "The gatehouse proxy is not installed beside the app"
				pr.hint = "Client configs name the proxy by its absolute path. Install Gatehouse from its package, or build both programs (make build) and run bin/gatehouse-app."
			}
			p.banner.show(&pr, p.retry.failed(pr))
			p.govern.Disable()
			p.undo.Disable()
		} else {
			p.retry.ok()
			p.banner.show(nil, 0)
			p.show(cs)
		}
		if p.done != nil {
			p.done()
		}
	})
}

// counts returns how many entries are governed, and how many could be.
func counts(cs []clients.Client) (governed, open int) {
	for _, c := range cs {
		for _, f := range c.Files {
			for _, e := range f.Entries {
				switch e.State {
				case clients.Governed:
					governed++
				case clients.NotGoverned, clients.Added, clients.Changed:
					open++
				}
			}
		}
	}
	return governed, open
}

func (p *agentsPage) show(cs []clients.Client) {
	p.clients = cs
	p.list.RemoveAll()
	desktopRuns := false
	installed := 0
	for _, c := range cs {
		if c.ID == clients.ClaudeDesktop && c.Running {
			desktopRuns = true
		}
		if !c.Installed && !hasEntries(c) {
			continue
		}
		installed++
		p.list.Add(p.clientCard(c))
	}
	if desktopRuns {
		p.desktop.Show()
	} else {
		p.desktop.Hide()
	}
	governed, open := counts(cs)
	switch {
	case installed == 0:
		setText(p.summary, "No MCP client found on this computer. Gatehouse looks for "+clientNames()+", "+
			"and finds their servers once you add some in them; or add servers here, in Servers, and point your client at gatehouse proxy NAME.")
	case open == 0 && governed == 0:
		setText(p.summary, fmt.Sprintf("%s found, with no MCP servers configured yet.", plural(installed, "client", "clients")))
	case open == 0:
		setText(p.summary, fmt.Sprintf("Every server of your %s runs through Gatehouse (%d).", plural(installed, "client", "clients"), governed))
	default:
		setText(p.summary, fmt.Sprintf("%d of %d servers run through Gatehouse. Protect all governs the %d others.", governed, governed+open, open))
	}
	if open > 0 {
		p.govern.Enable()
	} else {
		p.govern.Disable()
	}
	if governed > 0 {
		p.undo.Enable()
	} else {
		p.undo.Disable()
	}
	p.content.Refresh()
}

func hasEntries(c clients.Client) bool {
	for _, f := range c.Files {
		if len(f.Entries) > 0 || f.Err != nil {
			return true
		}
	}
	return false
}

// clientCard shows one client: its files and their servers.
func (p *agentsPage) clientCard(c clients.Client) fyne.CanvasObject {
	sel := clients.Selection{Clients: []clients.ID{c.ID}}
	govern := widget.NewButton("Protect", func() { p.plan(false, sel) })
	govern.Importance = widget.HighImportance
	undo := widget.NewButton("Undo", func() { p.plan(true, sel) })
	g, o := counts([]clients.Client{c})
	if o == 0 {
		govern.Disable()
	}
	if g == 0 {
		undo.Disable()
	}
	name := c.Name
	if c.Running {
		name += "  (running)"
	}
	title := container.NewBorder(nil, nil, text(name, widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}}),
		container.NewHBox(undo, govern))
	rows := []fyne.CanvasObject{title}
	for _, f := range c.Files {
		if !f.Exists && len(f.Entries) == 0 {
			continue
		}
		where := tildePath(f.Path, userHome())
		if f.Project != "" {
			where += "  ·  project " + tildePath(f.Project, userHome())
		}
		rows = append(rows, text(where+"  ·  "+string(f.Scope)+" scope", widget.RichTextStyle{SizeName: theme.SizeNameCaptionText, ColorName: theme.ColorNamePlaceHolder}))
		if f.Err != nil {
			e := text("Cannot read it: "+sentence(f.Err)+" Nothing in it is changed.", widget.RichTextStyle{ColorName: theme.ColorNameError})
			e.Wrapping = fyne.TextWrapWord
			rows = append(rows, e)
			continue
		}
		if len(f.Entries) == 0 {
			rows = append(rows, text("no MCP servers", caption))
		}
		for _, e := range f.Entries {
			rows = append(rows, entryRow(e, p.held[e.Server]))
		}
	}
	return container.New(layout.NewCustomPaddedLayout(0, theme.Padding()*2, 0, 0), newPanel(theme.ColorNameInputBackground, 0, container.NewVBox(rows...)))
}

// entryRow is one server of a client's file: its name, what it runs,
// where Gatehouse stands with it, and how many of its tools are held for
// review.
func entryRow(e clients.Entry, held int) fyne.CanvasObject {
	c := newChip()
	c.set(stateLook(e.State))
	target := e.Target
	if e.State == clients.Governed && e.Server != "" {
		target = "through Gatehouse server " + e.Server
	}
	detail := target
	if e.Detail != "" {
		detail += " · " + e.Detail
	}
	d := text(plainLine(detail), caption)
	d.Truncation = fyne.TextTruncateEllipsis
	name := text(plainLine(e.Name), widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	var top fyne.CanvasObject = name
	if held > 0 && e.Server != "" {
		top = container.NewHBox(name, text(heldWords(held)+" held for review in Servers",
			widget.RichTextStyle{ColorName: theme.ColorNameWarning, SizeName: theme.SizeNameCaptionText, TextStyle: fyne.TextStyle{Bold: true}, Inline: true}))
	}
	return container.NewBorder(nil, nil, nil, fixedWidth(150, container.NewCenter(c)), compact(top, pullUp(d)))
}

// stateLook returns the words and colour of an entry's state.
func stateLook(s clients.State) (string, color.Color) {
	switch s {
	case clients.Governed:
		return "Protected", colorAllowed
	case clients.NotGoverned:
		return "Not protected", colorDenied
	case clients.Added, clients.Changed:
		return "Changed since", colorAsked
	case clients.Missing:
		return "Missing", colorAsked
	case clients.Extension:
		return "Extension", colorNeutral
	case clients.Shadowed:
		return "Shadowed", colorNeutral
	}
	return "Not supported", colorNeutral
}

// plan works out what governing (or undoing) sel does, and shows it for
// the person to confirm.
func (p *agentsPage) plan(undo bool, sel clients.Selection) {
	goRead(p.u, func(ctx context.Context) (*clients.Plan, error) {
		m, err := p.manager(ctx)
		if err != nil {
			return nil, err
		}
		if undo {
			return m.PlanUndo(ctx, sel)
		}
		return m.PlanGovern(ctx, sel)
	}, func(pl *clients.Plan, err error) {
		if err != nil {
			pr := explain("work out the change", err)
			dialog.ShowError(errors.New(pr.title+": "+pr.text+" "+pr.hint), p.u.win)
			return
		}
		p.confirm(pl)
	})
}

// confirm shows a plan: each file's diff, each entry's fate; and applies
// it when the person agrees.
func (p *agentsPage) confirm(pl *clients.Plan) {
	verb := "Protect"
	if pl.Undo {
		verb = "Undo"
	}
	var sections []fyne.CanvasObject
	var changes int
	for _, r := range pl.Results {
		line := plainLine(r.Name) + " (" + string(r.Client) + ")"
		switch {
		case r.Err != nil:
			line += ": " + sentence(r.Err)
		case r.Skipped != "":
			line += ": left as it is, " + r.Skipped
		default:
			changes++
			if pl.Undo {
				line += ": put back as it was"
			} else {
				line += ": runs through gatehouse proxy " + r.Server
			}
		}
		for _, n := range r.Notes {
			line += "; " + n
		}
		sections = append(sections, wrapText("• "+line, widget.RichTextStyle{}))
	}
	for _, f := range pl.Files {
		sections = append(sections, text(tildePath(f.Path, userHome()), widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}),
			newPanel(theme.ColorNameInputBackground, 0, unifiedDiff(f.Diff)))
	}
	if len(pl.Files) == 0 {
		sections = append(sections, text("Nothing to change.", secondary))
	}
	scroll := container.NewVScroll(container.NewVBox(sections...))
	scroll.SetMinSize(fyne.NewSize(760, 460))
	title := fmt.Sprintf("%s: %s", verb, plural(changes, "server", "servers"))
	d := dialog.NewCustomConfirm(title, verb, "Cancel", scroll, func(ok bool) {
		if ok && len(pl.Files) > 0 {
			p.apply(pl)
		}
	}, p.u.win)
	d.Show()
}

// apply carries out the plan and says what became of each entry.
func (p *agentsPage) apply(pl *clients.Plan) {
	goRead(p.u, func(ctx context.Context) (*clients.Plan, error) {
		m, err := p.manager(ctx)
		if err != nil {
			return nil, err
		}
		return pl, m.Apply(ctx, pl)
	}, func(pl *clients.Plan, err error) {
		done := 0
		for _, r := range pl.Results {
			if r.Done {
				done++
			}
		}
		if err != nil {
			dialog.ShowError(fmt.Errorf("%d done; some files were left as they were: %w", done, err), p.u.win)
		} else if !pl.Undo && done > 0 {
			p.restart.Show()
		}
		p.refresh()
		p.u.refreshStatus()
		p.u.view.refresh()
	})
}

// unifiedDiff shows a unified diff: removed lines in red, added in green.
func unifiedDiff(d string) fyne.CanvasObject {
	var segs []widget.RichTextSegment
	for _, line := range strings.Split(strings.TrimRight(d, "\n"), "\n") {
		st := widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}
		switch {
		case strings.HasPrefix(line, "+++"), strings.HasPrefix(line, "---"), strings.HasPrefix(line, "@@"):
			st.ColorName = theme.ColorNamePlaceHolder
		case strings.HasPrefix(line, "+"):
			st.ColorName = colorNameDiffAdded
		case strings.HasPrefix(line, "-"):
			st.ColorName = colorNameDiffRemoved
		}
		if line == "" {
			line = " "
		}
		segs = append(segs, &widget.TextSegment{Text: plainLine(line), Style: st})
	}
	t := widget.NewRichText(segs...)
	t.Wrapping = fyne.TextWrapBreak
	return t
}

// clientNames lists the clients Gatehouse knows, by their product names.
func clientNames() string {
	ids := clients.IDs()
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = id.Name()
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
