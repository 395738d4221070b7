package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// exportPage is the Export view: choose what goes in a bundle and where,
// write it, and see it verified as an auditor would.
type exportPage struct {
	u       *UI
	content fyne.CanvasObject

	period   *widget.Select
	server   *widget.Select
	decision *widget.Select
	status   *widget.Select
	payloads *widget.Check
	archive  *widget.Check
	folder   *widget.Entry
	since    *widget.Entry
	run      *widget.Button
	progress *widget.ProgressBarInfinite
	result   *fyne.Container
	scroll   *container.Scroll // the choices, then the result

	// exported, when set, runs after an export's result is on screen.
	// Tests use it to wait without sleeping.
	exported func()
}

// exportResult is what an export did.
type exportResult struct {
	out    *receipts.Exported
	report *verify.Report
}

func newExportPage(u *UI) *exportPage {
	p := &exportPage{u: u}
	p.period = widget.NewSelect(timeChoices.labels(), nil)
	p.period.SetSelected("All time")
	p.server = widget.NewSelect([]string{allServers}, nil)
	p.server.SetSelected(allServers)
	p.decision = widget.NewSelect(decisionChoices.labels(), nil)
	p.decision.SetSelected(decisionChoices[0].label)
	p.status = widget.NewSelect(statusChoices.labels(), nil)
	p.status.SetSelected(statusChoices[0].label)
	p.payloads = widget.NewCheck("Include arguments and results", nil)
	p.payloads.SetChecked(true)
	p.archive = widget.NewCheck("One .tar.gz file instead of a folder", nil)

	p.folder = widget.NewEntry()
	p.folder.SetText(defaultExportFolder())
	choose := widget.NewButtonWithIcon("Choose…", theme.FolderOpenIcon(), func() {
		d := dialog.NewFolderOpen(func(uri fyne.ListableURI, err error) {
			if err == nil && uri != nil {
				p.folder.SetText(uri.Path())
			}
		}, u.win)
		d.Show()
	})
	p.since = widget.NewEntry()
	p.since.SetPlaceHolder("optional: the checkpoint file of an earlier export")
	chooseSince := widget.NewButtonWithIcon("Choose…", theme.FileIcon(), func() {
		d := dialog.NewFileOpen(func(r fyne.URIReadCloser, err error) {
			if err == nil && r != nil {
				p.since.SetText(r.URI().Path())
				r.Close()
			}
		}, u.win)
		d.Show()
	})

	p.run = widget.NewButtonWithIcon("Export and verify", theme.DownloadIcon(), p.export)
	p.run.Importance = widget.HighImportance
	p.progress = widget.NewProgressBarInfinite()
	p.progress.Stop()
	p.progress.Hide()
	p.result = container.NewVBox()
	p.showPlaceholder()

	form := widget.NewForm(
		widget.NewFormItem("Period", p.period),
		widget.NewFormItem("Server", p.server),
		widget.NewFormItem("Decision", p.decision),
		widget.NewFormItem("Outcome", p.status),
		&widget.FormItem{Widget: p.payloads, HintText: "without them, the bundle proves only what they were, not what they said"},
		&widget.FormItem{Text: "Into folder", Widget: container.NewBorder(nil, nil, nil, choose, p.folder), HintText: "a new bundle is made in it, named after the time"},
		widget.NewFormItem("", p.archive),
		&widget.FormItem{Text: "Extends", Widget: container.NewBorder(nil, nil, nil, chooseSince, p.since), HintText: "proves this log extends the one an earlier bundle saw"},
	)
	what := textBlock("The bundle holds the entries chosen and what an auditor needs to check them offline, with nothing but the bundle: "+
		"the log's public keys, a signed checkpoint, inclusion proofs, a CSV and an HTML report. "+
		"It is checked here, as `gatehouse verify` checks it, as soon as it is written.", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder})
	card := newPanel(theme.ColorNameInputBackground, 0, container.NewVBox(what, form))

	// One column, which fits the narrowest window: the choices, then the
	// result, scrolled; the button stays on screen below them.
	header := pageHeader("Export for an auditor", "A verifiable bundle of the evidence log: the calls you choose, their decisions and outcomes, signed and provable.")
	actions := container.NewVBox(p.progress, container.NewHBox(layout.NewSpacer(), p.run))
	p.scroll = container.NewVScroll(container.NewVBox(card, p.result))
	body := container.NewBorder(nil, actions, nil, nil, p.scroll)
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(body))
	return p
}

