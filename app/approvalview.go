package app

import (
	"fmt"
	"image/color"
	"strings"
	"unicode/utf8"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// approvalView is the content of the approval window: the request on
// screen with its answers, or, when none waits, a word saying so.
type approvalView struct {
	content *touchArea

	request fyne.CanvasObject // what shows a request; hidden when none waits
	empty   fyne.CanvasObject // shown when none waits

	// Header.
	asks     *widget.RichText // "claude-code asks to run"
	tool     *widget.Label
	where    *widget.RichText // "on github · rule ask-critical"
	risk     *badge
	queue    fyne.CanvasObject // the position in the queue, hidden for one request
	position *widget.RichText
	prev     *widget.Button
	next     *widget.Button

	// Banners under the header.
	note        fyne.CanvasObject // what happened to the request before
	noteText    *widget.Label
	changed     fyne.CanvasObject // the tool's definition changed
	changedText *widget.Label

	body *container.Scroll // arguments, change, description

	countdown *widget.RichText
	timer     *widget.Icon
	keys      *widget.RichText // what Return and Escape do

	deny *widget.Button // the safe answer
	once *widget.Button // Allow once: the primary answer unless the request is one to be careful with

	answers     []*widget.Button // each answer's button
	alwaysAllow *widget.Button   // "Always allow…", among answers (without the dots for a plan: no choice follows)
	alwaysDeny  *widget.Button   // "Always deny…", likewise
	minutes     *widget.Button   // "Allow for 15 minutes", among answers
	minutesMenu *widget.Button   // chooses the minutes

	emptyNote *widget.Label
	close     *widget.Button

	scopes *widget.RichText // what "this session" and "Always" mean
	story  callStory        // the request on screen, read
}

// The labels of the standing answers, which ask what they cover first.
const (
	labelAlwaysAllow = "Always allow…"
	labelAlwaysDeny  = "Always deny…"
)

// labelMinutes is the label of the "minutes" answer.
func labelMinutes(n int) string { return fmt.Sprintf("Allow for %d minutes", n) }

// newApprovalView builds the window's content. Its callbacks go to a.
func newApprovalView(a *approvals) *approvalView {
	v := &approvalView{}
	pad := theme.Padding()

	// Header: how risky, who asks to run what, where; the queue.
	v.asks = widget.NewRichText(
		&widget.TextSegment{Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}},
		&widget.TextSegment{Text: " asks to run the tool", Style: secondary})
	v.asks.Truncation = fyne.TextTruncateEllipsis
	v.tool = widget.NewLabelWithStyle("", fyne.TextAlignLeading, fyne.TextStyle{Bold: true})
	v.tool.SizeName = theme.SizeNameHeadingText
	v.tool.Wrapping = fyne.TextWrapBreak
	v.where = text("", secondary)
	v.where.Wrapping = fyne.TextWrapBreak
	v.risk = newBadge()

	v.position = text("", secondary)
	v.prev = widget.NewButtonWithIcon("", theme.NavigateBackIcon(), a.previous)
	v.next = widget.NewButtonWithIcon("", theme.NavigateNextIcon(), a.following)
	v.prev.Importance, v.next.Importance = widget.LowImportance, widget.LowImportance
	v.queue = container.NewHBox(container.NewCenter(v.position), v.prev, v.next)

	icon := canvas.NewImageFromResource(iconResource)
	icon.FillMode = canvas.ImageFillContain
	icon.SetMinSize(fyne.NewSize(44, 44))
	title := compact(
		container.NewBorder(nil, nil, container.NewCenter(v.risk), v.queue, v.asks),
		pullUp(v.tool),
		pullUp(v.where),
	)
	header := container.NewBorder(nil, nil, container.NewVBox(container.NewPadded(icon)), nil, title)

	v.noteText = widget.NewLabel("")
	v.noteText.Wrapping = fyne.TextWrapWord
	v.note = newPanel(theme.ColorNamePrimary, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewPrimaryThemedResource(theme.InfoIcon()))), nil, v.noteText))
	v.note.Hide()

	v.changedText = widget.NewLabel("")
	v.changedText.Wrapping = fyne.TextWrapWord
	v.changed = newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil, v.changedText))
	v.changed.Hide()

	v.body = container.NewVScroll(layout.NewSpacer())
	v.body.OnScrolled = func(fyne.Position) { a.touch() }

	// Footer: the countdown and the answers.
	v.timer = widget.NewIcon(theme.NewColoredResource(theme.HistoryIcon(), theme.ColorNamePlaceHolder))
	v.countdown = text("", secondary)
	v.countdown.Wrapping = fyne.TextWrapWord
	v.keys = text("", caption)
	v.scopes = text("", caption)
	v.scopes.Wrapping = fyne.TextWrapWord

	answer := func(label string, imp widget.Importance, scope approval.Scope) *widget.Button {
		b := widget.NewButton(label, func() { a.answer(scope) })
		b.Importance = imp
		v.answers = append(v.answers, b)
		return b
	}
	v.deny = answer("Deny", widget.MediumImportance, approval.ScopeDeny)
	alwaysDeny := widget.NewButton(labelAlwaysDeny, func() { a.askReach(false) })
	v.alwaysDeny = alwaysDeny
	alwaysDeny.Importance = widget.LowImportance
	v.answers = append(v.answers, alwaysDeny)
	v.once = answer("Allow once", widget.HighImportance, approval.ScopeOnce)
	session := answer("Allow for this session", widget.LowImportance, approval.ScopeSession)
	v.minutes = answer(labelMinutes(defaultMinutes), widget.LowImportance, approval.ScopeMinutes)
	always := widget.NewButton(labelAlwaysAllow, func() { a.askReach(true) })
	v.alwaysAllow = always
	always.Importance = widget.LowImportance
	v.answers = append(v.answers, always)
	v.minutesMenu = widget.NewButtonWithIcon("", theme.MenuDropDownIcon(), func() { a.chooseMinutes(v.minutesMenu) })
	v.minutesMenu.Importance = widget.LowImportance

	// The footer keeps its size whatever it says: the countdown has room
	// for two lines and the minutes' button for its longest label, so no
	// button moves under the pointer.
	minutes := container.New(layout.NewCustomPaddedHBoxLayout(0),
		fixedWidth(widget.NewButton(labelMinutes(60), nil).MinSize().Width, v.minutes), v.minutesMenu)
	more := container.NewHBox(alwaysDeny, layout.NewSpacer(), session, minutes, always)
	twoLines := text("1\n2", secondary).MinSize().Height
	wait := container.NewBorder(nil, nil, container.NewVBox(v.timer), nil, fixedHeight(twoLines, v.countdown))
	main := container.NewBorder(nil, nil, nil, container.NewHBox(v.deny, v.once), container.NewVBox(layout.NewSpacer(), v.keys, layout.NewSpacer()))
	footer := container.NewStack(newBand(theme.ColorNameHeaderBackground), container.NewVBox(widget.NewSeparator(),
		container.New(layout.NewCustomPaddedLayout(pad, pad*2, pad*3, pad*3), container.NewVBox(wait, more, pullUp(fixedHeight(text("1\n2", caption).MinSize().Height, v.scopes)), main))))

	v.request = container.NewBorder(
		container.NewVBox(
			container.New(layout.NewCustomPaddedLayout(pad*2, pad, pad*3, pad*3), header),
			container.New(layout.NewCustomPaddedLayout(0, 0, pad*3, pad*3), container.NewVBox(v.note, v.changed)),
			widget.NewSeparator(),
		),
		footer, nil, nil,
		v.body,
	)

	// When none waits.
	emptyIcon := canvas.NewImageFromResource(iconResource)
	emptyIcon.FillMode = canvas.ImageFillContain
	emptyIcon.SetMinSize(fyne.NewSize(64, 64))
	v.emptyNote = widget.NewLabel("")
	v.emptyNote.Wrapping = fyne.TextWrapWord
	v.emptyNote.Alignment = fyne.TextAlignCenter
	v.close = widget.NewButton("Close", a.hide)
	v.empty = container.NewCenter(container.NewVBox(
		container.NewCenter(emptyIcon),
		widget.NewLabelWithStyle("No tool calls are waiting for approval", fyne.TextAlignCenter, fyne.TextStyle{Bold: true}),
		container.NewGridWrap(fyne.NewSize(420, 0), v.emptyNote),
		container.NewCenter(v.close),
	))
	v.empty.Hide()

	v.content = newTouchArea(container.NewStack(v.request, v.empty), a.touch)
	return v
}

