package app

import (
	"context"
	"fmt"
	"image/color"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// searchDebounce is how long the history waits after a keystroke before it
// searches: typing fast runs one query, not one a key.
const searchDebounce = 150 * time.Millisecond

// A choice is one option of a filter: what it reads, and what it selects.
type choice[T any] struct {
	label string
	value T
}

// choices are the options of one filter, in the order a Select lists them.
type choices[T any] []choice[T]

func (cs choices[T]) labels() []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.label
	}
	return out
}

// value returns what the option labelled label selects (zero for none).
func (cs choices[T]) value(label string) T {
	for _, c := range cs {
		if c.label == label {
			return c.value
		}
	}
	var zero T
	return zero
}

// The choices of the history's filters (and the export's).
var (
	timeChoices = choices[time.Duration]{
		{"Last hour", time.Hour},
		{"Last 24 hours", 24 * time.Hour},
		{"Last 7 days", 7 * 24 * time.Hour},
		{"Last 30 days", 30 * 24 * time.Hour},
		{"All time", 0},
	}
	decisionChoices = choices[string]{
		{"Any decision", ""}, {"Allowed", entry.Allow}, {"Denied", entry.Deny}, {"Awaiting approval", entry.ApprovalRequired},
	}
	statusChoices = choices[string]{
		{"Any outcome", ""}, {"Succeeded", entry.Succeeded}, {"Failed", entry.Failed}, {"Unknown", entry.Unknown},
	}
)

const (
	allServers    = "All servers"
	defaultPeriod = "Last 7 days"
)

// historyPage is the History view: search and filters, a chart of calls
// over time, the entries found, and the one selected.
type historyPage struct {
	u       *UI
	content fyne.CanvasObject

	search   *widget.Entry
	period   *widget.Select
	server   *widget.Select
	decision *widget.Select
	status   *widget.Select
	all      *widget.Check

	chart        *barChart
	chartCaption *widget.RichText
	legend       fyne.CanvasObject

	list    *widget.List
	listBox fyne.CanvasObject
	empty   *widget.RichText
	footer  *widget.RichText
	// upgrading says, while the search index is being upgraded, how far
	// it has to go.
	upgrading *widget.RichText
	body      *fyne.Container // all but the header, laid out again as that line comes and goes
	live      *widget.RichText
	banner    *problemBanner
	detail    *entryDetail
	selected  string // the id of the entry on the right

	filter   historyFilter
	hl       historyList
	loaded   bool   // a first page is in
	fetching bool   // a next page is being read
	gen      uint64 // counts first-page reads; older results are dropped
	cancel   context.CancelFunc
	debounce func() bool
	retry    retrier
	chartGen uint64

	// seenSize is the log's size when the list was last read or updated;
	// polling compares it with the log's size now.
	seenSize int64

	// searched, when set, runs after a first page reaches the list.
	// Tests use it to wait without sleeping.
	searched func()
}

