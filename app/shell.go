package app

import (
	"errors"
	"fmt"
	"image/color"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// The views of the main window, by id.
const (
	pageServers  = "servers"
	pageAgents   = "agents"
	pagePolicy   = "policy"
	pageHistory  = "history"
	pageExport   = "export"
	pageSettings = "settings"
)

// A view is one page of the main window, reached from the sidebar.
type view struct {
	id      string
	label   string
	icon    fyne.Resource
	content fyne.CanvasObject
	refresh func() // reads again what the page shows
	close   func() // stops its timers; nil for none
	item    *navItem
}

// shell is the main window's frame: the sidebar with the gate's state and
// the views, the banners that concern every view, and the view on screen.
type shell struct {
	u       *UI
	content fyne.CanvasObject
	views   []*view
	current *view
	stack   *fyne.Container // the views' contents, one visible

	// The gate's state, in the sidebar.
	stateDot   *canvas.Circle
	stateTitle *widget.RichText
	stateText  *widget.RichText
	pause      *widget.Button
	homeText   *elidedText    // the home folder
	quit       *widget.Button // quits, after asking

	// Banners above every view.
	waiting     fyne.CanvasObject // shown while approval requests wait
	waitingText *widget.Label
	approver    fyne.CanvasObject // shown when Gatehouse cannot answer approvals
	apTitle     *widget.RichText
	apText      *widget.Label
	paused      fyne.CanvasObject // shown while every call is denied
	pausedText  *widget.Label
	dbGone      fyne.CanvasObject // shown when the database file went away
	banners     *fyne.Container
}

func newShell(u *UI, home, version string) *shell {
	s := &shell{u: u}
	s.views = []*view{
		{id: pageServers, label: "Servers", icon: theme.ComputerIcon(), content: u.view.content, refresh: u.view.refresh},
		{id: pageAgents, label: "Protect my agents", icon: theme.ConfirmIcon(), content: u.agents.content, refresh: u.agents.refresh},
		{id: pagePolicy, label: "Policy", icon: theme.DocumentIcon(), content: u.policy.content, refresh: u.policy.refresh},
		{id: pageHistory, label: "History", icon: theme.HistoryIcon(), content: u.history.content, refresh: u.history.refresh, close: u.history.close},
		{id: pageExport, label: "Export", icon: theme.DownloadIcon(), content: u.export.content, refresh: u.export.refresh},
		{id: pageSettings, label: "Settings", icon: theme.SettingsIcon(), content: u.settings.content, refresh: u.settings.refresh},
	}

	// Sidebar: the name, the gate's state with the pause button, the views,
	// and at the bottom the home folder and version.
	icon := canvas.NewImageFromResource(iconResource)
	icon.FillMode = canvas.ImageFillContain
	icon.SetMinSize(fyne.NewSize(36, 36))
	name := text(Title, widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}})
	brand := container.NewHBox(container.NewCenter(icon), container.NewCenter(name))

	s.stateDot = canvas.NewCircle(color.NRGBA{R: 0x9C, G: 0xA3, B: 0xAF, A: 0xFF})
	s.stateTitle = text("Starting…", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	s.stateText = text("", caption)
	s.stateText.Wrapping = fyne.TextWrapWord
	s.pause = widget.NewButtonWithIcon("Pause all calls", theme.MediaPauseIcon(), u.togglePause)
	dot := container.NewGridWrap(fyne.NewSize(10, 10), s.stateDot)
	state := newPanel(theme.ColorNameBackground, 0, container.NewVBox(
		container.NewBorder(nil, nil, container.NewCenter(dot), nil, s.stateTitle),
		pullUp(s.stateText),
		s.pause,
	))

	var items []fyne.CanvasObject
	for _, v := range s.views {
		v.item = newNavItem(v.label, v.icon, func() { s.open(v.id) })
		items = append(items, v.item)
	}

	// The home folder on one line, elided in the middle: its end tells
	// one profile from another; Settings shows it whole.
	s.homeText = newElidedText(fyne.TextStyle{}, theme.SizeNameCaptionText, theme.ColorNamePlaceHolder)
	s.homeText.SetText(tildePath(home, userHome()))
	footer := []fyne.CanvasObject{
		container.NewBorder(nil, nil, widget.NewIcon(theme.NewColoredResource(theme.FolderIcon(), theme.ColorNamePlaceHolder)), nil, s.homeText),
	}
	if version != "" {
		footer = append(footer, text("Gatehouse "+version, caption))
	}
	s.quit = widget.NewButtonWithIcon("Quit Gatehouse", theme.LogoutIcon(), u.confirmQuit)
	s.quit.Importance = widget.LowImportance
	s.quit.Alignment = widget.ButtonAlignLeading
	footer = append(footer, s.quit)

	pad := theme.Padding()
	sidebarBody := container.NewBorder(
		container.NewVBox(
			container.New(layout.NewCustomPaddedLayout(pad, pad, pad, pad), brand),
			state,
			container.New(layout.NewCustomPaddedLayout(pad, 0, 0, 0), container.New(layout.NewCustomPaddedVBoxLayout(2), items...)),
		),
		compact(footer...),
		nil, nil,
	)
	sidebar := container.NewStack(newBand(theme.ColorNameHeaderBackground),
		container.New(layout.NewCustomPaddedLayout(pad*2, pad*2, pad*2, pad*2),
			container.NewGridWrap(fyne.NewSize(sidebarWidth, 0), layout.NewSpacer()), // sets the width
		),
		container.New(layout.NewCustomPaddedLayout(pad*2, pad*2, pad*2, pad*2), sidebarBody),
	)

	// Banners.
	s.waitingText = widget.NewLabel("")
	s.waitingText.TextStyle.Bold = true
	review := widget.NewButton("Review", u.ShowApprovals)
	review.Importance = widget.HighImportance
	s.waiting = newPanel(theme.ColorNamePrimary, 0x22, container.NewBorder(nil, nil,
		container.NewCenter(widget.NewIcon(theme.NewPrimaryThemedResource(theme.QuestionIcon()))),
		container.NewCenter(review), s.waitingText))
	s.waiting.Hide()
	s.apText = widget.NewLabel("")
	s.apText.Wrapping = fyne.TextWrapWord
	s.apTitle = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameWarning})
	s.approver = newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil,
		compact(s.apTitle, s.apText)))
	s.approver.Hide()
	s.pausedText = widget.NewLabel("")
	s.pausedText.Wrapping = fyne.TextWrapWord
	resume := widget.NewButtonWithIcon("Resume", theme.MediaPlayIcon(), u.togglePause)
	resume.Importance = widget.WarningImportance
	s.paused = newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
		container.NewCenter(widget.NewIcon(theme.NewWarningThemedResource(theme.MediaPauseIcon()))),
		container.NewCenter(resume),
		compact(text("Gatehouse is paused", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameWarning}), s.pausedText)))
	s.paused.Hide()
	quit := widget.NewButton("Quit", u.Quit)
	s.dbGone = newPanel(theme.ColorNameError, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))), container.NewCenter(quit),
		compact(text("The Gatehouse database was removed or replaced", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameError}),
			wrapText("Gatehouse still shows the database it opened, which proxies no longer use. Quit, and start Gatehouse again to open "+store.DatabaseFile+" as it is now.", widget.RichTextStyle{}))))
	s.dbGone.Hide()
	s.banners = container.NewVBox(s.dbGone, s.paused, s.waiting, s.approver)

	var contents []fyne.CanvasObject
	for _, v := range s.views {
		v.content.Hide()
		contents = append(contents, v.content)
	}
	s.stack = container.NewStack(contents...)
	main := container.NewBorder(
		container.New(layout.NewCustomPaddedLayout(0, 0, pad*3, pad*3), s.banners), nil, nil, nil,
		s.stack)
	s.content = container.NewBorder(nil, nil, container.NewHBox(sidebar, widget.NewSeparator()), nil, main)
	s.show(s.views[0])
	return s
}

