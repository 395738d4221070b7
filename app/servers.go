package app

import (
	"context"
	"errors"
	"fmt"
	"image/color"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// exampleAddCommand shows AddServerCommand filled in, under it in the empty
// view.
const exampleAddCommand = "gatehouse server add memory -- npx -y @modelcontextprotocol/server-memory"

// probeTimeout bounds a connection test, as gatehouse server test does.
const probeTimeout = 30 * time.Second

// A health is what the last connection test of a server found.
type health struct {
	at  time.Time
	h   *gateway.Health
	err error
}

// serversPage is the Servers view: the registered servers on the left, the
// one selected on the right with its tools.
type serversPage struct {
	u       *UI
	content fyne.CanvasObject

	banner  *problemBanner
	count   *widget.RichText // "3 servers" above the list
	list    *widget.List
	listBox fyne.CanvasObject // the list with its heading
	empty   fyne.CanvasObject // shown when the store holds no server
	copy    *widget.Button    // copies AddServerCommand
	copied  *widget.RichText  // "Copied" after the copy button is pressed
	detail  *serverDetail

	servers  []store.Server // what the list shows
	held     map[string]int // by server: its tools held for review
	selected string         // the name of the server on the right
	health   map[string]health
	gen      uint64      // counts reads; only the latest one's result is shown
	lastForm *serverForm // the form opened last
	retry    retrier
	abi      int // this machine's Landlock ABI (0: none), for confinement
}

func newServersPage(u *UI) *serversPage {
	p := &serversPage{u: u, health: map[string]health{}}
	p.abi, _ = confine.ABI()
	p.retry = retrier{u: u, f: p.refresh}
	p.banner = newProblemBanner(p.refresh)

	refresh := widget.NewButtonWithIcon("Refresh", theme.ViewRefreshIcon(), u.Refresh)
	add := widget.NewButtonWithIcon("Add server", theme.ContentAddIcon(), func() { p.openForm(nil) })
	add.Importance = widget.HighImportance
	header := pageHeader("Servers", "The MCP servers registered in Gatehouse. Each is protected once an agent runs it through gatehouse proxy NAME (see Protect my agents).", refresh, add)

	// The list.
	p.list = widget.NewList(
		func() int { return len(p.servers) },
		func() fyne.CanvasObject { return newServerRow() },
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < len(p.servers) {
				s := p.servers[id]
				o.(*serverRow).set(s, p.health[s.Name], p.held[s.Name])
			}
		},
	)
	p.list.OnSelected = func(id widget.ListItemID) {
		if id >= 0 && id < len(p.servers) {
			p.selectServer(p.servers[id].Name)
		}
	}
	p.count = text("", secondary)
	listHeading := container.NewBorder(nil, nil,
		text("MCP servers", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}), p.count)
	p.detail = newServerDetail(p)
	p.listBox = container.NewBorder(nil, nil,
		fixedWidth(232, container.NewBorder(listHeading, nil, nil, nil, newPanel(theme.ColorNameInputBackground, 0, p.list))),
		nil,
		container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding()*2, 0), p.detail.content))
	p.listBox.Hide()

	// Empty state.
	p.copied = text("", secondary)
	p.copy = widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() {
		u.app.Clipboard().SetContent(AddServerCommand)
		setText(p.copied, "Copied")
	})
	p.copy.Importance = widget.LowImportance
	emptyIcon := canvas.NewImageFromResource(iconResource)
	emptyIcon.FillMode = canvas.ImageFillContain
	emptyIcon.SetMinSize(fyne.NewSize(72, 72))
	command := newPanel(theme.ColorNameInputBackground, 0, container.NewBorder(nil, nil, nil, p.copy,
		container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding(), 0),
			container.NewCenter(text(AddServerCommand, mono)))))
	addFirst := widget.NewButtonWithIcon("Add a server", theme.ContentAddIcon(), func() { p.openForm(nil) })
	addFirst.Importance = widget.HighImportance
	p.empty = container.NewCenter(container.NewVBox(
		container.NewCenter(emptyIcon),
		text("No servers yet", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}}),
		text("Add an MCP server here, or register one from a terminal, and it appears here:", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: secondary.ColorName}),
		command,
		text("For example:", widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText}),
		pullUp(text(exampleAddCommand, widget.RichTextStyle{Alignment: fyne.TextAlignCenter, ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText, TextStyle: fyne.TextStyle{Monospace: true}})),
		container.NewCenter(p.copied),
		container.NewCenter(addFirst),
	))
	p.empty.Hide()

	body := container.NewBorder(p.banner.content, nil, nil, nil, container.NewStack(p.listBox, p.empty))
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(body))
	return p
}