// showPlaceholder says where the result will be.
func (p *exportPage) showPlaceholder() {
	p.result.RemoveAll()
	p.result.Add(container.New(layout.NewCustomPaddedLayout(theme.Padding()*8, 0, theme.Padding()*4, theme.Padding()*4),
		container.NewVBox(
			container.NewCenter(widget.NewIcon(theme.NewColoredResource(theme.DownloadIcon(), theme.ColorNamePlaceHolder))),
			wrapText("The bundle's path, what it holds, and each check of its verification appear here once it is written.",
				widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, Alignment: fyne.TextAlignCenter}))))
}

// defaultExportFolder is where bundles go unless the user chooses: the
// Documents folder, else the home folder.
func defaultExportFolder() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	if fi, err := os.Stat(filepath.Join(home, "Documents")); err == nil && fi.IsDir() {
		return filepath.Join(home, "Documents")
	}
	return home
}

// refresh reads the servers for the server filter.
func (p *exportPage) refresh() {
	goRead(p.u, func(ctx context.Context) ([]store.Server, error) {
		return p.u.st.Servers(ctx)
	}, func(servers []store.Server, err error) {
		if err != nil {
			return
		}
		opts := []string{allServers}
		for _, s := range servers {
			opts = append(opts, s.Name)
		}
		p.server.Options = opts
		if !slices.Contains(opts, p.server.Selected) {
			p.server.SetSelected(allServers)
		}
		p.server.Refresh()
	})
}

// filter returns the export filter the form chooses, at now.
func (p *exportPage) filter(now time.Time) receipts.ExportFilter {
	var f receipts.ExportFilter
	if span := timeChoices.value(p.period.Selected); span > 0 {
		f.From = now.Add(-span)
	}
	if s := p.server.Selected; s != allServers && s != "" {
		f.Servers = []string{s}
	}
	if d := decisionChoices.value(p.decision.Selected); d != "" {
		f.Decisions = []string{d}
	}
	if s := statusChoices.value(p.status.Selected); s != "" {
		f.Statuses = []string{s}
	}
	return f
}

// bundleName names a new bundle after the time it is made.
func bundleName(now time.Time, archive bool) string {
	name := "gatehouse-evidence-" + now.Local().Format("2006-01-02-150405")
	if archive {
		name += ".tar.gz"
	}
	return name
}

// freshPath returns name in folder, or, when that exists (two exports in
// the same second), name with -2, -3 … before its extension.
func freshPath(folder, name string) string {
	base, ext := name, ""
	if b, ok := strings.CutSuffix(name, ".tar.gz"); ok {
		base, ext = b, ".tar.gz"
	}
	p := filepath.Join(folder, name)
	for i := 2; ; i++ {
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			return p
		}
		p = filepath.Join(folder, fmt.Sprintf("%s-%d%s", base, i, ext))
	}
}

// export writes the bundle and verifies it.
func (p *exportPage) export() {
	folder := expandTilde(strings.TrimSpace(p.folder.Text))
	p.result.RemoveAll()
	if folder == "" || !filepath.IsAbs(folder) {
		p.showError(problem{title: "Choose a folder", text: "Type or choose the absolute path of a folder for the bundle."})
		return
	}
	if fi, err := os.Stat(folder); err != nil || !fi.IsDir() {
		p.showError(problem{title: "No such folder", text: folder + " is not a folder that exists."})
		return
	}
	now := p.u.clock.Now()
	opts := &receipts.ExportOptions{Filter: p.filter(now), NoPayloads: !p.payloads.Checked, Generator: "gatehouse-app"}
	if s := strings.TrimSpace(p.since.Text); s != "" {
		data, err := os.ReadFile(expandTilde(s))
		if err != nil {
			p.showError(explain("read the earlier checkpoint", err))
			return
		}
		opts.Since = data
	}
	out := freshPath(folder, bundleName(now, p.archive.Checked))
	p.run.Disable()
	p.progress.Show()
	p.progress.Start()
	// An export of a million entries takes minutes: no read deadline.
	if !p.u.startRead() {
		return
	}
	go func() {
		defer p.u.reads.Done()
		r, err := exportAndVerify(p.u.ctx, p.u.core, out, opts)
		p.u.do(func() {
			defer p.u.inflight.Add(-1)
			p.run.Enable()
			p.progress.Stop()
			p.progress.Hide()
			if err != nil {
				pr := explain("export", err)
				if errors.Is(err, receipts.ErrInconsistent) {
					pr.title = "This log does not extend the earlier export's"
					pr.hint = "The log was truncated or rewritten since that checkpoint, or it is another log. Nothing was exported."
				}
				p.showError(pr)
			} else {
				p.showResult(r)
			}
			if p.exported != nil {
				p.exported()
			}
		})
	}()
}

