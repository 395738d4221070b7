package app

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"unicode"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// The transports, as the form offers them.
const (
	kindStdio = "Runs on this computer (stdio)"
	kindHTTP  = "Remote (streamable HTTP)"
)

// A serverForm adds a server, or edits one. Credentials are typed into
// password fields and go to the keychain as the secret NAME.KEY; the
// server's entry holds only vault://secret/NAME.KEY, as gatehouse server
// add --secret-env does.
type serverForm struct {
	p    *serversPage
	old  *store.Server // the server edited; nil when adding
	dlg  *dialog.CustomDialog
	save *widget.Button

	name    *widget.Entry
	kind    *widget.RadioGroup
	command *widget.Entry
	cwd     *widget.Entry
	env     *widget.Entry
	url     *widget.Entry
	headers *widget.Entry
	trusted *widget.Check
	confine *widget.Check
	read    *widget.Entry     // allowed to read, one path a line
	write   *widget.Entry     // allowed to write, one path a line
	net     *widget.Entry     // TCP ports it may connect to
	stdio   fyne.CanvasObject // the stdio fields
	http    fyne.CanvasObject // the HTTP fields

	creds    []*credRow
	credBox  *fyne.Container
	errText  *widget.RichText
	errPanel fyne.CanvasObject
}

// A credRow is one credential: its variable (or header) name and its
// value, typed into a password field.
type credRow struct {
	key     *widget.Entry
	value   *widget.Entry
	stored  bool // the keychain holds it: an empty value keeps it
	removed bool
	row     fyne.CanvasObject
}

// openForm opens the form to add a server (old nil) or to edit old.
func (p *serversPage) openForm(old *store.Server) {
	f := &serverForm{p: p, old: old}
	p.lastForm = f
	f.build()
	f.dlg.Show()
	f.dlg.Resize(fyne.NewSize(640, 620))
	p.u.win.Canvas().Focus(f.name)
}

func (f *serverForm) build() {
	f.name = widget.NewEntry()
	f.name.SetPlaceHolder("a short name, e.g. github")
	f.command = widget.NewEntry()
	f.command.TextStyle.Monospace = true
	f.command.SetPlaceHolder("the command, e.g. npx -y @modelcontextprotocol/server-github")
	f.cwd = widget.NewEntry()
	f.cwd.SetPlaceHolder("the folder the proxy starts in")
	f.env = widget.NewMultiLineEntry()
	f.env.TextStyle.Monospace = true
	f.env.SetPlaceHolder("KEY=value, one a line (not secret)")
	f.env.SetMinRowsVisible(3)
	f.url = widget.NewEntry()
	f.url.SetPlaceHolder("the address, e.g. https://mcp.example.com/mcp")
	f.headers = widget.NewMultiLineEntry()
	f.headers.TextStyle.Monospace = true
	f.headers.SetPlaceHolder("Name: value, one a line (not secret)")
	f.headers.SetMinRowsVisible(3)
	f.trusted = widget.NewCheck("Trust its tool annotations (a read-only hint may then lower a tool's risk)", nil)

	f.read = widget.NewMultiLineEntry()
	f.read.TextStyle.Monospace = true
	f.read.SetPlaceHolder("one folder or file a line, e.g. ~/notes")
	f.read.SetMinRowsVisible(2)
	f.write = widget.NewMultiLineEntry()
	f.write.TextStyle.Monospace = true
	f.write.SetPlaceHolder("one folder or file a line, e.g. ~/projects/site")
	f.write.SetMinRowsVisible(2)
	f.net = widget.NewEntry()
	f.net.TextStyle.Monospace = true
	f.net.SetPlaceHolder("ports, e.g. 443, 5432 (or * for any)")
	f.confine = widget.NewCheck("Confine it (Linux, Landlock): it reads the system, its install and what its command names, writes a private temporary folder, and reaches nothing else but what is given below", f.confineChanged)
	f.confineChanged(false)
	confineHelp := wrapText("A confined server does not start where this computer cannot confine it.", caption)

	f.stdio = widget.NewForm(
		widget.NewFormItem("Command", f.command),
		widget.NewFormItem("Working folder", f.cwd),
		widget.NewFormItem("Environment", f.env),
		widget.NewFormItem("Confinement", compact(f.confine, confineHelp)),
		widget.NewFormItem("May also read", f.read),
		widget.NewFormItem("May also write", f.write),
		widget.NewFormItem("May connect to", f.net),
	)
	f.http = widget.NewForm(
		widget.NewFormItem("URL", f.url),
		widget.NewFormItem("Headers", f.headers),
	)
	f.kind = widget.NewRadioGroup([]string{kindStdio, kindHTTP}, func(k string) { f.showKind(k) })
	f.kind.Horizontal = true
	f.kind.Required = true

	f.credBox = container.NewVBox()
	addCred := widget.NewButtonWithIcon("Add a credential", theme.ContentAddIcon(), func() { f.addCred("", false) })
	addCred.Importance = widget.LowImportance
	credHelp := text("Typed here, a value goes to the OS keychain and nowhere else; the server receives it when the proxy starts it.", caption)
	credHelp.Wrapping = fyne.TextWrapWord

	f.errText = text("", widget.RichTextStyle{ColorName: theme.ColorNameError})
	f.errText.Wrapping = fyne.TextWrapWord
	f.errPanel = newPanel(theme.ColorNameError, 0x22, f.errText)
	f.errPanel.Hide()

	title := "Add a server"
	if f.old != nil {
		title = "Edit " + f.old.Name
		f.fill(*f.old)
	} else {
		f.kind.SetSelected(kindStdio)
	}

	content := container.NewVBox(
		widget.NewForm(widget.NewFormItem("Name", f.name)),
		f.kind,
		f.stdio, f.http,
		widget.NewSeparator(),
		container.NewBorder(nil, nil, heading("Credentials"), addCred),
		credHelp,
		f.credBox,
		widget.NewSeparator(),
		f.trusted,
		f.errPanel,
	)
	scroll := container.NewVScroll(container.New(layout.NewCustomPaddedLayout(0, 0, 0, theme.Padding()*2), content))
	scroll.SetMinSize(fyne.NewSize(600, 480))

	cancel := widget.NewButton("Cancel", func() { f.dlg.Hide() })
	saveLabel := "Add server"
	if f.old != nil {
		saveLabel = "Save"
	}
	f.save = widget.NewButtonWithIcon(saveLabel, theme.ConfirmIcon(), f.submit)
	f.save.Importance = widget.HighImportance
	f.dlg = dialog.NewCustomWithoutButtons(title, scroll, f.p.u.win)
	f.dlg.SetButtons([]fyne.CanvasObject{cancel, f.save})
}

