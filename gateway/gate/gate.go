// Package gate decides on each tool call that reaches a Gatehouse proxy, and
// proves what it decided and what happened.
//
// A [Gate] is the proxy's [gateway.Governor]. For every tools/call it:
//
//  1. classifies the call's risk and asks the policy (the most specific
//     rule wins; an unknown tool is never allowed by a default);
//  2. checks the tool's definition against the one the user accepted (its
//     pin): a changed definition is held for a person to review;
//  3. asks the approver when the policy says APPROVAL_REQUIRED, waiting a
//     bounded time below the clients' own timeouts; an answer given later
//     is picked up by the next identical call; no approver means no; an
//     answer that does not carry this call's key ([approval.CallKey]) is
//     no answer; the receipt names the approver and how the answer came,
//     and a call a lasting answer allows later says it came by a grant;
//  4. writes the authorization receipt to the evidence log, durably,
//     before anything runs; if it cannot, the call does not run;
//  5. after a call that ran, writes its execution outcome.
//
// What the model reads when a call does not run says it was Gatehouse, which
// rule, and the receipt's id; nothing else of the evidence (hashes,
// signatures, policy text, other calls) reaches it.
package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// DefaultApprovalWait bounds one wait for an approver: below the roughly 60
// seconds after which Claude Desktop cancels a call.
const DefaultApprovalWait = 45 * time.Second

// Policies is where the gate reads the policy, and writes the rules a
// person's "always" answers add (*policy.Store is one).
type Policies interface {
	Fresh(ctx context.Context, have *policy.Policy) (*policy.Policy, error)
	Save(ctx context.Context, p *policy.Policy) (int64, error)
}

// AskFunc asks a person to approve a call ([approval.Ask] on the home's
// socket).
type AskFunc func(ctx context.Context, req approval.Request, wait time.Duration, progress func(time.Duration)) (approval.Decision, error)

// Config is what a [Gate] needs.
type Config struct {
	Server string // the server's name, as in capabilities
	// Client names the client whose config launched this proxy (the
	// proxy's --client). When set, it is the client that rules match and
	// receipts name; otherwise the name the client gave in initialize.
	Client string
	// Home is the home folder whose pause (see [Pause]) this gate obeys;
	// empty means it is never paused.
	Home    string
	Trusted bool // the user trusts the server's annotations
	// Pack is the capability pack the server matched when it was
	// registered (nil: none): it classifies the tools it names.
	Pack *policy.Pack
	// Quarantined reports whether the server still awaits the user's
	// review (read at every call: a review made elsewhere applies at
	// once). Until then, a call the policy allows asks a person first.
	// Nil: never quarantined.
	Quarantined func(ctx context.Context) (bool, error)
	// Confinement is how the server was started, recorded in every
	// receipt; nil records nothing (a remote server).
	Confinement *entry.Confinement
	// LocalFiles says the server runs on this machine (a stdio server): path
	// arguments are checked against folder constraints after following
	// symbolic links ([RealPath]), as the server will follow them.
	LocalFiles bool
	Log        *receipts.Log
	Policies   Policies
	Pins       receipts.Migrator // the database that holds the pins
	Ask        AskFunc
	// Secrets resolves the vault://secret/<id> references an agent passes
	// in arguments, for the secrets the deciding rule binds (*vault.Vault is
	// one). Nil refuses every reference.
	Secrets SecretSource
	// ApprovalWait bounds one wait for an approver; zero means
	// DefaultApprovalWait.
	ApprovalWait time.Duration
	Logger       *slog.Logger
	// Program, when set, names the step of a governed program each call
	// is made for (gatehouse programs), which its receipt records; nil, or
	// nil returned, for an agent's own calls. It is given the context
	// Authorize was given, which may carry the step.
	Program func(ctx context.Context, c *gateway.Call) *entry.Program
	// WithReceipt, when set, gives a write to commit in the same
	// transaction as a call's receipt (nil: none): what must be durable
	// before the call runs, as a program's record of its step before this
	// one. The receipt is not written, and the call does not run, if it
	// fails.
	WithReceipt func(ctx context.Context, c *gateway.Call) receipts.TxWrite
}

// SecretSource returns a secret's value by id.
type SecretSource interface {
	Secret(id string) (string, error)
}

