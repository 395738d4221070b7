package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"time"
)

// Upgrading the search index.
//
// Step 4 of the log's schema ([prefixMigration]) gives the full-text index
// prefix indexes of three and four characters: a search for a word being
// typed (exa*) then reads one list instead of merging the lists of every
// word that starts so (example, exact, exam...), which at a million
// receipts took 40-200 ms a keystroke and now takes well under one
// (docs/performance.md).
//
// FTS5 fixes its options when a table is created, so the step creates a
// new index and the entries already in the log must be indexed again: at a
// million receipts, minutes of work. A proxy opens the log when it starts
// and must not wait for that, so the step itself only renames the old
// index search_retired, creates the new one as search_fts (a proxy of the
// previous version, still running, appends into the new one by that name)
// and records in search_meta where each stands:
//
//   - reindex_from: search_fts holds every entry from this index on;
//     search_retired the ones below it. [Log.Search] reads the newest from
//     the first and goes on in the second.
//   - retired_to: search_retired holds the entries below this index, the
//     log as it was when the step ran. Erasure takes an entry out of every
//     index that holds it.
//
// [Log.UpgradeIndex] then moves the entries across, newest first, a small
// transaction at a time, and finally empties and drops the retired index
// in small transactions too (dropping it at once would hold the write lock
// for seconds while secure_delete zeroes its pages). [Open] does all of it
// on the spot for a log small enough; the tray app runs it in the
// background for the others, and `gatehouse history --upgrade-index` runs
// it from a terminal.

const prefixMigration = `
	ALTER TABLE search_fts RENAME TO search_retired;
	CREATE VIRTUAL TABLE search_fts USING fts5 (server, tool, decision, client, text,
		content = 'search_source', content_rowid = 'idx', tokenize = 'unicode61 remove_diacritics 2',
		prefix = '3 4');
	INSERT INTO search_meta (key, value) SELECT 'reindex_from', coalesce(max(idx) + 1, 0) FROM entries;
	INSERT INTO search_meta (key, value) SELECT 'retired_to', coalesce(max(idx) + 1, 0) FROM entries`

// indexState says which full-text index holds which entries.
type indexState struct {
	indexedTo int64 // the indexer's cursor: no index holds an entry from here on
	upgrading bool  // search_retired exists
	from      int64 // search_fts holds the entries from this index on
	retiredTo int64 // search_retired holds the entries below this index
}

func readIndexState(ctx context.Context, q querier) (indexState, error) {
	rows, err := q.QueryContext(ctx, `SELECT key, value FROM search_meta WHERE key IN ('reindex_from', 'retired_to', 'indexed_to')`)
	if err != nil {
		return indexState{}, fmt.Errorf("read the search index's state: %w", err)
	}
	defer rows.Close()
	s := indexState{indexedTo: math.MaxInt64} // a log at an earlier schema step indexes as it appends
	for rows.Next() {
		var key string
		var v int64
		if err := rows.Scan(&key, &v); err != nil {
			return indexState{}, fmt.Errorf("read the search index's state: %w", err)
		}
		switch key {
		case "reindex_from":
			s.upgrading, s.from = true, v
		case "retired_to":
			s.retiredTo = v
		case "indexed_to":
			s.indexedTo = v
		}
	}
	if err := rows.Err(); err != nil {
		return indexState{}, fmt.Errorf("read the search index's state: %w", err)
	}
	return s, nil
}

// indexes returns the full-text indexes that hold entry idx.
func (s indexState) indexes(idx int64) []string {
	var out []string
	if idx >= s.from {
		out = append(out, "search_fts")
	}
	if idx < s.retiredTo {
		out = append(out, "search_retired")
	}
	return out
}

// IndexBacklog returns how many entries the search index has yet to take
// over from the index it replaces, and whether an upgrade is under way at
// all (after the last entry moves, the retired index is still being
// emptied).
func (l *Reader) IndexBacklog(ctx context.Context) (left int64, upgrading bool, err error) {
	s, err := readIndexState(ctx, l.db)
	return s.from, s.upgrading, err
}

// Pacing of [Log.UpgradeIndex]: each transaction aims to hold the write lock
// for about upgradeSlice, and the upgrade rests as long as it worked before
// the next one: a proxy's receipt waits for one transaction at most, and
// the proxies write at least half the time.
const (
	upgradeSlice     = 8 * time.Millisecond
	upgradeFirstMove = 128  // entries in the first transaction
	upgradeMaxMove   = 4096 // and in any
	upgradeDropRows  = 64   // rows of the retired index deleted in the first transaction
	upgradeMaxDrop   = 8192 // and in any
)