// showRequest puts r on screen, as number pos (from 1) of n waiting.
func (v *approvalView) showRequest(r approval.Request, pos, n int) {
	story := readCall(r, statFile)
	v.story = story
	v.asks.Segments[0].(*widget.TextSegment).Text = clientName(r.Client)
	v.asks.Segments[1].(*widget.TextSegment).Text = " asks to run the tool"
	v.tool.SetText(plainLine(r.Tool))
	setText(v.where, "on the server "+plainLine(r.Server))
	var stories []callStory
	if p := r.Plan; p != nil {
		stories = planStories(r)
		v.asks.Segments[1].(*widget.TextSegment).Text = " asks to run the program"
		v.tool.SetText(plainLine(p.Program))
		setText(v.where, fmt.Sprintf("%s, approved as a whole · bound to this exact program", plural(len(p.Steps), "step", "steps")))
	}
	v.asks.Refresh()
	v.risk.set(riskLook(r.Risk))
	v.setPosition(pos, n)
	if r.Change != nil {
		msg := "The tool's definition changed since you accepted it. Allowing this call accepts the new one."
		if found := newlySensitive(r.Change.Old, r.Change.New); len(found) > 0 {
			msg += "\n\nIt now mentions " + sensitiveList(found) + ", which it did not before. " +
				"A tool that changes to reach for secrets is a known attack: deny unless you expected this."
		}
		v.changedText.SetText(msg)
		v.changed.Show()
	} else {
		v.changed.Hide()
	}
	// The safe answer is the primary one, the one Return gives, for a
	// request to be careful with.
	keys := "Return: Allow once  ·  Esc: Deny  ·  ←/→: other requests"
	if carefulWith(r) {
		v.deny.Importance, v.once.Importance = widget.HighImportance, widget.MediumImportance
		keys = "Return: Deny  ·  Esc: Deny  ·  ←/→: other requests"
	} else {
		v.deny.Importance, v.once.Importance = widget.MediumImportance, widget.HighImportance
	}
	if n < 2 {
		keys = strings.TrimSuffix(keys, "  ·  ←/→: other requests")
	}
	setText(v.keys, keys)
	setText(v.scopes, fmt.Sprintf("“This session” lasts until %s closes its connection to %s. “Always” answers write a rule: you choose what it covers first.",
		clientName(r.Client), plainLine(r.Server)))
	v.deny.Refresh()
	v.once.Refresh()
	v.alwaysAllow.SetText(labelAlwaysAllow)
	v.alwaysDeny.SetText(labelAlwaysDeny)
	if r.Plan != nil {
		v.alwaysAllow.SetText(strings.TrimSuffix(labelAlwaysAllow, "…"))
		v.alwaysDeny.SetText(strings.TrimSuffix(labelAlwaysDeny, "…"))
		setText(v.scopes, fmt.Sprintf("“Allow once” and “This session” approve this run. “Minutes” and “Always” approve this same program for %s again while its programs server runs; they write no rule.",
			clientName(r.Client)))
		v.body.Content = planBody(r, stories)
	} else {
		v.body.Content = requestBody(r, story)
	}
	v.body.Offset = fyne.Position{}
	v.body.Refresh()
	v.empty.Hide()
	v.request.Show()
	v.content.Refresh()
}

