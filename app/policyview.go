package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/dialog"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// The decisions, as the policy view offers them.
var decisionLabels = []struct {
	label string
	d     policy.Decision
}{
	{"Allow", policy.Allow},
	{"Ask me", policy.ApprovalRequired},
	{"Deny", policy.Deny},
}

func decisionLabel(d policy.Decision) string {
	for _, l := range decisionLabels {
		if l.d == d {
			return l.label
		}
	}
	return string(d)
}

func decisionOf(label string) policy.Decision {
	for _, l := range decisionLabels {
		if l.label == label {
			return l.d
		}
	}
	return policy.ApprovalRequired
}

func decisionOptions() []string {
	var out []string
	for _, l := range decisionLabels {
		out = append(out, l.label)
	}
	return out
}

// policyPage is the Policy view: the defaults by risk, the rules, and an
// explanation of the decision on a sample call.
type policyPage struct {
	u       *UI
	content fyne.CanvasObject
	banner  *problemBanner
	retry   retrier
	gen     uint64

	pol       *policy.Policy // as read; never modified in place
	servers   []store.Server
	defaults  map[policy.Risk]*widget.Select
	global    *widget.Select
	rules     []policy.Rule // shown, in order
	filter    *widget.Select
	list      *widget.List
	count     *widget.RichText
	rulesCard *fyne.Container // the rules, under their heading and count
	version   *widget.RichText
	filling   bool // the selects are being set from a read: not a change

	// Explain.
	exServer *widget.SelectEntry
	exTool   *widget.Entry
	exClient *widget.Entry
	exArgs   *widget.Entry
	exResult *fyne.Container
}

