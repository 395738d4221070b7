package app

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/app/autostart"
	"github.com/gatehouse-dev/gatehouse/app/install"
	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// The choices of how long proxies wait for an answer.
var waitChoices = []struct {
	label string
	d     time.Duration
}{
	{"15 seconds", 15 * time.Second},
	{"30 seconds", 30 * time.Second},
	{"45 seconds (default)", 0},
	{"55 seconds", 55 * time.Second},
	{"2 minutes", 2 * time.Minute},
	{"5 minutes", 5 * time.Minute},
}

// The log levels offered.
var levelChoices = []struct {
	label string
	l     *slog.Level
}{
	{"Info (default)", nil},
	{"Debug", levelPtr(slog.LevelDebug)},
	{"Warnings", levelPtr(slog.LevelWarn)},
	{"Errors only", levelPtr(slog.LevelError)},
}

func levelPtr(l slog.Level) *slog.Level { return &l }

// settingsPage is the Settings view.
type settingsPage struct {
	u       *UI
	content fyne.CanvasObject
	banner  *problemBanner
	retry   retrier
	filling bool // the widgets are being set from a read: not a change

	wait      *widget.Select
	waitNote  *widget.RichText
	level     *widget.Select
	login     *widget.Check
	loginNote *widget.RichText

	keychain *widget.RichText
	keys     *fyne.Container
	rotate   *widget.Button
	exportPK *widget.Button

	serve *serveSection // serving over HTTP, evidence out

	// saved, when set, runs after a setting was saved. Tests use it.
	saved func(error)
}

func newSettingsPage(u *UI) *settingsPage {
	p := &settingsPage{u: u}
	p.retry = retrier{u: u, f: p.refresh}
	p.banner = newProblemBanner(p.refresh)

	// Approvals.
	var waits []string
	for _, c := range waitChoices {
		waits = append(waits, c.label)
	}
	p.wait = widget.NewSelect(waits, p.waitChanged)
	p.waitNote = text("", caption)
	p.waitNote.Wrapping = fyne.TextWrapWord
	approvals := card("Approvals",
		widget.NewForm(widget.NewFormItem("A proxy waits", p.wait)),
		wrapText("for your answer, then tells the agent that approval is pending and to retry.", secondary),
		p.waitNote)

	// Start at login.
	p.login = widget.NewCheck("Start Gatehouse in the tray when I log in", p.loginChanged)
	p.loginNote = text("", caption)
	p.loginNote.Wrapping = fyne.TextWrapWord
	startup := card("Start at login", p.login, p.loginNote)

	// Home folder.
	home := u.st.Dir()
	homeLabel := widget.NewLabel(home)
	homeLabel.TextStyle.Monospace = true
	homeLabel.Wrapping = fyne.TextWrapBreak
	homeLabel.Selectable = true
	open := widget.NewButtonWithIcon("Open folder", theme.FolderOpenIcon(), func() {
		if err := u.app.OpenURL(&url.URL{Scheme: "file", Path: filepath.ToSlash(home)}); err != nil {
			dialog.ShowError(err, u.win)
		}
	})
	copyHome := widget.NewButtonWithIcon("Copy path", theme.ContentCopyIcon(), func() { u.app.Clipboard().SetContent(home) })
	homeHelp := text("The database, the evidence log and the approval socket live here. To use another home folder, start Gatehouse with --home DIR or set "+store.EnvHome+
		", and give the proxies the same (gatehouse --home DIR proxy NAME).", caption)
	homeHelp.Wrapping = fyne.TextWrapWord
	folder := card("Home folder", homeLabel, container.NewHBox(open, copyHome), homeHelp)

	// Keys.
	p.keychain = text("", secondary)
	p.keychain.Wrapping = fyne.TextWrapWord
	p.keys = container.NewVBox()
	p.rotate = widget.NewButtonWithIcon("Rotate…", theme.ViewRefreshIcon(), p.rotateKey)
	p.exportPK = widget.NewButtonWithIcon("Export public keys…", theme.DocumentSaveIcon(), p.exportKeys)
	keysHelp := text("Every entry of the evidence log is signed. The private key stays in the OS keychain; the public keys are in the log, so entries signed by a retired key still verify. Auditors pin the first key.", caption)
	keysHelp.Wrapping = fyne.TextWrapWord
	keys := card("Signing keys", p.keychain, p.keys, container.NewHBox(p.rotate, p.exportPK), keysHelp)

	// Log level.
	var levels []string
	for _, c := range levelChoices {
		levels = append(levels, c.label)
	}
	p.level = widget.NewSelect(levels, p.levelChanged)
	logHelp := text("Of the log Gatehouse writes to "+tildePath(u.st.LogPath(), userHome())+" and to each MCP client's log. Proxies read it when they start. Arguments and secrets are never logged.", caption)
	logHelp.Wrapping = fyne.TextWrapWord
	logs := card("Log", widget.NewForm(widget.NewFormItem("Level", p.level)), logHelp)

	words := card("Words Gatehouse uses", wrapText("The views say things in plain words; here is what the technical terms behind them mean.", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder}), glossaryView())
	p.serve = newServeSection(u)
	cols := container.NewVBox(approvals, keys, startup, folder, logs, p.serve.content, words)
	header := pageHeader("Settings", "How Gatehouse waits, starts, signs and logs.")
	body := container.NewBorder(p.banner.content, nil, nil, nil, container.NewVScroll(cols))
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(body))
	return p
}