// fill puts s in the form, its credentials as rows that keep what the
// keychain holds unless a new value is typed.
func (f *serverForm) fill(s store.Server) {
	f.name.SetText(s.Name)
	f.name.Disable() // a server's name is in capability names and client configs
	f.trusted.SetChecked(s.Trusted)
	plainPairs := func(m map[string]string, sep string) string {
		var lines []string
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if _, ok := vault.ParseRef(m[k]); ok {
				f.addCred(k, true)
				continue
			}
			lines = append(lines, k+sep+m[k])
		}
		return strings.Join(lines, "\n")
	}
	if s.Remote() {
		f.kind.SetSelected(kindHTTP)
		f.url.SetText(s.URL)
		f.headers.SetText(plainPairs(s.Headers, ": "))
	} else {
		f.kind.SetSelected(kindStdio)
		f.command.SetText(commandLine(s.Command, s.Args))
		f.cwd.SetText(s.Cwd)
		f.env.SetText(plainPairs(s.Env, "="))
		f.read.SetText(strings.Join(s.AllowRead, "\n"))
		f.write.SetText(strings.Join(s.AllowWrite, "\n"))
		f.net.SetText(strings.Join(s.AllowNet, ", "))
		f.confine.SetChecked(s.Confine)
	}
}

// confineChanged enables the allowed folders and ports while the server is
// to be confined; unconfined, they are kept but do not apply.
func (f *serverForm) confineChanged(on bool) {
	for _, e := range []*widget.Entry{f.read, f.write, f.net} {
		if on {
			e.Enable()
		} else {
			e.Disable()
		}
	}
}

func (f *serverForm) showKind(k string) {
	if k == kindHTTP {
		f.stdio.Hide()
		f.http.Show()
	} else {
		f.http.Hide()
		f.stdio.Show()
	}
}

// addCred adds a credential row; stored says the keychain holds its value.
func (f *serverForm) addCred(key string, stored bool) {
	c := &credRow{key: widget.NewEntry(), value: widget.NewPasswordEntry(), stored: stored}
	c.key.SetText(key)
	c.key.SetPlaceHolder("name, e.g. GITHUB_TOKEN")
	c.key.TextStyle.Monospace = true
	if stored {
		c.key.Disable()
		c.value.SetPlaceHolder("kept in the keychain; type to replace")
	} else {
		c.value.SetPlaceHolder("value")
	}
	remove := widget.NewButtonWithIcon("", theme.DeleteIcon(), nil)
	remove.Importance = widget.LowImportance
	c.row = container.NewBorder(nil, nil, nil, remove, container.NewGridWithColumns(2, c.key, c.value))
	remove.OnTapped = func() {
		c.removed = true
		f.credBox.Remove(c.row)
	}
	f.creds = append(f.creds, c)
	f.credBox.Add(c.row)
}

