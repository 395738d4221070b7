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

	"github.com/gowebpki/jcs"
)

// A Pin is a tool definition as the user last accepted it.
type Pin struct {
	Server, Tool string
	Hash         string          // sha256:<hex> of the canonical definition
	Definition   json.RawMessage // the whole definition, canonical JSON
	AcceptedAt   time.Time
}

// ToolHash returns a tool's whole definition, as the client read it
// (name, title, descriptions, schemas, annotations, _meta and anything
// else), in canonical JSON (RFC 8785), and its hash. A server that changes
// any of it after the user accepted the tool gets its calls held for
// review.
func ToolHash(definition json.RawMessage) (canonical []byte, hash string, err error) {
	canonical, err = jcs.Transform(definition)
	if err != nil {
		return nil, "", fmt.Errorf("tool definition: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return canonical, "sha256:" + hex.EncodeToString(sum[:]), nil
}

// pinned is the part of a tool's definition that pins covered before they
// covered the whole definition (and the part Tools reads back).
type pinned struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema,omitempty"`
	Annotations json.RawMessage `json:"annotations,omitempty"`
}

// legacyHash is the hash a pin made before pins covered the whole
// definition has for definition ("legacy:sha256:..."). A pin with it is
// upgraded, once, to the whole definition's hash: what the user accepted
// then is unchanged.
func legacyHash(definition json.RawMessage) string {
	var p pinned
	if err := json.Unmarshal(definition, &p); err != nil {
		return ""
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return ""
	}
	canonical, err := jcs.Transform(raw)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(canonical)
	return "legacy:sha256:" + hex.EncodeToString(sum[:])
}

// pins keeps accepted tool definitions in the shared database.
type pins struct {
	db       *sql.DB
	hashStmt *sql.Stmt // a pin's hash, read on every call
}

func newPins(ctx context.Context, db *sql.DB) (pins, error) {
	stmt, err := db.PrepareContext(ctx, `SELECT hash FROM pins WHERE server = ? AND tool = ?`)
	if err != nil {
		return pins{}, fmt.Errorf("open pins: %w", err)
	}
	return pins{db: db, hashStmt: stmt}, nil
}

var errNoPin = errors.New("no pin")

// hash returns the pinned hash of tool: what a call compares, without
// reading the definition.
func (p pins) hash(ctx context.Context, server, tool string) (string, error) {
	var h string
	err := p.hashStmt.QueryRowContext(ctx, server, tool).Scan(&h)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNoPin
	}
	if err != nil {
		return "", fmt.Errorf("read pin of %s.%s: %w", server, tool, err)
	}
	return h, nil
}

func (p pins) get(ctx context.Context, server, tool string) (Pin, error) {
	var pin Pin
	var def []byte
	var at string
	err := p.db.QueryRowContext(ctx, `SELECT hash, definition, accepted_at FROM pins WHERE server = ? AND tool = ?`,
		server, tool).Scan(&pin.Hash, &def, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return Pin{}, errNoPin
	}
	if err != nil {
		return Pin{}, fmt.Errorf("read pin of %s.%s: %w", server, tool, err)
	}
	pin.Server, pin.Tool, pin.Definition = server, tool, def
	pin.AcceptedAt, _ = time.Parse(time.RFC3339Nano, at)
	return pin, nil
}

func (p pins) put(ctx context.Context, server, tool, hash string, def []byte) error {
	_, err := p.db.ExecContext(ctx, `INSERT INTO pins (server, tool, hash, definition, accepted_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (server, tool) DO UPDATE SET hash = excluded.hash, definition = excluded.definition, accepted_at = excluded.accepted_at,
			seen_hash = '', seen_definition = NULL, seen_at = ''`,
		server, tool, hash, def, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("pin %s.%s: %w", server, tool, err)
	}
	return nil
}

// seen records that the server listed a definition of tool other than its
// pin (or clears that, when it lists the pinned one again). It reports
// whether anything changed.
func (p pins) seen(ctx context.Context, server, tool, hash string, def []byte) (bool, error) {
	var res sql.Result
	var err error
	if def == nil {
		res, err = p.db.ExecContext(ctx, `UPDATE pins SET seen_hash = '', seen_definition = NULL, seen_at = ''
			WHERE server = ? AND tool = ? AND seen_hash != ''`, server, tool)
	} else {
		res, err = p.db.ExecContext(ctx, `UPDATE pins SET seen_hash = ?, seen_definition = ?, seen_at = ?
			WHERE server = ? AND tool = ? AND seen_hash != ?`, hash, def, time.Now().UTC().Format(time.RFC3339Nano), server, tool, hash)
	}
	if err != nil {
		return false, fmt.Errorf("note the listed definition of %s.%s: %w", server, tool, err)
	}
	n, _ := res.RowsAffected()
	return n > 0, nil
}

// migrations are the gate's schema steps. Append only.
var migrations = []string{
	// 1: accepted tool definitions.
	`CREATE TABLE pins (
		server      TEXT NOT NULL,
		tool        TEXT NOT NULL,
		hash        TEXT NOT NULL,
		definition  BLOB NOT NULL,
		accepted_at TEXT NOT NULL,
		PRIMARY KEY (server, tool)
	) STRICT`,
	// 2: the definition the server listed last, when it differs from the
	// pin: a tool held for review, before anyone calls it.
	`ALTER TABLE pins ADD COLUMN seen_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE pins ADD COLUMN seen_definition BLOB;
	ALTER TABLE pins ADD COLUMN seen_at TEXT NOT NULL DEFAULT ''`,
	// 3: idempotency keys (idempotency.go): the call that took each key.
	`CREATE TABLE idempotency (
		server     TEXT NOT NULL,
		tool       TEXT NOT NULL,
		key_hash   TEXT NOT NULL, -- sha256 of the key: keys are the client's, not ours to keep
		args_hash  TEXT NOT NULL, -- sha256 of the arguments as recorded
		receipt    TEXT NOT NULL, -- empty while the first call is being decided
		created_at TEXT NOT NULL,
		PRIMARY KEY (server, tool, key_hash)
	) STRICT`,
	// 4: pins cover the whole definition now; the ones made before covered
	// a part of it, and are marked so (see legacyHash).
	`UPDATE pins SET hash = 'legacy:' || hash`,
	// 5: a listed definition a person rejected (RejectChange): its calls are
	// denied without asking.
	`ALTER TABLE pins ADD COLUMN rejected_hash TEXT NOT NULL DEFAULT '';
	ALTER TABLE pins ADD COLUMN rejected_at TEXT NOT NULL DEFAULT ''`,
}