// wrapText is a rich text that wraps at words.
func wrapText(s string, style widget.RichTextStyle) *widget.RichText {
	style.Inline = false
	t := text(s, style)
	t.Wrapping = fyne.TextWrapWord
	return t
}

// card is a titled panel.
func card(title string, objs ...fyne.CanvasObject) fyne.CanvasObject {
	return container.New(layout.NewCustomPaddedLayout(0, theme.Padding()*2, 0, 0),
		newPanel(theme.ColorNameInputBackground, 0, container.NewVBox(append([]fyne.CanvasObject{heading(title)}, objs...)...)))
}

type settingsRead struct {
	s        store.Settings
	login    bool
	loginErr error
	keys     []receipts.Key
	current  string
	keyErr   error
}

// refresh reads the settings, whether the app starts at login, and the
// keys.
func (p *settingsPage) refresh() {
	p.serve.refresh()
	entry := p.autostartEntry()
	goRead(p.u, func(ctx context.Context) (settingsRead, error) {
		var r settingsRead
		var err error
		if r.s, err = p.u.st.Settings(ctx); err != nil {
			return r, err
		}
		r.login, r.loginErr = entry.Enabled()
		l, err := p.u.core.evidence(ctx)
		if err == nil {
			r.keys, err = l.Keys(ctx)
			r.current = l.KeyID()
		}
		r.keyErr = err
		return r, nil
	}, func(r settingsRead, err error) {
		if err != nil {
			pr := explain("read the settings", err)
			p.banner.show(&pr, p.retry.failed(pr))
			return
		}
		p.retry.ok()
		p.banner.show(nil, 0)
		p.show(r)
	})
}

