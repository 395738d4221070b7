package app

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/driver/desktop"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// ApprovalTitle is the approval window's title.
const ApprovalTitle = "Gatehouse — approve a tool call"

// proxyWait is how long a proxy waits for an answer before it tells the agent
// that approval is pending, when its request does not say (the gate's
// default wait). The window counts it down from when a request arrives.
const proxyWait = 45 * time.Second

// armDelay is how long the answers stay disabled after a request comes on
// screen, so that a click or a key press meant for something else (the
// window that was in front, or the request just answered) answers nothing.
const armDelay = 600 * time.Millisecond

// The choices of "Allow for N minutes".
var minuteChoices = []int{5, 15, 60}

const defaultMinutes = 15

// A Decider takes a person's answers to approval requests, each for the
// request as the window showed it. An [approval.Server] is one.
type Decider interface {
	Decide(shown approval.Request, a approval.Answer) error
}

var _ Decider = (*approval.Server)(nil)

// A waiting request is one the window holds.
type waiting struct {
	req     approval.Request
	arrived time.Time
	// waitEnds is when the proxy stops waiting and tells the agent that
	// approval is pending, on the window's clock.
	waitEnds time.Time
	// touched records that the person touched the window while it was on
	// screen: its countdown stopped.
	touched bool
}

// approvals is the approval window and its queue. It lives on the Fyne
// thread.
type approvals struct {
	u       *UI
	clock   clock
	win     fyne.Window
	view    *approvalView
	decider Decider

	queue   []*waiting // in the order they came
	cur     int        // the index in queue of the request on screen
	visible bool       // the window is shown
	placed  bool       // the window has been centred once
	minutes int        // the minutes of "Allow for N minutes"
	armed   bool       // the answers take taps

	screen   uint64      // counts what was put on screen; timers of an older one do nothing
	stopArm  func() bool // stops the timer that arms the answers
	stopTick func() bool // stops the countdown's next tick
}

func newApprovals(u *UI, c clock) *approvals {
	a := &approvals{u: u, clock: c, minutes: defaultMinutes}
	a.win = u.app.NewWindow(ApprovalTitle)
	a.win.SetIcon(iconResource)
	a.view = newApprovalView(a)
	a.win.SetContent(a.view.content)
	a.win.Resize(windowSize)
	a.win.SetCloseIntercept(a.hide)
	// Keys typed on the window, when no widget has the focus, answer or
	// move through the queue, and are touches too.
	cv := a.win.Canvas()
	cv.SetOnTypedKey(a.typed)
	cv.SetOnTypedRune(func(rune) { a.touch() })
	if dc, ok := cv.(desktop.Canvas); ok {
		dc.SetOnKeyDown(func(*fyne.KeyEvent) { a.touch() })
	}
	a.view.showEmpty("")
	return a
}

// add queues a request that just arrived, and brings the window to the
// front.
func (a *approvals) add(req approval.Request) {
	now := a.clock.Now()
	a.queue = append(a.queue, &waiting{req: req, arrived: now, waitEnds: now.Add(proxyWaitOf(req, time.Now()))})
	if len(a.queue) == 1 {
		a.cur = 0
		a.display("")
	} else {
		a.view.setPosition(a.cur+1, len(a.queue))
	}
	a.raise()
}

// withdraw removes the request with the given ID: its proxies went away.
func (a *approvals) withdraw(id string) {
	k := slices.IndexFunc(a.queue, func(w *waiting) bool { return w.req.ID == id })
	if k < 0 {
		return
	}
	w := a.queue[k]
	a.queue = slices.Delete(a.queue, k, k+1)
	switch {
	case k == a.cur:
		a.cur = max(min(a.cur, len(a.queue)-1), 0)
		a.display(fmt.Sprintf("The request to run %s was withdrawn: the agent stopped waiting for it, or it expired.", callName(w.req)))
	case k < a.cur:
		a.cur--
		a.view.setPosition(a.cur+1, len(a.queue))
	default:
		a.view.setPosition(a.cur+1, len(a.queue))
	}
}

