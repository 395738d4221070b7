package app

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A verification is what checking one entry against the log found.
type verification struct {
	signature error // nil: signed by a key of the log, and the signature holds
	keyID     string
	inclusion error // nil: the entry is a leaf of the checkpoint's tree
	size      int64 // the checkpoint's size
	root      string
	payloads  error // nil: every payload left matches its commitment
}

func (v verification) ok() bool { return v.signature == nil && v.inclusion == nil && v.payloads == nil }

// verifyEntry checks s the way an auditor's verifier does, against the log
// as it is now: its signature by the key it names (a key the log
// announced), its inclusion in the log's tree as it is now, and each
// payload not erased against its salted commitment.
func verifyEntry(ctx context.Context, l *receipts.Reader, s receipts.Stored) (verification, error) {
	var v verification
	e, err := entry.Parse(s.Data)
	if err != nil {
		return v, fmt.Errorf("entry %d: %w", s.Index, err)
	}
	v.keyID = e.Key
	keys, err := l.Keys(ctx)
	if err != nil {
		return v, err
	}
	var pub ed25519.PublicKey
	for _, k := range keys {
		if k.ID == e.Key {
			pub = k.Public
		}
	}
	switch {
	case pub == nil:
		v.signature = fmt.Errorf("signed by key %s, which the log never announced", e.Key)
	default:
		v.signature = entry.Verify(e, pub)
	}

	cp, err := l.Tree(ctx)
	if err != nil {
		return v, err
	}
	v.size, v.root = cp.Size, entry.FormatTreeHash(cp.Hash)
	proof, err := l.ProveInclusion(ctx, s.Index, cp.Size)
	if err != nil {
		v.inclusion = err
	} else {
		v.inclusion = tlog.CheckRecord(proof, cp.Size, cp.Hash, s.Index, entry.LeafHash(s.Data))
	}

	for _, p := range s.Payloads {
		if p.Erased() || p.Data == nil {
			continue
		}
		if entry.Commit(p.Salt, p.Data) != p.Commitment {
			v.payloads = fmt.Errorf("the %s do not match their commitment", partName(p.Part))
		}
	}
	return v, nil
}

// partName names a payload's part in a sentence.
func partName(part string) string {
	switch part {
	case "args":
		return "arguments"
	case "result":
		return "result"
	}
	return part
}

// An entryView is everything the detail pane shows of one entry.
type entryView struct {
	stored  receipts.Stored
	e       *entry.Entry
	check   verification
	outcome *receipts.Stored // a receipt's outcome, once written
	oe      *entry.Entry
	erasure map[int64]string // index of an erasure entry -> "reason (time)"
}

// entryDetail is the right side of the History view.
type entryDetail struct {
	p       *historyPage
	content fyne.CanvasObject
	body    *container.Scroll
	hit     receipts.Hit
	cur     *entryView
	gen     uint64
}

func newEntryDetail(p *historyPage) *entryDetail {
	d := &entryDetail{p: p}
	hint := text("Select an entry to see it whole: the signed entry, its verification, and its arguments and result.",
		widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignCenter})
	hint.Wrapping = fyne.TextWrapWord
	d.body = container.NewVScroll(container.New(layout.NewCustomPaddedLayout(theme.Padding()*8, 0, theme.Padding()*4, theme.Padding()*4), hint))
	d.content = container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding(), 0), newPanel(theme.ColorNameInputBackground, 0, d.body))
	return d
}

// show reads the entry of h, checks it, and shows it.
func (d *entryDetail) show(h receipts.Hit) {
	d.hit = h
	d.gen++
	gen := d.gen
	goRead(d.p.u, func(ctx context.Context) (*entryView, error) {
		return readEntry(ctx, d.p.u.core, h.ID)
	}, func(v *entryView, err error) {
		if gen != d.gen {
			return
		}
		if err != nil {
			pr := explain("read the entry", err)
			d.setBody(container.NewVBox(heading(pr.title), widget.NewLabel(pr.text), widget.NewLabel(pr.hint)))
			return
		}
		d.setBody(d.render(v))
		d.cur = v
	})
}