// refresh reads the server list again and shows it. The read runs on its
// own goroutine; a read that finishes after a newer one started is
// dropped.
func (p *serversPage) refresh() {
	p.gen++
	gen := p.gen
	type read struct {
		servers []store.Server
		held    map[string]int
	}
	goRead(p.u, func(ctx context.Context) (read, error) {
		servers, err := p.u.st.Servers(ctx)
		if err != nil {
			return read{}, err
		}
		return read{servers, p.u.readHeld(ctx, servers)}, nil
	}, func(r read, err error) {
		if gen != p.gen {
			return
		}
		servers := r.servers
		if err == nil {
			p.held = r.held
		}
		if err != nil {
			p.u.log.Error("refresh server list", "err", err)
		}
		p.show(servers, err)
		if p.u.refreshed != nil {
			p.u.refreshed()
		}
	})
}

// show puts the result of a read on screen. When err is set, the list keeps
// the servers of the last good read (none if there was none), and the banner
// says what went wrong.
func (p *serversPage) show(servers []store.Server, err error) {
	if err == nil {
		p.servers = servers
		p.retry.ok()
		p.banner.show(nil, 0)
	} else {
		pr := explain("read the server list", err)
		p.banner.show(&pr, p.retry.failed(pr))
	}
	servers = p.servers
	setText(p.copied, "")
	setText(p.count, countServers(len(servers)))
	switch {
	case len(servers) > 0:
		p.empty.Hide()
		p.listBox.Show()
	case err == nil:
		p.listBox.Hide()
		p.empty.Show()
	default: // nothing read yet: say only what failed
		p.listBox.Hide()
		p.empty.Hide()
	}
	// Keep the selection on the same server; else the first.
	k := slices.IndexFunc(servers, func(s store.Server) bool { return s.Name == p.selected })
	if k < 0 && len(servers) > 0 {
		k = 0
	}
	p.list.Refresh()
	if k >= 0 {
		p.selected = servers[k].Name
		p.list.Select(k)
		p.detail.show(servers[k])
	}
	p.content.Refresh()
}

// selectServer shows the server called name on the right, with its tools.
func (p *serversPage) selectServer(name string) {
	k := slices.IndexFunc(p.servers, func(s store.Server) bool { return s.Name == name })
	if k < 0 {
		return
	}
	p.selected = name
	p.detail.show(p.servers[k])
}

// test starts (or reaches) the server and lists its tools, as gatehouse
// server test does, and shows the result in its row and on the right.
func (p *serversPage) test(s store.Server) {
	p.detail.testing(s.Name)
	kc := p.u.core.kc
	goRead(p.u, func(ctx context.Context) (*gateway.Health, error) {
		ctx, cancel := context.WithTimeout(ctx, probeTimeout)
		defer cancel()
		return downstream.Probe(ctx, s, kc, nil)
	}, func(h *gateway.Health, err error) {
		p.health[s.Name] = health{at: p.u.clock.Now(), h: h, err: err}
		p.list.Refresh()
		if p.selected == s.Name {
			p.detail.show(s)
		}
	})
}

