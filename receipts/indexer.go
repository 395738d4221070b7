package receipts

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
)

// The indexer.
//
// Indexing an entry for full-text search costs about as much CPU as the
// rest of its append, and nothing about a call needs it: a receipt must be
// durable before its call runs, not searchable. So an append writes the
// entry and its searchable columns, and the full-text index follows the
// log from a cursor, search_meta's indexed_to: every entry below it is in
// the index, none at or after it.
//
// An indexer takes in the entries from the cursor on, a batch of at most
// indexBatch in each transaction, and moves the cursor in the same
// transaction: write transactions are serialized (inTx), so several
// indexers in several processes index each entry exactly once, and a crash
// leaves the index and its cursor in step. Every process that appends runs
// one in the background after its commits ([Log] starts it), and [Open]
// starts one for whatever a process that died left behind.
//
// Its transactions run with synchronous=NORMAL: the index is derived from
// the log and can always be rebuilt from it, so it needs no fsync of its
// own; the log's next commit to the database (synchronous=FULL: the one
// that stores the receipt journal, or a write of the log's own) makes it
// durable with it. A crash may lose an index transaction whole, cursor and all, never
// half of one.
//
// Erasure takes the entries it erases out of the index when the index
// holds them (below the cursor), and leaves the others: the indexer reads
// them later as they are then, erased. Both run in write transactions, so
// an indexer never sees an entry half erased.

// indexerMigration is step 7 of the log's schema: the indexer's cursor.
// Every entry appended before it is in the index already.
const indexerMigration = indexerSQL

// indexerStep is the schema step of indexerMigration.
const indexerStep = 7

const indexerSQL = `INSERT INTO search_meta (key, value) SELECT 'indexed_to', coalesce(max(idx) + 1, 0) FROM entries`

const (
	// indexBatch bounds the entries one index transaction takes in:
	// about 10-20 ms of work, so that a receipt that comes meanwhile
	// does not wait long.
	indexBatch = 256
	// openCatchUp is the most entries [Open] indexes before it returns;
	// a larger lag is left to the background.
	openCatchUp = 4 * indexBatch
	// checkpointEvery is how many entries the background indexer takes
	// in between checkpoints of the WAL: an entry and its indexes write
	// about 5 to 10 pages, so the WAL stays under the 1,000 pages at which
	// a commit would checkpoint it.
	checkpointEvery = 64
	// indexDelay is how long the background indexer waits after a commit
	// before it indexes: the entries of several commits then share a
	// transaction, and the indexer keeps off the write lock while calls
	// come one after another.
	indexDelay = 20 * time.Millisecond
)

// indexer runs a Log's background indexing: one goroutine at a time, which
// exits when the index has caught up.
type indexer struct {
	l *Log

	mu      sync.Mutex
	running bool // guarded by mu
	again   bool // a commit came while it ran; guarded by mu
	off     bool // no background indexing (tests of the lag); guarded by mu

	sinceCheckpoint int64 // entries indexed since the last checkpoint; the goroutine's own
}

// kick makes the indexer take in what was committed: it starts the
// goroutine, or tells the running one to look again.
func (x *indexer) kick() {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.off {
		return
	}
	if x.running {
		x.again = true
		return
	}
	x.running = true
	go x.run()
}