// readEntry reads the entry id, its outcome and the erasures of its
// payloads, and verifies it.
func readEntry(ctx context.Context, c *core, id string) (*entryView, error) {
	l, err := c.reader(ctx)
	if err != nil {
		return nil, err
	}
	s, err := l.EntryByID(ctx, id)
	if err != nil {
		return nil, err
	}
	v := &entryView{stored: s, erasure: map[int64]string{}}
	if v.e, err = entry.Parse(s.Data); err != nil {
		return nil, err
	}
	if v.check, err = verifyEntry(ctx, l, s); err != nil {
		return nil, err
	}
	payloads := s.Payloads
	if v.e.Kind == entry.KindReceipt {
		o, err := l.OutcomeOf(ctx, v.e.ID)
		switch {
		case err == nil:
			v.outcome = &o
			if v.oe, err = entry.Parse(o.Data); err != nil {
				return nil, err
			}
			payloads = append(payloads, o.Payloads...)
		case !errors.Is(err, receipts.ErrNotFound):
			return nil, err
		}
	}
	for _, p := range payloads {
		if !p.Erased() {
			continue
		}
		for es, err := range l.Entries(ctx, p.ErasedBy, p.ErasedBy+1) {
			if err != nil {
				return nil, err
			}
			ee, err := entry.Parse(es.Data)
			if err != nil {
				return nil, err
			}
			var body entry.ErasureEvent
			json.Unmarshal(ee.Body, &body)
			v.erasure[p.ErasedBy] = fmt.Sprintf("%s on %s (%s)", ee.ID, entryTime(ee).Local().Format("Jan 2, 2006 at 15:04"), plainLine(body.Reason))
		}
	}
	return v, nil
}

func entryTime(e *entry.Entry) time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.Time)
	return t
}

func (d *entryDetail) setBody(o fyne.CanvasObject) {
	d.body.Content = container.New(layout.NewCustomPaddedLayout(theme.Padding(), theme.Padding(), theme.Padding(), theme.Padding()), o)
	d.body.Offset = fyne.Position{}
	d.body.Refresh()
}