// remove asks, then unregisters s and deletes the credentials it alone
// used from the keychain.
func (p *serversPage) remove(s store.Server) {
	secrets := ownSecrets(s)
	msg := fmt.Sprintf("MCP clients configured to run %s will no longer start it.", ProxyCommand(s.Name))
	if len(secrets) > 0 {
		msg += fmt.Sprintf(" Its credentials (%s) are deleted from the keychain, unless another server uses them.", strings.Join(secrets, ", "))
	}
	d := dialog.NewConfirm("Remove "+s.Name+"?", msg, func(ok bool) {
		if !ok {
			return
		}
		kc := p.u.core.kc
		goRead(p.u, func(ctx context.Context) ([]string, error) {
			if err := p.u.st.RemoveServer(ctx, s.Name); err != nil {
				return nil, err
			}
			return forgetSecrets(ctx, p.u.st, kc, secrets), nil
		}, func(kept []string, err error) {
			if err != nil {
				dialog.ShowError(fmt.Errorf("remove server %s: %w", s.Name, err), p.u.win)
				return
			}
			if len(kept) > 0 {
				dialog.ShowInformation("Credentials kept", "Removed "+s.Name+", but these credentials stay in the keychain: "+strings.Join(kept, "; ")+
					". Delete them later with gatehouse secret remove ID.", p.u.win)
			}
			delete(p.health, s.Name)
			p.selected = ""
			p.refresh()
			p.u.refreshStatus()
		})
	}, p.u.win)
	d.SetConfirmText("Remove")
	d.Show()
}

// ownSecrets returns the ids of the secrets s's entry refers to that were
// made for it (named after it), as gatehouse server remove deletes them.
func ownSecrets(s store.Server) []string {
	var ids []string
	for _, m := range []map[string]string{s.Env, s.Headers} {
		for _, v := range m {
			if id, ok := vault.ParseRef(v); ok && strings.HasPrefix(id, s.Name+".") {
				ids = append(ids, id)
			}
		}
	}
	slices.Sort(ids)
	return ids
}

// forgetSecrets deletes the secrets ids from the keychain and the store's
// index, unless a registered server still refers to them, and returns those
// it could not delete, with why.
func forgetSecrets(ctx context.Context, st *store.Store, kc Keychain, ids []string) []string {
	if len(ids) == 0 {
		return nil
	}
	servers, err := st.Servers(ctx)
	if err != nil {
		return []string{fmt.Sprintf("%s (%v)", strings.Join(ids, ", "), err)}
	}
	used := map[string]bool{}
	for _, s := range servers {
		for _, m := range []map[string]string{s.Env, s.Headers} {
			for _, v := range m {
				if id, ok := vault.ParseRef(v); ok {
					used[id] = true
				}
			}
		}
	}
	var kept []string
	for _, id := range ids {
		if used[id] {
			continue
		}
		if err := kc.DeleteSecret(id); err != nil && !errors.Is(err, vault.ErrNotFound) {
			kept = append(kept, fmt.Sprintf("%s (%v)", id, err))
			continue
		}
		st.ForgetSecret(ctx, id)
	}
	return kept
}

// serverDetail is the right side of the Servers view: one server, its
// health, its settings and its tools.
type serverDetail struct {
	p       *serversPage
	content fyne.CanvasObject
	server  store.Server

	avatar    *canvas.Circle
	initial   *canvas.Text
	name      *widget.RichText
	transport *widget.RichText
	trusted   fyne.CanvasObject
	tags      *fyne.Container // confinement and capability pack
	added     *widget.RichText
	testBtn   *widget.Button

	healthIcon *widget.Icon
	healthText *widget.RichText
	activity   *widget.ProgressBarInfinite

	info *fyne.Container // form rows

	quarantine fyne.CanvasObject // shown while the server is in quarantine
	reviewBtn  *widget.Button

	tools      []gate.ToolStatus
	review     dialog.Dialog // the review of a changed tool, once opened
	toolsErr   *widget.RichText
	toolsCount *widget.RichText
	toolList   *widget.List
	toolsEmpty fyne.CanvasObject
	gen        uint64
}