func newHistoryPage(u *UI) *historyPage {
	p := &historyPage{u: u, seenSize: -1}
	p.retry = retrier{u: u, f: p.refresh}
	p.banner = newProblemBanner(p.refresh)
	p.filter.span = 7 * 24 * time.Hour

	p.search = widget.NewEntry()
	p.search.SetPlaceHolder("Search: a tool, a path, words in a call…")
	p.search.ActionItem = widget.NewIcon(theme.SearchIcon())
	p.search.OnChanged = func(string) { p.typed() }
	p.search.OnSubmitted = func(string) { p.stopDebounce(); p.reload() }

	p.period = widget.NewSelect(timeChoices.labels(), func(s string) {
		p.filter.span = timeChoices.value(s)
		p.reload()
	})
	p.period.Selected = defaultPeriod
	p.server = widget.NewSelect([]string{allServers}, func(s string) {
		p.filter.server = ""
		if s != allServers {
			p.filter.server = s
		}
		p.reload()
	})
	p.server.Selected = allServers
	p.decision = widget.NewSelect(decisionChoices.labels(), func(s string) {
		p.filter.decision = decisionChoices.value(s)
		p.reload()
	})
	p.decision.Selected = decisionChoices[0].label
	p.status = widget.NewSelect(statusChoices.labels(), func(s string) {
		p.filter.status = statusChoices.value(s)
		p.reload()
	})
	p.status.Selected = statusChoices[0].label
	p.all = widget.NewCheck("Every entry", func(on bool) { p.filter.all = on; p.reload() })

	p.chart = newBarChart()
	p.chart.empty = "No calls in this period: choose a longer one"
	p.chartCaption = text("", caption)
	p.legend = container.NewHBox(legendItem("Allowed", colorAllowed), legendItem("Failed", colorFailed),
		legendItem("Awaiting approval", colorAsked), legendItem("Denied", colorDenied))

	p.list = widget.NewList(p.length, func() fyne.CanvasObject { return newHistoryRow() }, p.updateRow)
	p.list.OnSelected = func(id widget.ListItemID) {
		if id < len(p.hl.hits) {
			p.selected = p.hl.hits[id].ID
			p.detail.show(p.hl.hits[id])
		}
	}
	p.empty = text("", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignCenter})
	p.empty.Wrapping = fyne.TextWrapWord
	p.footer = text("", caption)
	p.upgrading = text("", caption)
	p.upgrading.Hide()
	p.live = text("", widget.RichTextStyle{ColorName: theme.ColorNameSuccess, SizeName: theme.SizeNameCaptionText, Inline: true})
	p.detail = newEntryDetail(p)

	refresh := widget.NewButtonWithIcon("Refresh", theme.ViewRefreshIcon(), u.Refresh)
	header := pageHeader("History", "Every call your agents made through Gatehouse, its decision and its outcome, as the signed evidence log holds them.", refresh)

	filters := container.NewGridWithColumns(3, p.period, p.server, p.decision, p.status, container.NewCenter(p.all))
	toolbar := container.NewVBox(p.search, filters)
	chartBox := newPanel(theme.ColorNameInputBackground, 0, container.NewBorder(
		compact(p.chartCaption, p.legend), nil, nil, nil, p.chart))

	p.footer.Wrapping = fyne.TextWrapWord
	p.listBox = container.NewBorder(nil, container.NewBorder(nil, nil, nil, p.live, p.footer),
		nil, nil,
		newPanel(theme.ColorNameInputBackground, 0, container.NewStack(p.list,
			container.New(layout.NewCustomPaddedLayout(theme.Padding()*8, 0, theme.Padding()*4, theme.Padding()*4), container.NewVBox(p.empty)))))
	// The list at a width its rows fit, the entry beside it taking the rest.
	split := container.NewBorder(nil, nil, fixedWidth(historyListWidth, p.listBox), nil, p.detail.content)

	p.body = container.NewBorder(container.NewVBox(p.banner.content, toolbar, p.upgrading, chartBox), nil, nil, nil, split)
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(p.body))
	return p
}

// historyListWidth is the width of History's list.
const historyListWidth = 290

// legendItem is a swatch and a word.
func legendItem(label string, c color.Color) fyne.CanvasObject {
	sw := canvas.NewRectangle(c)
	sw.CornerRadius = 2
	sw.SetMinSize(fyne.NewSize(10, 10))
	return container.NewHBox(container.NewCenter(sw), text(label, caption))
}

// length is the list's length: the entries read, and a row that says more
// are coming while there are.
func (p *historyPage) length() int {
	n := len(p.hl.hits)
	if p.hl.more {
		n++
	}
	return n
}