// render lays out an entry: what it records, its verification, its
// payloads, and the signed entry itself.
func (d *entryDetail) render(v *entryView) fyne.CanvasObject {
	e := v.e
	var sections []fyne.CanvasObject

	// Title.
	h := d.hit
	title := text(hitTitle(h), widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}})
	title.Wrapping = fyne.TextWrapBreak
	c := newChip()
	c.set(hitChip(h))
	word, col := statusLook(h)
	status := text(word, widget.RichTextStyle{ColorName: col, TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	sections = append(sections, title, container.NewHBox(container.NewCenter(c), status))

	// What the call was about, and what can be done with it, first: the
	// arguments and result, with Copy and Erase. The evidence follows.
	var payloads []fyne.CanvasObject

	// Facts.
	facts := container.New(layout.NewFormLayout())
	fact := func(k, val string, mono bool) {
		if val == "" {
			return
		}
		l := widget.NewLabel(val)
		l.TextStyle.Monospace = mono
		l.Wrapping = fyne.TextWrapWord
		if mono {
			l.Wrapping = fyne.TextWrapBreak
		}
		l.Selectable = true
		facts.Add(text(k, widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignTrailing}))
		facts.Add(l)
	}
	fact("When", entryTime(e).Local().Format("Jan 2, 2006, 15:04:05.000 MST"), false)
	fact("Entry", fmt.Sprintf("%s, %s #%s", e.ID, e.Kind, thousands(int(e.Index))), true)
	switch e.Kind {
	case entry.KindReceipt:
		var r entry.Receipt
		json.Unmarshal(e.Body, &r)
		client := r.Client.Name
		if r.Client.Version != "" {
			client += " " + r.Client.Version
		}
		fact("Client", plainLine(client), false)
		fact("Tool", toolWords(r.Capability)+" (capability "+plainLine(r.Capability)+")", false)
		fact("Decided by", ruleName(r.Rule), false)
		if o := r.Observed; o != nil {
			sections = append(sections, newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
				container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.VisibilityIcon()))), nil,
				compact(text(capitalize(observedWords(*o)), widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}),
					textBlock("Rule "+plainLine(o.Rule)+" is in observe mode: it records what it would decide, and the call was decided without it, by rule "+plainLine(r.Rule)+". Set the rule to enforce when it decides as you want.", widget.RichTextStyle{})))))
		}
		if a := r.Approver; a != nil {
			by := a.Kind + ": " + a.Scope
			if a.Until != "" {
				by += " until " + a.Until
			}
			if w := viaWords(a.Via); w != "" {
				by += " (" + w + ")"
			}
			fact("Answered by", by, false)
		}
		fact("Session", r.Session, true)
		fact("Policy", r.PolicyHash, true)
		fact("Tool definition", r.ToolHash, true)
		if v.oe != nil {
			var o entry.Outcome
			json.Unmarshal(v.oe.Body, &o)
			fact("Outcome", fmt.Sprintf("%s in %.1f ms (%s)", o.Status, o.DurationMS, v.oe.ID), false)
			if len(o.Redactions) > 0 {
				var parts []string
				for _, f := range o.Redactions {
					parts = append(parts, fmt.Sprintf("%s ×%d (%s)", f.Secret, f.Count, f.Encoding))
				}
				fact("Redacted", strings.Join(parts, ", "), false)
			}
		}
	case entry.KindOutcome:
		var o entry.Outcome
		json.Unmarshal(e.Body, &o)
		fact("Receipt", o.Receipt, true)
		fact("Status", fmt.Sprintf("%s in %.1f ms", o.Status, o.DurationMS), false)
	}
	// Payloads.
	showPayload := func(label string, p receipts.Payload) {
		box := []fyne.CanvasObject{heading(label)}
		switch {
		case p.Erased():
			by := v.erasure[p.ErasedBy]
			if by == "" {
				by = fmt.Sprintf("entry #%d", p.ErasedBy)
			}
			box = append(box, newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
				container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.DeleteIcon()))), nil,
				compact(text("Erased: only its commitment remains", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}),
					textBlock("By "+by+". The signature still verifies: the entry holds a salted commitment, not the payload. Commitment "+p.Commitment+".", widget.RichTextStyle{})))))
		case p.NotKept != nil:
			box = append(box, newPanel(theme.ColorNameWarning, 0x22, container.NewBorder(nil, nil,
				container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.InfoIcon()))), nil,
				compact(text("Not kept: too large to store", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}}),
					textBlock(fmt.Sprintf("%d bytes, over the log's cap of %d bytes. The signed entry says so, and commits to all of it: whoever kept the payload can show it is this one. Commitment %s.", p.NotKept.Size, p.NotKept.Cap, p.Commitment), widget.RichTextStyle{})))))
		case len(p.Data) == 0:
			box = append(box, text("none", secondary))
		default:
			box = append(box, newPanel(theme.ColorNameBackground, 0, textBlock(prettyJSON(p.Data, false), widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}})))
		}
		payloads = append(payloads, container.NewVBox(box...))
	}
	erasable := false
	for _, p := range v.stored.Payloads {
		showPayload(capitalize(partName(p.Part))+" (as stored, after redaction)", p)
		erasable = erasable || !p.Erased()
	}
	if v.outcome != nil {
		for _, p := range v.outcome.Payloads {
			showPayload("Result (as stored, after redaction)", p)
			erasable = erasable || !p.Erased()
		}
	}

	// Actions.
	copyEntry := widget.NewButtonWithIcon("Copy entry", theme.ContentCopyIcon(), func() {
		d.p.u.app.Clipboard().SetContent(string(v.stored.Data))
	})
	var actions []fyne.CanvasObject
	actions = append(actions, copyEntry)
	if erasable {
		erase := widget.NewButtonWithIcon("Erase…", theme.DeleteIcon(), func() { d.erase(v) })
		erase.Importance = widget.DangerImportance
		actions = append(actions, erase)
	}
	sections = append(sections, container.NewHBox(actions...))
	sections = append(sections, payloads...)
	sections = append(sections, verificationView(v.check), facts)

	// The signed entry.
	var pretty bytes.Buffer
	json.Indent(&pretty, v.stored.Data, "", "  ")
	signedBox := widget.NewAccordion(widget.NewAccordionItem("Signed entry (RFC 8785 canonical JSON, Ed25519)",
		newPanel(theme.ColorNameBackground, 0, textBlock(plain(pretty.String()), widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}))))
	sections = append(sections, signedBox)

	return container.NewVBox(sections...)
}

