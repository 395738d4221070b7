package receipts

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"iter"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Size returns the number of entries in the log.
func (l *Reader) Size(ctx context.Context) (int64, error) {
	if err := l.sync(ctx); err != nil {
		return 0, err
	}
	var n int64
	err := l.db.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM entries`).Scan(&n)
	return n, err
}

// Tree returns the log's tree as it is now, unsigned: its size and hash,
// read in one snapshot.
func (l *Reader) Tree(ctx context.Context) (entry.Checkpoint, error) {
	if err := l.sync(ctx); err != nil {
		return entry.Checkpoint{}, err
	}
	var c entry.Checkpoint
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return c, fmt.Errorf("read the tree: %w", err)
	}
	defer tx.Rollback()
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM entries`).Scan(&c.Size); err != nil {
		return c, fmt.Errorf("read the tree: %w", err)
	}
	if c.Size > 0 {
		if err := tx.QueryRowContext(ctx, `SELECT value FROM log_meta WHERE key = 'id'`).Scan(&c.Log); err != nil {
			return c, fmt.Errorf("read the tree: %w", err)
		}
	}
	if c.Hash, err = tlog.TreeHash(c.Size, &hashReader{ctx: ctx, q: tx}); err != nil {
		return c, fmt.Errorf("read the tree: %w", err)
	}
	return c, nil
}

// Checkpoint returns a checkpoint of the log as it is now, signed with the
// log's key.
func (l *Log) Checkpoint(ctx context.Context) ([]byte, entry.Checkpoint, error) {
	c, err := l.Tree(ctx)
	if err != nil {
		return nil, c, fmt.Errorf("checkpoint: %w", err)
	}
	c.Log = l.id
	key, err := l.liveKey(ctx, l.db, l.currentKey(), c.Size)
	if err != nil {
		return nil, c, fmt.Errorf("checkpoint: %w", err)
	}
	signed, err := entry.SignCheckpoint(c, key)
	if err != nil {
		return nil, c, fmt.Errorf("checkpoint: %w", err)
	}
	return signed, c, nil
}

// ProveInclusion proves that entry index is in the tree of the given size.
func (l *Reader) ProveInclusion(ctx context.Context, index, size int64) (tlog.RecordProof, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	p, err := tlog.ProveRecord(size, index, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return nil, fmt.Errorf("prove entry %d in %d: %w", index, size, err)
	}
	return p, nil
}

// ProveConsistency proves that the tree of size oldSize is a prefix of the
// tree of size newSize.
func (l *Reader) ProveConsistency(ctx context.Context, oldSize, newSize int64) (tlog.TreeProof, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	p, err := tlog.ProveTree(newSize, oldSize, &hashReader{ctx: ctx, q: l.db})
	if err != nil {
		return nil, fmt.Errorf("prove %d consistent with %d: %w", oldSize, newSize, err)
	}
	return p, nil
}

// TreeHash returns the tree hash of the log's first size entries.
func (l *Reader) TreeHash(ctx context.Context, size int64) (tlog.Hash, error) {
	if err := l.sync(ctx); err != nil {
		return tlog.Hash{}, err
	}
	return tlog.TreeHash(size, &hashReader{ctx: ctx, q: l.db})
}

// A Stored entry is an entry as the log holds it: its signed bytes, and its
// payloads beside it.
type Stored struct {
	Index    int64
	Data     []byte // the signed entry
	Payloads []Payload
}

// A Payload is an entry's arguments or result, or its tombstone.
type Payload struct {
	Part       string // args, result
	Commitment string
	Salt, Data []byte // nil once erased; Data is nil too when not kept
	ErasedBy   int64  // index of the erasure entry; -1 when not erased
	// NotKept is set when the log did not keep the payload, as it was over
	// the cap ([MaxStoredPayload]): as the entry's signed body says, its
	// size and the cap. Such a payload has its salt (until erased) and no
	// data.
	NotKept *entry.NotKept
}

// Erased reports whether the payload was erased.
func (p Payload) Erased() bool { return p.ErasedBy >= 0 }

// Entries yields the entries with from <= index < to, in order, with their
// payloads.
func (l *Reader) Entries(ctx context.Context, from, to int64) iter.Seq2[Stored, error] {
	return func(yield func(Stored, error) bool) {
		if err := l.sync(ctx); err != nil {
			yield(Stored{}, err)
			return
		}
		rows, err := l.db.QueryContext(ctx, `SELECT e.idx, e.data, p.part, p.commitment, p.salt, p.data, coalesce(p.erased_by, -1),
				p.not_kept_size, p.not_kept_cap
			FROM entries e LEFT JOIN payloads p ON p.entry_idx = e.idx
			WHERE e.idx >= ? AND e.idx < ? ORDER BY e.idx, p.part`, from, to)
		if err != nil {
			yield(Stored{}, err)
			return
		}
		defer rows.Close()
		var cur Stored
		cur.Index = -1
		for rows.Next() {
			var (
				idx           int64
				data          []byte
				part, comm    sql.NullString
				salt, pd      []byte
				erasedBy      int64
				nkSize, nkCap sql.NullInt64
			)
			if err := rows.Scan(&idx, &data, &part, &comm, &salt, &pd, &erasedBy, &nkSize, &nkCap); err != nil {
				yield(Stored{}, err)
				return
			}
			if idx != cur.Index {
				if cur.Index >= 0 && !yield(cur, nil) {
					return
				}
				cur = Stored{Index: idx, Data: data}
			}
			if part.Valid {
				p := Payload{Part: part.String, Commitment: comm.String, Salt: salt, Data: pd, ErasedBy: erasedBy}
				if nkSize.Valid {
					p.NotKept = &entry.NotKept{Size: nkSize.Int64, Cap: nkCap.Int64}
				}
				cur.Payloads = append(cur.Payloads, p)
			}
		}
		if err := rows.Err(); err != nil {
			yield(Stored{}, err)
			return
		}
		if cur.Index >= 0 {
			yield(cur, nil)
		}
	}
}