func (p *historyPage) updateRow(id widget.ListItemID, o fyne.CanvasObject) {
	r := o.(*historyRow)
	if id >= len(p.hl.hits) {
		r.loading()
		p.fetchMore()
		return
	}
	h := p.hl.hits[id]
	answered := p.hl.answered[h.ID]
	if answered != "" {
		h.Decision = answered // answered on the agent's retry: no longer awaiting
	}
	obs, ok := p.hl.observed[h.ID]
	if !ok {
		r.set(h, nil, p.u.clock.Now())
	} else {
		r.set(h, &obs, p.u.clock.Now())
	}
	if answered != "" {
		setText(r.outcome, "answered on retry")
	}
	if id >= len(p.hl.hits)-historyPrefetch {
		p.fetchMore()
	}
}

// typed is called at each keystroke in the search box: the search runs
// once the typing pauses.
func (p *historyPage) typed() {
	p.stopDebounce()
	p.debounce = p.u.clock.AfterFunc(searchDebounce, func() { p.u.do(p.reload) })
}

func (p *historyPage) stopDebounce() {
	if p.debounce != nil {
		p.debounce()
		p.debounce = nil
	}
}

// refresh reads everything the view shows again: the servers of the
// filter, the list from the top, and the chart.
func (p *historyPage) refresh() {
	goRead(p.u, func(ctx context.Context) ([]store.Server, error) {
		return p.u.st.Servers(ctx)
	}, func(servers []store.Server, err error) {
		if err != nil {
			return // the list's read says what is wrong
		}
		opts := []string{allServers}
		for _, s := range servers {
			opts = append(opts, s.Name)
		}
		if p.filter.server != "" && !slices.Contains(opts, p.filter.server) {
			opts = append(opts, p.filter.server) // a server removed since: its calls stay
		}
		p.server.Options = opts
		p.server.Refresh()
	})
	p.reload()
}

// reload reads the first page of what the filters and the search choose,
// and the chart. A read still running for an earlier choice is cancelled.
func (p *historyPage) reload() {
	p.filter.text = p.search.Text
	p.gen++
	gen := p.gen
	if p.cancel != nil {
		p.cancel()
	}
	ctx, cancel := context.WithCancel(p.u.ctx)
	p.cancel = cancel
	q := p.filter.query(p.u.clock.Now())
	type first struct {
		hl   historyList
		size int64
	}
	goRead(p.u, func(rctx context.Context) (first, error) {
		rctx, stop := context.WithCancel(rctx)
		defer stop()
		context.AfterFunc(ctx, stop)
		l, err := p.u.core.reader(rctx)
		if err != nil {
			return first{}, err
		}
		size, err := l.Size(rctx)
		if err != nil {
			return first{}, err
		}
		hl, err := readFirst(rctx, l, q)
		return first{hl, size}, err
	}, func(f first, err error) {
		if gen != p.gen {
			return // a newer choice is on its way
		}
		p.fetching = false
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			p.u.log.Error("read history", "err", err)
			pr := explain("read the evidence log", err)
			p.banner.show(&pr, p.retry.failed(pr))
			if !p.loaded {
				p.showEmpty("")
			}
			return
		}
		p.retry.ok()
		p.banner.show(nil, 0)
		p.loaded = true
		p.hl = f.hl
		p.seenSize = f.size
		p.showList()
		p.reselect()
		if p.searched != nil {
			p.searched()
		}
	})
	p.readChart()
}

// showList puts the entries read on screen, with the line under them.
func (p *historyPage) showList() {
	p.list.Refresh()
	switch {
	case len(p.hl.hits) > 0:
		p.empty.Hide()
	case p.filter.text != "" || p.filter.server != "" || p.filter.decision != "" || p.filter.status != "":
		p.showEmpty("Nothing matches. Try fewer words, or another period or filter.")
	case p.seenSize <= 1:
		p.showEmpty("No calls yet. They appear here as your agents make them through gatehouse proxy: Protect my agents sets that up.")
	default:
		p.showEmpty("No calls in this period: choose a longer one above.")
	}
	what := "calls"
	if p.filter.all {
		what = "entries"
	}
	n := thousands(len(p.hl.hits))
	var footer string
	switch {
	case p.hl.more:
		footer = fmt.Sprintf("%s %s shown, newest first; more load as you scroll · %s entries in the log", n, what, thousands(int(p.seenSize)))
	default:
		footer = fmt.Sprintf("%s %s · %s entries in the log", n, what, thousands(int(max(p.seenSize, 0))))
	}
	setText(p.footer, footer)
	if left := p.u.core.indexLeft.Load(); left > 0 {
		setText(p.upgrading, fmt.Sprintf("Upgrading the search index: %s older entries to go. Words typed part way are slower to find among them until then.", thousands(int(left))))
		if !p.upgrading.Visible() {
			p.upgrading.Show()
			p.body.Refresh()
		}
	} else if p.upgrading.Visible() {
		p.upgrading.Hide()
		p.body.Refresh()
	}
	if p.u.poll > 0 {
		setText(p.live, "● Live")
	}
	p.listBox.Refresh() // the footer's lines may have changed
}