func newPolicyPage(u *UI) *policyPage {
	p := &policyPage{u: u, defaults: map[policy.Risk]*widget.Select{}}
	p.retry = retrier{u: u, f: p.refresh}
	p.banner = newProblemBanner(p.refresh)

	refresh := widget.NewButtonWithIcon("Refresh", theme.ViewRefreshIcon(), u.Refresh)
	add := widget.NewButtonWithIcon("Add rule", theme.ContentAddIcon(), func() { p.openRule(nil) })
	add.Importance = widget.HighImportance
	header := pageHeader("Policy", "What happens to each tool call: the most specific rule that matches decides, then the default for the tool's risk, then the global default.", refresh, add)

	// Defaults.
	defaults := container.New(layout.NewFormLayout())
	for _, r := range policy.Risks {
		sel := widget.NewSelect(decisionOptions(), func(string) { p.defaultsChanged() })
		p.defaults[r] = sel
		word, _ := riskLook(string(r))
		b := newBadge()
		b.set(riskLook(string(r)))
		defaults.Add(container.NewHBox(container.NewCenter(b), layout.NewSpacer()))
		defaults.Add(sel)
		_ = word
	}
	p.global = widget.NewSelect(decisionOptions(), func(string) { p.defaultsChanged() })
	defaults.Add(text("Anything else", widget.RichTextStyle{ColorName: theme.ColorNamePlaceHolder}))
	defaults.Add(p.global)
	riskHelp := text("A tool's risk comes from its name (read_, write_, delete_, run_ …) and its MCP annotations. A tool the server never listed is never allowed by a default.", caption)
	riskHelp.Wrapping = fyne.TextWrapWord
	defaultsCard := newPanel(theme.ColorNameInputBackground, 0, container.NewVBox(heading("Defaults by risk"), defaults, riskHelp))

	// Rules.
	p.filter = widget.NewSelect([]string{allServers}, func(string) { p.showRules() })
	p.filter.Selected = allServers
	p.count = text("", secondary)
	p.list = widget.NewList(
		func() int { return len(p.rules) },
		func() fyne.CanvasObject { return newRuleRow(p) },
		func(id widget.ListItemID, o fyne.CanvasObject) {
			if id < len(p.rules) {
				o.(*ruleRow).set(p.rules[id], p.pol != nil && p.pol.Observed(&p.rules[id]))
			}
		})
	p.list.OnSelected = func(id widget.ListItemID) {
		p.list.UnselectAll()
		if id < len(p.rules) {
			r := p.rules[id]
			p.openRule(&r)
		}
	}
	p.rulesCard = container.NewBorder(
		container.NewBorder(nil, nil, container.NewHBox(heading("Rules"), container.NewCenter(p.count)), p.filter),
		nil, nil, nil,
		newPanel(theme.ColorNameInputBackground, 0, p.list))

	// Explain.
	p.exServer = widget.NewSelectEntry(nil)
	p.exServer.SetPlaceHolder("server name, as in Servers")
	p.exTool = widget.NewEntry()
	p.exTool.SetPlaceHolder("tool name")
	p.exClient = widget.NewEntry()
	p.exClient.SetPlaceHolder("agent (optional): any agent")
	p.exArgs = widget.NewMultiLineEntry()
	p.exArgs.TextStyle.Monospace = true
	p.exArgs.SetPlaceHolder("arguments as JSON (optional)")
	p.exArgs.SetMinRowsVisible(3)
	explain := widget.NewButtonWithIcon("Explain", theme.QuestionIcon(), p.explain)
	explain.Importance = widget.HighImportance
	p.exResult = container.NewVBox()
	explainCard := newPanel(theme.ColorNameInputBackground, 0, container.NewVBox(
		heading("Explain a call"),
		widget.NewForm(
			widget.NewFormItem("Server", p.exServer),
			widget.NewFormItem("Tool", p.exTool),
			widget.NewFormItem("Client", p.exClient),
			widget.NewFormItem("Arguments", p.exArgs),
		),
		container.NewHBox(layout.NewSpacer(), explain),
		p.exResult,
	))

	p.version = text("", caption)
	// The defaults above the rules, each scrolled, the line between them
	// draggable: both fit the smallest window.
	rulesSplit := container.NewVSplit(container.NewVScroll(defaultsCard), container.New(layout.NewCustomPaddedLayout(theme.Padding()*2, 0, 0, 0), p.rulesCard))
	rulesSplit.Offset = 0.45
	left := container.NewBorder(nil, p.version, nil, nil, rulesSplit)
	right := container.NewVScroll(explainCard)
	split := container.NewHSplit(left, container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding()*2, 0), right))
	split.Offset = 0.58
	body := container.NewBorder(p.banner.content, nil, nil, nil, split)
	p.content = container.NewBorder(container.NewVBox(header, widget.NewSeparator()), nil, nil, nil, pageBody(body))
	return p
}

type policyRead struct {
	pol     *policy.Policy
	servers []store.Server
	saved   string // when the version in force was saved
}

// refresh reads the policy in force and the servers.
func (p *policyPage) refresh() {
	p.gen++
	gen := p.gen
	goRead(p.u, func(ctx context.Context) (policyRead, error) {
		ps, err := p.u.core.policies(ctx)
		if err != nil {
			return policyRead{}, err
		}
		pol, err := ps.Current(ctx)
		if err != nil {
			return policyRead{}, err
		}
		servers, err := p.u.st.Servers(ctx)
		if err != nil {
			return policyRead{}, err
		}
		r := policyRead{pol: pol, servers: servers}
		if pol.Version > 0 {
			if hist, err := ps.History(ctx); err == nil {
				for _, v := range hist {
					if v.Version == pol.Version {
						r.saved = v.Created.Local().Format("Jan 2, 2006 at 15:04")
					}
				}
			}
		}
		return r, nil
	}, func(r policyRead, err error) {
		if gen != p.gen {
			return
		}
		if err != nil {
			pr := explain("read the policy", err)
			p.banner.show(&pr, p.retry.failed(pr))
			return
		}
		p.retry.ok()
		p.banner.show(nil, 0)
		p.show(r)
	})
}