// A Gate governs one proxy session's calls to one server.
type Gate struct {
	cfg  Config
	pins pins
	log  *slog.Logger

	// pinMu serializes reading and writing pins, so a tool first seen by
	// a listing and a call at once is pinned once.
	pinMu sync.Mutex

	// budgetMu is held from a budget's count to the receipt that spends
	// it, so that calls of this session racing each other cannot both take
	// the last place.
	budgetMu sync.Mutex
	allowed  []allowedCall // guarded by budgetMu
	// budgetLock is the home's lock other proxies spending the same
	// per-server budgets take (nil without a home).
	budgetLock *filelock.Mutex
	// idemMu is held from an idempotency key's lookup to its record.
	idemMu sync.Mutex

	mu     sync.Mutex
	hashes map[string]toolHashMemo // by tool name: the last definition hashed; guarded by mu
	policy *policy.Policy          // last read; guarded by mu
	// hashed and hash are the last policy a receipt named, and its hash
	// (formatting the policy to hash it took a tenth of a client proxy's
	// CPU per call); guarded by mu.
	hashed *policy.Policy
	hash   string
	grants map[string]grant // capability -> what a person allowed; guarded by mu
}

// grant is a person's lasting "yes" to a tool, for this session or a while.
type grant struct {
	approver *entry.Approver // as the receipts of the calls it allows name it: via a grant
	until    time.Time       // zero: for the session
}

var _ gateway.Governor = (*Gate)(nil)

// New returns a gate for cfg, creating the pins table when needed.
func New(ctx context.Context, cfg Config) (*Gate, error) {
	if cfg.Log == nil || cfg.Policies == nil || cfg.Pins == nil || cfg.Ask == nil {
		panic("gate: Config needs Log, Policies, Pins and Ask")
	}
	if err := cfg.Pins.Migrate(ctx, "gate", migrations); err != nil {
		return nil, fmt.Errorf("open gate: %w", err)
	}
	if cfg.ApprovalWait <= 0 {
		cfg.ApprovalWait = DefaultApprovalWait
	}
	pn, err := newPins(ctx, cfg.Pins.DB())
	if err != nil {
		return nil, err
	}
	g := &Gate{cfg: cfg, pins: pn, log: cfg.Logger, grants: map[string]grant{}, hashes: map[string]toolHashMemo{}}
	if cfg.Home != "" {
		g.budgetLock = filelock.New(filepath.Join(cfg.Home, serverBudgetLock))
	}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	return g, nil
}

// decision is what the gate decided, before it is written down.
type decision struct {
	verdict  policy.Decision
	rule     string
	risk     policy.Risk
	approver *entry.Approver
	why      string      // for the model, when the call does not run
	call     policy.Call // what the policy decided on
}