func (p *historyPage) showEmpty(s string) {
	setText(p.empty, s)
	if s == "" {
		p.empty.Hide()
	} else {
		p.empty.Show()
	}
}

// reselect keeps the entry on the right selected in the list, if it is
// still there. If not, no row is: the list would otherwise keep its row
// selected, now another entry's, and a click on that row (which selects
// nothing new) would not show it.
func (p *historyPage) reselect() {
	if k := slices.IndexFunc(p.hl.hits, func(h receipts.Hit) bool { return h.ID == p.selected }); p.selected != "" && k >= 0 {
		p.list.Select(k)
		return
	}
	p.list.UnselectAll()
}

// fetchMore reads the next page, unless one is being read or there is
// none.
func (p *historyPage) fetchMore() {
	if p.fetching || !p.hl.more {
		return
	}
	p.fetching = true
	gen := p.gen
	hl := p.hl
	type more struct {
		hits []receipts.Hit
		next int64
		obs  notes
	}
	goRead(p.u, func(ctx context.Context) (more, error) {
		l, err := p.u.core.reader(ctx)
		if err != nil {
			return more{}, err
		}
		hits, next, err := readMore(ctx, l, hl)
		return more{hits, next, readNotes(ctx, l, hits)}, err
	}, func(m more, err error) {
		if gen != p.gen {
			return
		}
		p.fetching = false
		if err != nil {
			pr := explain("read more of the evidence log", err)
			p.banner.show(&pr, 0)
			return
		}
		p.hl.add(m.hits, m.next)
		p.hl.note(m.obs)
		p.showList()
	})
}

// logGrew is called by polling with the log's size: entries were added.
// The newest that match are put at the top of the list; what the person
// has selected or scrolled to stays where it is.
func (p *historyPage) logGrew(size int64) {
	if !p.loaded || size == p.seenSize || p.fetching {
		return
	}
	gen := p.gen
	q := p.filter.query(p.u.clock.Now())
	top := p.hl.top()
	waiting := p.hl.waiting(p.u.clock.Now())
	type newer struct {
		hits []receipts.Hit
		obs  notes
	}
	goRead(p.u, func(ctx context.Context) (newer, error) {
		l, err := p.u.core.reader(ctx)
		if err != nil {
			return newer{}, err
		}
		hits, full, err := readNewer(ctx, l, q, top)
		if err == nil && !full {
			return newer{}, errTooManyNew
		}
		if err != nil {
			return newer{}, err
		}
		// New receipts may answer calls held before: look at those again.
		return newer{hits, readNotes(ctx, l, append(hits, waiting...))}, nil
	}, func(n newer, err error) {
		hits := n.hits
		if gen != p.gen {
			return
		}
		if err == errTooManyNew {
			p.reload()
			return
		}
		if err != nil {
			return // the next poll tries again
		}
		p.seenSize = size
		if len(hits) > 0 {
			offset := p.list.GetScrollOffset()
			p.hl.prepend(hits)
			p.hl.note(n.obs)
			p.showList()
			if offset > 0 {
				// Keep what the person looks at in place.
				p.list.ScrollToOffset(offset + float32(len(hits))*p.rowHeight())
			}
			p.reselect()
		} else {
			p.showList()
		}
		p.readChart()
	})
}

