package app

import (
	"hash/fnv"
	"image/color"
	"time"
	"unicode"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// Text styles used across the window.
var (
	secondary = widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Inline: true}
	caption   = widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText, Inline: true}
	mono      = widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, Inline: true}
)

// text returns a one-segment rich text, which unlike a label can take any
// theme colour and size.
func text(s string, style widget.RichTextStyle) *widget.RichText {
	return widget.NewRichText(&widget.TextSegment{Text: s, Style: style})
}

// setText replaces the text of a rich text made by [text].
func setText(t *widget.RichText, s string) {
	seg := t.Segments[0].(*widget.TextSegment)
	if seg.Text == s {
		return
	}
	seg.Text = s
	t.Refresh()
}

// compact stacks objects vertically without padding between them, for lines
// that belong together (a title and its tagline).
func compact(objects ...fyne.CanvasObject) *fyne.Container {
	return container.New(layout.NewCustomPaddedVBoxLayout(0), objects...)
}

// pullUp draws o closer to what is above it, cancelling most of the padding
// that rich text keeps above its first line.
func pullUp(o fyne.CanvasObject) *fyne.Container {
	return container.New(layout.NewCustomPaddedLayout(-theme.InnerPadding()/2-2, 0, 0, 0), o)
}

// A panel is content on a rounded background of a theme colour, redrawn when
// the theme changes.
type panel struct {
	widget.BaseWidget
	color   fyne.ThemeColorName
	alpha   uint8 // 0 keeps the theme colour's own alpha
	content fyne.CanvasObject
}

func newPanel(c fyne.ThemeColorName, alpha uint8, content fyne.CanvasObject) *panel {
	p := &panel{color: c, alpha: alpha, content: content}
	p.ExtendBaseWidget(p)
	return p
}

func (p *panel) CreateRenderer() fyne.WidgetRenderer {
	r := &panelRenderer{p: p, bg: canvas.NewRectangle(color.Transparent)}
	r.inner = container.NewPadded(p.content)
	r.Refresh()
	return r
}

type panelRenderer struct {
	p     *panel
	bg    *canvas.Rectangle
	inner *fyne.Container
}

func (r *panelRenderer) Layout(size fyne.Size) {
	r.bg.Resize(size)
	r.inner.Resize(size)
}

func (r *panelRenderer) MinSize() fyne.Size           { return r.inner.MinSize() }
func (r *panelRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.bg, r.inner} }
func (r *panelRenderer) Destroy()                     {}
func (r *panelRenderer) Refresh() {
	th := r.p.Theme()
	v := fyne.CurrentApp().Settings().ThemeVariant()
	c := th.Color(r.p.color, v)
	if r.p.alpha != 0 {
		cr, cg, cb, _ := c.RGBA()
		c = color.NRGBA{R: uint8(cr >> 8), G: uint8(cg >> 8), B: uint8(cb >> 8), A: r.p.alpha}
	}
	r.bg.FillColor = c
	r.bg.CornerRadius = th.Size(theme.SizeNameInputRadius) * 1.5
	r.bg.Refresh()
	r.inner.Refresh()
}

// A serverRow is one server in the list: an avatar with its initial (and
// the result of its last connection test), its name and transport, whether
// it is in quarantine, and the command it runs or the URL it is reached at.
type serverRow struct {
	widget.BaseWidget
	dot       *canvas.Circle // the last connection test: green, red, or none
	avatar    *canvas.Circle
	initial   *canvas.Text
	name      *widget.RichText
	transport *widget.RichText
	command   *widget.RichText
	held      fyne.CanvasObject // shown when tools are held for review
	heldText  *widget.RichText
	quar      fyne.CanvasObject // shown while the server is in quarantine
}

func newServerRow() *serverRow {
	r := &serverRow{
		dot:       canvas.NewCircle(color.Transparent),
		avatar:    canvas.NewCircle(avatarColors[0]),
		initial:   canvas.NewText("", color.White),
		name:      text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}),
		transport: text("", widget.RichTextStyle{ColorName: theme.ColorNamePrimary, SizeName: theme.SizeNameCaptionText, Inline: true}),
		command:   text("", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, TextStyle: fyne.TextStyle{Monospace: true}, Inline: true}),
	}
	r.initial.TextStyle.Bold = true
	r.initial.TextSize = 16
	r.initial.Alignment = fyne.TextAlignCenter
	r.command.Truncation = fyne.TextTruncateEllipsis
	r.heldText = text("", widget.RichTextStyle{ColorName: theme.ColorNameWarning, SizeName: theme.SizeNameCaptionText, TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	r.held = newPanel(theme.ColorNameWarning, 0x30, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0), r.heldText))
	r.held.Hide()
	r.quar = newPanel(theme.ColorNameWarning, 0x30, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0),
		text("quarantine", widget.RichTextStyle{ColorName: theme.ColorNameWarning, SizeName: theme.SizeNameCaptionText, TextStyle: fyne.TextStyle{Bold: true}, Inline: true})))
	r.quar.Hide()
	r.ExtendBaseWidget(r)
	return r
}