// Authorize implements [gateway.Governor].
func (g *Gate) Authorize(ctx context.Context, c *gateway.Call, progress func(string)) (*gateway.Authorization, error) {
	start := time.Now()
	if g.cfg.Client != "" {
		c.Client.Name = g.cfg.Client
	}
	capability := policy.Capability(g.cfg.Server, c.Tool)
	pol, err := g.currentPolicy(ctx)
	if err != nil {
		return nil, fmt.Errorf("read the policy: %w", err)
	}
	pc := policy.Call{Server: g.cfg.Server, Tool: c.Tool, Client: c.Client.Name, Args: c.Arguments,
		Known: c.Definition != nil, Trusted: g.cfg.Trusted, Pack: g.cfg.Pack}
	if g.cfg.LocalFiles {
		pc.ResolvePath = RealPath
	}
	if c.Definition != nil && c.Definition.Annotations != nil {
		a := c.Definition.Annotations
		pc.Annotations = &policy.Annotations{ReadOnly: a.ReadOnlyHint, Destructive: a.DestructiveHint,
			Idempotent: a.IdempotentHint, OpenWorld: a.OpenWorldHint}
	}
	res := pol.Decide(pc)
	d := decision{verdict: res.Decision, rule: res.Rule, risk: res.Risk, call: pc}

	change, toolHash, err := g.checkPin(ctx, c)
	if err != nil {
		return nil, err
	}
	if g.cfg.Home != "" {
		paused, _, err := Paused(g.cfg.Home)
		if err != nil {
			return nil, err
		}
		if paused {
			d.verdict, d.rule = policy.Deny, "gatehouse:paused"
			d.why = fmt.Sprintf("Gatehouse is paused: the user has stopped every tool call until they resume it (in the Gatehouse app, or with `gatehouse resume`). %s did not run.", capability)
		}
	}
	if change != nil && d.verdict != policy.Deny {
		rejected, err := g.pins.rejected(ctx, g.cfg.Server, c.Tool, toolHash)
		if err != nil {
			return nil, err
		}
		if rejected {
			d.verdict, d.rule = policy.Deny, "pin:rejected"
			d.why = fmt.Sprintf("Gatehouse denied this call: the definition of %s changed since it was accepted, and a person rejected the change. It did not run.", capability)
		}
	}
	if d.verdict == policy.Allow && g.cfg.Quarantined != nil {
		q, err := g.cfg.Quarantined(ctx)
		if err != nil {
			return nil, fmt.Errorf("read the server's quarantine: %w", err)
		}
		if q {
			d.verdict, d.rule = policy.ApprovalRequired, "quarantine:unreviewed"
		}
	}
	if change != nil && d.verdict == policy.Allow {
		d.verdict, d.rule = policy.ApprovalRequired, "pin:changed"
	}
	if d.verdict == policy.ApprovalRequired && change == nil {
		if gr, ok := g.grant(capability); ok {
			d.verdict, d.approver = policy.Allow, gr.approver
		}
	}
	if d.verdict == policy.ApprovalRequired {
		if err := g.approve(ctx, c, capability, change, &d, progress); err != nil {
			return nil, err
		}
	}

	var idem idempotent
	if d.verdict == policy.Allow && c.IdempotencyKey != "" {
		g.idemMu.Lock()
		defer g.idemMu.Unlock()
		if idem, err = g.checkKey(ctx, c, recordedArgs(c)); err != nil {
			return nil, err
		}
		if idem.why != "" {
			d.verdict, d.rule, d.why = policy.Deny, idem.rule, idem.why
		} else if idem.replay != nil {
			d.rule = idem.rule // answered from the record: nothing runs
		}
	}

	budgets := pol.BudgetsFor(g.cfg.Server, c.Tool)
	if idem.replay != nil {
		budgets = nil // a replay runs nothing, so spends nothing
	}
	if d.verdict == policy.Allow && len(budgets) > 0 {
		g.budgetMu.Lock()
		defer g.budgetMu.Unlock()
		if perServer(budgets) && g.budgetLock != nil {
			// Other proxies spend the same budget: hold the home's lock
			// from the count to the receipt, as budgetMu does here.
			unlock, err := g.budgetLock.Lock(ctx)
			if err != nil {
				return nil, fmt.Errorf("lock the server budgets: %w", err)
			}
			defer unlock()
		}
		b, wait, err := g.overBudget(ctx, budgets, time.Now())
		if err != nil {
			return nil, err
		}
		if b != nil {
			d.verdict, d.rule = policy.Deny, "budget:"+b.ID
			d.why = budgetMessage(b, wait)
		}
	}

	args := c.Arguments
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	var resolved json.RawMessage
	var redact map[string]string
	if d.verdict == policy.Allow && idem.replay == nil {
		var bound []string
		if rule := pol.Rule(d.rule); rule != nil {
			bound = rule.Secrets
		}
		resolved, redact, err = g.resolveRefs(args, bound)
		var unbound *unboundRef
		switch {
		case errors.As(err, &unbound):
			d.verdict, d.rule = policy.Deny, "vault:unbound"
			d.why = fmt.Sprintf("Gatehouse refused this call: the argument %s refers to a secret that no rule binds to %s, so it was not resolved and the call did not run.", unbound.ref, capability)
		case err != nil:
			return nil, err
		}
	}
	r := entry.Receipt{
		Capability: capability, Server: g.cfg.Server, Tool: c.Tool,
		Decision: string(d.verdict), Rule: d.rule, PolicyHash: g.policyHash(pol), Approver: d.approver,
		Client: entry.Client{Name: c.Client.Name, Version: c.Client.Version}, ToolHash: toolHash, Session: c.Session,
		Confinement: g.cfg.Confinement,
	}
	if g.cfg.Program != nil {
		r.Program = g.cfg.Program(ctx, c)
	}
	if o := res.Observed; o != nil && o.Rule != d.rule {
		r.Observed = &entry.Observed{Decision: string(o.Decision), Rule: o.Rule}
	}
	// A decision that was made is written even if the client has given up.
	decided := time.Now()
	var with receipts.TxWrite
	if g.cfg.WithReceipt != nil {
		with = g.cfg.WithReceipt(ctx, c)
	}
	e, err := g.cfg.Log.AppendReceiptWith(context.WithoutCancel(ctx), r, recordedArgs(c), with)
	if idem.fresh {
		allowed := err == nil && d.verdict == policy.Allow
		id := ""
		if err == nil {
			id = e.ID
		}
		if serr := g.settleKey(context.WithoutCancel(ctx), c, id, allowed); serr != nil && err == nil {
			err = serr // the call must not run with its key unrecorded
		}
	}
	if err != nil {
		return nil, fmt.Errorf("write the receipt: %w", err)
	}
	auth := &gateway.Authorization{Allow: d.verdict == policy.Allow, Receipt: e.ID, Replay: idem.replay}
	if auth.Allow && len(budgets) > 0 {
		g.allowed = append(g.allowed, allowedCall{tool: c.Tool, at: decided})
	}
	if auth.Allow {
		auth.Arguments, auth.Redact = resolved, redact
	} else {
		auth.Message = g.message(capability, d, e.ID)
	}
	g.log.Info("decided", slog.String("capability", capability), slog.String("decision", string(d.verdict)),
		slog.String("rule", d.rule), slog.String("receipt", e.ID),
		slog.Duration("decide", decided.Sub(start)), slog.Duration("receipt_write", time.Since(decided)))
	return auth, nil
}