// EntryByID returns the entry with the given id.
func (l *Reader) EntryByID(ctx context.Context, id string) (Stored, error) {
	if err := l.sync(ctx); err != nil {
		return Stored{}, err
	}
	var idx int64
	err := l.db.QueryRowContext(ctx, `SELECT idx FROM entries WHERE id = ?`, id).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return Stored{}, fmt.Errorf("entry %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return Stored{}, err
	}
	for s, err := range l.Entries(ctx, idx, idx+1) {
		return s, err
	}
	return Stored{}, fmt.Errorf("entry %s: %w", id, ErrNotFound)
}

// A Key is a signing key announced in the log.
type Key struct {
	ID       string
	Public   ed25519.PublicKey
	AddedIdx int64 // index of the entry that announced it
}

// Keys returns every key announced in the log, oldest first.
func (l *Reader) Keys(ctx context.Context) ([]Key, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	rows, err := l.db.QueryContext(ctx, `SELECT key_id, public_key, added_idx FROM keys ORDER BY added_idx`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []Key
	for rows.Next() {
		var k Key
		var pub []byte
		if err := rows.Scan(&k.ID, &pub, &k.AddedIdx); err != nil {
			return nil, err
		}
		k.Public = ed25519.PublicKey(pub)
		out = append(out, k)
	}
	return out, rows.Err()
}

// Erase deletes the payloads (arguments and results) of the entries with the
// given ids, and their salts, leaving tombstones, and appends an erasure
// entry that names what was erased and why. Signatures and proofs stay
// valid: entries hold commitments, not payloads. A payload the log did not
// keep (over [MaxStoredPayload]) has only its salt to delete: once it is
// gone, not even whoever kept the payload can show it was the one committed
// to. Payloads already erased are skipped; if nothing is left to erase, no
// entry is appended and nil is returned.
func (l *Log) Erase(ctx context.Context, ids []string, reason string) (*entry.Entry, error) {
	var e *entry.Entry
	err := l.inTx(ctx, func(tx *sql.Tx) error {
		var erased []entry.Erased
		var idxs []int64
		for _, id := range ids {
			rows, err := tx.QueryContext(ctx, `SELECT p.entry_idx, p.part, p.commitment FROM payloads p
				JOIN entries e ON e.idx = p.entry_idx WHERE e.id = ? AND p.erased_by IS NULL ORDER BY p.part`, id)
			if err != nil {
				return err
			}
			for rows.Next() {
				var er entry.Erased
				var idx int64
				if err := rows.Scan(&idx, &er.Part, &er.Commitment); err != nil {
					rows.Close()
					return err
				}
				er.Entry = id
				erased = append(erased, er)
				idxs = append(idxs, idx)
			}
			rows.Close()
			if err := rows.Err(); err != nil {
				return err
			}
		}
		if len(erased) == 0 {
			return nil
		}
		var err error
		e, err = l.appendTx(ctx, tx, l.currentKey(), draft{kind: entry.KindErasure, prefix: "e",
			body: entry.ErasureEvent{Erased: erased, Reason: reason}})
		if err != nil {
			return err
		}
		// Search: the erased text leaves the full-text index in this
		// transaction. FTS5 is told what the rows held while the payloads
		// are still there, and they are indexed again once they are gone.
		if err := l.unindexTx(ctx, tx, idxs); err != nil {
			return err
		}
		for i, er := range erased {
			if _, err := tx.ExecContext(ctx, `UPDATE payloads SET salt = NULL, data = NULL, erased_by = ?
				WHERE entry_idx = ? AND part = ?`, e.Index, idxs[i], er.Part); err != nil {
				return err
			}
		}
		return l.reindexTx(ctx, tx, idxs)
	})
	if err != nil {
		return nil, fmt.Errorf("erase: %w", err)
	}
	if e != nil {
		// secure_delete zeroes the erased bytes in the database file; the
		// write-ahead log still holds the pages as they were until it is
		// checkpointed and reset. Best effort: a reader in another process
		// can hold it back until later.
		l.db.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`)
		// The receipt journal keeps the records it emptied until later
		// ones are written over them: erased arguments may be among them.
		if err := l.scrubJournal(ctx); err != nil {
			return e, fmt.Errorf("erase: %w", err)
		}
	}
	return e, nil
}