func (p *policyPage) show(r policyRead) {
	p.pol, p.servers = r.pol, r.servers
	p.filling = true
	for risk, sel := range p.defaults {
		d, ok := r.pol.Defaults[risk]
		if !ok {
			d = r.pol.Default
		}
		sel.SetSelected(decisionLabel(d))
	}
	p.global.SetSelected(decisionLabel(r.pol.Default))
	p.filling = false

	opts := []string{allServers}
	var names []string
	for _, s := range r.servers {
		opts = append(opts, s.Name)
		names = append(names, s.Name)
	}
	p.filter.Options = opts
	if !slices.Contains(opts, p.filter.Selected) {
		p.filter.Selected = allServers
	}
	p.filter.Refresh()
	p.exServer.SetOptions(names)
	p.showRules()
	switch {
	case r.pol.Version == 0:
		setText(p.version, "The built-in policy: reads are allowed, everything else asks. Any change saves version 1.")
	default:
		setText(p.version, fmt.Sprintf("Version %d, saved %s · %s", r.pol.Version, r.saved, shortHash(r.pol.Hash())))
	}
}

// showRules lists the rules of the server chosen: those whose capability
// names it, or could (globs).
func (p *policyPage) showRules() {
	p.rules = p.rules[:0]
	if p.pol == nil {
		return
	}
	server := p.filter.Selected
	for _, r := range p.pol.Rules {
		if server != allServers && server != "" && !ruleCanName(r, server) {
			continue
		}
		p.rules = append(p.rules, r)
	}
	slices.SortStableFunc(p.rules, func(a, b policy.Rule) int { return strings.Compare(a.Capability, b.Capability) })
	setText(p.count, plural(len(p.rules), "rule", "rules"))
	p.rulesCard.Refresh() // the count's width changed
	p.list.Refresh()
}

// ruleCanName reports whether r's capability glob can match a tool of
// server (a rule naming only a risk class can).
func ruleCanName(r policy.Rule, server string) bool {
	if r.Capability == "" {
		return true
	}
	s, _, ok := policy.SplitCapability(r.Capability)
	if !ok {
		return strings.HasPrefix(r.Capability, "mcp.*")
	}
	return globMatch(s, server)
}

// globMatch matches a glob of * over name.
func globMatch(glob, name string) bool {
	if !strings.Contains(glob, "*") {
		return glob == name
	}
	parts := strings.Split(glob, "*")
	if !strings.HasPrefix(name, parts[0]) {
		return false
	}
	name = name[len(parts[0]):]
	for _, part := range parts[1 : len(parts)-1] {
		k := strings.Index(name, part)
		if k < 0 {
			return false
		}
		name = name[k+len(part):]
	}
	return strings.HasSuffix(name, parts[len(parts)-1])
}

// defaultsChanged saves the defaults chosen as a new version.
func (p *policyPage) defaultsChanged() {
	if p.filling || p.pol == nil {
		return
	}
	next := p.pol.Clone()
	if next.Defaults == nil {
		next.Defaults = map[policy.Risk]policy.Decision{}
	}
	for risk, sel := range p.defaults {
		next.Defaults[risk] = decisionOf(sel.Selected)
	}
	next.Default = decisionOf(p.global.Selected)
	p.save(next, nil)
}

// save stores next as a new version of the policy, recorded in the
// evidence log before it takes effect. done, when set, runs after it is
// saved.
func (p *policyPage) save(next *policy.Policy, done func(error)) {
	if err := next.Validate(); err != nil {
		if done != nil {
			done(err)
		} else {
			dialog.ShowError(err, p.u.win)
		}
		return
	}
	goRead(p.u, func(ctx context.Context) (int64, error) {
		ps, err := p.u.core.policies(ctx)
		if err != nil {
			return 0, err
		}
		return ps.Save(ctx, next)
	}, func(v int64, err error) {
		if errors.Is(err, policy.ErrConflict) {
			err = errors.New("the policy changed meanwhile (with the gatehouse CLI, or another window): it was read again; make your change once more")
		}
		if err != nil {
			p.u.log.Error("save policy", "err", err)
		}
		if done != nil {
			done(err)
		} else if err != nil {
			pr := explain("save the policy", err)
			dialog.ShowError(errors.New(pr.title+": "+pr.text+" "+pr.hint), p.u.win)
		}
		p.refresh()
		p.u.view.detail.readTools()
	})
}

