package app

import (
	"hash/fnv"
	"image/color"
	"strings"
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
	dot      *canvas.Circle // the last connection test: green, red, or none
	avatar   *canvas.Circle
	initial  *canvas.Text
	name     *widget.RichText
	command  *elidedText
	held     fyne.CanvasObject // shown when tools are held for review
	heldText *widget.RichText
	quar     fyne.CanvasObject // shown while the server is in quarantine
}

func newServerRow() *serverRow {
	r := &serverRow{
		dot:     canvas.NewCircle(color.Transparent),
		avatar:  canvas.NewCircle(avatarColors[0]),
		initial: canvas.NewText("", color.White),
		name:    text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}),
		command: newElidedText(fyne.TextStyle{Monospace: true}, theme.SizeNameCaptionText, theme.ColorNamePlaceHolder),
	}
	r.name.Truncation = fyne.TextTruncateEllipsis
	r.initial.TextStyle.Bold = true
	r.initial.TextSize = 16
	r.initial.Alignment = fyne.TextAlignCenter
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
	top := container.NewBorder(nil, nil, nil, container.NewHBox(container.NewCenter(r.held), container.NewCenter(r.quar)), r.name)
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
	if s.Remote() {
		r.command.shorten = elideMiddle
		r.command.SetText(s.URL)
	} else {
		r.command.shorten = elideCommand(s.Command, s.Args)
		r.command.SetText(commandLine(s.Command, s.Args))
	}
	r.Refresh() // lays the row out again: its parts' widths changed
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

// An elidedText is one line of text that, when its width is too small for
// it, shows a shorter form of it: by default the start and the end with
// "…" between, so that what tells two lines apart (a command's package, a
// path's last folders) stays on screen. Where it is shown shorter, the
// whole text is one click away (the server's details, a copy button).
type elidedText struct {
	widget.BaseWidget
	full    string
	style   fyne.TextStyle
	size    fyne.ThemeSizeName
	color   fyne.ThemeColorName
	shorten func(s string, n int) string // s in at most n characters
}

func newElidedText(style fyne.TextStyle, size fyne.ThemeSizeName, color fyne.ThemeColorName) *elidedText {
	t := &elidedText{style: style, size: size, color: color, shorten: elideMiddle}
	t.ExtendBaseWidget(t)
	return t
}

// SetText shows s.
func (t *elidedText) SetText(s string) {
	if t.full != s {
		t.full = s
		t.Refresh()
	}
}

func (t *elidedText) CreateRenderer() fyne.WidgetRenderer {
	r := &elidedRenderer{t: t, text: canvas.NewText("", color.Black)}
	r.Refresh()
	return r
}

type elidedRenderer struct {
	t    *elidedText
	text *canvas.Text
	size fyne.Size
}

func (r *elidedRenderer) textSize() float32 { return r.t.Theme().Size(r.t.size) }

// fit returns the longest form of the text that fits width w.
func (r *elidedRenderer) fit(w float32) string {
	full := r.t.full
	n := utf8.RuneCountInString(full)
	for s := full; ; n-- {
		if fyne.MeasureText(s, r.textSize(), r.t.style).Width <= w || n <= 1 {
			return s
		}
		s = r.t.shorten(full, n-1)
	}
}

func (r *elidedRenderer) Layout(size fyne.Size) {
	r.size = size
	r.text.Text = r.fit(size.Width - 2*theme.InnerPadding())
	r.text.Move(fyne.NewPos(theme.InnerPadding(), 0))
	r.text.Resize(fyne.NewSize(size.Width-2*theme.InnerPadding(), size.Height))
	r.text.Refresh()
}

// MinSize is a line's height, and the width of a few characters: the text
// takes what width its container gives it.
func (r *elidedRenderer) MinSize() fyne.Size {
	m := fyne.MeasureText("MMMMMM…", r.textSize(), r.t.style)
	return fyne.NewSize(m.Width+2*theme.InnerPadding(), m.Height)
}

func (r *elidedRenderer) Refresh() {
	th := r.t.Theme()
	r.text.TextSize = r.textSize()
	r.text.TextStyle = r.t.style
	r.text.Color = th.Color(r.t.color, fyne.CurrentApp().Settings().ThemeVariant())
	if r.size.Width > 0 {
		r.Layout(r.size)
	}
	r.text.Refresh()
}

func (r *elidedRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.text} }
func (r *elidedRenderer) Destroy()                     {}

// elideMiddle writes s in at most n characters: its start and its end,
// with "…" between.
func elideMiddle(s string, n int) string {
	rs := []rune(s)
	if len(rs) <= n {
		return s
	}
	if n <= 1 {
		return "…"
	}
	head := (n - 1) / 2
	tail := n - 1 - head
	return string(rs[:head]) + "…" + string(rs[len(rs)-tail:])
}

// elideCommand writes a command line (a command and its arguments, joined
// by [commandLine]) in at most n characters, keeping what names what it
// runs: the command, then the package (the last part of its first
// argument that is not a flag: "server-filesystem" of
// "@modelcontextprotocol/server-filesystem"), then as much of the rest as
// fits, elided in the middle.
func elideCommand(command string, args []string) func(string, int) string {
	return func(full string, n int) string {
		if utf8.RuneCountInString(full) <= n {
			return full
		}
		pkg := -1
		for i, a := range args {
			if !strings.HasPrefix(a, "-") {
				pkg = i
				break
			}
		}
		if pkg < 0 {
			return elideMiddle(full, n)
		}
		name := args[pkg]
		if i := strings.LastIndex(strings.TrimSuffix(name, "/"), "/"); i >= 0 && i < len(name)-1 {
			name = name[i+1:]
		}
		head := shellwords.Join([]string{command}) + " … " + shellwords.Join([]string{name})
		rest := shellwords.Join(args[pkg+1:])
		if rest == "" {
			if utf8.RuneCountInString(head) <= n {
				return head
			}
			return shortName(name, n)
		}
		short := head + " " + rest
		if utf8.RuneCountInString(short) <= n {
			return short
		}
		if room := n - utf8.RuneCountInString(head) - 1; room >= 4 {
			return head + " " + elideMiddle(rest, room)
		}
		return shortName(name, n)
	}
}

// shortName writes a command's package name in at most n characters,
// after "… " that says more came before it.
func shortName(name string, n int) string {
	if utf8.RuneCountInString(name)+2 <= n {
		return "… " + name
	}
	return elideMiddle(name, n)
}
