package programs

import (
	"context"
	"crypto/rand"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/receipts"
)

// Run statuses.
const (
	StatusRunning        = "RUNNING"
	StatusSuccess        = "SUCCESS"
	StatusFailed         = "FAILED"
	StatusSuspended      = "SUSPENDED"
	StatusBudgetExceeded = "BUDGET_EXCEEDED"
	StatusStalled        = "STALLED"
)

// Step statuses, as a trace records each attempt.
const (
	StepOK      = "OK"      // the step did its work
	StepFailed  = "FAILED"  // it failed, and the run with it
	StepError   = "ERROR"   // it failed and is retried or skipped
	StepSkipped = "SKIPPED" // it failed and on_error skipped it
	StepDenied  = "DENIED"  // the policy or a person refused it
	StepPending = "PENDING" // it waits (an approval, or the tool's work)
)

// ErrNotFound is a trace or program that does not exist.
var ErrNotFound = errors.New("not found")

// A Trace is one run of a program, step by step.
type Trace struct {
	ID       string
	Key      string // the idempotency key it was run with, if any
	Client   string
	Name     string
	Hash     string
	Body     json.RawMessage // the program as submitted
	Status   string
	Error    string // why it stopped, when it did not succeed
	Position int    // the index of the step to run next
	Stalled  int
	Plan     string // how the plan was approved, when it was
	Started  time.Time
	Updated  time.Time
	Steps    []StepRecord
}

// A StepRecord is one attempt of one step: its input, its output, and the
// hash of the run's state after it.
type StepRecord struct {
	Seq     int
	Step    string
	Kind    string
	Status  string
	Input   json.RawMessage // tool arguments, prompt or message, as resolved
	Output  json.RawMessage
	Message string // what went wrong, or what the gate said
	Receipt string // the evidence log entry of a tool call's receipt
	Next    string // the step that follows ("" for the next in order)
	Hash    string // sha256:<hex> of the state after this step
	At      time.Time
}

// SavedProgram is a program kept under its name.
type SavedProgram struct {
	Name  string
	Hash  string
	Body  json.RawMessage
	Saved time.Time
}

// A Store keeps programs and their traces in the home's database.
type Store struct {
	db *sql.DB
	// writes is the home's queue of writers (receipts.WriteLockFile); nil
	// for a database opened alone.
	writes *filelock.Mutex
	// A step's record and the run's state after it, prepared once: a run
	// writes them at every step.
	insertStep, setTrace *sql.Stmt
}

const (
	insertStepSQL = `INSERT INTO program_steps (trace, seq, step, kind, status, input, output, message, receipt, next, hash, at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	setTraceSQL = `UPDATE program_traces SET status = ?, error = ?, position = ?, stalled = ?, plan = ?, updated_at = ? WHERE id = ?`
)

var migrations = []string{
	// 1: programs, runs and their steps.
	`CREATE TABLE program_defs (
		name     TEXT PRIMARY KEY,
		hash     TEXT NOT NULL,
		body     BLOB NOT NULL,
		saved_at TEXT NOT NULL
	) STRICT;
	CREATE TABLE program_traces (
		id         TEXT PRIMARY KEY,
		idem_key   TEXT UNIQUE,
		client     TEXT NOT NULL,
		name       TEXT NOT NULL,
		hash       TEXT NOT NULL,
		body       BLOB NOT NULL,
		status     TEXT NOT NULL,
		error      TEXT NOT NULL DEFAULT '',
		position   INTEGER NOT NULL DEFAULT 0,
		stalled    INTEGER NOT NULL DEFAULT 0,
		plan       TEXT NOT NULL DEFAULT '',
		started_at TEXT NOT NULL,
		updated_at TEXT NOT NULL
	) STRICT;
	CREATE INDEX program_traces_started ON program_traces (started_at);
	CREATE TABLE program_steps (
		trace   TEXT NOT NULL REFERENCES program_traces (id) ON DELETE CASCADE,
		seq     INTEGER NOT NULL,
		step    TEXT NOT NULL,
		kind    TEXT NOT NULL,
		status  TEXT NOT NULL,
		input   BLOB,
		output  BLOB,
		message TEXT NOT NULL DEFAULT '',
		receipt TEXT NOT NULL DEFAULT '',
		next    TEXT NOT NULL DEFAULT '',
		hash    TEXT NOT NULL,
		at      TEXT NOT NULL,
		PRIMARY KEY (trace, seq)
	) STRICT`,
}

// OpenStore returns the programs' store in db, creating its tables when
// needed.
func OpenStore(ctx context.Context, db receipts.Migrator) (*Store, error) {
	if err := db.Migrate(ctx, "programs", migrations); err != nil {
		return nil, fmt.Errorf("open programs: %w", err)
	}
	s := &Store{db: db.DB()}
	var err error
	if s.insertStep, err = s.db.PrepareContext(ctx, insertStepSQL); err != nil {
		return nil, fmt.Errorf("open programs: %w", err)
	}
	if s.setTrace, err = s.db.PrepareContext(ctx, setTraceSQL); err != nil {
		return nil, fmt.Errorf("open programs: %w", err)
	}
	if h, ok := db.(interface{ Dir() string }); ok {
		s.writes = filelock.New(filepath.Join(h.Dir(), receipts.WriteLockFile))
	}
	return s, nil
}

const timeFormat = time.RFC3339Nano

func newTraceID() string { return "tr_" + rand.Text()[:20] }

// Programs lists the saved programs, by name.
func (s *Store) Programs(ctx context.Context) ([]SavedProgram, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT name, hash, body, saved_at FROM program_defs ORDER BY name`)
	if err != nil {
		return nil, fmt.Errorf("list programs: %w", err)
	}
	defer rows.Close()
	var out []SavedProgram
	for rows.Next() {
		var sp SavedProgram
		var at string
		if err := rows.Scan(&sp.Name, &sp.Hash, &sp.Body, &at); err != nil {
			return nil, err
		}
		sp.Saved, _ = time.Parse(timeFormat, at)
		out = append(out, sp)
	}
	return out, rows.Err()
}