var errTooManyNew = fmt.Errorf("more new entries than a page")

// rowHeight is the height of one row of the list.
func (p *historyPage) rowHeight() float32 {
	return newHistoryRow().MinSize().Height + theme.SeparatorThicknessSize()
}

// readChart reads the calls over the period chosen, for the chart.
func (p *historyPage) readChart() {
	p.chartGen++
	gen := p.chartGen
	f := p.filter
	f.text = p.search.Text
	now := p.u.clock.Now()
	type chartData struct {
		buckets []receipts.Bucket
		step    time.Duration
		capped  bool // counts only the newest chartMatches calls found
	}
	goRead(p.u, func(ctx context.Context) (chartData, error) {
		l, err := p.u.core.reader(ctx)
		if err != nil {
			return chartData{}, err
		}
		first, err := l.First(ctx)
		if err != nil {
			return chartData{}, err
		}
		from, step := chartSpan(f.span, now, first)
		to := from.Add(time.Duration((now.Sub(from)+step-1)/step) * step)
		b, capped, err := activity(ctx, l, from, to, step, f)
		return chartData{b, step, capped}, err
	}, func(c chartData, err error) {
		if gen != p.chartGen {
			return
		}
		if err != nil {
			p.chart.set(nil, 0)
			setText(p.chartCaption, "")
			return
		}
		p.chart.set(c.buckets, c.step)
		var total, allowed, denied, asked int64
		for _, b := range c.buckets {
			total += b.Calls()
			allowed += b.Allowed
			denied += b.Denied
			asked += b.Pending
		}
		what := "Calls"
		if !f.onlyServer() {
			what = "Calls found"
		}
		caption := fmt.Sprintf("%s per %s · %s: %s allowed, %s denied, %s awaiting approval",
			what, stepName(c.step), plural(int(total), "call", "calls"), thousands(int(allowed)), thousands(int(denied)), thousands(int(asked)))
		if c.capped {
			caption += fmt.Sprintf(" (the newest %s found)", thousands(chartMatches))
		}
		setText(p.chartCaption, caption)
	})
}

// chartMatches bounds the calls a chart counts one by one: those a search
// or a filter of decision or outcome finds.
const chartMatches = 20_000

// activity counts the calls f chooses from from to to, in buckets of step:
// with the log's own count when f chooses by server at most, else by
// reading the calls found, newest first, up to chartMatches (capped says
// there were more).
func activity(ctx context.Context, l *receipts.Reader, from, to time.Time, step time.Duration, f historyFilter) (b []receipts.Bucket, capped bool, err error) {
	if f.onlyServer() {
		b, err = l.Activity(ctx, from, to, step, f.server)
		return b, false, err
	}
	n := int((to.Sub(from) + step - 1) / step)
	b = make([]receipts.Bucket, n)
	for i := range b {
		b[i].Start = from.Add(time.Duration(i) * step)
	}
	q := f.query(to)
	q.From, q.To, q.Kind, q.Limit = from, to, "receipt", receipts.MaxLimit
	for seen := 0; ; {
		page, err := l.Search(ctx, q)
		if err != nil {
			return nil, false, err
		}
		for _, h := range page.Hits {
			i := int(h.Time.Sub(from) / step)
			if i < 0 || i >= n {
				continue
			}
			switch h.Decision {
			case entry.Allow:
				b[i].Allowed++
				if h.Status == entry.Failed {
					b[i].Failed++
				}
			case entry.Deny:
				b[i].Denied++
			case entry.ApprovalRequired:
				b[i].Pending++
			}
		}
		seen += len(page.Hits)
		if page.Next == 0 {
			return b, false, nil
		}
		if seen >= chartMatches {
			return b, true, nil
		}
		q.Before = page.Next
	}
}

// plural writes n and the noun that goes with it.
func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return thousands(n) + " " + many
}