func (p *settingsPage) show(r settingsRead) {
	p.filling = true
	defer func() { p.filling = false }()
	for _, c := range waitChoices {
		if c.d == r.s.ApprovalWait {
			p.wait.SetSelected(c.label)
		}
	}
	if p.wait.Selected == "" || r.s.ApprovalWait != 0 && !slicesContainsWait(r.s.ApprovalWait) {
		label := r.s.ApprovalWait.String() + " (set elsewhere)"
		p.wait.Options = append(p.wait.Options[:len(waitChoices)], label)
		p.wait.SetSelected(label)
	}
	p.showWaitNote(r.s.ApprovalWait)
	p.level.SetSelected(levelChoices[0].label)
	for _, c := range levelChoices[1:] {
		if r.s.LogLevel != nil && *r.s.LogLevel == *c.l {
			p.level.SetSelected(c.label)
		}
	}
	p.login.SetChecked(r.login)
	switch {
	case errors.Is(r.loginErr, autostart.ErrUnsupported):
		p.login.Disable()
		setText(p.loginNote, "This system has no autostart mechanism Gatehouse knows.")
	case r.loginErr != nil:
		setText(p.loginNote, sentence(r.loginErr))
	default:
		e := p.autostartEntry()
		where, _ := e.Path()
		setText(p.loginNote, "Kept in "+tildePath(where, userHome())+", which your desktop's own startup settings also show.")
	}

	p.keys.RemoveAll()
	if r.keyErr != nil {
		pr := explain("read the keys", r.keyErr)
		setText(p.keychain, pr.title+": "+pr.text+" "+pr.hint)
		p.rotate.Disable()
		p.exportPK.Disable()
		return
	}
	setText(p.keychain, "The keychain holds the current key (service "+p.u.st.KeychainService()+").")
	p.rotate.Enable()
	p.exportPK.Enable()
	for i, k := range r.keys {
		state := "retired: its public key stays in the log"
		if k.ID == r.current {
			state = "current: signs new entries"
		}
		if i == 0 {
			state += " · the log's first key (auditors pin it)"
		}
		row := widget.NewRichText(
			&widget.TextSegment{Text: k.ID, Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}},
			&widget.TextSegment{Text: fmt.Sprintf("Announced at entry %d · %s", k.AddedIdx, state), Style: caption},
		)
		row.Wrapping = fyne.TextWrapWord
		p.keys.Add(row)
	}
}

func slicesContainsWait(d time.Duration) bool {
	for _, c := range waitChoices {
		if c.d == d {
			return true
		}
	}
	return false
}

func (p *settingsPage) showWaitNote(d time.Duration) {
	note := "Proxies read this when an MCP client starts them: restart your clients (or their MCP servers) for it to take effect."
	if d > 55*time.Second {
		note = "Claude Desktop cancels a call after about 60 seconds: with a longer wait it may give up before you answer (your answer then applies to the agent's next identical call). " + note
	}
	setText(p.waitNote, note)
}

func (p *settingsPage) waitChanged(label string) {
	if p.filling {
		return
	}
	var d time.Duration
	found := false
	for _, c := range waitChoices {
		if c.label == label {
			d, found = c.d, true
		}
	}
	if !found {
		return // the value set elsewhere, chosen again
	}
	p.showWaitNote(d)
	p.saveSetting(func(ctx context.Context) error { return p.u.st.SetApprovalWait(ctx, d) })
}

func (p *settingsPage) levelChanged(label string) {
	if p.filling {
		return
	}
	for _, c := range levelChoices {
		if c.label == label {
			l := c.l
			if p.u.level != nil {
				if l == nil {
					p.u.level.Set(slog.LevelInfo)
				} else {
					p.u.level.Set(*l)
				}
			}
			p.saveSetting(func(ctx context.Context) error { return p.u.st.SetLogLevel(ctx, l) })
		}
	}
}

// saveSetting runs save and says so when it fails.
func (p *settingsPage) saveSetting(save func(context.Context) error) {
	goRead(p.u, func(ctx context.Context) (struct{}, error) {
		return struct{}{}, save(ctx)
	}, func(_ struct{}, err error) {
		if err != nil {
			pr := explain("save the setting", err)
			p.banner.show(&pr, 0)
		}
		if p.saved != nil {
			p.saved(err)
		}
	})
}

