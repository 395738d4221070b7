package app

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/stream"
)

// serveSection is the Settings' part for serving over HTTP and sending the
// evidence out: one narrow column of two cards.
type serveSection struct {
	u       *UI
	content fyne.CanvasObject
	filling bool // the widgets are being set from a read: not a change

	enabled   *widget.Check
	listen    *widget.Entry
	cert, key *widget.Entry
	saveServe *widget.Button
	state     *widget.RichText // serving or not, where, how many
	note      *widget.RichText // what the last save or start said

	tokens  *fyne.Container // a row for each live token
	client  *widget.Entry
	servers *widget.Entry // comma-separated; empty reaches every server
	addTok  *widget.Button
	live    int // live tokens, as last read

	exportOn   *widget.Check
	otlp       *widget.Entry
	header     *widget.Entry // NAME=vault://secret/ID
	syslog     *widget.Entry
	saveExport *widget.Button
	exportNote *widget.RichText

	// shown, when set, runs after a token was added (with it) or revoked,
	// or a save ended. Tests use it.
	shown func(token string, err error)
}

func newServeSection(u *UI) *serveSection {
	p := &serveSection{u: u}
	p.enabled = widget.NewCheck("Serve the registered servers over HTTP while Gatehouse runs", p.enabledChanged)
	p.listen = widget.NewEntry()
	p.listen.SetPlaceHolder(httpfront.DefaultListen)
	p.cert = widget.NewEntry()
	p.cert.SetPlaceHolder("certificate chain, PEM (empty: plain HTTP)")
	p.key = widget.NewEntry()
	p.key.SetPlaceHolder("its private key, PEM")
	p.saveServe = widget.NewButtonWithIcon("Save and apply", theme.DocumentSaveIcon(), p.saveServeSettings)
	p.state = wrapText("", widget.RichTextStyle{})
	p.note = wrapText("", caption)
	form := widget.NewForm(
		widget.NewFormItem("Address", p.listen),
		widget.NewFormItem("TLS certificate", p.cert),
		widget.NewFormItem("TLS key", p.key))
	help := wrapText("Each registered server NAME is at /mcp/NAME (MCP's streamable HTTP), every call through the same gate. "+
		"Clients send a token: Authorization: Bearer TOKEN. The same as gatehouse serve, with the same settings.", caption)

	p.tokens = container.NewVBox()
	p.client = widget.NewEntry()
	p.client.SetPlaceHolder("client name, e.g. alice-laptop")
	p.servers = widget.NewEntry()
	p.servers.SetPlaceHolder("servers it reaches, comma-separated (empty: all)")
	p.addTok = widget.NewButtonWithIcon("Add token", theme.ContentAddIcon(), p.addToken)
	serve := card("Serve over HTTP", p.enabled, p.state, form, container.NewHBox(p.saveServe), p.note, help,
		heading("Client tokens"), p.tokens, p.client, p.servers, container.NewHBox(p.addTok))

	p.exportOn = widget.NewCheck("Send every receipt and outcome to the destinations below", nil)
	p.otlp = widget.NewEntry()
	p.otlp.SetPlaceHolder("http://collector:4318")
	p.header = widget.NewEntry()
	p.header.SetPlaceHolder("Authorization=vault://secret/ID (optional)")
	p.syslog = widget.NewEntry()
	p.syslog.SetPlaceHolder("tcp://siem:601 or udp://siem:514")
	p.saveExport = widget.NewButtonWithIcon("Save", theme.DocumentSaveIcon(), p.saveExportSettings)
	p.exportNote = wrapText("", caption)
	exportHelp := wrapText("Sent while Gatehouse serves over HTTP (here or gatehouse serve), or by gatehouse export-stream; "+
		"at least once, from a cursor that survives restarts. No arguments or results are sent. "+
		"A header's value stays in the keychain: store it with gatehouse secret set ID.", caption)
	out := card("Evidence out", p.exportOn, widget.NewForm(
		widget.NewFormItem("OTLP endpoint", p.otlp),
		widget.NewFormItem("OTLP header", p.header),
		widget.NewFormItem("Syslog", p.syslog)), container.NewHBox(p.saveExport), p.exportNote, exportHelp)

	p.content = container.New(&maxWidth{w: 560}, container.NewVBox(serve, out))
	return p
}

// maxWidth lays its one object out no wider than w, at the left.
type maxWidth struct{ w float32 }

func (m *maxWidth) MinSize(objs []fyne.CanvasObject) fyne.Size {
	s := objs[0].MinSize()
	return fyne.NewSize(min(s.Width, m.w), s.Height)
}

func (m *maxWidth) Layout(objs []fyne.CanvasObject, size fyne.Size) {
	objs[0].Move(fyne.NewPos(0, 0))
	objs[0].Resize(fyne.NewSize(min(size.Width, m.w), size.Height))
}

type serveRead struct {
	set    store.Settings
	tokens []httpfront.TokenInfo
}