func (r *serverRow) CreateRenderer() fyne.WidgetRenderer {
	r.dot.StrokeWidth = 2
	r.dot.StrokeColor = color.White
	dot := container.NewWithoutLayout(r.dot)
	r.dot.Resize(fyne.NewSize(12, 12))
	r.dot.Move(fyne.NewPos(26, 25))
	avatar := container.NewGridWrap(fyne.NewSize(36, 36), container.NewStack(r.avatar, container.NewCenter(r.initial), dot))
	chip := newPanel(theme.ColorNamePrimary, 0x26, container.New(layout.NewCustomPaddedLayout(-6, -6, 0, 0), r.transport))
	top := container.NewHBox(r.name, container.NewCenter(chip), container.NewCenter(r.held), container.NewCenter(r.quar))
	return widget.NewSimpleRenderer(container.New(layout.NewCustomPaddedLayout(2, 2, 4, 4),
		container.NewBorder(nil, nil,
			container.NewCenter(avatar),
			nil,
			compact(top, r.command))))
}

// set shows s in the row, with the result of its last connection test and
// how many of its tools are held for review.
func (r *serverRow) set(s store.Server, h health, held int) {
	if held > 0 {
		setText(r.heldText, heldWords(held))
		r.held.Show()
	} else {
		r.held.Hide()
	}
	if s.Quarantined {
		r.quar.Show()
	} else {
		r.quar.Hide()
	}
	switch {
	case h.at.IsZero():
		r.dot.FillColor, r.dot.StrokeColor = color.Transparent, color.Transparent
	case h.err != nil:
		r.dot.FillColor, r.dot.StrokeColor = color.NRGBA{R: 0xDC, G: 0x26, B: 0x26, A: 0xFF}, color.White
	default:
		r.dot.FillColor, r.dot.StrokeColor = color.NRGBA{R: 0x16, G: 0xA3, B: 0x4A, A: 0xFF}, color.White
	}
	r.dot.Refresh()
	initial, _ := utf8.DecodeRuneInString(s.Name)
	r.initial.Text = string(unicode.ToUpper(initial))
	r.avatar.FillColor = avatarColor(s.Name)
	r.initial.Refresh()
	r.avatar.Refresh()
	setText(r.name, s.Name)
	setText(r.transport, s.Transport)
	if s.Remote() {
		setText(r.command, s.URL)
	} else {
		setText(r.command, commandLine(s.Command, s.Args))
	}
}

// avatarColors are the avatar backgrounds, chosen to carry white text in
// both light and dark themes.
var avatarColors = []color.NRGBA{
	{R: 0x4F, G: 0x46, B: 0xE5, A: 0xFF}, // indigo
	{R: 0x08, G: 0x91, B: 0xB2, A: 0xFF}, // cyan
	{R: 0x05, G: 0x96, B: 0x69, A: 0xFF}, // emerald
	{R: 0xD9, G: 0x77, B: 0x06, A: 0xFF}, // amber
	{R: 0xDB, G: 0x27, B: 0x77, A: 0xFF}, // pink
	{R: 0x7C, G: 0x3A, B: 0xED, A: 0xFF}, // violet
	{R: 0x25, G: 0x63, B: 0xEB, A: 0xFF}, // blue
	{R: 0xDC, G: 0x26, B: 0x26, A: 0xFF}, // red
}

// avatarColor picks a server's avatar colour from its name, so that a server
// keeps its colour from one refresh to the next.
func avatarColor(name string) color.NRGBA {
	h := fnv.New32a()
	h.Write([]byte(name))
	return avatarColors[h.Sum32()%uint32(len(avatarColors))]
}

// addedOn says when a server was added, in the local time zone.
func addedOn(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return "Added " + t.Local().Format("Jan 2, 2006")
}

// commandLine shows a command and its arguments as one line a user could
// paste into a POSIX shell ([shellwords.Join]).
func commandLine(command string, args []string) string {
	return shellwords.Join(append([]string{command}, args...))
}
