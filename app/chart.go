package app

import (
	"fmt"
	"image/color"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/canvas"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/receipts"
)

// The colours of the chart's decisions, as their chips use them too.
var (
	colorAllowed = color.NRGBA{R: 0x10, G: 0xB9, B: 0x81, A: 0xFF} // emerald 500
	colorAsked   = color.NRGBA{R: 0xF5, G: 0x9E, B: 0x0B, A: 0xFF} // amber 500
	colorDenied  = color.NRGBA{R: 0xEF, G: 0x44, B: 0x44, A: 0xFF} // red 500
	colorFailed  = color.NRGBA{R: 0x04, G: 0x78, B: 0x57, A: 0xFF} // emerald 700, the failed share of allowed
	colorNeutral = color.NRGBA{R: 0x6B, G: 0x72, B: 0x80, A: 0xFF} // grey 500
)

// A barChart draws calls over time: a bar per bucket, stacked by decision
// (allowed at the bottom, the failed part of them darker, then asked, then
// denied), with the largest count on a grid line and times under the bars.
type barChart struct {
	widget.BaseWidget
	buckets []receipts.Bucket
	step    time.Duration
	empty   string // shown when there is nothing to draw
}

func newBarChart() *barChart {
	c := &barChart{}
	c.ExtendBaseWidget(c)
	return c
}

// set shows buckets of step.
func (c *barChart) set(buckets []receipts.Bucket, step time.Duration) {
	c.buckets, c.step = buckets, step
	c.Refresh()
}

// chartHeight is the chart's height, axis labels included.
const chartHeight = 120

func (c *barChart) MinSize() fyne.Size { return fyne.NewSize(200, chartHeight) }

func (c *barChart) CreateRenderer() fyne.WidgetRenderer {
	r := &chartRenderer{c: c}
	r.grid = canvas.NewLine(color.Transparent)
	r.base = canvas.NewLine(color.Transparent)
	r.maxLabel = canvas.NewText("", color.Black)
	r.emptyText = canvas.NewText("", color.Black)
	r.emptyText.Alignment = fyne.TextAlignCenter
	for range 3 {
		t := canvas.NewText("", color.Black)
		r.times = append(r.times, t)
	}
	r.Refresh()
	return r
}

type chartRenderer struct {
	c         *barChart
	grid      *canvas.Line
	base      *canvas.Line
	maxLabel  *canvas.Text
	emptyText *canvas.Text
	times     []*canvas.Text
	bars      []*canvas.Rectangle // four a bucket: allowed-ok, failed, asked, denied
	size      fyne.Size
}

func (r *chartRenderer) Objects() []fyne.CanvasObject {
	objs := []fyne.CanvasObject{r.grid, r.base, r.maxLabel, r.emptyText}
	for _, t := range r.times {
		objs = append(objs, t)
	}
	for _, b := range r.bars {
		objs = append(objs, b)
	}
	return objs
}

func (r *chartRenderer) MinSize() fyne.Size { return r.c.MinSize() }
func (r *chartRenderer) Destroy()           {}

func (r *chartRenderer) Layout(size fyne.Size) {
	r.size = size
	r.layoutBars()
}

// maxCalls returns the largest bucket's calls.
func (c *barChart) maxCalls() int64 {
	var m int64
	for _, b := range c.buckets {
		m = max(m, b.Calls())
	}
	return m
}

func (r *chartRenderer) layoutBars() {
	size := r.size
	th := r.c.Theme()
	caption := th.Size(theme.SizeNameCaptionText)
	labelH := caption + 6
	left := float32(0)
	top := labelH
	plotH := size.Height - labelH - top
	if plotH < 10 {
		plotH = 10
	}
	bottom := top + plotH
	r.grid.Position1, r.grid.Position2 = fyne.NewPos(left, top), fyne.NewPos(size.Width, top)
	r.base.Position1, r.base.Position2 = fyne.NewPos(left, bottom), fyne.NewPos(size.Width, bottom)
	r.maxLabel.Move(fyne.NewPos(left, 0))
	r.emptyText.Move(fyne.NewPos(size.Width/2, top+plotH/2-caption))

	n := len(r.c.buckets)
	m := r.c.maxCalls()
	if n == 0 {
		return
	}
	slot := (size.Width - left) / float32(n)
	gap := max(min(slot*0.25, 6), 1)
	w := max(slot-gap, 1)
	for i, b := range r.c.buckets {
		x := left + float32(i)*slot + gap/2
		parts := []int64{b.Allowed - b.Failed, b.Failed, b.Pending, b.Denied}
		y := bottom
		for k, v := range parts {
			bar := r.bars[i*4+k]
			if m == 0 || v <= 0 {
				bar.Hide()
				continue
			}
			h := plotH * float32(v) / float32(m)
			if h < 1 {
				h = 1
			}
			y -= h
			bar.Move(fyne.NewPos(x, y))
			bar.Resize(fyne.NewSize(w, h))
			bar.Show()
		}
	}
	// Time labels: first, middle, last bucket.
	idx := []int{0, n / 2, n - 1}
	for k, t := range r.times {
		i := idx[k]
		ts := t.MinSize()
		x := left + float32(i)*slot + slot/2 - ts.Width/2
		x = min(max(x, 0), size.Width-ts.Width)
		t.Move(fyne.NewPos(x, bottom+3))
	}
}