// refresh reads the settings and the tokens, and shows them with the state.
func (p *serveSection) refresh() {
	goRead(p.u, func(ctx context.Context) (serveRead, error) {
		var r serveRead
		var err error
		if r.set, err = p.u.st.Settings(ctx); err != nil {
			return r, err
		}
		t, err := p.u.serve.tokens(ctx)
		if err != nil {
			return r, err
		}
		r.tokens, err = t.List(ctx)
		return r, err
	}, func(r serveRead, err error) {
		if err != nil {
			pr := explain("read the serve settings", err)
			setText(p.note, pr.title+": "+pr.text)
			return
		}
		p.fill(r)
		p.show(p.u.serve.state())
	})
}

func (p *serveSection) fill(r serveRead) {
	p.filling = true
	defer func() { p.filling = false }()
	s := r.set
	p.enabled.SetChecked(s.ServeEnabled)
	p.listen.SetText(s.ServeListen)
	p.cert.SetText(s.ServeTLSCert)
	p.key.SetText(s.ServeTLSKey)
	p.exportOn.SetChecked(!s.ExportOff)
	p.otlp.SetText(strings.Join(s.ExportOTLP, ", "))
	p.syslog.SetText(strings.Join(s.ExportSyslog, ", "))
	var hs []string
	for name, ref := range s.ExportOTLPHeaders {
		hs = append(hs, name+"="+ref)
	}
	slices.Sort(hs)
	p.header.SetText(strings.Join(hs, ", "))

	p.tokens.RemoveAll()
	p.live = 0
	for _, t := range r.tokens {
		if !t.Revoked.IsZero() {
			continue
		}
		p.live++
		reach := "every server"
		if t.Servers != nil {
			reach = strings.Join(t.Servers, ", ")
		}
		row := widget.NewRichText(
			&widget.TextSegment{Text: t.Client, Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}},
			&widget.TextSegment{Text: "  " + t.Hint + "…  reaches " + reach, Style: caption})
		row.Wrapping = fyne.TextWrapWord
		client := t.Client
		revoke := widget.NewButtonWithIcon("Revoke", theme.DeleteIcon(), func() { p.revoke(client) })
		p.tokens.Add(container.NewBorder(nil, nil, nil, revoke, row))
	}
	if p.live == 0 {
		p.tokens.Add(wrapText("No client has a token yet.", caption))
	}
}

// show says how serving stands.
func (p *serveSection) show(st serveState) {
	tokens := plural(p.live, "token", "tokens")
	switch {
	case st.on:
		tls := "TLS off"
		if st.tls {
			tls = "TLS on"
		}
		setText(p.state, fmt.Sprintf("Serving at %s · %s · %s · %s open", st.url, tls, tokens, plural(st.sessions, "session", "sessions")))
	case st.err != nil:
		setText(p.state, "Not serving: "+sentence(st.err))
	default:
		setText(p.state, "Not serving · "+tokens)
	}
}

func (p *serveSection) done(token string, err error) {
	if p.shown != nil {
		p.shown(token, err)
	}
}

func (p *serveSection) enabledChanged(on bool) {
	if p.filling {
		return
	}
	goRead(p.u, func(ctx context.Context) (struct{}, error) {
		if err := p.u.st.SetServeEnabled(ctx, on); err != nil {
			return struct{}{}, err
		}
		if !on {
			p.u.serve.stop()
			return struct{}{}, nil
		}
		return struct{}{}, p.u.serve.start(context.WithoutCancel(ctx))
	}, func(_ struct{}, err error) {
		setText(p.note, "")
		if err != nil {
			setText(p.note, sentence(err))
		}
		p.u.serveChanged()
		p.refresh()
		p.done("", err)
	})
}

// saveServeSettings checks the address and the TLS files as serving would
// (an unreadable certificate is refused; a non-loopback address without
// TLS is kept, with a warning, and serving refuses it), saves them, and
// restarts serving when it is on.
func (p *serveSection) saveServeSettings() {
	listen, cert, key := strings.TrimSpace(p.listen.Text), strings.TrimSpace(p.cert.Text), strings.TrimSpace(p.key.Text)
	on := p.enabled.Checked
	goRead(p.u, func(ctx context.Context) (string, error) {
		cfg := httpfront.Config{Listen: listen, TLSCert: cert, TLSKey: key}
		warn := ""
		if err := cfg.Check(); errors.Is(err, httpfront.ErrPlainNetwork) {
			warn = "Warning: " + sentence(err) + " Give a TLS certificate and key: until then Gatehouse does not serve on this address."
		} else if err != nil {
			return "", err
		}
		if err := errors.Join(p.u.st.SetServeListen(ctx, listen), p.u.st.SetServeTLS(ctx, cert, key)); err != nil {
			return "", err
		}
		if on {
			if err := p.u.serve.start(context.WithoutCancel(ctx)); err != nil && warn == "" {
				return "", err
			}
		}
		if warn != "" {
			return warn, nil
		}
		return "Saved.", nil
	}, func(msg string, err error) {
		if err != nil {
			msg = "Not saved: " + sentence(err)
		}
		setText(p.note, msg)
		p.u.serveChanged()
		p.done("", err)
	})
}