// sidebarWidth is the width of the sidebar's content.
const sidebarWidth = 176

// open shows the view with the given id and reads what it shows.
func (s *shell) open(id string) {
	for _, v := range s.views {
		if v.id == id {
			s.show(v)
			if s.u.shown {
				v.refresh()
			}
			return
		}
	}
}

func (s *shell) show(v *view) {
	if s.current == v {
		return
	}
	for _, o := range s.views {
		o.item.setSelected(o == v)
		if o == v {
			o.content.Show()
		} else {
			o.content.Hide()
		}
	}
	s.current = v
	s.stack.Refresh()
	// A view hidden while the window was resized still has its old size:
	// lay it out again at the size it now has.
	v.content.Resize(s.stack.Size())
	v.content.Refresh()
}

// refreshCurrent reads again what the view on screen shows.
func (s *shell) refreshCurrent() {
	if s.current != nil {
		s.current.refresh()
	}
}

// close stops the views' timers.
func (s *shell) close() {
	for _, v := range s.views {
		if v.close != nil {
			v.close()
		}
	}
}

// showState shows the gate's state in the sidebar and the pause banner.
func (s *shell) showState(st status) {
	title, t := st.headline()
	s.stateDot.FillColor = toneColors[t]
	setText(s.stateTitle, title)
	s.stateDot.Refresh()
	summary := st.summary()
	if why := st.why(); why != "" {
		summary = strings.TrimSuffix(why+" · "+summary, " · ")
	}
	setText(s.stateText, summary)
	if st.paused {
		s.pause.SetText("Resume")
		s.pause.SetIcon(theme.MediaPlayIcon())
		s.pause.Importance = widget.WarningImportance
		s.pausedText.SetText("Every tool call is denied until you resume, and the agent is told Gatehouse is paused." + pausedSince(st))
		s.paused.Show()
	} else {
		s.pause.SetText("Pause all calls")
		s.pause.SetIcon(theme.MediaPauseIcon())
		s.pause.Importance = widget.MediumImportance
		s.paused.Hide()
	}
	s.pause.Refresh()
	s.banners.Refresh()
}