// setPosition shows the place of the request on screen in the queue.
func (v *approvalView) setPosition(pos, n int) {
	if n < 2 {
		v.queue.Hide()
		return
	}
	setText(v.position, fmt.Sprintf("%d of %d waiting", pos, n))
	if pos > 1 {
		v.prev.Enable()
	} else {
		v.prev.Disable()
	}
	if pos < n {
		v.next.Enable()
	} else {
		v.next.Disable()
	}
	v.queue.Show()
}

// showEmpty says that no request waits, and note what became of the last.
func (v *approvalView) showEmpty(note string) {
	v.emptyNote.SetText(note)
	if note == "" {
		v.emptyNote.Hide()
	} else {
		v.emptyNote.Show()
	}
	v.request.Hide()
	v.empty.Show()
	v.content.Refresh()
}

// setNote shows a note above the request, or none for "".
func (v *approvalView) setNote(s string) {
	v.noteText.SetText(s)
	if s == "" {
		v.note.Hide()
	} else {
		v.note.Show()
	}
}

// carefulWith reports whether a request is one whose safe answer, Deny,
// comes first: a changed tool's, a critical call's, or a file call that
// touches where secrets are kept or writes what looks like one (or a plan
// with such a step).
func carefulWith(r approval.Request) bool {
	if r.Plan != nil && len(planWarnings(r, planStories(r))) > 0 {
		return true
	}
	return r.Change != nil || strings.EqualFold(r.Risk, "critical") || len(readCall(r, nil).warnings) > 0
}