// A serverChange is what saving the form does: the server to register,
// the secrets to store first, and the secrets its old entry had that it no
// longer refers to.
type serverChange struct {
	server  store.Server
	secrets map[string]string // id -> value
	dropped []string          // ids
}

// change reads the form. Every mistake is returned, for the form to show,
// before anything is written.
func (f *serverForm) change() (serverChange, error) {
	var ch serverChange
	s := store.Server{Name: strings.TrimSpace(f.name.Text), Trusted: f.trusted.Checked}
	if o := f.old; o != nil {
		// What the form does not show is kept as it was.
		s.Name, s.UnconfinedOK, s.Quarantined, s.Pack, s.CreatedAt = o.Name, o.UnconfinedOK, o.Quarantined, o.Pack, o.CreatedAt
		if o.Remote() && f.kind.Selected == kindHTTP {
			s.Transport, s.Auth, s.OAuthClientID, s.OAuthScopes = o.Transport, o.Auth, o.OAuthClientID, o.OAuthScopes
		}
	}
	if err := store.ValidateName(s.Name); err != nil {
		return ch, err
	}
	var refs map[string]string // where credentials go: the environment or the headers
	if f.kind.Selected == kindHTTP {
		if s.Transport == "" {
			s.Transport = store.TransportHTTP
		}
		s.URL = strings.TrimSpace(f.url.Text)
		h, err := parsePairs(f.headers.Text, ":", "header")
		if err != nil {
			return ch, err
		}
		s.Headers = h
		refs = s.Headers
	} else {
		s.Transport = store.TransportStdio
		home, _ := os.UserHomeDir()
		words, err := shellwords.Split(f.command.Text, home)
		if err != nil {
			return ch, fmt.Errorf("command: %w", err)
		}
		if len(words) == 0 {
			return ch, errors.New("command: type the command that starts the server, for example npx -y @modelcontextprotocol/server-memory")
		}
		s.Command, s.Args = words[0], words[1:]
		if cwd := strings.TrimSpace(f.cwd.Text); cwd != "" {
			cwd = expandTilde(cwd)
			if !filepath.IsAbs(cwd) {
				return ch, fmt.Errorf("working folder %q: give an absolute path", cwd)
			}
			s.Cwd = cwd
		}
		env, err := parsePairs(f.env.Text, "=", "variable")
		if err != nil {
			return ch, err
		}
		s.Env = env
		refs = s.Env
		if err := f.confinement(&s); err != nil {
			return ch, err
		}
	}
	if f.old == nil || s.Command != f.old.Command || !slices.Equal(s.Args, f.old.Args) || s.URL != f.old.URL {
		// As gatehouse server add does: the pack its command or URL runs.
		s.Pack = ""
		if p := policy.MatchPack(s.Command, s.Args, s.URL); p != nil {
			s.Pack = p.Ref()
		}
	}

	ch.secrets = map[string]string{}
	kept := map[string]bool{}
	for _, c := range f.creds {
		if c.removed {
			continue
		}
		key := strings.TrimSpace(c.key.Text)
		if key == "" && c.value.Text == "" {
			continue
		}
		if key == "" {
			return ch, errors.New("a credential has a value but no name")
		}
		if _, dup := refs[key]; dup {
			return ch, fmt.Errorf("%s is given twice (as a credential and in plain)", key)
		}
		id := s.Name + "." + key
		if err := vault.ValidateSecretID(id); err != nil {
			return ch, fmt.Errorf("credential %q: not a usable name (letters, digits, '.', '_', '-')", key)
		}
		if strings.ContainsAny(key, " :=\r\n") {
			return ch, fmt.Errorf("credential %q: not a usable name (letters, digits, '.', '_', '-')", key)
		}
		switch {
		case c.value.Text != "":
			if len(c.value.Text) > vault.MaxSecretBytes {
				return ch, fmt.Errorf("credential %s: %v (at most %d bytes)", key, vault.ErrTooLarge, vault.MaxSecretBytes)
			}
			ch.secrets[id] = c.value.Text
		case c.stored:
			// Kept as it is in the keychain.
		default:
			return ch, fmt.Errorf("credential %s: type its value", key)
		}
		refs[key] = vault.Ref(id)
		kept[id] = true
	}
	if f.old != nil {
		for _, id := range ownSecrets(*f.old) {
			if !kept[id] {
				ch.dropped = append(ch.dropped, id)
			}
		}
	}
	if err := s.Validate(); err != nil {
		return ch, err
	}
	ch.server = s
	return ch, nil
}