// recordedArgs are the arguments receipts and approvers see: the server's
// secret values masked.
func recordedArgs(c *gateway.Call) json.RawMessage {
	args := c.Recorded
	if args == nil {
		args = c.Arguments
	}
	if len(args) == 0 {
		args = json.RawMessage("{}")
	}
	return args
}

func (g *Gate) message(capability string, d decision, receipt string) string {
	switch {
	case d.why != "":
		return d.why + " Receipt " + receipt + "."
	case d.verdict == policy.ApprovalRequired && d.rule == "pin:changed":
		return fmt.Sprintf("Gatehouse is holding this call: the definition of %s changed since it was accepted, and a person must review the change before it runs. "+
			"It has not run. Once the change is approved in the Gatehouse app or in `gatehouse approvals`, call the tool again with the same arguments. Receipt %s.",
			capability, receipt)
	case d.verdict == policy.ApprovalRequired && d.rule == "quarantine:unreviewed":
		return fmt.Sprintf("Gatehouse is holding this call: server %s is new and in quarantine until the user reviews it, so each of its calls needs a person's approval. "+
			"It has not run. Once it is approved in the Gatehouse app or in `gatehouse approvals` (or the server is reviewed with `gatehouse server review %s`), call the tool again with the same arguments. Receipt %s.",
			g.cfg.Server, g.cfg.Server, receipt)
	case d.verdict == policy.ApprovalRequired:
		return fmt.Sprintf("Gatehouse is waiting for a person to approve this call (%s, rule %s), so it has not run yet. "+
			"Once it is approved in the Gatehouse app or in `gatehouse approvals`, call the tool again with the same arguments. Receipt %s.",
			capability, d.rule, receipt)
	default:
		return fmt.Sprintf("Gatehouse denied this call: %s is not allowed (rule %s). It did not run. Receipt %s.", capability, d.rule, receipt)
	}
}