func (x *indexer) run() {
	ctx := context.Background()
	for {
		time.Sleep(indexDelay)
		x.mu.Lock()
		x.again = false
		x.mu.Unlock()
		n, err := x.l.CatchUpIndex(ctx)
		if x.sinceCheckpoint += n; err == nil && x.sinceCheckpoint >= checkpointEvery {
			// Copy the WAL into the database here, off the calls' path:
			// else the commit that takes the WAL past SQLite's
			// autocheckpoint (1,000 pages) does it, and its call waits
			// for the copy and an fsync of the database. PASSIVE waits
			// for no reader and no writer.
			x.sinceCheckpoint = 0
			x.l.db.ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`)
		}
		x.mu.Lock()
		if err != nil || !x.again {
			// On an error (the database closed, a disk full) the next
			// commit, or the next opener, tries again.
			x.running = false
			x.mu.Unlock()
			return
		}
		x.mu.Unlock()
	}
}

// IndexLag returns how many of the log's entries the full-text index has
// yet to take in.
func (r *Reader) IndexLag(ctx context.Context) (int64, error) {
	if err := r.sync(ctx); err != nil {
		return 0, err
	}
	var n int64
	// A log at a schema step before the cursor indexes as it appends.
	err := r.db.QueryRowContext(ctx, `SELECT coalesce((SELECT max(idx) + 1 FROM entries)
		- (SELECT value FROM search_meta WHERE key = 'indexed_to'), 0)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("read the search index's lag: %w", err)
	}
	return max(n, 0), nil
}

// CatchUpIndex takes every entry the full-text index lacks into it, in
// short transactions, and returns how many it took in. Other processes may
// do the same at the same time: each entry is indexed once.
func (l *Log) CatchUpIndex(ctx context.Context) (int64, error) {
	var total int64
	for {
		n, err := l.indexSome(ctx, indexBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("index the log: %w", err)
		}
		if n < indexBatch {
			// It took in the whole log as it was then: another write
			// transaction only to find nothing more would hold up the
			// next receipt for nothing.
			return total, nil
		}
	}
}

// indexSome indexes up to n entries from the cursor on, in one
// transaction, and returns how many.
func (l *Log) indexSome(ctx context.Context, n int64) (int64, error) {
	conn, err := l.db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
		return 0, err
	}
	defer func() {
		// The connection goes back to the pool as the store opened it, or
		// not at all.
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
			conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	var done int64
	err = l.inTxOn(ctx, conn, func(tx *sql.Tx) error {
		var from, size int64
		err := tx.QueryRowContext(ctx, `SELECT value FROM search_meta WHERE key = 'indexed_to'`).Scan(&from)
		if errors.Is(err, sql.ErrNoRows) {
			return nil // a log at a schema step before the cursor
		}
		if err != nil {
			return err
		}
		if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM entries`).Scan(&size); err != nil {
			return err
		}
		to := min(size, from+n)
		if to <= from {
			return nil
		}
		if _, err := l.stmts.exec(ctx, tx, `INSERT INTO search_fts (rowid, server, tool, decision, client, text)
			SELECT idx, server, tool, decision, client, text FROM search_source WHERE idx >= ? AND idx < ?`, from, to); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE search_meta SET value = ? WHERE key = 'indexed_to'`, to); err != nil {
			return err
		}
		done = to - from
		return nil
	})
	return done, err
}

// CatchUpIndex takes every entry the full-text index of m's log lacks into
// it, as [Log.CatchUpIndex] does: indexing needs no signing key, so a
// reader of the log (gatehouse history) can bring the index up to date
// before it searches. It writes nothing to the log itself.
func CatchUpIndex(ctx context.Context, m Migrator) (int64, error) {
	r, err := OpenReader(ctx, m)
	if err != nil {
		return 0, err
	}
	l := &Log{Reader: r}
	if h, ok := m.(interface{ Dir() string }); ok {
		l.writes = filelock.New(filepath.Join(h.Dir(), WriteLockFile))
	}
	return l.CatchUpIndex(ctx)
}

// Erasable is [Reader.Erasable] after the index has taken in every entry
// committed so far.
func (l *Log) Erasable(ctx context.Context, q Query) (int, error) {
	if err := l.sync(ctx); err != nil {
		return 0, err
	}
	if _, err := l.CatchUpIndex(ctx); err != nil {
		return 0, fmt.Errorf("erase matching: %w", err)
	}
	return l.Reader.Erasable(ctx, q)
}

// Search is [Reader.Search] after the index has taken in every entry
// committed so far: a process that appends reads its own writes.
func (l *Log) Search(ctx context.Context, q Query) (Page, error) {
	if err := l.sync(ctx); err != nil {
		return Page{}, err
	}
	if len(parseQuery(q.Text)) > 0 {
		if _, err := l.CatchUpIndex(ctx); err != nil {
			return Page{}, fmt.Errorf("search: %w", err)
		}
	}
	return l.Reader.Search(ctx, q)
}