// display puts the request at a.cur on screen, or the empty state, with a
// note about the request before it ("" for none).
func (a *approvals) display(note string) {
	a.screen++
	a.stopTimers()
	// No widget keeps the focus from the request before: a key press must
	// not answer a request its sender has not seen.
	a.win.Canvas().Unfocus()
	if len(a.queue) == 0 {
		a.view.showEmpty(note)
		return
	}
	w := a.queue[a.cur]
	a.view.setNote(note)
	a.view.showRequest(w.req, a.cur+1, len(a.queue))
	a.disarm()
	a.tick()
}

// disarm disables the answers for armDelay.
func (a *approvals) disarm() {
	if a.stopArm != nil {
		a.stopArm()
	}
	a.armed = false
	a.view.setArmed(false)
	screen := a.screen
	a.stopArm = a.clock.AfterFunc(armDelay, func() {
		a.u.do(func() {
			if a.screen == screen {
				a.armed = true
				a.view.setArmed(true)
			}
		})
	})
}

// tick shows the countdown of the request on screen, and schedules the next
// tick while the proxy still waits.
func (a *approvals) tick() {
	if len(a.queue) == 0 {
		return
	}
	w := a.queue[a.cur]
	left := w.waitEnds.Sub(a.clock.Now())
	setText(a.view.countdown, countdown(left, w.touched))
	if left <= 0 {
		return
	}
	next := left % time.Second
	if next == 0 {
		next = time.Second
	}
	screen := a.screen
	a.stopTick = a.clock.AfterFunc(next, func() {
		a.u.do(func() {
			if a.screen == screen {
				a.tick()
			}
		})
	})
}

// proxyWaitOf returns how long the proxy that sent req still waits for an
// answer, as of now: until the request's WaitUntil, or proxyWait from now
// when the proxy did not say (an older proxy). A wait the request puts
// beyond an hour, or in the past, is bounded to that.
func proxyWaitOf(req approval.Request, now time.Time) time.Duration {
	if req.WaitUntil.IsZero() {
		return proxyWait
	}
	return min(max(req.WaitUntil.Sub(now), 0), time.Hour)
}

// countdown says how long the agent still waits for an answer.
func countdown(left time.Duration, touched bool) string {
	switch {
	case left <= 0:
		return "The agent was told approval is pending and to retry: your answer applies to its next identical call."
	case touched:
		return fmt.Sprintf("The agent is waiting: it is told approval is pending in %d s. Take your time: your answer also applies to its next identical call.", int(math.Ceil(left.Seconds())))
	}
	return fmt.Sprintf("The agent is waiting: it is told approval is pending in %d s.", int(math.Ceil(left.Seconds())))
}

func (a *approvals) stopTimers() {
	for _, stop := range []func() bool{a.stopArm, a.stopTick} {
		if stop != nil {
			stop()
		}
	}
	a.stopArm, a.stopTick = nil, nil
}

// touch records that the person touched the window: the countdown of the
// request on screen stops.
func (a *approvals) touch() {
	if len(a.queue) == 0 || a.queue[a.cur].touched {
		return
	}
	a.queue[a.cur].touched = true
	if a.stopTick != nil {
		a.stopTick()
	}
	a.tick()
}

// typed takes a key typed on the window while no widget has the focus:
// Return gives the primary answer (Deny for a request to be careful with,
// else Allow once), Escape denies, the left and right arrows show the
// request before or after. Like a click, a key answers nothing while the
// answers are disarmed.
func (a *approvals) typed(e *fyne.KeyEvent) {
	a.touch()
	if len(a.queue) == 0 {
		if e.Name == fyne.KeyEscape || e.Name == fyne.KeyReturn || e.Name == fyne.KeyEnter {
			a.hide()
		}
		return
	}
	switch e.Name {
	case fyne.KeyReturn, fyne.KeyEnter:
		if carefulWith(a.queue[a.cur].req) {
			a.answer(approval.ScopeDeny)
		} else {
			a.answer(approval.ScopeOnce)
		}
	case fyne.KeyEscape:
		a.answer(approval.ScopeDeny)
	case fyne.KeyLeft:
		a.previous()
	case fyne.KeyRight:
		a.following()
	}
}