// exportAndVerify writes the bundle to out and verifies it offline.
func exportAndVerify(ctx context.Context, c *core, out string, opts *receipts.ExportOptions) (exportResult, error) {
	l, err := c.evidence(ctx)
	if err != nil {
		return exportResult{}, err
	}
	ex, err := l.Export(ctx, out, opts)
	if err != nil {
		return exportResult{}, err
	}
	fsys, err := verify.Open(ex.Path)
	if err != nil {
		return exportResult{out: ex}, err
	}
	rep, err := verify.Bundle(ctx, fsys, &verify.Options{Since: opts.Since})
	if c, ok := fsys.(interface{ Close() error }); ok {
		c.Close()
	}
	return exportResult{out: ex, report: rep}, err
}

func (p *exportPage) showError(pr problem) {
	p.result.RemoveAll()
	b := newProblemBanner(p.export)
	b.show(&pr, 0)
	p.result.Add(b.content)
	p.scroll.ScrollToBottom()
}

// showResult shows where the bundle is, what it holds, and each check of
// its verification.
func (p *exportPage) showResult(r exportResult) {
	p.result.RemoveAll()
	ok := r.report != nil && r.report.OK()
	title, col := "Exported and verified", theme.ColorNameSuccess
	if !ok {
		title, col = "Exported, but the bundle does not verify", theme.ColorNameError
	}
	m := r.out.Manifest
	summary := fmt.Sprintf("%s entries chosen, %s in the bundle with those they need to verify; %s payloads (%s erased).",
		thousands(int(m.Counts.Selected)), thousands(int(m.Counts.Entries)), thousands(int(m.Counts.Payloads)), thousands(int(m.Counts.Erased)))
	path := widget.NewLabel(r.out.Path)
	path.TextStyle.Monospace = true
	path.Wrapping = fyne.TextWrapBreak
	path.Selectable = true
	copyPath := widget.NewButtonWithIcon("Copy path", theme.ContentCopyIcon(), func() { p.u.app.Clipboard().SetContent(r.out.Path) })
	pin := widget.NewLabel("Pin the log's first key when you first trust it: gatehouse verify --pin-key " + r.out.FirstKey + " BUNDLE")
	pin.Wrapping = fyne.TextWrapWord
	pin.TextStyle.Monospace = true
	rows := []fyne.CanvasObject{
		text(title, widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}, ColorName: col}),
		path, copyPath,
		textBlock(summary, widget.RichTextStyle{}),
		textBlock(fmt.Sprintf("Checkpoint: %s entries, tree %s. Filters: %s.", thousands(int(r.out.Checkpoint.Size)), shortHash(entry.FormatTreeHash(r.out.Checkpoint.Hash)), m.Filters), widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder}),
	}
	if r.report != nil {
		checks := container.NewVBox()
		for _, c := range r.report.Checks {
			checks.Add(checkRow(c))
		}
		rows = append(rows, heading("Verification, as an auditor runs it"), checks)
	}
	rows = append(rows, pin)
	p.result.Add(newPanel(col, 0x18, container.NewVBox(rows...)))
	p.scroll.Content.Refresh()
	p.scroll.ScrollToOffset(fyne.NewPos(0, p.result.Position().Y)) // the result, under the choices
}

// checkRow shows one check of a verification report.
func checkRow(c *verify.Check) fyne.CanvasObject {
	var icon *widget.Icon
	col := theme.ColorNameForeground
	switch c.Status {
	case verify.OK:
		icon = widget.NewIcon(theme.NewSuccessThemedResource(theme.ConfirmIcon()))
	case verify.Failed:
		icon = widget.NewIcon(theme.NewErrorThemedResource(theme.ErrorIcon()))
		col = theme.ColorNameError
	default:
		icon = widget.NewIcon(theme.NewColoredResource(theme.ContentRemoveIcon(), theme.ColorNamePlaceHolder))
		col = theme.ColorNamePlaceHolder
	}
	detail := c.Detail
	for _, pr := range c.Problems {
		detail += "; " + pr.Msg
	}
	t := widget.NewRichText(
		&widget.TextSegment{Text: c.Name, Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, ColorName: col, Inline: true}},
		&widget.TextSegment{Text: "  " + detail, Style: widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder, SizeName: theme.SizeNameCaptionText, Inline: true}},
	)
	t.Wrapping = fyne.TextWrapWord
	return container.NewBorder(nil, nil, container.NewVBox(icon), nil, t)
}