// explain decides the sample call and shows the decision step by step.
func (p *policyPage) explain() {
	p.exResult.RemoveAll()
	if p.pol == nil {
		return
	}
	server, tool := strings.TrimSpace(p.exServer.Text), strings.TrimSpace(p.exTool.Text)
	if server == "" || tool == "" {
		p.exResult.Add(text("Give a server and a tool.", widget.RichTextStyle{ColorName: theme.ColorNameError}))
		return
	}
	var args json.RawMessage
	if a := strings.TrimSpace(p.exArgs.Text); a != "" {
		var obj map[string]any
		if err := json.Unmarshal([]byte(a), &obj); err != nil {
			p.exResult.Add(text("The arguments are not a JSON object: "+err.Error(), widget.RichTextStyle{ColorName: theme.ColorNameError}))
			return
		}
		args = json.RawMessage(a)
	}
	trusted := false
	for _, s := range p.servers {
		if s.Name == server {
			trusted = s.Trusted
		}
	}
	res := p.pol.Decide(policy.Call{Server: server, Tool: tool, Client: strings.TrimSpace(p.exClient.Text), Args: args, Known: true, Trusted: trusted})
	word, c := decisionLook(string(res.Decision))
	b := newBadge()
	b.set(riskLook(string(res.Risk)))
	p.exResult.Add(container.NewHBox(
		text(word, widget.RichTextStyle{SizeName: theme.SizeNameSubHeadingText, TextStyle: fyne.TextStyle{Bold: true}, ColorName: c, Inline: true}),
		container.NewCenter(b),
		container.NewCenter(text("by rule "+res.Rule, widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, Inline: true})),
	))
	steps := textBlock(strings.Join(res.Explanation, "\n"), widget.RichTextStyle{})
	p.exResult.Add(steps)
	p.exResult.Add(text("As a tool the server listed; one it never listed is allowed only by a rule naming it exactly.", caption))
}

// A ruleRow is one rule: what it names, for whom, its conditions, and its
// decision.
type ruleRow struct {
	widget.BaseWidget
	p        *policyPage
	rule     policy.Rule
	id       *widget.RichText
	what     *widget.RichText
	detail   *widget.RichText
	decision *widget.RichText
	del      *widget.Button
}

func newRuleRow(p *policyPage) *ruleRow {
	r := &ruleRow{p: p}
	r.id = text("", caption)
	r.what = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}, Inline: true})
	r.what.Truncation = fyne.TextTruncateEllipsis
	r.detail = text("", caption)
	r.detail.Truncation = fyne.TextTruncateEllipsis
	r.decision = text("", widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true})
	r.del = widget.NewButtonWithIcon("", theme.DeleteIcon(), func() { p.deleteRule(r.rule) })
	r.del.Importance = widget.LowImportance
	r.ExtendBaseWidget(r)
	return r
}

func (r *ruleRow) CreateRenderer() fyne.WidgetRenderer {
	return widget.NewSimpleRenderer(container.New(layout.NewCustomPaddedLayout(0, 0, 4, 0),
		container.NewBorder(nil, nil, nil, container.NewHBox(fixedWidth(70, container.NewCenter(r.decision)), container.NewCenter(r.del)),
			compact(r.what, pullUp(r.detail)))))
}