// confinement reads the form's confinement into s, checked as gatehouse
// server set checks its flags: absolute paths (a leading ~ is the home
// folder), TCP ports or *.
func (f *serverForm) confinement(s *store.Server) error {
	s.Confine = f.confine.Checked
	var err error
	if s.AllowRead, err = pathLines(f.read.Text, "may also read"); err != nil {
		return err
	}
	if s.AllowWrite, err = pathLines(f.write.Text, "may also write"); err != nil {
		return err
	}
	s.AllowNet = nil
	for _, p := range strings.FieldsFunc(f.net.Text, func(r rune) bool { return r == ',' || unicode.IsSpace(r) }) {
		if _, _, err := confine.ParsePort(p); err != nil {
			return fmt.Errorf("may connect to: %w", err)
		}
		if !slices.Contains(s.AllowNet, p) {
			s.AllowNet = append(s.AllowNet, p)
		}
	}
	return nil
}

// pathLines reads one path a line, blank lines skipped: each absolute
// (after a leading ~), given once.
func pathLines(text, what string) ([]string, error) {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		p := strings.TrimSpace(line)
		if p == "" {
			continue
		}
		p = expandTilde(p)
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%s: %q is not an absolute path", what, p)
		}
		p = filepath.Clean(p)
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out, nil
}

// submit saves the form: the secrets first, then the server. The form
// stays open, with what went wrong, until saving works.
func (f *serverForm) submit() {
	ch, err := f.change()
	if err != nil {
		f.showError(sentence(err))
		return
	}
	f.save.Disable()
	u := f.p.u
	kc := u.core.kc
	adding := f.old == nil
	goRead(u, func(ctx context.Context) ([]string, error) {
		if adding {
			if _, err := u.st.Server(ctx, ch.server.Name); err == nil {
				return nil, fmt.Errorf("a server named %s already exists: choose another name", ch.server.Name)
			}
		}
		for _, id := range slices.Sorted(maps.Keys(ch.secrets)) {
			if err := kc.SetSecret(id, ch.secrets[id]); err != nil {
				return nil, fmt.Errorf("store credential %s: %w", id, err)
			}
			if err := u.st.NoteSecret(ctx, id); err != nil {
				return nil, err
			}
		}
		var err error
		if adding {
			// As gatehouse server add does: a server no capability pack
			// knows is quarantined when the home's setting says so.
			settings, serr := u.st.Settings(ctx)
			if serr != nil {
				return nil, serr
			}
			if settings.QuarantineNewServers && ch.server.Pack == "" {
				ch.server.Quarantined = true
			}
			err = u.st.AddServer(ctx, ch.server)
		} else {
			err = u.st.UpdateServer(ctx, ch.server)
		}
		if err != nil {
			return nil, err
		}
		return forgetSecrets(ctx, u.st, kc, ch.dropped), nil
	}, func(kept []string, err error) {
		f.save.Enable()
		if err != nil {
			msg := sentence(err)
			if errors.Is(err, vault.ErrUnavailable) {
				msg += " Nothing was saved. " + keychainHint
			}
			f.showError(msg)
			return
		}
		f.dlg.Hide()
		if len(kept) > 0 {
			dialog.ShowInformation("Credentials kept", "These credentials the server no longer uses stay in the keychain: "+strings.Join(kept, "; "), u.win)
		}
		f.p.selected = ch.server.Name
		delete(f.p.health, ch.server.Name)
		f.p.refresh()
		u.refreshStatus()
	})
}

func (f *serverForm) showError(msg string) {
	setText(f.errText, msg)
	f.errPanel.Show()
	f.errPanel.Refresh()
}

// parsePairs reads lines of NAME<sep>VALUE; blank lines and lines that
// start with # are skipped.
func parsePairs(s, sep, what string) (map[string]string, error) {
	out := map[string]string{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, sep)
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if !ok || k == "" || strings.ContainsAny(k, " \t") {
			return nil, fmt.Errorf("line %d: want NAME%sVALUE for a %s, got %q", i+1, strings.TrimSpace(sep), what, line)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("line %d: %s %s is given twice", i+1, what, k)
		}
		out[k] = v
	}
	return out, nil
}

// expandTilde replaces a leading ~ or ~/ with the user's home folder, as a
// shell would have before the proxy ever saw the word.
func expandTilde(s string) string {
	home, _ := os.UserHomeDir()
	return shellwords.ExpandTilde(s, home)
}