// Program returns the saved program name.
func (s *Store) Program(ctx context.Context, name string) (SavedProgram, error) {
	sp := SavedProgram{Name: name}
	var at string
	err := s.db.QueryRowContext(ctx, `SELECT hash, body, saved_at FROM program_defs WHERE name = ?`, name).Scan(&sp.Hash, &sp.Body, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return sp, fmt.Errorf("program %q: %w", name, ErrNotFound)
	}
	sp.Saved, _ = time.Parse(timeFormat, at)
	return sp, err
}

// Delete removes the saved program name; its traces stay.
func (s *Store) Delete(ctx context.Context, name string) error {
	r, err := s.db.ExecContext(ctx, `DELETE FROM program_defs WHERE name = ?`, name)
	if err != nil {
		return fmt.Errorf("delete program %s: %w", name, err)
	}
	if n, _ := r.RowsAffected(); n == 0 {
		return fmt.Errorf("program %q: %w", name, ErrNotFound)
	}
	return nil
}

// start keeps p under its name (replacing an older version) and records
// its new run t, in one transaction, or returns the run an idempotency key
// already made (existing true). Without sync, the commit is not flushed:
// the runner asks for that when the run's first step is a tool step, whose
// receipt's flush flushes it too (see appendStep).
func (s *Store) start(ctx context.Context, p *Program, t *Trace, sync bool) (existing bool, err error) {
	now := time.Now().UTC()
	t.Started, t.Updated = now, now
	var key any
	if t.Key != "" {
		key = t.Key
	}
	err = s.inTx(ctx, sync, func(tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, `INSERT INTO program_defs (name, hash, body, saved_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET hash = excluded.hash, body = excluded.body, saved_at = excluded.saved_at`,
			p.Name, p.Hash(), []byte(t.Body), now.Format(timeFormat)); err != nil {
			return fmt.Errorf("save program %s: %w", p.Name, err)
		}
		_, err := tx.ExecContext(ctx, `INSERT INTO program_traces (id, idem_key, client, name, hash, body, status, started_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (idem_key) DO NOTHING`,
			t.ID, key, t.Client, t.Name, t.Hash, []byte(t.Body), t.Status, now.Format(timeFormat), now.Format(timeFormat))
		return err
	})
	if err != nil {
		return false, fmt.Errorf("record the run: %w", err)
	}
	if t.Key == "" {
		return false, nil
	}
	var id string
	if err := s.db.QueryRowContext(ctx, `SELECT id FROM program_traces WHERE idem_key = ?`, t.Key).Scan(&id); err != nil {
		return false, fmt.Errorf("record the run: %w", err)
	}
	return id != t.ID, nil
}

