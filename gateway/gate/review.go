package gate

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A person reviews a changed tool (see [Tools]) outside any call: they
// accept the definition the server lists now ([AcceptChange]), or reject
// it ([RejectChange]). A third answer, blocking the tool whatever its
// definition, is a deny rule of the policy.

// ErrNotHeld is returned by [AcceptChange] and [RejectChange] when the tool
// is not held with the definition the person reviewed: the server listed
// another since (or the pinned one again), or another review came first.
var ErrNotHeld = errors.New("the tool is not held with the definition reviewed")

// AcceptChange accepts, for server's tool, the definition the server
// lists now in place of the one accepted before, so that its calls go by
// the policy again. listedHash is the hash of the listed definition the
// person reviewed ([ToolStatus.ListedHash]); if the server lists another
// one now, nothing is accepted ([ErrNotHeld]).
//
// The pin event MUST be in the evidence log before the pin changes: a pin
// that is not in the evidence does not count.
func AcceptChange(ctx context.Context, db receipts.Migrator, log *receipts.Log, server, tool, listedHash string) error {
	if err := db.Migrate(ctx, "gate", migrations); err != nil {
		return fmt.Errorf("accept the change of %s: %w", tool, err)
	}
	var hash, seenHash string
	var seenDef []byte
	err := db.DB().QueryRowContext(ctx, `SELECT hash, seen_hash, seen_definition FROM pins WHERE server = ? AND tool = ?`,
		server, tool).Scan(&hash, &seenHash, &seenDef)
	if errors.Is(err, sql.ErrNoRows) || err == nil && (seenHash == "" || seenHash != listedHash || seenHash == hash) {
		return fmt.Errorf("accept the change of %s: %w", tool, ErrNotHeld)
	}
	if err != nil {
		return fmt.Errorf("accept the change of %s: %w", tool, err)
	}
	if _, err := log.AppendEvent(context.WithoutCancel(ctx), entry.KindPin,
		entry.PinEvent{Server: server, Tool: tool, OldHash: hash, NewHash: seenHash}); err != nil {
		return fmt.Errorf("log the pin of %s: %w", tool, err)
	}
	return pins{db: db.DB()}.put(ctx, server, tool, seenHash, seenDef)
}

// RejectChange refuses, for server's tool, the definition the server lists
// now (listedHash, as reviewed): the accepted one stays, and a call made
// while the server lists the rejected one is denied without asking. A
// definition listed later, other than both, is held for review again.
func RejectChange(ctx context.Context, db receipts.Migrator, server, tool, listedHash string) error {
	if err := db.Migrate(ctx, "gate", migrations); err != nil {
		return fmt.Errorf("reject the change of %s: %w", tool, err)
	}
	res, err := db.DB().ExecContext(ctx, `UPDATE pins SET rejected_hash = ?, rejected_at = ?
		WHERE server = ? AND tool = ? AND seen_hash = ? AND seen_hash != '' AND seen_hash != hash`,
		listedHash, time.Now().UTC().Format(time.RFC3339Nano), server, tool, listedHash)
	if err != nil {
		return fmt.Errorf("reject the change of %s: %w", tool, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("reject the change of %s: %w", tool, ErrNotHeld)
	}
	return nil
}

// rejected reports whether a person rejected hash as server's tool's
// definition.
func (p pins) rejected(ctx context.Context, server, tool, hash string) (bool, error) {
	var n int
	err := p.db.QueryRowContext(ctx, `SELECT count(*) FROM pins WHERE server = ? AND tool = ? AND rejected_hash = ?`,
		server, tool, hash).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("read pin of %s.%s: %w", server, tool, err)
	}
	return n > 0, nil
}