// approve asks a person, and turns the answer into d.
func (g *Gate) approve(ctx context.Context, c *gateway.Call, capability string, change *approval.Change, d *decision, progress func(string)) error {
	req := approval.Request{Server: g.cfg.Server, Tool: c.Tool, Client: c.Client.Name, Risk: string(d.risk), Rule: d.rule,
		Args: recordedArgs(c), Session: c.Session, Change: change}
	if len(req.Args) == 0 {
		req.Args = json.RawMessage("{}")
	}
	if c.Definition != nil {
		req.Description = c.Definition.Description
	}
	// The answer must be for this call: the Key the request is shown with.
	key, err := approval.CallKey(req)
	if err != nil {
		return fmt.Errorf("ask for approval: %w", err)
	}
	req.Key = key
	var report func(time.Duration)
	if progress != nil {
		report = func(waited time.Duration) {
			progress(fmt.Sprintf("Waiting for a person to approve %s in Gatehouse (%ds)", capability, int(waited.Seconds())))
		}
	}
	ans, err := g.cfg.Ask(ctx, req, g.cfg.ApprovalWait, report)
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, approval.ErrNoApprover):
		g.log.Warn("no approver answered; the call is denied", slog.String("capability", capability), slog.Any("err", err))
		d.verdict = policy.Deny
		need := fmt.Sprintf("Gatehouse needs a person to approve %s (rule %s)", capability, d.rule)
		if d.rule == "quarantine:unreviewed" {
			need = fmt.Sprintf("Server %s is in quarantine until the user reviews it (`gatehouse server review %s`), so Gatehouse needs a person to approve %s", g.cfg.Server, g.cfg.Server, capability)
		}
		if change != nil {
			need = fmt.Sprintf("The definition of %s changed since it was accepted, and Gatehouse needs a person to review the change", capability)
		}
		d.why = need + ", and no approver is running, so the call was denied and did not run. " +
			"Open the Gatehouse app, or run `gatehouse approvals` in a terminal, then call the tool again."
		return nil
	case errors.Is(err, approval.ErrPending):
		return nil // stays APPROVAL_REQUIRED: the receipt says so, the model is told to call again
	case err != nil:
		return fmt.Errorf("ask for approval: %w", err)
	}
	if ans.Key != key {
		// An answer for other arguments (or another tool, server or
		// client) is no answer for this call.
		g.log.Warn("an approver's answer for another call was refused", slog.String("capability", capability))
		d.verdict = policy.Deny
		d.why = fmt.Sprintf("Gatehouse refused the approver's answer: it was for another call than this one (%s with these arguments), so the call did not run.", capability)
		return nil
	}
	d.approver = &entry.Approver{Kind: ans.Approver, Scope: string(ans.Scope), Via: string(ans.Via)}
	if until := ans.Until(); !until.IsZero() {
		d.approver.Until = until.UTC().Format(time.RFC3339)
	}
	if !ans.Scope.Allows() {
		d.verdict = policy.Deny
		d.why = fmt.Sprintf("A person denied this call in Gatehouse (%s). It did not run.", capability)
		if ans.Scope == approval.ScopeAlwaysDeny {
			return g.addRule(ctx, capability, policy.Deny, ans, d.call)
		}
		return nil
	}
	d.verdict = policy.Allow
	if change != nil {
		// The new definition is accepted with the call.
		if err := g.acceptPin(ctx, c); err != nil {
			return err
		}
	}
	switch ans.Scope {
	case approval.ScopeSession:
		g.setGrant(capability, grant{approver: standing(d.approver)})
	case approval.ScopeMinutes:
		g.setGrant(capability, grant{approver: standing(d.approver), until: ans.Until()})
	case approval.ScopeAlways:
		return g.addRule(ctx, capability, policy.Allow, ans, d.call)
	}
	return nil
}

// addRule makes a person's "always" (or "always deny") a rule of the policy.
// A tool whose name would read as a glob (it holds a '*') cannot be named by
// a rule exactly: the answer then lasts for the session only. An approver
// may have written the rule itself, with the reach the person chose (the
// app writes it, for one agent or some arguments, before it answers): when
// the policy already decides the call so, nothing is added.
func (g *Gate) addRule(ctx context.Context, capability string, verdict policy.Decision, ans approval.Decision, call policy.Call) error {
	if strings.Contains(capability, "*") {
		g.log.Warn("a tool name with '*' cannot be a rule; the answer lasts for this session", slog.String("capability", capability))
		if verdict == policy.Allow {
			g.setGrant(capability, grant{approver: &entry.Approver{Kind: ans.Approver, Scope: string(approval.ScopeSession), Via: entry.ViaGrant}})
		}
		return nil
	}
	pol, err := g.currentPolicy(ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	if pol.Decide(call).Decision == verdict {
		return nil
	}
	next := pol.Clone()
	id := ruleID(verdict, capability)
	next.Rules = append(removeRule(next.Rules, id), policy.Rule{ID: id, Capability: capability, Decision: verdict,
		Note: fmt.Sprintf("answered %q by the %s approver (%s) at %s", ans.Scope, ans.Approver, ans.Via, ans.Decided.UTC().Format(time.RFC3339))})
	if _, err := g.cfg.Policies.Save(context.WithoutCancel(ctx), next); err != nil {
		return fmt.Errorf("save the approver's rule: %w", err)
	}
	return nil
}

// ruleID names the rule an approver's lasting answer adds: readable when
// the capability is, else its hash.
func ruleID(verdict policy.Decision, capability string) string {
	prefix := "always-"
	if verdict == policy.Deny {
		prefix = "never-"
	}
	rest := strings.NewReplacer(".", "-").Replace(strings.TrimPrefix(capability, "mcp."))
	for _, r := range rest {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._:/@+-", r)) {
			sum := sha256.Sum256([]byte(capability))
			return prefix + hex.EncodeToString(sum[:8])
		}
	}
	if len(prefix)+len(rest) > 200 {
		sum := sha256.Sum256([]byte(capability))
		return prefix + hex.EncodeToString(sum[:8])
	}
	return prefix + rest
}