// smallUpgrade is the size of a log whose index [Open] upgrades on the
// spot: about a second of work at most. A variable for tests.
var smallUpgrade int64 = 5000

// UpgradeIndex moves the log's older entries into the current search index
// and removes the retired one, a short transaction at a time, until it is
// done (nil) or ctx ends. progress, if not nil, is told after each
// transaction how many entries are left to move. Several processes may run
// it at once: each transaction takes up where the last one, of whichever
// process, left off.
func (l *Log) UpgradeIndex(ctx context.Context, progress func(left int64)) error {
	return l.upgradeIndex(ctx, progress, true)
}

func (l *Log) upgradeIndex(ctx context.Context, progress func(left int64), rest bool) error {
	move, drop := int64(upgradeFirstMove), int64(upgradeDropRows)
	for {
		t0 := time.Now()
		var s indexState
		var done int64
		err := l.inTx(ctx, func(tx *sql.Tx) error {
			var err error
			if s, err = readIndexState(ctx, tx); err != nil || !s.upgrading {
				return err
			}
			if s.from > 0 {
				done, err = l.moveEntriesTx(ctx, tx, s.from, move)
				s.from -= done
			} else {
				done, err = l.dropRetiredTx(ctx, tx, drop)
				s.upgrading = done > 0
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("upgrade the search index: %w", err)
		}
		if progress != nil {
			progress(s.from)
		}
		if !s.upgrading {
			return nil
		}
		took := time.Since(t0)
		// Aim the next transaction at the slice, from what this one did.
		scale := func(n, lo, hi int64) int64 {
			if took <= 0 {
				return hi
			}
			return min(hi, max(lo, n*int64(upgradeSlice)/int64(took)))
		}
		if s.from > 0 {
			move = scale(max(done, 1), 16, upgradeMaxMove)
		} else {
			drop = scale(max(done, 1), 16, upgradeMaxDrop)
		}
		if rest {
			select {
			case <-ctx.Done():
				return fmt.Errorf("upgrade the search index: %w", ctx.Err())
			case <-time.After(took):
			}
		}
	}
}

// moveEntriesTx indexes in search_fts up to n entries below from, the
// newest of them, and records that it holds them: it returns how many
// positions it covered.
func (l *Log) moveEntriesTx(ctx context.Context, tx *sql.Tx, from, n int64) (int64, error) {
	lo := max(0, from-n)
	if _, err := tx.ExecContext(ctx, `INSERT INTO search_fts (rowid, server, tool, decision, client, text)
		SELECT idx, server, tool, decision, client, text FROM search_source WHERE idx >= ? AND idx < ?`, lo, from); err != nil {
		return 0, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE search_meta SET value = ? WHERE key = 'reindex_from'`, lo); err != nil {
		return 0, err
	}
	return from - lo, nil
}

// dropRetiredTx empties the retired index by up to n rows of its tables
// and drops it once they are empty: it returns 0 when it is gone. The rows
// are deleted from its tables directly, which leaves it unreadable: no
// search reads it any more (every entry is in search_fts), and erasures
// stop touching it first.
func (l *Log) dropRetiredTx(ctx context.Context, tx *sql.Tx, n int64) (int64, error) {
	if _, err := tx.ExecContext(ctx, `DELETE FROM search_meta WHERE key = 'retired_to'`); err != nil {
		return 0, err
	}
	for _, t := range []struct{ table, key string }{
		{"search_retired_data", "id"}, {"search_retired_docsize", "id"}, {"search_retired_idx", "segid, term"},
	} {
		res, err := tx.ExecContext(ctx, `DELETE FROM `+t.table+` WHERE (`+t.key+`) IN (SELECT `+t.key+` FROM `+t.table+` LIMIT ?)`, n)
		if err != nil {
			return 0, err
		}
		if k, err := res.RowsAffected(); err != nil || k > 0 {
			return k, err
		}
	}
	if _, err := tx.ExecContext(ctx, `DROP TABLE search_retired`); err != nil {
		return 0, err
	}
	_, err := tx.ExecContext(ctx, `DELETE FROM search_meta WHERE key = 'reindex_from'`)
	return 0, err
}
