package app

import (
	"fmt"
	"math"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"
)

// A problemBanner says, above a view, what went wrong, what to do, and when
// the view tries again; its Retry button tries at once.
type problemBanner struct {
	content *panel
	title   *widget.RichText
	text    *widget.Label
	hint    *widget.Label
	next    *widget.RichText // "Trying again in 5 s"
	retry   *widget.Button
}

func newProblemBanner(retry func()) *problemBanner {
	b := &problemBanner{}
	b.title = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameError})
	b.text = widget.NewLabel("")
	b.text.Wrapping = fyne.TextWrapWord
	b.hint = widget.NewLabel("")
	b.hint.Wrapping = fyne.TextWrapWord
	b.next = text("", caption)
	b.retry = widget.NewButtonWithIcon("Retry", theme.ViewRefreshIcon(), retry)
	b.content = newPanel(theme.ColorNameError, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))),
		container.NewVBox(b.retry),
		compact(b.title, b.text, b.hint, b.next)))
	b.content.Hide()
	return b
}

// show shows p, or hides the banner for nil. next is when the view tries
// again by itself (0: it does not).
func (b *problemBanner) show(p *problem, next time.Duration) {
	if p == nil {
		b.content.Hide()
		return
	}
	setText(b.title, p.title)
	b.text.SetText(p.text)
	b.hint.SetText(p.hint)
	if p.hint == "" {
		b.hint.Hide()
	} else {
		b.hint.Show()
	}
	if next > 0 {
		setText(b.next, fmt.Sprintf("Trying again in %d s.", int(math.Ceil(next.Seconds()))))
		b.next.Show()
	} else {
		setText(b.next, "")
		b.next.Hide()
	}
	b.content.Show()
	b.content.Refresh()
}

// A retrier tries a failed read again later, waiting longer after each
// failure in a row, up to retryMax.
type retrier struct {
	u     *UI
	f     func() // the read, on the Fyne thread
	fails int
	stop  func() bool
}

// retryDelays are the waits after the first failures in a row; later ones
// wait retryMax.
var retryDelays = []time.Duration{2 * time.Second, 5 * time.Second, 10 * time.Second}

const retryMax = 30 * time.Second

// failed schedules the next try, when p may go away by itself, and returns
// how long until then (0 for none).
func (r *retrier) failed(p problem) time.Duration {
	r.cancel()
	if !p.retry || r.u.ctx.Err() != nil {
		return 0
	}
	d := retryMax
	if r.fails < len(retryDelays) {
		d = retryDelays[r.fails]
	}
	r.fails++
	r.stop = r.u.clock.AfterFunc(d, func() { r.u.do(r.f) })
	return d
}

// ok resets the backoff after a read that worked.
func (r *retrier) ok() {
	r.cancel()
	r.fails = 0
}

func (r *retrier) cancel() {
	if r.stop != nil {
		r.stop()
		r.stop = nil
	}
}