// toneColors are the sidebar's dot colours.
var toneColors = map[tone]color.Color{
	toneIdle: color.NRGBA{R: 0x9C, G: 0xA3, B: 0xAF, A: 0xFF},
	toneGood: color.NRGBA{R: 0x16, G: 0xA3, B: 0x4A, A: 0xFF},
	toneWarn: color.NRGBA{R: 0xD9, G: 0x77, B: 0x06, A: 0xFF},
	toneBad:  color.NRGBA{R: 0xDC, G: 0x26, B: 0x26, A: 0xFF},
}

// pausedSince says since when Gatehouse is paused.
func pausedSince(st status) string {
	if st.pausedAt.IsZero() {
		return ""
	}
	return " Paused since " + st.pausedAt.Local().Format("15:04, Jan 2") + "."
}

// showDatabaseGone says that the database file was removed or replaced.
func (s *shell) showDatabaseGone(gone bool) {
	if gone == s.dbGone.Visible() {
		return
	}
	if gone {
		s.dbGone.Show()
	} else {
		s.dbGone.Hide()
	}
	s.banners.Refresh()
}

// showWaiting says how many approval requests wait, if any.
func (s *shell) showWaiting(n int) {
	switch n {
	case 0:
		s.waiting.Hide()
	case 1:
		s.waitingText.SetText("A tool call is waiting for your approval")
		s.waiting.Show()
	default:
		s.waitingText.SetText(fmt.Sprintf("%d tool calls are waiting for your approval", n))
		s.waiting.Show()
	}
	s.banners.Refresh()
}

// showApprover says why Gatehouse cannot answer approval requests, or
// nothing when err is nil.
func (s *shell) showApprover(err error) {
	var running *approval.RunningError
	switch {
	case err == nil, errors.As(err, &running) && running.Self():
		// None, or the approver is this app itself: it answers.
		s.approver.Hide()
	case errors.Is(err, approval.ErrApproverRunning):
		setText(s.apTitle, "Approval requests go to another approver")
		s.apText.SetText(sentence(err) + " To answer them here, stop it (it may be gatehouse approvals in a terminal), then start Gatehouse again.")
		s.approver.Show()
	default:
		setText(s.apTitle, "Gatehouse cannot answer approval requests")
		s.apText.SetText(sentence(err) + " Until an approver runs, tool calls that need approval are denied. Fix this, then start Gatehouse again.")
		s.approver.Show()
	}
	s.banners.Refresh()
}

// A navItem is one entry of the sidebar: an icon and a label, highlighted
// when its view is on screen or the pointer is over it.
type navItem struct {
	widget.BaseWidget
	label    string
	icon     fyne.Resource
	tapped   func()
	selected bool
	hovered  bool
}

var (
	_ fyne.Tappable      = (*navItem)(nil)
	_ desktop.Hoverable  = (*navItem)(nil)
	_ desktop.Cursorable = (*navItem)(nil)
)

func newNavItem(label string, icon fyne.Resource, tapped func()) *navItem {
	n := &navItem{label: label, icon: icon, tapped: tapped}
	n.ExtendBaseWidget(n)
	return n
}