// verificationView shows a verification, a line a check.
func verificationView(v verification) fyne.CanvasObject {
	line := func(err error, okText string) fyne.CanvasObject {
		icon := widget.NewIcon(theme.NewSuccessThemedResource(theme.ConfirmIcon()))
		t := okText
		c := theme.ColorNameForeground
		if err != nil {
			icon = widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))
			t, c = sentence(err), theme.ColorNameError
		}
		l := text(t, widget.RichTextStyle{ColorName: c, Inline: true})
		l.Wrapping = fyne.TextWrapWord
		return container.NewBorder(nil, nil, container.NewVBox(icon), nil, l)
	}
	title := "Verified"
	color := theme.ColorNameSuccess
	if !v.ok() {
		title, color = "Verification failed", theme.ColorNameError
	}
	return newPanel(color, 0x1C, container.NewVBox(
		text(title, widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: color}),
		line(v.signature, "Signature valid: signed by key "+v.keyID+", announced in the log."),
		line(v.inclusion, fmt.Sprintf("In the log: its inclusion proof leads to the log's tree as it is now (%s entries, root %s).", thousands(int(v.size)), shortHash(v.root))),
		line(v.payloads, "Payloads match the salted commitments the entry signs (erased ones aside)."),
	))
}

// shortHash shortens a base64 hash for reading.
func shortHash(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// erase asks for a reason, then erases the payloads of the entry shown
// (and of its outcome): the log appends an erasure entry naming what was
// erased and why; every signature still verifies.
func (d *entryDetail) erase(v *entryView) {
	ids := []string{v.e.ID}
	if v.oe != nil {
		ids = append(ids, v.oe.ID)
	}
	reason := widget.NewEntry()
	reason.SetPlaceHolder("why, e.g. a deletion request and its reference")
	reason.Validator = func(s string) error {
		if strings.TrimSpace(s) == "" {
			return errors.New("give a reason")
		}
		return nil
	}
	msg := widget.NewLabel("The arguments and result of this call are deleted from the database and the search index. " +
		"The entry stays, with its commitment, so the log still verifies. This cannot be undone.")
	msg.Wrapping = fyne.TextWrapWord
	items := []*widget.FormItem{
		widget.NewFormItem("", msg),
		{Text: "Reason", Widget: reason, HintText: "Recorded in the log, where it cannot be erased: no personal data."},
	}
	dlg := dialog.NewForm("Erase this call's payloads?", "Erase", "Cancel", items, func(ok bool) {
		r := strings.TrimSpace(reason.Text)
		if !ok || r == "" {
			return
		}
		u := d.p.u
		goRead(u, func(ctx context.Context) (*entry.Entry, error) {
			l, err := u.core.evidence(ctx)
			if err != nil {
				return nil, err
			}
			return l.Erase(ctx, ids, r)
		}, func(e *entry.Entry, err error) {
			if err != nil {
				dialog.ShowError(fmt.Errorf("erase: %w", err), u.win)
				return
			}
			d.show(d.hit)
			u.pollOnce()
		})
	}, d.p.u.win)
	dlg.Resize(fyne.NewSize(520, 0))
	dlg.Show()
}

// viaWords says how an answer came, from a receipt's approver via: "" when
// the receipt does not say (it is older than the member).
func viaWords(via string) string {
	switch via {
	case "":
		return ""
	case entry.ViaWindow:
		return "in the approval window"
	case entry.ViaTerminal:
		return "typed in a terminal"
	case entry.ViaPiped:
		return "read from piped input: nobody is known to have seen it"
	case entry.ViaAutomatic:
		return "answered automatically: nobody was asked"
	case entry.ViaGrant:
		return "an earlier answer reused: nobody was asked about this call"
	}
	return plainLine(via)
}