// TraceByKey returns the run an idempotency key made.
func (s *Store) TraceByKey(ctx context.Context, key string) (*Trace, error) {
	var id string
	err := s.db.QueryRowContext(ctx, `SELECT id FROM program_traces WHERE idem_key = ?`, key).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("idempotency key: %w", ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return s.Trace(ctx, id)
}

// appendStep records one attempt and the run's state after it, in one
// transaction. With sync, both are durable when it returns. Without, they
// are written to the write-ahead log but not flushed to the disk
// (synchronous=NORMAL): the next commit that is flushed, in this process
// or another, flushes them too, since it flushes the same log file. The
// runner asks for that only when the step that follows is a tool step,
// whose receipt is committed and flushed before its call runs; so a record
// MUST still be durable before the call of the step that follows it.
func (s *Store) appendStep(ctx context.Context, t *Trace, r StepRecord, sync bool) error {
	err := s.inTx(ctx, sync, func(tx *sql.Tx) error { return s.appendStepTx(ctx, tx, t, r) })
	if err != nil {
		return fmt.Errorf("record step %s: %w", r.Step, err)
	}
	return nil
}

// appendStepTx writes the record of a step and the run's state after it in
// tx, a transaction of s's database.
func (s *Store) appendStepTx(ctx context.Context, tx *sql.Tx, t *Trace, r StepRecord) error {
	at := r.At.UTC().Format(timeFormat)
	if _, err := tx.StmtContext(ctx, s.insertStep).ExecContext(ctx, t.ID, r.Seq, r.Step, r.Kind, r.Status, []byte(r.Input), []byte(r.Output),
		r.Message, r.Receipt, r.Next, r.Hash, at); err != nil {
		return err
	}
	return s.updateTrace(ctx, tx, t, at)
}

// A Pending is the record of a run's step that is not written yet: the
// runner leaves it to the receipt of the tool step that follows, so that
// one commit makes both durable before that step's call runs (see
// [ToolCall.Pending]), and writes it itself when no receipt took it.
type Pending struct {
	s   *Store
	t   Trace // the run's state after the step (without its steps)
	rec StepRecord

	mu      sync.Mutex
	inTx    bool // written in a transaction not known to have committed; guarded by mu
	written bool // guarded by mu
}

func (s *Store) pending(t *Trace, rec StepRecord) *Pending {
	st := *t
	st.Steps = nil
	return &Pending{s: s, t: st, rec: rec}
}

// InTx writes p in tx, a transaction of the home's database, unless it is
// written already. Whoever commits tx calls [Pending.Committed] once it
// has committed; until then p counts as not written.
func (p *Pending) InTx(ctx context.Context, tx *sql.Tx) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.written {
		return nil
	}
	if err := p.s.appendStepTx(ctx, tx, &p.t, p.rec); err != nil {
		return fmt.Errorf("record step %s: %w", p.rec.Step, err)
	}
	p.inTx = true
	return nil
}

// Committed says that the transaction p was last written in (InTx) has
// committed. It does nothing if no transaction wrote p.
func (p *Pending) Committed() {
	p.mu.Lock()
	p.written = p.written || p.inTx
	p.mu.Unlock()
}

// Flush writes p in a transaction of its own unless it is written, as a
// record that a tool step follows is written: flushed to the disk by the
// next commit that is. A transaction that wrote p (InTx) and whose end is
// not known has ended once Flush holds the write lock: if it committed, p
// is there, and is not written twice.
func (p *Pending) Flush(ctx context.Context) error {
	p.mu.Lock()
	done := p.written
	p.mu.Unlock()
	if done {
		return nil
	}
	err := p.s.inTx(ctx, false, func(tx *sql.Tx) error {
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.written {
			return nil
		}
		var hash string
		switch err := tx.QueryRowContext(ctx, `SELECT hash FROM program_steps WHERE trace = ? AND seq = ?`, p.t.ID, p.rec.Seq).Scan(&hash); {
		case err == nil && hash == p.rec.Hash:
			return nil // a receipt's transaction wrote it
		case err != nil && !errors.Is(err, sql.ErrNoRows):
			return err
		}
		return p.s.appendStepTx(ctx, tx, &p.t, p.rec)
	})
	if err != nil {
		return fmt.Errorf("record step %s: %w", p.rec.Step, err)
	}
	p.mu.Lock()
	p.written = true
	p.mu.Unlock()
	return nil
}

