package receipts

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// # Witnesses
//
// Witnesses (package witness) cosign the log's checkpoints. The log keeps
// each cosignature with the checkpoint it cosigns, so that an export of
// that checkpoint carries it, and how each witness last answered, so that
// its owner sees a witness that is down or refuses.

const cosignMigration = `CREATE TABLE cosignatures (
		size      INTEGER NOT NULL, -- the checkpoint cosigned: its size
		tree_hash BLOB    NOT NULL, -- and its tree hash
		witness   TEXT    NOT NULL, -- the witness's verifier key
		line      TEXT    NOT NULL, -- its cosignature: a note signature line, with its LF
		time_s    INTEGER NOT NULL, -- the time the cosignature carries
		PRIMARY KEY (size, witness)
	) STRICT;
	CREATE TABLE witness_status (
		witness    TEXT    NOT NULL PRIMARY KEY, -- verifier key
		size       INTEGER NOT NULL,  -- the size the witness last cosigned, as far as known
		ok_ns      INTEGER,           -- the last cosignature received
		failed_ns  INTEGER,           -- the last failure
		failure    TEXT    NOT NULL DEFAULT ''    -- what it was
	) STRICT`

// OnAppend sets f to be called after each commit that appended entries,
// in the committing goroutine: f MUST return at once (a witness submitter's
// non-blocking wake-up), since calls wait for their receipts' commit. Set
// it before the first append.
func (l *Log) OnAppend(f func()) { l.appended = f }

// SaveCosignature keeps witness's cosignature line of the checkpoint c,
// and records that the witness has cosigned c.Size entries.
func (l *Log) SaveCosignature(ctx context.Context, witness string, c entry.Checkpoint, line string, at time.Time) error {
	return l.inTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO cosignatures (size, tree_hash, witness, line, time_s) VALUES (?, ?, ?, ?, ?)
			ON CONFLICT (size, witness) DO UPDATE SET tree_hash = excluded.tree_hash, line = excluded.line, time_s = excluded.time_s`,
			c.Size, c.Hash[:], witness, line, at.Unix()); err != nil {
			return fmt.Errorf("save cosignature: %w", err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO witness_status (witness, size, ok_ns) VALUES (?, ?, ?)
			ON CONFLICT (witness) DO UPDATE SET size = max(size, excluded.size), ok_ns = excluded.ok_ns`,
			witness, c.Size, time.Now().UnixNano()); err != nil {
			return fmt.Errorf("save cosignature: %w", err)
		}
		return nil
	})
}

// WitnessFailed records that witness did not cosign, and why; size is the
// size it said it had cosigned (a 409), or -1 when it did not say.
func (l *Log) WitnessFailed(ctx context.Context, witness string, size int64, why error) error {
	_, err := l.db.ExecContext(ctx, `INSERT INTO witness_status (witness, size, failed_ns, failure) VALUES (?, max(?, 0), ?, ?)
		ON CONFLICT (witness) DO UPDATE SET size = CASE WHEN ? >= 0 THEN excluded.size ELSE size END,
			failed_ns = excluded.failed_ns, failure = excluded.failure`,
		witness, size, time.Now().UnixNano(), why.Error(), size)
	if err != nil {
		return fmt.Errorf("record witness failure: %w", err)
	}
	return nil
}

// A WitnessStatus is how a witness last answered the log's submissions.
type WitnessStatus struct {
	Size    int64     // the size it last cosigned, as far as the log knows
	OK      time.Time // its last cosignature; zero if none
	Failed  time.Time // its last failure; zero if none
	Failure string    // what that failure was
}

// WitnessStatus returns how witness (a verifier key) last answered; the
// zero WitnessStatus when it never did.
func (r *Reader) WitnessStatus(ctx context.Context, witness string) (WitnessStatus, error) {
	var (
		s          WitnessStatus
		ok, failed sql.NullInt64
	)
	err := r.db.QueryRowContext(ctx, `SELECT size, ok_ns, failed_ns, failure FROM witness_status WHERE witness = ?`, witness).
		Scan(&s.Size, &ok, &failed, &s.Failure)
	if errors.Is(err, sql.ErrNoRows) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("read witness status: %w", err)
	}
	if ok.Valid {
		s.OK = time.Unix(0, ok.Int64)
	}
	if failed.Valid {
		s.Failed = time.Unix(0, failed.Int64)
	}
	return s, nil
}

// A Cosignature is a witness's cosignature of one checkpoint.
type Cosignature struct {
	Witness string // its verifier key
	Line    string // the signature line, with its LF
	Time    time.Time
}

// Cosignatures returns the cosignatures kept for the checkpoint of size
// entries and tree hash hash, by witness.
func (r *Reader) Cosignatures(ctx context.Context, size int64, hash tlog.Hash) ([]Cosignature, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT witness, line, time_s FROM cosignatures WHERE size = ? AND tree_hash = ? ORDER BY witness`, size, hash[:])
	if err != nil {
		return nil, fmt.Errorf("read cosignatures: %w", err)
	}
	defer rows.Close()
	var out []Cosignature
	for rows.Next() {
		var (
			c Cosignature
			t int64
		)
		if err := rows.Scan(&c.Witness, &c.Line, &t); err != nil {
			return nil, fmt.Errorf("read cosignatures: %w", err)
		}
		c.Time = time.Unix(t, 0).UTC()
		out = append(out, c)
	}
	return out, rows.Err()
}

// cosignaturesTx returns the cosignature lines kept for the checkpoint of
// size entries and tree hash hash, by witness, read in tx.
func (r *Reader) cosignaturesTx(ctx context.Context, tx *sql.Tx, size int64, hash tlog.Hash) (map[string]string, error) {
	rows, err := tx.QueryContext(ctx, `SELECT witness, line FROM cosignatures WHERE size = ? AND tree_hash = ?`, size, hash[:])
	if err != nil {
		return nil, fmt.Errorf("read cosignatures: %w", err)
	}
	defer rows.Close()
	out := map[string]string{}
	for rows.Next() {
		var k, line string
		if err := rows.Scan(&k, &line); err != nil {
			return nil, fmt.Errorf("read cosignatures: %w", err)
		}
		out[k] = line
	}
	return out, rows.Err()
}