func newServerDetail(p *serversPage) *serverDetail {
	d := &serverDetail{p: p}
	d.avatar = canvas.NewCircle(avatarColors[0])
	d.initial = canvas.NewText("", color.White)
	d.initial.TextStyle.Bold = true
	d.initial.TextSize = 20
	d.initial.Alignment = fyne.TextAlignCenter
	avatar := container.NewGridWrap(fyne.NewSize(44, 44), container.NewStack(d.avatar, container.NewCenter(d.initial)))
	d.name = text("", widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	d.transport = text("", widget.RichTextStyle{ColorName: theme.ColorNamePrimary, SizeName: theme.SizeNameCaptionText, Inline: true})
	chip := newPanel(theme.ColorNamePrimary, 0x26, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0), d.transport))
	d.trusted = newPanel(theme.ColorNameSuccess, 0x26, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0),
		text("annotations trusted", widget.RichTextStyle{ColorName: theme.ColorNameSuccess, SizeName: theme.SizeNameCaptionText, Inline: true})))
	d.added = text("", caption)

	d.testBtn = widget.NewButtonWithIcon("Test connection", theme.MediaPlayIcon(), func() { p.test(d.server) })
	edit := widget.NewButtonWithIcon("Edit", theme.DocumentCreateIcon(), func() { s := d.server; p.openForm(&s) })
	remove := widget.NewButtonWithIcon("Remove", theme.DeleteIcon(), func() { p.remove(d.server) })
	remove.Importance = widget.DangerImportance

	d.tags = container.NewHBox()
	title := container.NewHBox(d.name, container.NewCenter(chip), container.NewCenter(d.trusted), d.tags)
	header := container.NewVBox(
		container.NewBorder(nil, nil, container.NewCenter(avatar), nil, compact(title, pullUp(d.added))),
		container.NewHBox(d.testBtn, edit, remove))

	d.healthIcon = widget.NewIcon(theme.NewColoredResource(theme.InfoIcon(), theme.ColorNamePlaceHolder))
	d.healthText = text("", secondary)
	d.healthText.Wrapping = fyne.TextWrapWord
	d.activity = widget.NewProgressBarInfinite()
	d.activity.Hide()
	d.activity.Stop()
	healthRow := container.NewBorder(nil, nil, container.NewCenter(d.healthIcon), nil, container.NewStack(d.healthText))

	d.info = container.New(layout.NewFormLayout())

	d.reviewBtn = widget.NewButtonWithIcon("Review", theme.ConfirmIcon(), func() { p.review(d.server) })
	d.reviewBtn.Importance = widget.WarningImportance
	d.quarantine = newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), container.NewCenter(d.reviewBtn),
		compact(text("In quarantine: each call asks you", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}),
			wrapText("Whatever the policy says, until you review it. Look at its tools and their risk below, set the rules you want, then press Review.", widget.RichTextStyle{SizeName: theme.SizeNameCaptionText}))))
	d.quarantine.Hide()

	d.toolsCount = text("", secondary)
	d.toolsErr = text("", widget.RichTextStyle{ColorName: theme.ColorNameError, Inline: true})
	d.toolsErr.Wrapping = fyne.TextWrapWord
	d.toolsErr.Hide()
	d.toolList = widget.NewList(
		func() int { return len(d.tools) },
		func() fyne.CanvasObject { return newToolRow(d.showChange) },
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < len(d.tools) {
				o.(*toolRow).set(d.tools[id])
			}
		})
	d.toolList.OnSelected = func(widget.ListItemID) { d.toolList.UnselectAll() }
	d.toolsEmpty = container.New(layout.NewCustomPaddedLayout(theme.Padding()*6, 0, theme.Padding()*4, theme.Padding()*4),
		wrapText("No tools seen yet: they appear when a client lists them through the proxy, or after Test connection.", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignCenter}))
	tools := container.NewBorder(
		container.NewVBox(container.NewBorder(nil, nil, heading("Tools"), d.toolsCount), d.toolsErr),
		nil, nil, nil,
		newPanel(theme.ColorNameInputBackground, 0, container.NewStack(d.toolList, d.toolsEmpty)))

	// The server above its tools, each part scrolled, the line between
	// them draggable: both fit the smallest window.
	split := container.NewVSplit(
		container.NewVScroll(container.NewVBox(header, d.quarantine, widget.NewSeparator(), healthRow, d.activity, d.info)),
		tools)
	split.Offset = 0.5
	d.content = split
	return d
}

