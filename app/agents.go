package app

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"os"
	"slices"
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
	rows := append([]fyne.CanvasObject{title}, managedNotice(c)...)
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
	c.set(stateLook(e))
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
func stateLook(e clients.Entry) (string, color.Color) {
	switch e.State {
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
	case clients.Overridden:
		return "Off by your organisation", colorNeutral
	case clients.Forbidden:
		if e.Open() {
			return "Not protected", colorDenied
		}
		return "Refused by your organisation", colorNeutral
	}
	return "Not supported", colorNeutral
}

// plan works out what governing (or undoing) sel does, and shows it for
// the person to confirm.
func (p *agentsPage) plan(undo bool, sel clients.Selection) {
	goRead(p.u, func(ctx context.Context) (planned, error) {
		return p.planFor(ctx, undo, sel)
	}, func(pd planned, err error) {
		if err != nil {
			pr := explain("work out the change", err)
			dialog.ShowError(errors.New(pr.title+": "+pr.text+" "+pr.hint), p.u.win)
			return
		}
		newPlanDialog(p, undo, sel, pd).show()
	})
}

// planned is a plan, and the clients it writes to that run now and must
// be quit first.
type planned struct {
	pl      *clients.Plan
	running []clients.ID
}

// planFor works out the plan for sel, and which of the clients whose files
// it changes must be quit first (Claude Desktop, which rewrites its file
// while it runs).
func (p *agentsPage) planFor(ctx context.Context, undo bool, sel clients.Selection) (planned, error) {
	m, err := p.manager(ctx)
	if err != nil {
		return planned{}, err
	}
	var pl *clients.Plan
	if undo {
		pl, err = m.PlanUndo(ctx, sel)
	} else {
		pl, err = m.PlanGovern(ctx, sel)
	}
	if err != nil {
		return planned{}, err
	}
	cs, err := m.Scan(ctx)
	if err != nil {
		return planned{}, err
	}
	pd := planned{pl: pl}
	for _, c := range cs {
		if !c.Running {
			continue
		}
		for _, f := range pl.Files {
			if f.Client == c.ID && !slices.Contains(pd.running, c.ID) {
				pd.running = append(pd.running, c.ID)
			}
		}
	}
	return pd, nil
}

// A planDialog shows a plan before it is applied: in words first (which
// agents, which servers, what moves to the keychain), with a box per
// server to leave it out; the exact change to each file behind Details;
// and the button that applies it, disabled, with the reason, while a
// client that must be quit first runs.
type planDialog struct {
	p    *agentsPage
	undo bool
	sel  clients.Selection // as asked, before any server is left out
	cur  planned           // the plan for the servers ticked
	gen  uint64

	names []string        // the entries that can change, by name
	ticks []*widget.Check // a box for each: cleared, it is left out

	summary *widget.RichText
	boxes   *fyne.Container
	details *fyne.Container
	reason  *widget.RichText
	action  *widget.Button
	d       dialog.Dialog
}

func newPlanDialog(p *agentsPage, undo bool, sel clients.Selection, pd planned) *planDialog {
	v := &planDialog{p: p, undo: undo, sel: sel, cur: pd}
	verb := "Protect"
	if undo {
		verb = "Undo"
	}
	v.summary = wrapText("", widget.RichTextStyle{})
	v.boxes = container.NewVBox()
	for _, r := range pd.pl.Results {
		if r.Err != nil || r.Skipped != "" {
			continue
		}
		if slices.Contains(v.names, r.Name) {
			continue // the same entry name in another client: one box
		}
		box := widget.NewCheck(plainLine(r.Name)+" in "+r.Client.Name(), nil)
		box.SetChecked(true)
		box.OnChanged = func(bool) { v.replan() }
		v.names = append(v.names, r.Name)
		v.ticks = append(v.ticks, box)
		v.boxes.Add(box)
	}
	v.details = container.NewVBox()
	v.reason = wrapText("", widget.RichTextStyle{ColorName: theme.ColorNameWarning, TextStyle: fyne.TextStyle{Bold: true}})
	v.action = widget.NewButton(verb, func() {
		v.d.Hide()
		if len(v.cur.pl.Files) > 0 {
			p.apply(v.cur.pl)
		}
	})
	v.action.Importance = widget.HighImportance
	cancel := widget.NewButton("Cancel", func() { v.d.Hide() })
	choose := "Leave a server out by clearing its box:"
	if undo {
		choose = "Leave a server as it is by clearing its box:"
	}
	details := widget.NewAccordion(widget.NewAccordionItem("Details: the change to each file", v.details))
	body := container.NewVBox(v.summary, text(choose, secondary), v.boxes, details)
	scroll := container.NewVScroll(body)
	scroll.SetMinSize(fyne.NewSize(540, 420))
	buttons := container.NewBorder(nil, nil, nil, container.NewHBox(cancel, v.action), v.reason)
	v.d = dialog.NewCustomWithoutButtons(verb+" my agents", container.NewBorder(nil, buttons, nil, nil, scroll), p.u.win)
	v.render()
	return v
}