func removeRule(rules []policy.Rule, id string) []policy.Rule {
	out := rules[:0:0]
	for _, r := range rules {
		if r.ID != id {
			out = append(out, r)
		}
	}
	return out
}

func (g *Gate) currentPolicy(ctx context.Context) (*policy.Policy, error) {
	g.mu.Lock()
	have := g.policy
	g.mu.Unlock()
	p, err := g.cfg.Policies.Fresh(ctx, have)
	if err != nil {
		return nil, err
	}
	g.mu.Lock()
	g.policy = p
	g.mu.Unlock()
	return p, nil
}

// policyHash returns p.Hash(), computed once per policy read: a policy
// the store returns is not modified.
func (g *Gate) policyHash(p *policy.Policy) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.hashed != p {
		g.hashed, g.hash = p, p.Hash()
	}
	return g.hash
}

// standing returns how the receipts of the calls a lasting answer a allows
// later name their approver: a's, as a grant, for nobody was asked about
// them.
func standing(a *entry.Approver) *entry.Approver {
	g := *a
	g.Via = entry.ViaGrant
	return &g
}

func (g *Gate) grant(capability string) (grant, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	gr, ok := g.grants[capability]
	if ok && !gr.until.IsZero() && time.Now().After(gr.until) {
		delete(g.grants, capability)
		return grant{}, false
	}
	return gr, ok
}

func (g *Gate) setGrant(capability string, gr grant) {
	g.mu.Lock()
	g.grants[capability] = gr
	g.mu.Unlock()
}

// checkPin compares the tool's definition with its pin. A tool seen for the
// first time is pinned as it is (and the pin logged); a changed one returns
// the change for a person to review.
func (g *Gate) checkPin(ctx context.Context, c *gateway.Call) (*approval.Change, string, error) {
	if c.Definition == nil {
		return nil, "", nil
	}
	canonical, hash, err := g.toolHash(c.Definition)
	if err != nil {
		return nil, "", err
	}
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	pinned, err := g.pins.hash(ctx, g.cfg.Server, c.Tool)
	switch {
	case errors.Is(err, errNoPin):
		if err := g.pin(ctx, c.Tool, "", hash, canonical); err != nil {
			return nil, "", err
		}
		return nil, hash, nil
	case err != nil:
		return nil, "", err
	case pinned == hash:
		return nil, hash, nil
	case pinned == legacyHash(c.Definition.Raw):
		if err := g.pin(ctx, c.Tool, pinned, hash, canonical); err != nil {
			return nil, "", err
		}
		return nil, hash, nil
	}
	pin, err := g.pins.get(ctx, g.cfg.Server, c.Tool)
	if err != nil {
		return nil, "", err
	}
	return &approval.Change{Old: pin.Definition, New: canonical}, hash, nil
}

// toolHashMemo is a tool definition as listed, and its hash.
type toolHashMemo struct {
	raw       json.RawMessage
	canonical []byte
	hash      string
}

// toolHash is [ToolHash] of def, remembered while the server lists the same
// definition: a call does not canonicalise its tool's schema again.
func (g *Gate) toolHash(def *gateway.Tool) ([]byte, string, error) {
	g.mu.Lock()
	m, ok := g.hashes[def.Name]
	g.mu.Unlock()
	if ok && bytes.Equal(m.raw, def.Raw) {
		return m.canonical, m.hash, nil
	}
	canonical, hash, err := ToolHash(def.Raw)
	if err != nil {
		return nil, "", err
	}
	g.mu.Lock()
	g.hashes[def.Name] = toolHashMemo{raw: def.Raw, canonical: canonical, hash: hash}
	g.mu.Unlock()
	return canonical, hash, nil
}