// show puts server s on screen, and reads its tools.
func (d *serverDetail) show(s store.Server) {
	d.server = s
	initial, _ := utf8.DecodeRuneInString(s.Name)
	d.initial.Text = string(unicode.ToUpper(initial))
	d.avatar.FillColor = avatarColor(s.Name)
	d.initial.Refresh()
	d.avatar.Refresh()
	setText(d.name, s.Name)
	setText(d.transport, s.Transport)
	if s.Trusted {
		d.trusted.Show()
	} else {
		d.trusted.Hide()
	}
	added := addedOn(s.CreatedAt)
	if !s.UpdatedAt.IsZero() && !s.UpdatedAt.Equal(s.CreatedAt) {
		added += " · changed " + s.UpdatedAt.Local().Format("Jan 2, 2006")
	}
	setText(d.added, added)

	h, tested := d.p.health[s.Name]
	d.activity.Stop()
	d.activity.Hide()
	d.testBtn.Enable()
	switch {
	case !tested:
		d.healthIcon.SetResource(theme.NewColoredResource(theme.InfoIcon(), theme.ColorNamePlaceHolder))
		setText(d.healthText, "Not tested since Gatehouse started. Test connection starts the server and lists its tools.")
	case h.err != nil:
		d.healthIcon.SetResource(theme.NewErrorThemedResource(theme.ErrorIcon()))
		setText(d.healthText, "Could not connect: "+plainLine(h.err.Error())+testHint(s, h.err))
	default:
		d.healthIcon.SetResource(theme.NewSuccessThemedResource(theme.ConfirmIcon()))
		setText(d.healthText, fmt.Sprintf("Connected in %s at %s: %s (%s %s, protocol %s).",
			h.h.ConnectTime.Round(time.Millisecond), h.at.Local().Format("15:04:05"), countTools(len(h.h.Tools)),
			plainLine(h.h.ServerName), plainLine(h.h.ServerVersion), plainLine(h.h.ProtocolVersion)))
	}

	if s.Quarantined {
		d.reviewBtn.Enable()
		d.quarantine.Show()
	} else {
		d.quarantine.Hide()
	}
	d.tags.Objects = serverTags(s, d.p.abi)
	d.tags.Refresh()
	d.info.Objects = serverInfo(d.p.u, s)
	d.info.Refresh()
	d.readTools()
	d.content.Refresh()
}

// testHint says what to check after a failed connection test.
func testHint(s store.Server, err error) string {
	switch {
	case errors.Is(err, vault.ErrUnavailable):
		return " " + keychainHint
	case errors.Is(err, vault.ErrNotFound):
		return " A credential it needs is not in the keychain: Edit the server and type it again."
	case s.Remote():
		return " Check the URL and the credentials."
	}
	return " Check the command: run it in a terminal to see what it prints."
}

// testing shows that a connection test of the server called name runs.
func (d *serverDetail) testing(name string) {
	if d.server.Name != name {
		return
	}
	d.testBtn.Disable()
	d.activity.Show()
	d.activity.Start()
	d.healthIcon.SetResource(theme.NewColoredResource(theme.MediaPlayIcon(), theme.ColorNamePlaceHolder))
	setText(d.healthText, "Starting "+name+" and listing its tools…")
}

// readTools reads the tools of the server on screen: those pinned through
// a proxy, and those the last connection test listed.
func (d *serverDetail) readTools() {
	d.gen++
	gen := d.gen
	s := d.server
	probed := d.p.health[s.Name]
	goRead(d.p.u, func(ctx context.Context) ([]gate.ToolStatus, error) {
		ps, err := d.p.u.core.policies(ctx)
		if err != nil {
			return nil, err
		}
		pol, err := ps.Current(ctx)
		if err != nil {
			return nil, err
		}
		tools, err := gate.Tools(ctx, d.p.u.st, pol, s.Name, s.Trusted, policy.PackByRef(s.Pack))
		if err != nil {
			return nil, err
		}
		if probed.h != nil {
			tools = mergeProbed(tools, probed.h.Tools, pol, s)
		}
		return tools, nil
	}, func(tools []gate.ToolStatus, err error) {
		if gen != d.gen {
			return
		}
		if err != nil {
			d.toolsErr.Segments[0].(*widget.TextSegment).Text = explain("read the tools", err).title + ": " + sentence(err)
			d.toolsErr.Show()
			d.toolsErr.Refresh()
		} else {
			d.toolsErr.Hide()
			d.tools = tools
		}
		setText(d.toolsCount, countTools(len(d.tools)))
		if len(d.tools) == 0 {
			d.toolsEmpty.Show()
		} else {
			d.toolsEmpty.Hide()
		}
		d.toolList.Refresh()
		d.content.Refresh()
	})
}