// close stops the view's timers and reads.
func (p *historyPage) close() {
	p.stopDebounce()
	p.retry.cancel()
	if p.cancel != nil {
		p.cancel()
	}
}

// A historyRow is one entry of the list: when, the decision, the call (or
// what the entry records), who asked, and how the call ended.
type historyRow struct {
	widget.BaseWidget
	when    *widget.RichText
	day     *widget.RichText
	chip    *chip
	what    *widget.RichText
	who     *widget.RichText
	outcome *widget.RichText
}

func newHistoryRow() *historyRow {
	r := &historyRow{
		when:    text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, SizeName: theme.SizeNameCaptionText, Inline: true}),
		day:     text("", caption),
		chip:    newChip(),
		what:    text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}),
		who:     text("", caption),
		outcome: text("", widget.RichTextStyle{SizeName: theme.SizeNameCaptionText, Inline: true}),
	}
	r.what.Truncation = fyne.TextTruncateEllipsis
	r.who.Truncation = fyne.TextTruncateEllipsis
	r.ExtendBaseWidget(r)
	return r
}

func (r *historyRow) CreateRenderer() fyne.WidgetRenderer {
	// Three short lines, which fit the narrowest window: what was called
	// and its decision; when, and how it ended; who called, or what a rule
	// in observe mode would have decided.
	top := container.NewBorder(nil, nil, nil, container.NewCenter(r.chip), r.what)
	middle := container.NewHBox(r.when, r.day, r.outcome)
	return widget.NewSimpleRenderer(container.New(layout.NewCustomPaddedLayout(0, 0, 4, 4),
		compact(top, pullUp(middle), pullUp(r.who))))
}

// loading shows the row that stands for the page being read.
func (r *historyRow) loading() {
	setText(r.when, "")
	setText(r.day, "")
	r.chip.set("", color.Transparent)
	setText(r.what, "Loading more…")
	setText(r.who, "")
	setText(r.outcome, "")
}

// set shows h, its time relative to now, and what a rule in observe mode
// would have decided on it (obs, nil when none would have differed).
func (r *historyRow) set(h receipts.Hit, obs *entry.Observed, now time.Time) {
	t := h.Time.Local()
	setText(r.when, t.Format("15:04:05"))
	day := t.Format("Jan 2")
	y, m, d := now.Local().Date()
	if ty, tm, td := t.Date(); ty == y && tm == m && td == d {
		day = "today"
	} else if ty, tm, td := t.AddDate(0, 0, 1).Date(); ty == y && tm == m && td == d {
		day = "yesterday"
	} else if ty != y {
		day = t.Format("Jan 2, 2006")
	}
	setText(r.day, day)
	r.chip.set(hitChip(h))
	setText(r.what, hitTitle(h))
	who := plainLine(h.Client)
	if who == "" {
		who = string(h.Kind)
	}
	seg := r.who.Segments[0].(*widget.TextSegment)
	seg.Text, seg.Style.ColorName = who, caption.ColorName
	if obs != nil {
		// Short, to fit the row; the entry's details say it in full.
		seg.Text, seg.Style.ColorName = "observe mode: "+plainLine(obs.Rule)+" would "+wouldVerb(obs.Decision), theme.ColorNameWarning
	}
	r.who.Refresh()
	word, c := statusLook(h)
	seg = r.outcome.Segments[0].(*widget.TextSegment)
	seg.Text, seg.Style.ColorName = word, c
	r.Refresh() // lays the row out again: its parts' widths changed
}

// wouldVerb says in a verb what a rule in observe mode would have
// decided.
func wouldVerb(decision string) string {
	switch decision {
	case entry.Allow:
		return "allow"
	case entry.Deny:
		return "deny"
	case entry.ApprovalRequired:
		return "ask"
	}
	return plainLine(decision)
}