// set shows rule; observed says it is in observe mode (its own, or the
// policy's): its decision is recorded, not applied.
func (r *ruleRow) set(rule policy.Rule, observed bool) {
	r.rule = rule
	what := toolWords(rule.Capability)
	if rule.Capability == "" {
		what = "any tool"
	}
	setText(r.what, what)
	var parts []string
	parts = append(parts, rule.ID)
	if rule.Client != "" {
		parts = append(parts, "client "+rule.Client)
	}
	if rule.Risk != "" {
		parts = append(parts, string(rule.Risk)+" risk")
	}
	for _, a := range rule.Args {
		parts = append(parts, constraintText(a))
	}
	if len(rule.Secrets) > 0 {
		parts = append(parts, "binds "+strings.Join(rule.Secrets, ", "))
	}
	if rule.Note != "" {
		parts = append(parts, "“"+rule.Note+"”")
	}
	word, c := decisionLook(string(rule.Decision))
	if observed {
		parts = append([]string{"OBSERVE MODE: recorded, not applied"}, parts...)
		c = theme.ColorNamePlaceHolder
	}
	setText(r.detail, strings.Join(parts, " · "))
	seg := r.decision.Segments[0].(*widget.TextSegment)
	seg.Text, seg.Style.ColorName = word, c
	r.Refresh() // lays the row out again: its parts' widths changed
}

// constraintText writes an argument constraint as the rule editor reads
// it: "path under /home/me".
func constraintText(a policy.ArgConstraint) string {
	switch {
	case a.Under != "":
		return a.Arg + " under " + a.Under
	case a.Matches != "":
		return a.Arg + " matches " + a.Matches
	}
	return a.Arg + " equals " + a.Equals
}

// parseConstraints reads the rule editor's conditions, one a line.
func parseConstraints(s string) ([]policy.ArgConstraint, error) {
	var out []policy.ArgConstraint
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		arg, rest, ok := strings.Cut(line, " ")
		op, val, ok2 := strings.Cut(strings.TrimSpace(rest), " ")
		val = strings.TrimSpace(val)
		if !ok || !ok2 || val == "" {
			return nil, fmt.Errorf("condition %d: want ARGUMENT under|equals|matches VALUE, got %q", i+1, line)
		}
		c := policy.ArgConstraint{Arg: arg}
		switch op {
		case "under":
			c.Under = val
		case "equals":
			c.Equals = val
		case "matches":
			c.Matches = val
		default:
			return nil, fmt.Errorf("condition %d: %q is not under, equals or matches", i+1, op)
		}
		out = append(out, c)
	}
	return out, nil
}

// deleteRule asks, then saves the policy without rule.
func (p *policyPage) deleteRule(rule policy.Rule) {
	dialog.ShowConfirm("Delete rule "+rule.ID+"?", "Calls it decided fall to the next most specific rule, or to the defaults.", func(ok bool) {
		if !ok || p.pol == nil {
			return
		}
		next := p.pol.Clone()
		next.Rules = slices.DeleteFunc(next.Rules, func(r policy.Rule) bool { return r.ID == rule.ID })
		p.save(next, nil)
	}, p.u.win)
}