// unpinned is the pin state of a tool a connection test listed but no
// proxy has yet: it is pinned as listed the first time a client lists it.
const unpinned gate.PinState = "unpinned"

// mergeProbed adds to tools those a connection test listed that no proxy
// has pinned yet, decided by pol as a call of an unknown client would be.
func mergeProbed(tools []gate.ToolStatus, probed []gateway.ToolInfo, pol *policy.Policy, s store.Server) []gate.ToolStatus {
	pack := policy.PackByRef(s.Pack)
	have := map[string]bool{}
	for _, t := range tools {
		have[t.Name] = true
	}
	for _, t := range probed {
		if have[t.Name] {
			continue
		}
		res := pol.Decide(policy.Call{Server: s.Name, Tool: t.Name, Known: true, Trusted: s.Trusted, Pack: pack})
		ts := gate.ToolStatus{Name: t.Name, Description: t.Description, Risk: res.Risk,
			Decision: res.Decision, Rule: res.Rule, Pin: unpinned}
		if _, ok := pack.Tool(t.Name); ok {
			ts.Pack = pack.Ref()
		}
		tools = append(tools, ts)
	}
	slices.SortFunc(tools, func(a, b gate.ToolStatus) int { return strings.Compare(a.Name, b.Name) })
	return tools
}

// serverInfo returns the rows describing s: what it runs or reaches, its
// folder, the names of its environment variables or headers (never their
// values, which often hold secrets), what it may reach when confined, and
// what clients run.
func serverInfo(u *UI, s store.Server) []fyne.CanvasObject {
	value := func(v string, mono bool) *widget.Label {
		l := widget.NewLabel(v)
		l.TextStyle.Monospace = mono
		l.Wrapping = fyne.TextWrapWord
		l.Selectable = true
		return l
	}
	key := func(k string) fyne.CanvasObject {
		return text(k, widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignTrailing})
	}
	names := func(m map[string]string, what string) fyne.CanvasObject {
		if len(m) == 0 {
			return value("none", false)
		}
		var lines []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if id, ok := vault.ParseRef(m[k]); ok {
				lines = append(lines, k+"  (in the keychain as "+id+")")
			} else {
				lines = append(lines, k)
			}
		}
		return compact(value(strings.Join(lines, "\n"), true), pullUp(text(what+" values are not shown.", caption)))
	}
	var rows []fyne.CanvasObject
	if s.Remote() {
		rows = append(rows, key("URL"), value(s.URL, true), key("Headers"), names(s.Headers, "Header"))
	} else {
		cwd := s.Cwd
		if cwd == "" {
			cwd = "the folder the proxy starts in"
		}
		rows = append(rows,
			key("Command"), value(commandLine(s.Command, s.Args), true),
			key("Working folder"), value(cwd, cwd == s.Cwd),
			key("Environment"), names(s.Env, "Environment"))
		if allowed := allowedWords(s); s.Confine && allowed != "" {
			rows = append(rows, key("Confined, also"), value(allowed, false))
		}
	}
	proxy := ProxyCommand(s.Name)
	copyProxy := widget.NewButtonWithIcon("", theme.ContentCopyIcon(), func() { u.app.Clipboard().SetContent(proxy) })
	copyProxy.Importance = widget.LowImportance
	rows = append(rows, key("Clients run"), container.NewBorder(nil, nil, nil, copyProxy, value(proxy, true)))
	return rows
}

// serverTags returns the tags beside a server's name: whether the proxy
// starts it confined on this machine, whose Landlock ABI is abi (0: none),
// as gatehouse server list says, and its capability pack.
func serverTags(s store.Server, abi int) []fyne.CanvasObject {
	var tags []fyne.CanvasObject
	if !s.Remote() {
		switch {
		case !s.Confine:
			tags = append(tags, tag("not confined", theme.ColorNamePlaceHolder))
		case abi >= confine.NeedABI(s.AllowNet):
			tags = append(tags, tag(fmt.Sprintf("confined: Landlock ABI %d", abi), theme.ColorNameSuccess))
		case s.UnconfinedOK:
			tags = append(tags, tag("cannot be confined here: starts unconfined", theme.ColorNameWarning))
		default:
			tags = append(tags, tag("cannot be confined here: will not start", theme.ColorNameError))
		}
	}
	if s.Pack != "" {
		tags = append(tags, tag("pack "+s.Pack, theme.ColorNamePrimary))
	}
	return tags
}