// previous and following show the request before or after the one on
// screen.
func (a *approvals) previous()  { a.move(-1) }
func (a *approvals) following() { a.move(+1) }

func (a *approvals) move(by int) {
	if k := a.cur + by; k >= 0 && k < len(a.queue) {
		a.cur = k
		a.display("")
	}
	a.touch()
}

// answer decides the request on screen with scope.
func (a *approvals) answer(scope approval.Scope) {
	if !a.armed || len(a.queue) == 0 {
		return
	}
	a.decide(a.queue[a.cur], scope, "")
}

// decide answers w with scope; rule, when not "", says in words the rule a
// standing answer wrote.
func (a *approvals) decide(w *waiting, scope approval.Scope, rule string) {
	minutes := 0
	if scope == approval.ScopeMinutes {
		minutes = a.minutes
	}
	var err error
	if a.decider == nil {
		err = fmt.Errorf("decide: %w", approval.ErrNotOpen)
	} else {
		// A button of this window took it: that is all the window can tell
		// of who pressed it.
		err = a.decider.Decide(w.req, approval.Answer{Scope: scope, Minutes: minutes, Via: approval.ViaWindow})
	}
	if k := slices.Index(a.queue, w); k >= 0 {
		a.queue = slices.Delete(a.queue, k, k+1)
		if k < a.cur {
			a.cur--
		}
	}
	a.cur = min(a.cur, max(len(a.queue)-1, 0))
	var note string
	switch {
	case err != nil && rule != "":
		a.u.log.Info("a standing answer came after its request closed", "err", err)
		note = fmt.Sprintf("Your answer to %s is a rule now: %s The agent stopped waiting for this call; its next call follows the rule.", callName(w.req), rule)
	case err != nil:
		a.u.log.Warn("answer an approval request", "err", err)
		note = fmt.Sprintf("Your answer to %s was not taken: the request is no longer open (the agent stopped waiting, or it expired).", callName(w.req))
	case rule != "":
		note = fmt.Sprintf("Answered %s: %s", callName(w.req), rule)
	default:
		note = fmt.Sprintf("Answered %s: %s.", callName(w.req), answered(scope, minutes))
	}
	if len(a.queue) == 0 && err == nil {
		a.display("")
		a.hide()
	} else {
		a.display(note)
	}
	a.u.approvalsChanged()
}