// setArmed enables or disables the answers.
func (v *approvalView) setArmed(armed bool) {
	for _, b := range append(v.answers, v.minutesMenu) {
		if armed {
			b.Enable()
		} else {
			b.Disable()
		}
	}
}

// requestBody shows what a request asks: what will happen, in words and
// in a form for its kind (a file's content, an edit's diff, other tools'
// arguments as a tree), why Gatehouse asks, the change of the tool's
// definition if that is why, the raw arguments one click away, and the
// tool's description.
func requestBody(r approval.Request, story callStory) fyne.CanvasObject {
	pad := theme.Padding()
	var sections []fyne.CanvasObject

	// What will happen, and why Gatehouse asks.
	what := []fyne.CanvasObject{heading("What will happen"), textBlock(story.what(r), widget.RichTextStyle{})}
	if len(story.warnings) > 0 {
		warn := textBlock(strings.Join(story.warnings, "\n"), widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}})
		what = append(what, newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
			container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil, warn)))
	}
	why := strings.TrimSpace(ruleWords(r.Rule, r.Risk) + " " + story.riskWhy())
	if why != "" {
		what = append(what, textBlock(why, secondaryBlock))
	}
	sections = append(sections, container.NewVBox(what...))

	if c := r.Change; c != nil {
		lines := diffLines(strings.Split(prettyJSON(c.Old, c.Truncated), "\n"), strings.Split(prettyJSON(c.New, c.Truncated), "\n"), 2)
		box := []fyne.CanvasObject{
			container.NewBorder(nil, nil, heading("What changed in the tool's definition"),
				container.NewCenter(note("−  as you accepted it     +  as the server lists it now"))),
			newPanel(theme.ColorNameInputBackground, 0, diffView(lines)),
		}
		if c.Truncated {
			box = append(box, note("(truncated: a definition is too large to show whole; the start is shown)"))
		}
		sections = append(sections, container.NewVBox(box...))
	}

	codeStyle := widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}
	if d := callDetail(r, story); d != nil {
		sections = append(sections, d)
	}

	// The raw arguments, one click away (shown at once when they could
	// not be read any other way).
	argsText := prettyJSON(r.Args, r.ArgsTruncated)
	copyArgs := widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() {
		fyne.CurrentApp().Clipboard().SetContent(argsText)
	})
	copyArgs.Importance = widget.LowImportance
	rawBox := []fyne.CanvasObject{newPanel(theme.ColorNameInputBackground, 0, textBlock(argsText, codeStyle))}
	if r.ArgsTruncated {
		rawBox = append(rawBox, note(fmt.Sprintf("(truncated: %s bytes in all; the start is shown)", thousands(r.ArgsSize))))
	}
	raw := container.NewVBox(rawBox...)
	var toggle *widget.Button
	toggle = widget.NewButtonWithIcon("Show the raw arguments (JSON)", theme.MenuExpandIcon(), func() {
		if raw.Visible() {
			raw.Hide()
			toggle.SetText("Show the raw arguments (JSON)")
			toggle.SetIcon(theme.MenuExpandIcon())
		} else {
			raw.Show()
			toggle.SetText("Hide the raw arguments (JSON)")
			toggle.SetIcon(theme.MenuDropDownIcon())
		}
	})
	toggle.Importance = widget.LowImportance
	toggle.Alignment = widget.ButtonAlignLeading
	if story.kind == otherCall && r.ArgsTruncated {
		toggle.SetText("Hide the raw arguments (JSON)")
	} else {
		raw.Hide()
	}
	sections = append(sections, container.NewVBox(container.NewBorder(nil, nil, toggle, copyArgs), raw))

	desc := plain(strings.TrimSpace(r.Description))
	var descText fyne.CanvasObject
	if desc == "" {
		descText = text("The server gives no description.", secondary)
	} else {
		descText = textBlock(desc, widget.RichTextStyle{})
	}
	sections = append(sections, container.NewVBox(
		widget.NewRichText(
			&widget.TextSegment{Text: "Tool description", Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}},
			&widget.TextSegment{Text: "  as the server gives it", Style: secondary}),
		descText,
	))

	return container.New(layout.NewCustomPaddedLayout(pad, pad*2, pad*3, pad*3), container.NewVBox(sections...))
}