func (v *planDialog) show() { v.d.Show() }

// replan works the plan out again for the servers still ticked.
func (v *planDialog) replan() {
	var keep []string
	for i, c := range v.ticks {
		if c.Checked {
			keep = append(keep, v.names[i])
		}
	}
	sel := v.sel
	v.gen++
	gen := v.gen
	if len(keep) == 0 {
		v.cur = planned{pl: &clients.Plan{Undo: v.undo}}
		v.render()
		return
	}
	sel.Servers = keep
	goRead(v.p.u, func(ctx context.Context) (planned, error) {
		return v.p.planFor(ctx, v.undo, sel)
	}, func(pd planned, err error) {
		if gen != v.gen {
			return
		}
		if err != nil {
			setText(v.reason, sentence(err))
			v.action.Disable()
			return
		}
		v.cur = pd
		v.render()
	})
}

// render shows the current plan: the summary, the details, the button.
func (v *planDialog) render() {
	pl := v.cur.pl
	setText(v.summary, planSummary(pl))
	v.details.RemoveAll()
	for _, r := range pl.Results {
		if len(r.Notes) > 0 {
			v.details.Add(wrapText("• "+plainLine(r.Name)+" in "+r.Client.Name()+": "+strings.Join(r.Notes, "; "), widget.RichTextStyle{SizeName: theme.SizeNameCaptionText}))
		}
	}
	for _, f := range pl.Files {
		v.details.Add(text(tildePath(f.Path, userHome()), widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}))
		v.details.Add(newPanel(theme.ColorNameInputBackground, 0, unifiedDiff(f.Diff)))
	}
	switch {
	case len(pl.Files) == 0:
		setText(v.reason, "Nothing to change: tick a server.")
		v.action.Disable()
	case len(v.cur.running) > 0:
		var names []string
		for _, id := range v.cur.running {
			names = append(names, id.Name())
		}
		setText(v.reason, "Quit "+strings.Join(names, " and ")+" first (from its menu, not just its window): it rewrites its config while it runs, which would undo this.")
		v.action.Disable()
	default:
		setText(v.reason, "")
		v.action.Enable()
	}
	v.details.Refresh()
}

// planSummary says a plan in words: which agents, which servers, what
// moves to the keychain (by name, never the values), what is left as it
// is and why.
func planSummary(pl *clients.Plan) string {
	var byClient []string
	servers := map[clients.ID][]string{}
	var moved, left []string
	for _, r := range pl.Results {
		name := plainLine(r.Name)
		switch {
		case r.Err != nil:
			left = append(left, name+" in "+r.Client.Name()+" ("+strings.TrimSuffix(sentence(r.Err), ".")+")")
			continue
		case r.Skipped != "":
			left = append(left, name+" in "+r.Client.Name()+" ("+plainLine(r.Skipped)+")")
			continue
		}
		if _, ok := servers[r.Client]; !ok {
			byClient = append(byClient, string(r.Client))
		}
		servers[r.Client] = append(servers[r.Client], name)
		for _, s := range r.Secrets {
			moved = append(moved, plainLine(s)+" of "+name)
		}
	}
	var b strings.Builder
	n := 0
	for _, c := range servers {
		n += len(c)
	}
	if pl.Undo {
		fmt.Fprintf(&b, "Puts %s back as they were before Gatehouse, each file byte for byte:\n", plural(n, "server", "servers"))
	} else {
		fmt.Fprintf(&b, "%s will run through Gatehouse, which asks the policy before each of their tool calls:\n", plural(n, "server", "servers"))
	}
	for _, id := range byClient {
		c := clients.ID(id)
		fmt.Fprintf(&b, "• %s: %s\n", c.Name(), strings.Join(servers[c], ", "))
	}
	if !pl.Undo {
		if len(moved) > 0 {
			fmt.Fprintf(&b, "Moves to your keychain, out of the config files: %s.\n", strings.Join(moved, ", "))
		} else if n > 0 {
			b.WriteString("No secret values to move: the files hold none in these entries.\n")
		}
	}
	if len(left) > 0 {
		fmt.Fprintf(&b, "Left as they are: %s.", strings.Join(left, "; "))
	}
	return strings.TrimSpace(b.String())
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
