package gate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/receipts"
)

// PinState is where a tool stands with its pin.
type PinState string

const (
	// Pinned: the server lists the definition the user accepted.
	Pinned PinState = "pinned"
	// Changed: the server listed a definition other than the accepted one;
	// calls to the tool are held for a person to review the change.
	Changed PinState = "changed"
)

// A ToolStatus is what Gatehouse knows of one of a server's tools: how risky
// it is, what the policy decides for a call to it, and its pin.
type ToolStatus struct {
	Name        string
	Description string // as the server last listed it
	Risk        policy.Risk
	RiskWhy     []string        // the reasons for Risk ([policy.ClassifyIn]), in the order they were weighed
	Pack        string          // the pack that classified it ("filesystem@1"); empty when its name did
	Decision    policy.Decision // for a call with no arguments from any client
	Rule        string          // the rule that decides it
	Pin         PinState
	PinnedAt    time.Time        // when its definition was accepted
	ChangedAt   time.Time        // when a changed definition was listed; zero unless Changed
	Change      *approval.Change // the accepted and the listed definition; nil unless Changed
	ListedHash  string           // the listed definition's hash, for [AcceptChange] and [RejectChange]; empty unless Changed
	Rejected    bool             // a person rejected the listed definition: its calls are denied
}

// Tools returns the tools server has listed through a proxy of this home
// (each is pinned when first listed), sorted by name, with their risk, the
// policy's decision and their pin state. trusted says whether the user trusts
// the server's annotations; pack is the capability pack it matched (nil:
// none).
func Tools(ctx context.Context, db receipts.Migrator, pol *policy.Policy, server string, trusted bool, pack *policy.Pack) ([]ToolStatus, error) {
	if err := db.Migrate(ctx, "gate", migrations); err != nil {
		return nil, fmt.Errorf("read tools of %s: %w", server, err)
	}
	rows, err := db.DB().QueryContext(ctx, `SELECT tool, hash, definition, accepted_at, seen_hash, seen_definition, seen_at, rejected_hash
		FROM pins WHERE server = ? ORDER BY tool`, server)
	if err != nil {
		return nil, fmt.Errorf("read tools of %s: %w", server, err)
	}
	defer rows.Close()
	var out []ToolStatus
	for rows.Next() {
		var (
			name, hash, accepted, seenHash, seenAt, rejected string
			def, seenDef                                     []byte
		)
		if err := rows.Scan(&name, &hash, &def, &accepted, &seenHash, &seenDef, &seenAt, &rejected); err != nil {
			return nil, fmt.Errorf("read tools of %s: %w", server, err)
		}
		ts := ToolStatus{Name: name, Pin: Pinned}
		ts.PinnedAt, _ = time.Parse(time.RFC3339Nano, accepted)
		listed := def
		if seenHash != "" && seenHash != hash {
			ts.Pin, listed = Changed, seenDef
			ts.ChangedAt, _ = time.Parse(time.RFC3339Nano, seenAt)
			ts.Change = &approval.Change{Old: def, New: seenDef}
			ts.ListedHash, ts.Rejected = seenHash, rejected == seenHash
		}
		var p pinned
		_ = json.Unmarshal(listed, &p) // canonical JSON this package wrote
		ts.Description = p.Description
		call := policy.Call{Server: server, Tool: name, Known: true, Trusted: trusted, Pack: pack}
		var ann gateway.Annotations
		if len(p.Annotations) > 0 && json.Unmarshal(p.Annotations, &ann) == nil {
			call.Annotations = &policy.Annotations{ReadOnly: ann.ReadOnlyHint, Destructive: ann.DestructiveHint,
				Idempotent: ann.IdempotentHint, OpenWorld: ann.OpenWorldHint}
		}
		res := pol.Decide(call)
		ts.Risk, ts.Decision, ts.Rule = res.Risk, res.Decision, res.Rule
		_, ts.RiskWhy = policy.ClassifyIn(pack, name, call.Annotations, trusted)
		if _, ok := pack.Tool(name); ok {
			ts.Pack = pack.Ref()
		}
		switch {
		case ts.Pin == Changed && ts.Rejected && ts.Decision != policy.Deny:
			ts.Decision, ts.Rule = policy.Deny, "pin:rejected"
		case ts.Pin == Changed && ts.Decision == policy.Allow:
			ts.Decision, ts.Rule = policy.ApprovalRequired, "pin:changed"
		}
		out = append(out, ts)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tools of %s: %w", server, err)
	}
	return out, nil
}

// ToolsListed implements [gateway.ToolWatcher]: a tool seen for the first
// time is pinned as listed; a tool whose listed definition differs from its
// pin is noted as changed (its calls are held until a person accepts it), and
// the change is logged when first seen.
func (g *Gate) ToolsListed(ctx context.Context, tools []*gateway.Tool) {
	for _, t := range tools {
		if err := g.noteListed(ctx, t); err != nil {
			// The database is likely locked or failing: stop here rather
			// than wait out its busy timeout once per tool while calls wait
			// for pinMu. A call checks its own tool's pin anyway.
			g.log.Error("could not check the listed tools against their pins", slog.String("tool", t.Name), slog.Any("err", err))
			return
		}
	}
}

func (g *Gate) noteListed(ctx context.Context, t *gateway.Tool) error {
	canonical, hash, err := ToolHash(t.Raw)
	if err != nil {
		return err
	}
	g.pinMu.Lock()
	defer g.pinMu.Unlock()
	pin, err := g.pins.get(ctx, g.cfg.Server, t.Name)
	switch {
	case errors.Is(err, errNoPin):
		return g.pin(ctx, t.Name, "", hash, canonical)
	case err != nil:
		return err
	case pin.Hash == hash:
		_, err := g.pins.seen(ctx, g.cfg.Server, t.Name, "", nil)
		return err
	case pin.Hash == legacyHash(t.Raw):
		return g.pin(ctx, t.Name, pin.Hash, hash, canonical)
	}
	changed, err := g.pins.seen(ctx, g.cfg.Server, t.Name, hash, canonical)
	if changed {
		g.log.Warn("a tool's definition changed since it was accepted: its calls are held for review",
			slog.String("tool", t.Name), slog.String("accepted", pin.Hash), slog.String("listed", hash))
	}
	return err
}