// autostartEntry is what starts the app at login: the running program
// (or Options.Executable) in the tray, with the home folder unless it is
// the default one.
func (p *settingsPage) autostartEntry() *autostart.Entry {
	exe := p.u.exe
	if exe == "" {
		if e, err := os.Executable(); err == nil {
			if r, err := filepath.EvalSymlinks(e); err == nil {
				e = r
			}
			exe = e
		}
	}
	args := []string{"--hidden"}
	if sys, err := store.SystemDir(); err != nil || sys != p.u.st.Dir() {
		args = append(args, "--home", p.u.st.Dir())
	}
	id := install.AppID
	if runtime.GOOS == "windows" {
		id = install.WindowsRunValue // the installer's "Start at sign-in" writes the same value
	}
	return &autostart.Entry{ID: id, Name: Title, Comment: "A governed gate in front of your AI agents' MCP servers",
		Icon: install.AppID, Exec: exe, Args: args}
}

func (p *settingsPage) loginChanged(on bool) {
	if p.filling {
		return
	}
	e := p.autostartEntry()
	var err error
	if on {
		err = e.Enable()
	} else {
		err = e.Disable()
	}
	if err != nil {
		dialog.ShowError(err, p.u.win)
		p.filling = true
		p.login.SetChecked(!on)
		p.filling = false
	}
	if p.saved != nil {
		p.saved(err)
	}
}

// rotateKey asks, then replaces the signing key: the new key is announced
// in the log, signed by the old one, and only then kept in the keychain.
func (p *settingsPage) rotateKey() {
	dialog.ShowConfirm("Rotate the signing key?",
		"A new key signs the log from now on; the log records the change, signed by the current key. Entries signed before still verify. Give auditors the new public key afterwards.",
		func(ok bool) {
			if !ok {
				return
			}
			goRead(p.u, func(ctx context.Context) (string, error) {
				l, err := p.u.core.evidence(ctx)
				if err != nil {
					return "", err
				}
				old := l.KeyID()
				_, err = p.u.core.kc.RotateSigningKey(func(next ed25519.PrivateKey) error { return l.Rotate(ctx, next) })
				if err != nil {
					return "", err
				}
				return old + " → " + l.KeyID(), nil
			}, func(change string, err error) {
				if err != nil {
					pr := explain("rotate the key", err)
					dialog.ShowError(errors.New(pr.title+": "+pr.text+" "+pr.hint), p.u.win)
					return
				}
				dialog.ShowInformation("Signing key rotated", change, p.u.win)
				p.refresh()
			})
		}, p.u.win)
}

// exportKeys saves the log's public keys as a JWK Set, the format of a
// bundle's keys.jwks.json and of gatehouse keys export-public.
func (p *settingsPage) exportKeys() {
	d := dialog.NewFileSave(func(w fyne.URIWriteCloser, err error) {
		if err != nil || w == nil {
			return
		}
		path := w.URI().Path()
		w.Close()
		goRead(p.u, func(ctx context.Context) (int, error) {
			return writePublicKeys(ctx, p.u.core, path)
		}, func(n int, err error) {
			if err != nil {
				dialog.ShowError(fmt.Errorf("export public keys: %w", err), p.u.win)
				return
			}
			dialog.ShowInformation("Public keys exported", fmt.Sprintf("%s written to %s. Check a bundle with: gatehouse verify --pin-key FILE BUNDLE", plural(n, "key", "keys"), path), p.u.win)
		})
	}, p.u.win)
	d.SetFileName("gatehouse-keys.jwks.json")
	d.Show()
}

// writePublicKeys writes the log's public keys to path as a JWK Set, and
// returns how many.
func writePublicKeys(ctx context.Context, c *core, path string) (int, error) {
	l, err := c.evidence(ctx)
	if err != nil {
		return 0, err
	}
	keys, err := l.Keys(ctx)
	if err != nil {
		return 0, err
	}
	set := verify.JWKS{Keys: []verify.JWK{}}
	for _, k := range keys {
		set.Keys = append(set.Keys, verify.NewJWK(k.Public))
	}
	data, err := json.MarshalIndent(set, "", "  ")
	if err != nil {
		return 0, err
	}
	return len(keys), atomicfile.Write(path, append(data, '\n'), 0o644)
}
