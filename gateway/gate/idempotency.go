package gate

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Idempotency keys: a client that puts a key in a tools/call's _meta asks
// that the call run at most once. The first allowed call with a key
// reserves it (in the shared database, so across proxies and restarts) and
// records its receipt; a later call to the same tool with the same key and
// the same arguments gets the recorded result, and the server is not called
// again. The same key with other arguments, or a call whose first run has
// no recorded result (still running, killed, erased), is refused: Gatehouse
// does not run it twice.

// idempotent is what an idempotency key says about a call.
type idempotent struct {
	replay json.RawMessage // the recorded result to answer with
	first  string          // the receipt of the first call
	why    string          // why the call is refused; empty when it may proceed
	rule   string
	fresh  bool // the key was new and is now reserved for this call
}

func keyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

func argsHash(args json.RawMessage) string {
	sum := sha256.Sum256(args)
	return hex.EncodeToString(sum[:])
}

// checkKey looks the call's key up and, when it is new, reserves it.
// Called with idemMu held.
func (g *Gate) checkKey(ctx context.Context, c *gateway.Call, args json.RawMessage) (idempotent, error) {
	db := g.pins.db
	kh, ah := keyHash(c.IdempotencyKey), argsHash(args)
	res, err := db.ExecContext(ctx, `INSERT INTO idempotency (server, tool, key_hash, args_hash, receipt, created_at)
		VALUES (?, ?, ?, ?, '', ?) ON CONFLICT DO NOTHING`, g.cfg.Server, c.Tool, kh, ah, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return idempotent{}, fmt.Errorf("check the idempotency key: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return idempotent{fresh: true}, nil
	}
	var firstArgs, receipt, created string
	err = db.QueryRowContext(ctx, `SELECT args_hash, receipt, created_at FROM idempotency WHERE server = ? AND tool = ? AND key_hash = ?`,
		g.cfg.Server, c.Tool, kh).Scan(&firstArgs, &receipt, &created)
	if errors.Is(err, sql.ErrNoRows) {
		return idempotent{}, errors.New("check the idempotency key: its record vanished")
	}
	if err != nil {
		return idempotent{}, fmt.Errorf("check the idempotency key: %w", err)
	}
	refuse := func(rule, format string, args ...any) (idempotent, error) {
		return idempotent{first: receipt, rule: rule,
			why: "Gatehouse refused this call: " + fmt.Sprintf(format, args...) + " It did not run."}, nil
	}
	if firstArgs != ah {
		return refuse("idempotency:mismatch", "its idempotency key was used before for %s with other arguments (receipt %s); use a new key for a new call.", c.Tool, receipt)
	}
	if receipt == "" {
		return refuse("idempotency:in-flight", "a call with the same idempotency key was allowed at %s and has not recorded its receipt yet; call again shortly for its result.", created)
	}
	s, err := g.outcomeOf(ctx, receipt)
	if errors.Is(err, receipts.ErrNotFound) {
		return refuse("idempotency:in-flight", "the call with this idempotency key (receipt %s) is still running or never recorded its outcome, so whether it took effect is not known; it is not run twice.", receipt)
	}
	if err != nil {
		return idempotent{}, fmt.Errorf("read the outcome of %s: %w", receipt, err)
	}
	e, err := entry.Parse(s.Data)
	if err != nil {
		return idempotent{}, fmt.Errorf("read the outcome of %s: %w", receipt, err)
	}
	var o entry.Outcome
	if err := json.Unmarshal(e.Body, &o); err != nil {
		return idempotent{}, fmt.Errorf("read the outcome of %s: %w", receipt, err)
	}
	var result []byte
	erased, notKept := false, false
	for _, p := range s.Payloads {
		if p.Part == "result" {
			result, erased, notKept = p.Data, p.Erased(), p.NotKept != nil
		}
	}
	switch {
	case o.Status == gateway.StatusUnknown:
		return refuse("idempotency:unknown", "the call with this idempotency key (receipt %s) was cut off, and whether it took effect is not known; it is not run twice.", receipt)
	case erased:
		return refuse("idempotency:erased", "the call with this idempotency key ran (receipt %s), but its recorded result has been erased.", receipt)
	case notKept:
		return refuse("idempotency:not-kept", "the call with this idempotency key ran (receipt %s), but its result was too large for the log to keep, so it cannot be given again; it is not run twice.", receipt)
	case result == nil:
		return refuse("idempotency:no-result", "the call with this idempotency key ran (receipt %s) and ended without a result to give again (status %s).", receipt, o.Status)
	}
	return idempotent{replay: result, first: receipt, rule: "idempotency:" + receipt}, nil
}

// outcomeWait bounds how long a retry waits for the first call's outcome to
// be written: an outcome is committed within about 10 ms of the call's
// answer, so a client that retries at once still gets the recorded result.
const outcomeWait = 200 * time.Millisecond

// outcomeOf returns the outcome of receipt, waiting up to outcomeWait for
// one that is on its way.
func (g *Gate) outcomeOf(ctx context.Context, receipt string) (receipts.Stored, error) {
	deadline := time.Now().Add(outcomeWait)
	for {
		s, err := g.cfg.Log.OutcomeOf(ctx, receipt)
		if !errors.Is(err, receipts.ErrNotFound) || time.Now().After(deadline) {
			return s, err
		}
		select {
		case <-ctx.Done():
			return s, err
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// settleKey ties a reserved key to the receipt of the call that took it,
// or frees it when that call was not allowed.
func (g *Gate) settleKey(ctx context.Context, c *gateway.Call, receipt string, allowed bool) error {
	var err error
	if allowed {
		_, err = g.pins.db.ExecContext(ctx, `UPDATE idempotency SET receipt = ? WHERE server = ? AND tool = ? AND key_hash = ?`,
			receipt, g.cfg.Server, c.Tool, keyHash(c.IdempotencyKey))
	} else {
		_, err = g.pins.db.ExecContext(ctx, `DELETE FROM idempotency WHERE server = ? AND tool = ? AND key_hash = ? AND receipt = ''`,
			g.cfg.Server, c.Tool, keyHash(c.IdempotencyKey))
	}
	if err != nil {
		return fmt.Errorf("record the idempotency key: %w", err)
	}
	return nil
}