// observedWords says what a rule in observe mode would have decided on a
// call: "would have been DENIED by rule no-deletes — observe mode".
func observedWords(o entry.Observed) string {
	would := map[string]string{entry.Allow: "ALLOWED", entry.Deny: "DENIED", entry.ApprovalRequired: "held for approval"}[o.Decision]
	if would == "" {
		would = plainLine(o.Decision)
	}
	return fmt.Sprintf("would have been %s by rule %s — observe mode", would, plainLine(o.Rule))
}

// hitTitle names what an entry records: the call ("github · delete_branch"),
// or the event.
func hitTitle(h receipts.Hit) string {
	switch h.Kind {
	case entry.KindReceipt, entry.KindOutcome, entry.KindPin:
		if h.Server != "" {
			t := plainLine(h.Server) + " · " + plainLine(h.Tool)
			switch h.Kind {
			case entry.KindOutcome:
				t = "Outcome of " + t
			case entry.KindPin:
				t = "Tool definition accepted: " + t
			}
			return t
		}
	case entry.KindKey:
		return "Signing key announced"
	case entry.KindPolicy:
		return "Policy version saved"
	case entry.KindErasure:
		return "Payloads erased"
	}
	return string(h.Kind)
}

// hitChip returns the words and colour of an entry's decision chip.
func hitChip(h receipts.Hit) (string, color.Color) {
	switch h.Decision {
	case entry.Allow:
		return "Allowed", colorAllowed
	case entry.Deny:
		return "Denied", colorDenied
	case entry.ApprovalRequired:
		return "Awaiting", colorAsked
	}
	return "", color.Transparent
}

// statusLook returns how a call ended, as a word and a colour.
func statusLook(h receipts.Hit) (string, fyne.ThemeColorName) {
	switch h.Status {
	case entry.Succeeded:
		return "✓ succeeded", theme.ColorNameSuccess
	case entry.Failed:
		return "✗ failed", theme.ColorNameError
	case entry.Unknown:
		return "? unknown", theme.ColorNameWarning
	}
	if h.Kind == entry.KindReceipt && h.Decision == entry.Allow {
		return "no outcome", theme.ColorNamePlaceHolder
	}
	if h.Kind == entry.KindReceipt {
		return "did not run", theme.ColorNamePlaceHolder
	}
	return "", theme.ColorNamePlaceHolder
}

// A chip is a short word in white on a rounded patch of colour, smaller
// than a badge.
type chip struct {
	widget.BaseWidget
	bg    *canvas.Rectangle
	label *canvas.Text
}

func newChip() *chip {
	c := &chip{bg: canvas.NewRectangle(color.Transparent), label: canvas.NewText("", color.White)}
	c.label.TextStyle.Bold = true
	c.ExtendBaseWidget(c)
	return c
}

func (c *chip) set(s string, col color.Color) {
	c.label.Text = s
	c.bg.FillColor = col
	c.Refresh()
}

func (c *chip) CreateRenderer() fyne.WidgetRenderer { return &chipRenderer{c: c} }

type chipRenderer struct{ c *chip }

func (r *chipRenderer) Layout(size fyne.Size) {
	r.c.bg.Resize(size)
	ls := r.c.label.MinSize()
	r.c.label.Move(fyne.NewPos((size.Width-ls.Width)/2, (size.Height-ls.Height)/2))
	r.c.label.Resize(ls)
}

func (r *chipRenderer) MinSize() fyne.Size {
	ls := r.c.label.MinSize()
	if r.c.label.Text == "" {
		return fyne.Size{}
	}
	return fyne.NewSize(ls.Width+14, ls.Height+2)
}

func (r *chipRenderer) Refresh() {
	th := r.c.Theme()
	r.c.label.TextSize = th.Size(theme.SizeNameCaptionText) - 1
	r.c.bg.CornerRadius = r.MinSize().Height / 2
	r.c.label.Refresh()
	r.c.bg.Refresh()
}

func (r *chipRenderer) Objects() []fyne.CanvasObject { return []fyne.CanvasObject{r.c.bg, r.c.label} }
func (r *chipRenderer) Destroy()                     {}