// addToken makes a token for the client typed, through the same core code
// as gatehouse serve token add, and shows it once, with a copy button.
func (p *serveSection) addToken() {
	client := strings.TrimSpace(p.client.Text)
	var servers []string
	for s := range strings.SplitSeq(p.servers.Text, ",") {
		if s = strings.TrimSpace(s); s != "" {
			servers = append(servers, s)
		}
	}
	goRead(p.u, func(ctx context.Context) (string, error) {
		if err := validClient(client); err != nil {
			return "", err
		}
		for _, name := range servers {
			if _, err := p.u.st.Server(ctx, name); errors.Is(err, store.ErrNotFound) {
				return "", fmt.Errorf("%q is not a registered server", name)
			} else if err != nil {
				return "", err
			}
		}
		t, err := p.u.serve.tokens(ctx)
		if err != nil {
			return "", err
		}
		return t.Add(ctx, client, servers...)
	}, func(token string, err error) {
		if err != nil {
			setText(p.note, "No token made: "+sentence(err))
			p.done("", err)
			return
		}
		p.client.SetText("")
		p.servers.SetText("")
		setText(p.note, "")
		p.showToken(client, token)
		p.refresh()
		p.done(token, nil)
	})
}

func validClient(c string) error {
	if c == "" {
		return errors.New("type the client's name first")
	}
	for _, r := range c {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '-' || r == '_') || len(c) > 128 {
			return fmt.Errorf("the client's name %q: use 1-128 letters, digits, '.', '-' or '_'", c)
		}
	}
	return nil
}

// showToken shows a new token, the only time it is shown.
func (p *serveSection) showToken(client, token string) {
	tok := widget.NewLabel(token)
	tok.TextStyle.Monospace = true
	tok.Wrapping = fyne.TextWrapBreak
	tok.Selectable = true
	copyBtn := widget.NewButtonWithIcon("Copy", theme.ContentCopyIcon(), func() { p.u.app.Clipboard().SetContent(token) })
	body := container.NewVBox(
		wrapText("The token of "+client+". It is shown only this once; the OS keychain keeps it. The client sends it as Authorization: Bearer TOKEN.", widget.RichTextStyle{}),
		tok, container.NewHBox(copyBtn))
	d := dialog.NewCustom("Token for "+client, "Done", container.New(&maxWidth{w: 480}, body), p.u.win)
	d.Resize(fyne.NewSize(520, 260))
	d.Show()
}

func (p *serveSection) revoke(client string) {
	goRead(p.u, func(ctx context.Context) (struct{}, error) {
		t, err := p.u.serve.tokens(ctx)
		if err != nil {
			return struct{}{}, err
		}
		return struct{}{}, t.Revoke(ctx, client)
	}, func(_ struct{}, err error) {
		if err != nil {
			setText(p.note, "Not revoked: "+sentence(err))
		} else {
			setText(p.note, "The token of "+client+" is revoked: its next request gets 401.")
		}
		p.refresh()
		p.done("", err)
	})
}

// saveExportSettings checks and saves the evidence destinations; they take
// effect when serving (re)starts, which it does here when it is on.
func (p *serveSection) saveExportSettings() {
	on := p.exportOn.Checked
	otlp, syslog := splitList(p.otlp.Text), splitList(p.syslog.Text)
	var headers map[string]string
	var bad error
	for _, h := range splitList(p.header.Text) {
		name, ref, ok := strings.Cut(h, "=")
		name, ref = strings.TrimSpace(name), strings.TrimSpace(ref)
		if err := stream.CheckHeader(name, ref); !ok || err != nil {
			bad = fmt.Errorf("the OTLP header %s: %w", name, stream.ErrHeaderNotARef)
			break
		}
		if headers == nil {
			headers = map[string]string{}
		}
		headers[name] = ref
	}
	serving := p.enabled.Checked
	goRead(p.u, func(ctx context.Context) (struct{}, error) {
		if bad != nil {
			return struct{}{}, bad
		}
		if err := errors.Join(p.u.st.SetExportOTLP(ctx, otlp), p.u.st.SetExportSyslog(ctx, syslog),
			p.u.st.SetExportOTLPHeaders(ctx, headers), p.u.st.SetExportEnabled(ctx, on)); err != nil {
			return struct{}{}, err
		}
		if serving {
			return struct{}{}, p.u.serve.start(context.WithoutCancel(ctx))
		}
		return struct{}{}, nil
	}, func(_ struct{}, err error) {
		if err != nil {
			setText(p.exportNote, "Not saved: "+sentence(err))
		} else {
			setText(p.exportNote, "Saved.")
		}
		p.u.serveChanged()
		p.done("", err)
	})
}

func splitList(s string) []string {
	var out []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			out = append(out, v)
		}
	}
	return out
}