// openRule opens the rule editor: for a new rule (old nil) or old.
func (p *policyPage) openRule(old *policy.Rule) {
	id := widget.NewEntry()
	id.SetPlaceHolder("a short name for the rule, letters, digits and -")
	capability := widget.NewEntry()
	capability.TextStyle.Monospace = true
	capability.SetPlaceHolder("mcp.<server>.<tool>; * matches any run of characters")
	client := widget.NewEntry()
	client.SetPlaceHolder("agent (optional): any agent")
	riskOpts := []string{"any risk"}
	for _, r := range policy.Risks {
		riskOpts = append(riskOpts, string(r))
	}
	risk := widget.NewSelect(riskOpts, nil)
	risk.SetSelected("any risk")
	decision := widget.NewRadioGroup(decisionOptions(), nil)
	decision.Horizontal = true
	decision.Required = true
	decision.SetSelected("Ask me")
	args := widget.NewMultiLineEntry()
	args.TextStyle.Monospace = true
	args.SetPlaceHolder("conditions on the arguments (optional), one a line:\n<argument> under <folder>, <argument> equals <text>")
	args.SetMinRowsVisible(2)
	secrets := widget.NewEntry()
	secrets.SetPlaceHolder("secret ids an agent may pass as vault://secret/ID (Allow only)")
	note := widget.NewEntry()
	note.SetPlaceHolder("why, for people")
	errText := text("", widget.RichTextStyle{ColorName: theme.ColorNameError})
	errText.Wrapping = fyne.TextWrapWord

	if old != nil {
		id.SetText(old.ID)
		id.Disable()
		capability.SetText(old.Capability)
		client.SetText(old.Client)
		if old.Risk != "" {
			risk.SetSelected(string(old.Risk))
		}
		decision.SetSelected(decisionLabel(old.Decision))
		var lines []string
		for _, a := range old.Args {
			lines = append(lines, constraintText(a))
		}
		args.SetText(strings.Join(lines, "\n"))
		secrets.SetText(strings.Join(old.Secrets, ", "))
		note.SetText(old.Note)
	} else if s := p.filter.Selected; s != allServers && s != "" {
		capability.SetText("mcp." + s + ".")
	}

	form := widget.NewForm(
		widget.NewFormItem("Rule id", id),
		&widget.FormItem{Text: "Capability", Widget: capability, HintText: "mcp.SERVER.TOOL; * matches any part of a name"},
		widget.NewFormItem("Client", client),
		widget.NewFormItem("Risk", risk),
		widget.NewFormItem("Decision", decision),
		&widget.FormItem{Text: "Conditions", Widget: args, HintText: "one a line: ARGUMENT under FOLDER | equals VALUE | matches REGEXP"},
		widget.NewFormItem("Secrets", secrets),
		widget.NewFormItem("Note", note),
	)
	title := "Add a rule"
	if old != nil {
		title = "Edit rule " + old.ID
	}
	var dlg *dialog.CustomDialog
	save := widget.NewButtonWithIcon("Save", theme.ConfirmIcon(), nil)
	save.Importance = widget.HighImportance
	save.OnTapped = func() {
		r := policy.Rule{
			ID:         strings.TrimSpace(id.Text),
			Capability: strings.TrimSpace(capability.Text),
			Client:     strings.TrimSpace(client.Text),
			Decision:   decisionOf(decision.Selected),
			Note:       strings.TrimSpace(note.Text),
		}
		if risk.Selected != "any risk" {
			r.Risk = policy.Risk(risk.Selected)
		}
		var err error
		if r.Args, err = parseConstraints(args.Text); err != nil {
			setText(errText, sentence(err))
			return
		}
		for _, s := range strings.Split(secrets.Text, ",") {
			if s = strings.TrimSpace(s); s != "" {
				r.Secrets = append(r.Secrets, s)
			}
		}
		if p.pol == nil {
			return
		}
		next := p.pol.Clone()
		if old != nil {
			for i := range next.Rules {
				if next.Rules[i].ID == old.ID {
					next.Rules[i] = r
				}
			}
		} else {
			if next.Rule(r.ID) != nil {
				setText(errText, "A rule with id "+r.ID+" exists: choose another id.")
				return
			}
			next.Rules = append(next.Rules, r)
		}
		save.Disable()
		p.save(next, func(err error) {
			save.Enable()
			if err != nil {
				pr := explain("save the rule", err)
				msg := pr.text
				if pr.hint != "" {
					msg += " " + pr.hint
				}
				setText(errText, msg)
				return
			}
			dlg.Hide()
		})
	}
	cancel := widget.NewButton("Cancel", func() { dlg.Hide() })
	dlg = dialog.NewCustomWithoutButtons(title, container.NewVBox(form, errText), p.u.win)
	dlg.SetButtons([]fyne.CanvasObject{cancel, save})
	dlg.Resize(fyne.NewSize(620, 0))
	dlg.Show()
}