// callDetail shows a call's arguments in a form for its kind: a file's
// content, an edit's diff, other tools' arguments as a tree; nil when the
// arguments were cut and only their raw start can be shown.
func callDetail(r approval.Request, story callStory) fyne.CanvasObject {
	codeStyle := widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}
	switch story.kind {
	case fileWrite:
		state := "a new file"
		if story.exists {
			state = "replaces the file's " + byteSize(story.size)
		}
		return container.NewVBox(
			container.NewBorder(nil, nil, heading("Content to write"), note(fmt.Sprintf("%s, %s", plural(lines(story.content), "line", "lines"), state))),
			newPanel(theme.ColorNameInputBackground, 0, textBlock(shownContent(story.content), codeStyle)),
		)
	case fileEdit:
		box := []fyne.CanvasObject{container.NewBorder(nil, nil, heading("Changes to the file"),
			container.NewCenter(note("−  removed     +  added")))}
		for _, e := range story.edits {
			box = append(box, newPanel(theme.ColorNameInputBackground, 0,
				diffView(diffLines(strings.Split(plain(e.old), "\n"), strings.Split(plain(e.new), "\n"), 2))))
		}
		return container.NewVBox(box...)
	}
	if r.ArgsTruncated {
		return nil
	}
	return container.NewVBox(heading("Arguments"),
		newPanel(theme.ColorNameInputBackground, 0, textBlock(argTree(r.Args), codeStyle)))
}

// secondaryBlock is the style of a paragraph of secondary text.
var secondaryBlock = widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder}

// maxContentLines bounds the lines of a file's content on screen.
const maxContentLines = 400

// shownContent is a file's content as the window shows it: control
// characters made visible, at most maxContentLines lines.
func shownContent(s string) string {
	if s == "" {
		return "(empty)"
	}
	ls := strings.Split(strings.TrimSuffix(plain(s), "\n"), "\n")
	if len(ls) > maxContentLines {
		more := len(ls) - maxContentLines
		ls = append(ls[:maxContentLines], fmt.Sprintf("⋯ %s more lines not shown (the raw arguments hold them all)", thousands(more)))
	}
	return strings.Join(ls, "\n")
}

// textBlock shows long text, wrapped at word boundaries. Fyne wraps a
// segment of text in time that grows with the square of its length (a
// 16 KB description takes seconds, at every layout), so the text goes in
// as many short segments that flow on as one paragraph.
func textBlock(s string, style widget.RichTextStyle) *widget.RichText {
	t := widget.NewRichText(segments(s, style)...)
	t.Wrapping = fyne.TextWrapWord
	return t
}

// segmentSize bounds the segments of a textBlock.
const segmentSize = 200

// segments cuts s into text segments of about segmentSize bytes, after a
// space where there is one, each line ending a paragraph.
func segments(s string, style widget.RichTextStyle) []widget.RichTextSegment {
	var segs []widget.RichTextSegment
	add := func(t string, last bool) {
		st := style
		st.Inline = !last
		segs = append(segs, &widget.TextSegment{Text: t, Style: st})
	}
	for _, line := range strings.Split(s, "\n") {
		for len(line) > segmentSize {
			cut := strings.LastIndexByte(line[:segmentSize], ' ') + 1
			if cut == 0 {
				cut = segmentSize
				for cut > 0 && !utf8.RuneStart(line[cut]) {
					cut--
				}
			}
			add(line[:cut], false)
			line = line[cut:]
		}
		if line == "" {
			line = " " // an empty paragraph keeps its height
		}
		add(line, true)
	}
	return segs
}