// inTx runs f in a write transaction, committing when f returns nil, after
// queueing with the home's other writers: SQLite's own wait for its lock
// sleeps in growing steps that no commit wakes, and a run's records
// alternate with its receipts' commits. Without sync, the commit is not
// flushed to the disk (see appendStep).
func (s *Store) inTx(ctx context.Context, sync bool, f func(tx *sql.Tx) error) error {
	if s.writes != nil {
		lctx, cancel := context.WithTimeout(ctx, receipts.WriteLockWait)
		unlock, err := s.writes.Lock(lctx)
		cancel()
		if err != nil {
			return fmt.Errorf("wait for the home's other writers: %w", err)
		}
		defer unlock()
	}
	conn, err := s.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if !sync {
		if _, err := conn.ExecContext(ctx, `PRAGMA synchronous = NORMAL`); err != nil {
			return err
		}
		defer func() {
			// The connection goes back to the pool as the store opened
			// it, or not at all.
			if _, err := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA synchronous = FULL`); err != nil {
				conn.Raw(func(any) error { return driver.ErrBadConn })
			}
		}()
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := f(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// updateTrace records the run's status and position in tx.
func (s *Store) updateTrace(ctx context.Context, tx *sql.Tx, t *Trace, at string) error {
	if _, err := tx.StmtContext(ctx, s.setTrace).ExecContext(ctx, t.Status, t.Error, t.Position, t.Stalled, t.Plan, at, t.ID); err != nil {
		return fmt.Errorf("record the run's state: %w", err)
	}
	return nil
}

// setState records the run's status and position, durably.
func (s *Store) setState(ctx context.Context, t *Trace) error {
	return s.inTx(ctx, true, func(tx *sql.Tx) error {
		return s.updateTrace(ctx, tx, t, time.Now().UTC().Format(timeFormat))
	})
}

// Trace returns the run id with its steps.
func (s *Store) Trace(ctx context.Context, id string) (*Trace, error) {
	t := &Trace{ID: id}
	var key sql.NullString
	var started, updated string
	var body []byte
	err := s.db.QueryRowContext(ctx, `SELECT idem_key, client, name, hash, body, status, error, position, stalled, plan, started_at, updated_at
		FROM program_traces WHERE id = ?`, id).Scan(&key, &t.Client, &t.Name, &t.Hash, &body, &t.Status, &t.Error, &t.Position, &t.Stalled, &t.Plan, &started, &updated)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("trace %q: %w", id, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", id, err)
	}
	t.Key, t.Body = key.String, body
	t.Started, _ = time.Parse(timeFormat, started)
	t.Updated, _ = time.Parse(timeFormat, updated)
	rows, err := s.db.QueryContext(ctx, `SELECT seq, step, kind, status, input, output, message, receipt, next, hash, at
		FROM program_steps WHERE trace = ? ORDER BY seq`, id)
	if err != nil {
		return nil, fmt.Errorf("read trace %s: %w", id, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r StepRecord
		var in, out []byte
		var at string
		if err := rows.Scan(&r.Seq, &r.Step, &r.Kind, &r.Status, &in, &out, &r.Message, &r.Receipt, &r.Next, &r.Hash, &at); err != nil {
			return nil, err
		}
		r.Input, r.Output = in, out
		r.At, _ = time.Parse(timeFormat, at)
		t.Steps = append(t.Steps, r)
	}
	return t, rows.Err()
}

// TraceSummary is a run without its steps.
type TraceSummary struct {
	ID, Name, Client, Status, Error string
	Steps                           int
	Started                         time.Time
}

// Traces lists runs, newest first, whose id, program, client or status
// holds query (all when empty), at most limit.
func (s *Store) Traces(ctx context.Context, query string, limit int) ([]TraceSummary, error) {
	like := "%" + query + "%"
	rows, err := s.db.QueryContext(ctx, `SELECT t.id, t.name, t.client, t.status, t.error, t.started_at,
		(SELECT count(*) FROM program_steps s WHERE s.trace = t.id)
		FROM program_traces t
		WHERE ? = '' OR t.id LIKE ? OR t.name LIKE ? OR t.client LIKE ? OR t.status LIKE ? OR t.error LIKE ?
		ORDER BY t.started_at DESC LIMIT ?`, query, like, like, like, like, like, limit)
	if err != nil {
		return nil, fmt.Errorf("list traces: %w", err)
	}
	defer rows.Close()
	var out []TraceSummary
	for rows.Next() {
		var ts TraceSummary
		var at string
		if err := rows.Scan(&ts.ID, &ts.Name, &ts.Client, &ts.Status, &ts.Error, &at, &ts.Steps); err != nil {
			return nil, err
		}
		ts.Started, _ = time.Parse(timeFormat, at)
		out = append(out, ts)
	}
	return out, rows.Err()
}
