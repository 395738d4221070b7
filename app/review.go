package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// A review is a person's answer to a changed tool, outside any call.
type review int

const (
	reviewAccept review = iota // the listed definition becomes the accepted one
	reviewReject               // the accepted one stays; calls of the listed one are denied
	reviewBlock                // a deny rule for the tool, whatever its definition
)

// Labels of the review's answers.
const (
	labelAccept = "Accept the new definition"
	labelReject = "Reject the change"
	labelBlock  = "Block the tool"
)

// showChange shows what changed in a tool's definition, and takes the
// person's answer: accept it, reject it, or block the tool.
func (d *serverDetail) showChange(t gate.ToolStatus) {
	if t.Change == nil {
		return
	}
	server := d.server
	lines := diffLines(strings.Split(prettyJSON(t.Change.Old, false), "\n"), strings.Split(prettyJSON(t.Change.New, false), "\n"), 2)
	intro := "The server lists a definition of " + plainLine(t.Name) + " other than the one you accepted. Its calls are held for your review."
	if t.Rejected {
		intro = "You rejected this definition of " + plainLine(t.Name) + ": its calls are denied while the server lists it. You may still accept it, or block the tool."
	}
	parts := []fyne.CanvasObject{wrapLabel(intro)}
	if found := newlySensitive(t.Change.Old, t.Change.New); len(found) > 0 {
		warn := wrapText("It now mentions "+sensitiveList(found)+", which it did not before. A tool that changes to reach for secrets is a known attack: reject it or block the tool unless you expected this.",
			widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: theme.ColorNameWarning})
		parts = append(parts, newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
			container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil, warn)))
	}
	parts = append(parts,
		note("−  as you accepted it     +  as the server lists it now"),
		newPanel(theme.ColorNameInputBackground, 0, diffView(lines)))
	scroll := container.NewVScroll(container.NewVBox(parts...))
	scroll.SetMinSize(fyne.NewSize(680, 400))

	accept := widget.NewButtonWithIcon(labelAccept, theme.ConfirmIcon(), nil)
	reject := widget.NewButtonWithIcon(labelReject, theme.CancelIcon(), nil)
	block := widget.NewButtonWithIcon(labelBlock, theme.ErrorIcon(), nil)
	block.Importance = widget.DangerImportance
	closeBtn := widget.NewButton("Close", nil)
	// With a mention of secrets, the safe answer is the primary one.
	if len(newlySensitive(t.Change.Old, t.Change.New)) > 0 {
		reject.Importance = widget.HighImportance
	} else {
		accept.Importance = widget.HighImportance
	}
	if t.Rejected {
		reject.Disable()
	}
	status := text("", caption)
	buttons := container.NewHBox(closeBtn, layout.NewSpacer(), block, reject, accept)
	dlg := dialog.NewCustomWithoutButtons("What changed in "+plainLine(t.Name), container.NewBorder(nil, container.NewVBox(status, buttons), nil, nil, scroll), d.p.u.win)
	answer := func(r review) func() {
		return func() {
			for _, b := range []*widget.Button{accept, reject, block} {
				b.Disable()
			}
			setText(status, "Saving…")
			d.p.u.reviewChange(server, t, r, func(err error) {
				if err != nil {
					setText(status, err.Error())
					for _, b := range []*widget.Button{accept, reject, block} {
						b.Enable()
					}
					return
				}
				dlg.Hide()
			})
		}
	}
	accept.OnTapped = answer(reviewAccept)
	reject.OnTapped = answer(reviewReject)
	block.OnTapped = answer(reviewBlock)
	closeBtn.OnTapped = dlg.Hide
	d.review = dlg
	dlg.Show()
}

// reviewChange carries out a person's answer to a changed tool of server,
// then reads again what shows it: the tools, the server list, the status.
// done runs on the Fyne thread with what went wrong, if anything, as a
// sentence.
func (u *UI) reviewChange(server store.Server, t gate.ToolStatus, r review, done func(error)) {
	goRead(u, func(ctx context.Context) (struct{}, error) {
		switch r {
		case reviewAccept:
			l, err := u.core.evidence(ctx)
			if err != nil {
				return struct{}{}, err
			}
			return struct{}{}, gate.AcceptChange(ctx, u.st, l, server.Name, t.Name, t.ListedHash)
		case reviewReject:
			return struct{}{}, gate.RejectChange(ctx, u.st, server.Name, t.Name, t.ListedHash)
		}
		ps, err := u.core.policies(ctx)
		if err != nil {
			return struct{}{}, err
		}
		cur, err := ps.Current(ctx)
		if err != nil {
			return struct{}{}, err
		}
		next := cur.Clone()
		capability := policy.Capability(server.Name, t.Name)
		id := blockRuleID(capability)
		var rules []policy.Rule
		for _, rule := range next.Rules {
			if rule.ID != id {
				rules = append(rules, rule)
			}
		}
		next.Rules = append(rules, policy.Rule{ID: id, Capability: capability, Decision: policy.Deny,
			Note: "blocked in the Gatehouse app when its definition changed"})
		_, err = ps.Save(ctx, next)
		return struct{}{}, err
	}, func(_ struct{}, err error) {
		if err != nil {
			u.log.Error("review a changed tool", "err", err)
			what := map[review]string{reviewAccept: "accept the change", reviewReject: "reject the change", reviewBlock: "block the tool"}[r]
			if errors.Is(err, gate.ErrNotHeld) {
				err = fmt.Errorf("the server lists another definition of %s since this one was shown: close and review it again", plainLine(t.Name))
			} else {
				pr := explain(what, err)
				err = errors.New(pr.title + ": " + pr.text + " " + pr.hint)
			}
		}
		done(err)
		u.view.refresh()
		u.refreshStatus()
	})
}

// blockRuleID names the rule that blocks capability: readable when the
// capability is, else its hash.
func blockRuleID(capability string) string {
	rest := strings.ReplaceAll(strings.TrimPrefix(capability, "mcp."), ".", "-")
	if len(rest) <= 180 && ruleIDChars.MatchString(rest) {
		return "block-" + rest
	}
	sum := sha256.Sum256([]byte(capability))
	return "block-" + hex.EncodeToString(sum[:8])
}

var ruleIDChars = regexp.MustCompile(`^[A-Za-z0-9._:/@+-]+$`)

// readHeld counts, for each server, its tools held for review: their
// definition changed since it was accepted. Servers whose tools cannot be
// read are left out. It runs on a read's goroutine.
func (u *UI) readHeld(ctx context.Context, servers []store.Server) map[string]int {
	held := map[string]int{}
	ps, err := u.core.policies(ctx)
	if err != nil {
		return held
	}
	pol, err := ps.Current(ctx)
	if err != nil {
		return held
	}
	for _, s := range servers {
		ts, err := gate.Tools(ctx, u.st, pol, s.Name, s.Trusted, policy.PackByRef(s.Pack))
		if err != nil {
			continue
		}
		if n := countHeld(ts); n > 0 {
			held[s.Name] = n
		}
	}
	return held
}

// heldWords says how many of a server's tools are held for review.
func heldWords(n int) string {
	return plural(n, "changed tool", "changed tools")
}