// heading is a section's title.
func heading(s string) fyne.CanvasObject {
	return text(s, widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
}

// note is a small, quiet line of text.
func note(s string) fyne.CanvasObject {
	return text(s, caption)
}

// Colours of the diff: lines removed and added, and the words that changed.
var (
	diffRemoved = color.NRGBA{R: 0xDC, G: 0x26, B: 0x26, A: 0x26}
	diffAdded   = color.NRGBA{R: 0x16, G: 0xA3, B: 0x4A, A: 0x26}
)

// maxDiffRows bounds the rows of a diff on screen.
const maxDiffRows = 500

// diffView shows a line diff, one row a line: removed lines on red with a
// minus, added ones on green with a plus, the words that changed in colour.
func diffView(lines []diffLine) fyne.CanvasObject {
	rows := make([]fyne.CanvasObject, 0, min(len(lines), maxDiffRows+1))
	for i, l := range lines {
		if i == maxDiffRows {
			rows = append(rows, diffRow(diffLine{op: skipped, text: fmt.Sprintf("%s more not shown", thousands(len(lines)-i))}))
			break
		}
		rows = append(rows, diffRow(l))
	}
	return container.New(layout.NewCustomPaddedVBoxLayout(0), rows...)
}

func diffRow(l diffLine) fyne.CanvasObject {
	codeStyle := widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, Inline: true}
	var sign string
	var bg color.Color = color.Transparent
	var changed fyne.ThemeColorName
	switch l.op {
	case removed:
		sign, bg, changed = "−", diffRemoved, colorNameDiffRemoved
	case added:
		sign, bg, changed = "+", diffAdded, colorNameDiffAdded
	case skipped:
		t := text("⋯ "+l.text, widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText, Inline: true})
		return container.New(layout.NewCustomPaddedLayout(-4, -4, 0, 0), t)
	default:
		sign = " "
	}
	var segs []widget.RichTextSegment
	add := func(s string, mark bool) {
		if s == "" {
			return
		}
		st := codeStyle
		if mark {
			st.ColorName = changed
		}
		for _, seg := range segments(s, st) {
			seg.(*widget.TextSegment).Style.Inline = true
			segs = append(segs, seg)
		}
	}
	if l.to > l.from {
		add(l.text[:l.from], false)
		add(l.text[l.from:l.to], true)
		add(l.text[l.to:], false)
	} else {
		add(l.text, false)
	}
	if len(segs) == 0 {
		add(" ", false)
	}
	segs[len(segs)-1].(*widget.TextSegment).Style.Inline = false
	body := widget.NewRichText(segs...)
	body.Wrapping = fyne.TextWrapWord
	signText := text(sign, codeStyle)
	rect := canvas.NewRectangle(bg)
	return container.NewStack(rect, container.New(layout.NewCustomPaddedLayout(-4, -4, 0, 0),
		container.NewBorder(nil, nil, signText, nil, body)))
}

// A band is a background of a theme colour, redrawn when the theme
// changes.
type band struct {
	widget.BaseWidget
	color fyne.ThemeColorName
	rect  *canvas.Rectangle
}

func newBand(c fyne.ThemeColorName) *band {
	b := &band{color: c, rect: canvas.NewRectangle(color.Transparent)}
	b.ExtendBaseWidget(b)
	return b
}

func (b *band) CreateRenderer() fyne.WidgetRenderer {
	r := &bandRenderer{b: b}
	r.Refresh()
	return r
}

type bandRenderer struct{ b *band }

func (r *bandRenderer) Layout(size fyne.Size)        { r.b.rect.Resize(size) }
func (r *bandRenderer) MinSize() fyne.Size           { return fyne.Size{} }
func (r *bandRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.b.rect} }
func (r *bandRenderer) Destroy()                     {}
func (r *bandRenderer) Refresh() {
	r.b.rect.FillColor = r.b.Theme().Color(r.b.color, fyne.CurrentApp().Settings().ThemeVariant())
	r.b.rect.Refresh()
}