// askReach asks what a standing answer covers (this agent or every agent;
// for a file, its folder, the file, or any arguments), says the rule in
// words, and on confirmation writes the rule through the core, then
// answers. The rule is written at once, whether or not the agent still
// waits: an agent that stopped waiting finds it on its next call.
func (a *approvals) askReach(allow bool) {
	if !a.armed || len(a.queue) == 0 {
		return
	}
	a.touch()
	w := a.queue[a.cur]
	if w.req.Plan != nil {
		// A plan's standing answer holds for the program, in its server's
		// life: it writes no rule, so there is no reach to choose.
		scope := approval.ScopeAlways
		if !allow {
			scope = approval.ScopeAlwaysDeny
		}
		a.decide(w, scope, "")
		return
	}
	story := a.view.story
	rc := reach{args: argChoices(story)[0]}

	sentence := widget.NewLabel("")
	sentence.Wrapping = fyne.TextWrapWord
	update := func() { sentence.SetText(standingWords(w.req, story, allow, rc)) }

	agents := []string{agentChoice(w.req, false)}
	if oneClient(w.req.Client) {
		agents = append(agents, agentChoice(w.req, true))
	}
	who := widget.NewRadioGroup(agents, func(s string) {
		rc.allAgents = s == agentChoice(w.req, true)
		update()
	})
	who.Required = true
	who.SetSelected(agents[0])

	choices := argChoices(story)
	var names []string
	for _, c := range choices {
		names = append(names, argWords(story, c))
	}
	which := widget.NewRadioGroup(names, func(s string) {
		if i := slices.Index(names, s); i >= 0 {
			rc.args = choices[i]
		}
		update()
	})
	which.Required = true
	which.SetSelected(names[0])
	update()

	items := []fyne.CanvasObject{heading("For which agents"), who}
	if len(choices) > 1 {
		items = append(items, heading("For which calls of "+plainLine(w.req.Tool)), which)
	}
	items = append(items, widget.NewSeparator(), sentence)
	title, confirm, scope := "Always allow "+plainLine(w.req.Tool)+"?", "Always allow", approval.ScopeAlways
	if !allow {
		title, confirm, scope = "Always deny "+plainLine(w.req.Tool)+"?", "Always deny", approval.ScopeAlwaysDeny
	}
	d := dialog.NewCustomConfirm(title, confirm, "Cancel", container.NewVBox(items...), func(ok bool) {
		if !ok {
			return
		}
		rule, err := standingRule(w.req, story, allow, rc)
		if err != nil {
			// A rule cannot name the tool: the proxy keeps the answer
			// for its session.
			a.decide(w, scope, "")
			return
		}
		words := standingWords(w.req, story, allow, rc)
		goRead(a.u, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, a.u.core.addRule(ctx, rule)
		}, func(_ struct{}, err error) {
			if err != nil {
				p := explain("write the rule", err)
				a.view.setNote(p.title + ": " + p.text + " Nothing was answered; answer again when it is fixed.")
				return
			}
			a.decide(w, scope, words)
		})
	}, a.win)
	d.Resize(fyne.NewSize(min(560, a.win.Canvas().Size().Width-40), 0))
	d.Show()
}

// answered says what an answer did.
func answered(scope approval.Scope, minutes int) string {
	switch scope {
	case approval.ScopeOnce:
		return "allowed once"
	case approval.ScopeSession:
		return "allowed for this session"
	case approval.ScopeMinutes:
		return fmt.Sprintf("allowed for %d minutes", minutes)
	case approval.ScopeAlways:
		return "always allowed"
	case approval.ScopeDeny:
		return "denied"
	case approval.ScopeAlwaysDeny:
		return "always denied"
	}
	return string(scope)
}

// callName names a request's call in a sentence: "delete_branch on github".
func callName(r approval.Request) string {
	return plainLine(r.Tool) + " on " + plainLine(r.Server)
}

// chooseMinutes opens the menu of minutes under the button b.
func (a *approvals) chooseMinutes(b fyne.CanvasObject) {
	a.touch()
	var items []*fyne.MenuItem
	for _, n := range minuteChoices {
		it := fyne.NewMenuItem(fmt.Sprintf("%d minutes", n), func() { a.setMinutes(n) })
		it.Checked = n == a.minutes
		items = append(items, it)
	}
	cv := a.win.Canvas()
	pos := fyne.CurrentApp().Driver().AbsolutePositionForObject(b)
	m := widget.NewPopUpMenu(fyne.NewMenu("", items...), cv)
	size := m.MinSize()
	m.ShowAtPosition(fyne.NewPos(pos.X+b.Size().Width-size.Width, pos.Y-size.Height))
}

func (a *approvals) setMinutes(n int) {
	a.minutes = n
	a.view.minutes.SetText(labelMinutes(n))
	a.touch()
}

// windowSize is the approval window's size: the same for every request, so
// that the answers stay where the pointer found them.
var windowSize = fyne.NewSize(640, 640)

// raise shows the window in front of the others.
func (a *approvals) raise() {
	if !a.visible {
		a.win.Resize(windowSize)
		if !a.placed {
			a.placed = true
			a.win.CenterOnScreen()
		}
		a.win.Show()
		a.visible = true
		if len(a.queue) > 0 {
			a.disarm() // it just appeared under the pointer
		}
	}
	a.win.RequestFocus()
}

// hide hides the window; the requests stay in the queue.
func (a *approvals) hide() {
	a.win.Hide()
	a.visible = false
}

// close stops the timers.
func (a *approvals) close() {
	a.screen++
	a.stopTimers()
}