func (r *chartRenderer) Refresh() {
	th := r.c.Theme()
	v := fyne.CurrentApp().Settings().ThemeVariant()
	fg := th.Color(theme.ColorNamePlaceHolder, v)
	line := th.Color(theme.ColorNameSeparator, v)
	caption := th.Size(theme.SizeNameCaptionText)
	r.grid.StrokeColor, r.grid.StrokeWidth = line, 1
	r.base.StrokeColor, r.base.StrokeWidth = line, 1
	for _, t := range append([]*canvas.Text{r.maxLabel, r.emptyText}, r.times...) {
		t.Color, t.TextSize = fg, caption
	}
	m := r.c.maxCalls()
	r.maxLabel.Text = ""
	if m > 0 {
		r.maxLabel.Text = thousands(int(m)) + " calls"
	}
	r.emptyText.Text = ""
	if m == 0 {
		r.emptyText.Text = r.c.empty
	}
	n := len(r.c.buckets)
	for len(r.bars) < n*4 {
		for _, c := range []color.Color{colorAllowed, colorFailed, colorAsked, colorDenied} {
			b := canvas.NewRectangle(c)
			b.CornerRadius = 1.5
			r.bars = append(r.bars, b)
		}
	}
	r.bars = r.bars[:n*4]
	if n > 0 {
		idx := []int{0, n / 2, n - 1}
		for k, t := range r.times {
			t.Text = bucketLabel(r.c.buckets[idx[k]].Start, r.c.step)
		}
	} else {
		for _, t := range r.times {
			t.Text = ""
		}
	}
	for _, o := range r.Objects() {
		o.Refresh()
	}
	r.layoutBars()
}

// bucketLabel names the start of a bucket of step, in local time.
func bucketLabel(t time.Time, step time.Duration) string {
	t = t.Local()
	switch {
	case step < time.Minute:
		return t.Format("15:04:05")
	case step < time.Hour:
		return t.Format("15:04")
	case step < 24*time.Hour:
		return t.Format("Jan 2 15:04")
	}
	return t.Format("Jan 2")
}

// chartSpan chooses the buckets of a chart of span ending at now, or, for
// all time (span 0), from first: about 24 to 60 bars.
//
// A log younger than the period is charted from its first entry, so that
// a new user's first calls have a shape rather than one bar at the end.
func chartSpan(span time.Duration, now, first time.Time) (from time.Time, step time.Duration) {
	if !first.IsZero() {
		if age := now.Sub(first); span == 0 || age < span {
			span = max(age, time.Minute)
		}
	}
	if span == 0 {
		span = 24 * time.Hour
	}
	steps := []time.Duration{time.Second, 5 * time.Second, 15 * time.Second, 30 * time.Second,
		time.Minute, 5 * time.Minute, 15 * time.Minute, time.Hour, 3 * time.Hour, 6 * time.Hour,
		24 * time.Hour, 7 * 24 * time.Hour, 30 * 24 * time.Hour}
	step = steps[len(steps)-1]
	for _, s := range steps {
		if span/s <= 60 {
			step = s
			break
		}
	}
	// Buckets start on whole steps (local midnight for days), so the bars
	// do not move as time passes within a step.
	end := now.Truncate(step).Add(step)
	if step >= 24*time.Hour {
		y, m, d := now.Date()
		end = time.Date(y, m, d+1, 0, 0, 0, 0, now.Location())
	}
	n := (span + step - 1) / step
	from = end.Add(-time.Duration(n) * step)
	return from, step
}

// stepName says what a bucket of step is, for the chart's caption.
func stepName(step time.Duration) string {
	switch step {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	case 7 * 24 * time.Hour:
		return "week"
	case 30 * 24 * time.Hour:
		return "30 days"
	}
	if step < time.Minute {
		return fmt.Sprintf("%d seconds", int(step.Seconds()))
	}
	if step < time.Hour {
		return fmt.Sprintf("%d minutes", int(step.Minutes()))
	}
	return fmt.Sprintf("%d hours", int(step.Hours()))
}