// riskLook returns how a risk class is shown: its words and colour.
func riskLook(risk string) (string, color.NRGBA) {
	switch strings.ToLower(risk) {
	case "low":
		return "Low risk", color.NRGBA{R: 0x05, G: 0x96, B: 0x69, A: 0xFF}
	case "medium":
		return "Medium risk", color.NRGBA{R: 0xB4, G: 0x53, B: 0x09, A: 0xFF}
	case "high":
		return "High risk", color.NRGBA{R: 0xEA, G: 0x58, B: 0x0C, A: 0xFF}
	case "critical":
		return "Critical risk", color.NRGBA{R: 0xDC, G: 0x26, B: 0x26, A: 0xFF}
	case "":
		return "Risk not rated", color.NRGBA{R: 0x6B, G: 0x72, B: 0x80, A: 0xFF}
	}
	return plainLine(risk) + " risk", color.NRGBA{R: 0x6B, G: 0x72, B: 0x80, A: 0xFF}
}

// A badge is a short word in white on a rounded patch of colour.
type badge struct {
	widget.BaseWidget
	bg    *canvas.Rectangle
	label *canvas.Text
}

func newBadge() *badge {
	b := &badge{bg: canvas.NewRectangle(color.Transparent), label: canvas.NewText("", color.White)}
	b.label.TextStyle.Bold = true
	b.ExtendBaseWidget(b)
	return b
}

func (b *badge) set(s string, c color.NRGBA) {
	b.label.Text = s
	b.bg.FillColor = c
	b.Refresh()
}

func (b *badge) CreateRenderer() fyne.WidgetRenderer {
	return &badgeRenderer{b: b}
}

type badgeRenderer struct{ b *badge }

func (r *badgeRenderer) padding() (float32, float32) {
	th := r.b.Theme()
	return th.Size(theme.SizeNameInnerPadding), th.Size(theme.SizeNameInnerPadding) / 3
}

func (r *badgeRenderer) Layout(size fyne.Size) {
	h, v := r.padding()
	r.b.bg.Resize(size)
	r.b.label.Move(fyne.NewPos(h, v))
	r.b.label.Resize(fyne.NewSize(size.Width-2*h, size.Height-2*v))
}

func (r *badgeRenderer) MinSize() fyne.Size {
	h, v := r.padding()
	m := r.b.label.MinSize()
	return fyne.NewSize(m.Width+2*h, m.Height+2*v)
}

func (r *badgeRenderer) Refresh() {
	th := r.b.Theme()
	r.b.label.TextSize = th.Size(theme.SizeNameCaptionText)
	r.b.bg.CornerRadius = r.MinSize().Height / 2
	r.b.label.Refresh()
	r.b.bg.Refresh()
}

func (r *badgeRenderer) Objects() []fyne.CanvasObject {
	return []fyne.CanvasObject{r.b.bg, r.b.label}
}

func (r *badgeRenderer) Destroy() {}

// A touchArea holds content and reports each tap, click and mouse press on
// it that no widget inside takes: on its text, its padding, its
// background.
type touchArea struct {
	widget.BaseWidget
	content fyne.CanvasObject
	touched func()
}

var (
	_ fyne.Tappable          = (*touchArea)(nil)
	_ fyne.SecondaryTappable = (*touchArea)(nil)
	_ desktop.Mouseable      = (*touchArea)(nil)
)

func newTouchArea(content fyne.CanvasObject, touched func()) *touchArea {
	t := &touchArea{content: content, touched: touched}
	t.ExtendBaseWidget(t)
	return t
}

func (t *touchArea) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(t.content)
}

func (t *touchArea) Tapped(*fyne.PointEvent)          { t.touched() }
func (t *touchArea) TappedSecondary(*fyne.PointEvent) { t.touched() }
func (t *touchArea) MouseDown(*desktop.MouseEvent)    { t.touched() }
func (t *touchArea) MouseUp(*desktop.MouseEvent)      {}