// tag is a few words on a patch of their colour.
func tag(words string, c fyne.ThemeColorName) fyne.CanvasObject {
	return container.NewCenter(newPanel(c, 0x26, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0),
		text(words, widget.RichTextStyle{ColorName: c, SizeName: theme.SizeNameCaptionText, Inline: true}))))
}

// allowedWords says what a confined s may reach beyond what every
// confined server may: "reads ~/notes · writes /tmp/out · connects to port 443".
func allowedWords(s store.Server) string {
	home := userHome()
	paths := func(ps []string) string {
		out := make([]string, len(ps))
		for i, p := range ps {
			out[i] = tildePath(p, home)
		}
		return strings.Join(out, ", ")
	}
	var parts []string
	if len(s.AllowRead) > 0 {
		parts = append(parts, "reads "+paths(s.AllowRead))
	}
	if len(s.AllowWrite) > 0 {
		parts = append(parts, "writes "+paths(s.AllowWrite))
	}
	switch {
	case slices.Contains(s.AllowNet, "*"):
		parts = append(parts, "connects to any port")
	case len(s.AllowNet) == 1:
		parts = append(parts, "connects to port "+s.AllowNet[0])
	case len(s.AllowNet) > 1:
		parts = append(parts, "connects to ports "+strings.Join(s.AllowNet, ", "))
	}
	return strings.Join(parts, " · ")
}

// review ends the quarantine of s, through the core as gatehouse server
// review does, and shows the server again.
func (p *serversPage) review(s store.Server) {
	p.detail.reviewBtn.Disable()
	goRead(p.u, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, p.u.core.reviewServer(ctx, s.Name)
	}, func(_ struct{}, err error) {
		if err != nil {
			p.detail.reviewBtn.Enable()
			dialog.ShowError(err, p.u.win)
			return
		}
		p.refresh()
		p.u.refreshStatus()
	})
}

// countTools says how many tools there are.
func countTools(n int) string {
	if n == 1 {
		return "1 tool"
	}
	return fmt.Sprintf("%d tools", n)
}

// A toolRow is one tool of a server: its name and description, its risk and
// what classified it, what the policy decides for it and by which rule, and
// its pin.
type toolRow struct {
	widget.BaseWidget
	tool     gate.ToolStatus
	onChange func(gate.ToolStatus)

	name     *widget.RichText
	desc     *widget.RichText
	risk     *badge
	decision *widget.RichText
	rule     *widget.RichText
	pin      *widget.Button   // a changed definition: review it
	pinText  *widget.RichText // pinned, or not listed yet
}

func newToolRow(onChange func(gate.ToolStatus)) *toolRow {
	r := &toolRow{onChange: onChange}
	r.name = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, Inline: true})
	r.name.Truncation = fyne.TextTruncateEllipsis
	r.desc = text("", caption)
	r.desc.Truncation = fyne.TextTruncateEllipsis
	r.risk = newBadge()
	r.decision = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	r.rule = text("", caption)
	r.rule.Truncation = fyne.TextTruncateEllipsis
	r.pin = widget.NewButtonWithIcon("", theme.WarningIcon(), func() { r.onChange(r.tool) })
	r.pin.Importance = widget.WarningImportance
	r.pinText = text("", widget.RichTextStyle{SizeName: theme.SizeNameCaptionText, Inline: true})
	r.ExtendBaseWidget(r)
	return r
}

func (r *toolRow) CreateRenderer() fyne.WidgetRenderer {
	// Two lines, which fit the narrowest window: the tool, then what
	// Gatehouse makes of it.
	facts := container.NewHBox(container.NewCenter(r.risk), container.NewCenter(r.decision),
		container.NewCenter(container.NewStack(r.pin, container.NewCenter(r.pinText))))
	return widget.NewSimpleRenderer(container.New(layout.NewCustomPaddedLayout(0, 0, 4, 4),
		compact(r.name, pullUp(r.desc), facts, pullUp(r.rule))))
}