func (n *navItem) setSelected(on bool) {
	if n.selected != on {
		n.selected = on
		n.Refresh()
	}
}

func (n *navItem) Tapped(*fyne.PointEvent)        { n.tapped() }
func (n *navItem) MouseIn(*desktop.MouseEvent)    { n.hovered = true; n.Refresh() }
func (n *navItem) MouseMoved(*desktop.MouseEvent) {}
func (n *navItem) MouseOut()                      { n.hovered = false; n.Refresh() }
func (n *navItem) Cursor() desktop.Cursor         { return desktop.PointerCursor }
func (n *navItem) CreateRenderer() fyne.WidgetRenderer {
	r := &navItemRenderer{n: n, bg: canvas.NewRectangle(color.Transparent), label: canvas.NewText(n.label, color.Black)}
	r.icon = widget.NewIcon(n.icon)
	r.Refresh()
	return r
}

type navItemRenderer struct {
	n     *navItem
	bg    *canvas.Rectangle
	icon  *widget.Icon
	label *canvas.Text
}

func (r *navItemRenderer) Layout(size fyne.Size) {
	th := r.n.Theme()
	pad := th.Size(theme.SizeNameInnerPadding)
	r.bg.Resize(size)
	is := th.Size(theme.SizeNameInlineIcon)
	r.icon.Resize(fyne.NewSquareSize(is))
	r.icon.Move(fyne.NewPos(pad, (size.Height-is)/2))
	ls := r.label.MinSize()
	r.label.Move(fyne.NewPos(pad*2+is, (size.Height-ls.Height)/2))
	r.label.Resize(ls)
}

func (r *navItemRenderer) MinSize() fyne.Size {
	th := r.n.Theme()
	pad := th.Size(theme.SizeNameInnerPadding)
	ls := r.label.MinSize()
	return fyne.NewSize(pad*3+th.Size(theme.SizeNameInlineIcon)+ls.Width, ls.Height+pad*1.5)
}

func (r *navItemRenderer) Refresh() {
	th := r.n.Theme()
	v := fyne.CurrentApp().Settings().ThemeVariant()
	r.label.TextSize = th.Size(theme.SizeNameText)
	r.label.Color = th.Color(theme.ColorNameForeground, v)
	r.label.TextStyle.Bold = r.n.selected
	r.bg.CornerRadius = th.Size(theme.SizeNameInputRadius) * 1.5
	switch {
	case r.n.selected:
		r.bg.FillColor = withAlpha(toNRGBA(th.Color(theme.ColorNamePrimary, v)), 0x2E)
		r.icon.SetResource(theme.NewPrimaryThemedResource(r.n.icon))
		r.label.Color = th.Color(theme.ColorNamePrimary, v)
	case r.n.hovered:
		r.bg.FillColor = th.Color(theme.ColorNameHover, v)
		r.icon.SetResource(r.n.icon)
	default:
		r.bg.FillColor = color.Transparent
		r.icon.SetResource(r.n.icon)
	}
	r.bg.Refresh()
	r.label.Refresh()
}

func (r *navItemRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.bg, r.icon, r.label}
}

func (r *navItemRenderer) Destroy() {}

// toNRGBA converts a colour to non-premultiplied RGBA.
func toNRGBA(c color.Color) color.NRGBA {
	return color.NRGBAModel.Convert(c).(color.NRGBA)
}

// pageHeader is the top of a view: its title, a line under it, and its
// actions on the right.
func pageHeader(title, subtitle string, actions ...fyne.CanvasObject) fyne.CanvasObject {
	t := text(title, widget.RichTextStyle{SizeName: theme.SizeNameHeadingText, TextStyle: fyne.TextStyle{Bold: true}})
	sub := text(subtitle, secondary)
	sub.Wrapping = fyne.TextWrapWord
	right := container.NewHBox(actions...)
	pad := theme.Padding()
	return container.New(layout.NewCustomPaddedLayout(pad*2, pad, pad*3, pad*3),
		container.NewBorder(nil, nil, nil, container.NewVBox(layout.NewSpacer(), right, layout.NewSpacer()),
			compact(t, pullUp(sub))))
}

// pageBody pads a view's body like its header.
func pageBody(o fyne.CanvasObject) fyne.CanvasObject {
	pad := theme.Padding()
	return container.New(layout.NewCustomPaddedLayout(pad, pad*2, pad*3, pad*3), o)
}