func (g *Gate) acceptPin(ctx context.Context, c *gateway.Call) error {
	canonical, hash, err := ToolHash(c.Definition.Raw)
	if err != nil {
		return err
	}
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	old, err := g.pins.get(ctx, g.cfg.Server, c.Tool)
	if err != nil && !errors.Is(err, errNoPin) {
		return err
	}
	return g.pin(ctx, c.Tool, old.Hash, hash, canonical)
}

// pin records a definition as accepted, in the log first: a pin that is not
// in the evidence does not count.
func (g *Gate) pin(ctx context.Context, tool, oldHash, hash string, canonical []byte) error {
	if _, err := g.cfg.Log.AppendEvent(context.WithoutCancel(ctx), entry.KindPin,
		entry.PinEvent{Server: g.cfg.Server, Tool: tool, OldHash: oldHash, NewHash: hash}); err != nil {
		return fmt.Errorf("log the pin of %s: %w", tool, err)
	}
	return g.pins.put(ctx, g.cfg.Server, tool, hash, canonical)
}

// Complete implements [gateway.Governor]: it writes the outcome of a call
// that ran.
func (g *Gate) Complete(ctx context.Context, c *gateway.Call, a *gateway.Authorization, o *gateway.Outcome) {
	out := entry.Outcome{Receipt: a.Receipt, Status: o.Status, ErrorCode: o.ErrorCode,
		DurationMS: float64(o.Duration.Microseconds()) / 1000}
	for _, f := range o.Findings {
		out.Redactions = append(out.Redactions, entry.Finding{Secret: f.Secret, Encoding: f.Encoding, Count: f.Count})
	}
	var result []byte
	if len(o.Result) > 0 {
		result = o.Result
	}
	if _, err := g.cfg.Log.AppendOutcome(ctx, out, result); err != nil {
		g.log.Error("outcome not written", slog.String("receipt", a.Receipt), slog.Any("err", err))
	}
}

// unboundRef is a reference to a secret the deciding rule does not bind.
type unboundRef struct{ ref string }

func (e *unboundRef) Error() string { return "unbound secret reference " + e.ref }

// resolveRefs replaces each string value of args that is a vault://secret/
// reference with the secret's value, if the deciding rule binds it. It
// returns the new arguments (nil when there were no references) and the
// values it put in, which the proxy then keeps out of the result. The
// receipt records the arguments as the agent sent them: references, never
// values.
func (g *Gate) resolveRefs(args json.RawMessage, bound []string) (json.RawMessage, map[string]string, error) {
	if !strings.Contains(string(args), "vault://") {
		return nil, nil, nil
	}
	var v any
	dec := json.NewDecoder(strings.NewReader(string(args)))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, nil, nil // not JSON: the server will say so
	}
	values := map[string]string{}
	var walk func(any) (any, error)
	walk = func(v any) (any, error) {
		switch x := v.(type) {
		case string:
			if !strings.HasPrefix(x, "vault://") {
				return x, nil
			}
			id, ok := strings.CutPrefix(x, vaultRefPrefix)
			if !ok || !slices.Contains(bound, id) || g.cfg.Secrets == nil {
				return nil, &unboundRef{x}
			}
			val, err := g.cfg.Secrets.Secret(id)
			if err != nil {
				return nil, fmt.Errorf("resolve %s: %w", x, err)
			}
			values[id] = val
			return val, nil
		case []any:
			for i := range x {
				r, err := walk(x[i])
				if err != nil {
					return nil, err
				}
				x[i] = r
			}
			return x, nil
		case map[string]any:
			for k, e := range x {
				r, err := walk(e)
				if err != nil {
					return nil, err
				}
				x[k] = r
			}
			return x, nil
		}
		return v, nil
	}
	out, err := walk(v)
	if err != nil {
		return nil, nil, err
	}
	if len(values) == 0 {
		return nil, nil, nil
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, nil, err
	}
	return b, values, nil
}

// vaultRefPrefix starts a reference to a secret (as package vault has it).
const vaultRefPrefix = "vault://secret/"