func (r *toolRow) set(t gate.ToolStatus) {
	r.tool = t
	setText(r.name, plainLine(t.Name))
	desc, _, _ := strings.Cut(strings.TrimSpace(t.Description), "\n")
	if desc == "" {
		desc = "no description"
	}
	setText(r.desc, plainLine(desc))
	r.risk.set(riskLook(string(t.Risk)))
	word, c := decisionLook(string(t.Decision))
	seg := r.decision.Segments[0].(*widget.TextSegment)
	seg.Text, seg.Style.ColorName = word, c
	r.decision.Refresh()
	setText(r.rule, "by "+ruleName(t.Rule)+" · risk "+riskSource(t))
	seg = r.pinText.Segments[0].(*widget.TextSegment)
	switch t.Pin {
	case gate.Changed:
		r.pin.SetText("Review change")
		if t.Rejected {
			r.pin.SetText("Rejected: review")
		}
		r.pin.Show()
		seg.Text = ""
	case unpinned:
		r.pin.Hide()
		seg.Text, seg.Style.ColorName = "not listed through a proxy yet", theme.ColorNamePlaceHolder
	default:
		r.pin.Hide()
		seg.Text, seg.Style.ColorName = "✓ pinned "+t.PinnedAt.Local().Format("Jan 2"), theme.ColorNameSuccess
	}
	r.pinText.Refresh()
}

// riskSource says what classified a tool's risk: its server's capability
// pack, or its name (and annotations).
func riskSource(t gate.ToolStatus) string {
	if t.Pack != "" {
		return "pack " + t.Pack
	}
	return "by name"
}

// decisionLook returns how a decision is shown: its words and colour.
func decisionLook(d string) (string, fyne.ThemeColorName) {
	switch d {
	case string(policy.Allow):
		return "Allow", theme.ColorNameSuccess
	case string(policy.Deny):
		return "Deny", theme.ColorNameError
	case string(policy.ApprovalRequired):
		return "Ask", theme.ColorNameWarning
	case "":
		return "—", theme.ColorNamePlaceHolder
	}
	return plainLine(d), theme.ColorNameForeground
}

// fixedWidth lays o out at width w, at its own minimum height.
func fixedWidth(w float32, o fyne.CanvasObject) fyne.CanvasObject {
	return container.New(&fixedLayout{w: w}, o)
}

// fixedLayout gives its objects the width w and the height h, whatever
// they ask for; a zero keeps their own minimum in that direction.
type fixedLayout struct{ w, h float32 }

func (l *fixedLayout) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	for _, o := range objs {
		o.Resize(size)
		o.Move(fyne.Position{})
	}
}

func (l *fixedLayout) MinSize(objs []fyne.CanvasObject) fyne.Size {
	var min fyne.Size
	for _, o := range objs {
		min = min.Max(o.MinSize())
	}
	if l.w > 0 {
		min.Width = l.w
	}
	if l.h > 0 {
		min.Height = l.h
	}
	return min
}

// sentence writes an error as a sentence: a capital, a full stop.
func sentence(err error) string {
	s := err.Error()
	r, n := utf8.DecodeRuneInString(s)
	s = string(unicode.ToUpper(r)) + s[n:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// countServers says how many servers there are, as the list heading shows it.
func countServers(n int) string {
	if n == 1 {
		return "1 server"
	}
	return fmt.Sprintf("%d servers", n)
}

// userHome returns the user's home folder where paths are commonly written
// with a tilde, or "" elsewhere (Windows) or when it is unknown.
func userHome() string {
	if runtime.GOOS == "windows" {
		return ""
	}
	h, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return h
}

// tildePath writes path, when it lies inside home, as "~/" and the rest, the
// way shells and file managers show it.
func tildePath(path, home string) string {
	if home == "" || home == "/" {
		return path
	}
	rel, err := filepath.Rel(home, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return path
	}
	if rel == "." {
		return "~"
	}
	return "~" + string(filepath.Separator) + rel
}

// fixedHeight gives o the height h, whatever it asks for: text that
// wraps to another line does not move what is below it.
func fixedHeight(h float32, o fyne.CanvasObject) fyne.CanvasObject {
	return container.New(&fixedLayout{h: h}, o)
}
