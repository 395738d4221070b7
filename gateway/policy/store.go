package policy

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
)

// Migrator is the home folder's database, where the store keeps its tables
// (*store.Store is one).
type Migrator interface {
	DB() *sql.DB
	Migrate(ctx context.Context, component string, steps []string) error
}

// A Recorder writes a policy version to the evidence log. [Store.Save] calls
// it after the version is stored and before it takes effect, so that no
// version ever decides a call without being in the log.
type Recorder interface {
	RecordPolicy(ctx context.Context, version int64, hash string) error
}

// RecorderFunc adapts a function to [Recorder].
type RecorderFunc func(ctx context.Context, version int64, hash string) error

// RecordPolicy calls f.
func (f RecorderFunc) RecordPolicy(ctx context.Context, version int64, hash string) error {
	return f(ctx, version, hash)
}

// Options configure [Open]. The zero value opens a store that reads but
// cannot save.
type Options struct {
	// Recorder records each saved version in the evidence log; [Store.Save]
	// fails without one.
	Recorder Recorder
}

// ErrConflict is returned by [Store.Save] when the policy changed since the
// version the saved policy was made from.
var ErrConflict = errors.New("the policy changed meanwhile")

// ErrNoRecorder is returned by [Store.Save] on a store opened without a
// [Recorder]: a version that is not in the evidence log must not exist.
var ErrNoRecorder = errors.New("no evidence log to record the policy version in")

// ErrNotFound is returned for a version that does not exist.
var ErrNotFound = errors.New("not found")

// A Store keeps the versions of the policy in the shared database. It holds
// no copy of the policy: every read goes to the database, so every process
// sees a change as soon as it is saved. It is safe for concurrent use.
//
// Saving is three steps, in this order, so that the evidence log has every
// version that ever decided a call:
//
//  1. store the new version, not yet in force, under the next version number
//     (in one IMMEDIATE transaction, after checking that the policy it was
//     made from is still current);
//  2. record it in the evidence log ([Recorder]); if that fails, Save fails
//     and the version never takes effect;
//  3. make it current, if the policy it was made from is still current.
//
// A crash between steps 2 and 3, or a concurrent save that wins step 3,
// leaves a logged version that never took effect ([Version.Applied] false);
// a version in force is always in the log. Version numbers are never reused,
// so they may skip.
type Store struct {
	db  *sql.DB
	rec Recorder
	// version reads the current version: prepared once, since a proxy
	// runs it before every decision.
	version *sql.Stmt
}

// Open opens the policy store in m's database, creating its tables on first
// use. Nil options mean a store that reads but cannot save.
func Open(ctx context.Context, m Migrator, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if err := m.Migrate(ctx, "policy", migrations); err != nil {
		return nil, fmt.Errorf("open policy store: %w", err)
	}
	s := &Store{db: m.DB(), rec: opts.Recorder}
	var err error
	if s.version, err = s.db.PrepareContext(ctx, `SELECT version FROM policy_current WHERE id = 1`); err != nil {
		return nil, fmt.Errorf("open policy store: %w", err)
	}
	return s, nil
}

// migrations are the store's schema steps. Append only.
var migrations = []string{
	// 1: every version, and which one is current. A version is written
	// before it is logged and becomes current after.
	`CREATE TABLE policy_versions (
		version    INTEGER NOT NULL PRIMARY KEY,
		hash       TEXT    NOT NULL, -- sha256:<hex> of document
		document   TEXT    NOT NULL, -- canonical text (Policy.Format)
		base       INTEGER NOT NULL, -- the version it was made from
		created_at TEXT    NOT NULL,
		applied    INTEGER NOT NULL DEFAULT 0 -- 1 once logged and made current
	) STRICT;
	CREATE TABLE policy_current (
		id      INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL -- 0: none saved, the built-in default
	) STRICT;
	INSERT INTO policy_current (id, version) VALUES (1, 0)`,
}

// CurrentVersion returns the number of the version in force, 0 when none
// has been saved (the built-in [Default] is in force). It is one read of
// one row: cheap enough to call before every decision.
func (s *Store) CurrentVersion(ctx context.Context) (int64, error) {
	var v int64
	if err := s.version.QueryRowContext(ctx).Scan(&v); err != nil {
		return 0, fmt.Errorf("read current policy version: %w", err)
	}
	return v, nil
}

// Current returns the policy in force, with its Version set; the built-in
// [Default] (Version 0) when none has been saved. Callers must not modify
// it ([Policy.Clone] first).
func (s *Store) Current(ctx context.Context) (*Policy, error) {
	var (
		v   int64
		doc sql.NullString
	)
	err := s.db.QueryRowContext(ctx, `SELECT c.version, p.document FROM policy_current c
		LEFT JOIN policy_versions p ON p.version = c.version WHERE c.id = 1`).Scan(&v, &doc)
	if err != nil {
		return nil, fmt.Errorf("read current policy: %w", err)
	}
	if v == 0 {
		return Default(), nil
	}
	if !doc.Valid {
		return nil, fmt.Errorf("read current policy: version %d: %w", v, ErrNotFound)
	}
	return parseStored(v, doc.String)
}

// Fresh returns have when it is still the version in force, and the policy
// in force otherwise (or when have is nil): what a long-running process
// calls before each decision, for the price of [Store.CurrentVersion].
func (s *Store) Fresh(ctx context.Context, have *Policy) (*Policy, error) {
	if have != nil {
		v, err := s.CurrentVersion(ctx)
		if err != nil {
			return nil, err
		}
		if v == have.Version {
			return have, nil
		}
	}
	return s.Current(ctx)
}

// Load returns version v (whether or not it ever took effect); version 0 is
// the built-in [Default].
func (s *Store) Load(ctx context.Context, v int64) (*Policy, error) {
	if v == 0 {
		return Default(), nil
	}
	var doc string
	err := s.db.QueryRowContext(ctx, `SELECT document FROM policy_versions WHERE version = ?`, v).Scan(&doc)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("policy version %d: %w", v, ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("read policy version %d: %w", v, err)
	}
	return parseStored(v, doc)
}

func parseStored(v int64, doc string) (*Policy, error) {
	p, err := Parse([]byte(doc))
	if err != nil {
		return nil, fmt.Errorf("stored policy version %d: %w", v, err)
	}
	p.Version = v
	return p, nil
}

// Save stores p as a new version, records it, and makes it current (see
// [Store] for the order), returning its number. p.Version is the version p
// was made from (as [Store.Current] returned it): when another version has
// become current since, Save fails with [ErrConflict] and changes nothing
// in force. A policy that formats the same as the current one is not saved
// again: Save returns the current version.
func (s *Store) Save(ctx context.Context, p *Policy) (int64, error) {
	if s.rec == nil {
		return 0, fmt.Errorf("save policy: %w", ErrNoRecorder)
	}
	if err := p.Validate(); err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	doc := p.Format()
	if _, err := Parse(doc); err != nil {
		return 0, fmt.Errorf("save policy: it does not read back: %w", err)
	}
	sum := sha256.Sum256(doc)
	hash := "sha256:" + hex.EncodeToString(sum[:])

	next, err := s.reserve(ctx, p.Version, hash, doc)
	if err != nil || next == p.Version {
		return next, err
	}
	if err := s.rec.RecordPolicy(ctx, next, hash); err != nil {
		return 0, fmt.Errorf("save policy: record version %d in the evidence log: %w (it was not applied)", next, err)
	}
	// Once logged, finish even if the caller gives up: the log says this
	// version exists.
	ctx = context.WithoutCancel(ctx)
	if err := s.apply(ctx, p.Version, next); err != nil {
		return 0, err
	}
	return next, nil
}

// reserve stores doc as the next version, not yet in force. It returns base
// itself when doc is what is in force already.
func (s *Store) reserve(ctx context.Context, base int64, hash string, doc []byte) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	defer tx.Rollback()
	var (
		cur     int64
		curHash sql.NullString
	)
	if err := tx.QueryRowContext(ctx, `SELECT c.version, p.hash FROM policy_current c
		LEFT JOIN policy_versions p ON p.version = c.version WHERE c.id = 1`).Scan(&cur, &curHash); err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	if cur != base {
		return 0, fmt.Errorf("save policy: it was made from version %d, and version %d is current now: %w", base, cur, ErrConflict)
	}
	if cur == 0 && hash == Default().Hash() || curHash.Valid && curHash.String == hash {
		return cur, nil
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) + 1 FROM policy_versions`).Scan(&next); err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO policy_versions (version, hash, document, base, created_at)
		VALUES (?, ?, ?, ?, ?)`, next, hash, string(doc), base, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("save policy: %w", err)
	}
	return next, nil
}

// apply makes version next current if base still is.
func (s *Store) apply(ctx context.Context, base, next int64) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("save policy: apply version %d: %w", next, err)
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE policy_current SET version = ? WHERE id = 1 AND version = ?`, next, base)
	if err != nil {
		return fmt.Errorf("save policy: apply version %d: %w", next, err)
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("save policy: version %d is in the evidence log but was not applied: another version became current first: %w", next, ErrConflict)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE policy_versions SET applied = 1 WHERE version = ?`, next); err != nil {
		return fmt.Errorf("save policy: apply version %d: %w", next, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("save policy: apply version %d: %w", next, err)
	}
	return nil
}

// A Version is one saved version of the policy.
type Version struct {
	Version int64
	Hash    string // sha256:<hex> of its text
	Base    int64  // the version it was made from
	Created time.Time
	// Applied is true for a version that was in force at some time; false
	// for one that never was (its recording failed, or another version
	// became current first).
	Applied bool
	Current bool // it is in force now
}

// History returns every saved version, oldest first.
func (s *Store) History(ctx context.Context) ([]Version, error) {
	cur, err := s.CurrentVersion(ctx)
	if err != nil {
		return nil, err
	}
	rows, err := s.db.QueryContext(ctx, `SELECT version, hash, base, created_at, applied FROM policy_versions ORDER BY version`)
	if err != nil {
		return nil, fmt.Errorf("read policy history: %w", err)
	}
	defer rows.Close()
	var out []Version
	for rows.Next() {
		var (
			v       Version
			created string
		)
		if err := rows.Scan(&v.Version, &v.Hash, &v.Base, &created, &v.Applied); err != nil {
			return nil, fmt.Errorf("read policy history: %w", err)
		}
		v.Created, _ = time.Parse(time.RFC3339Nano, created)
		v.Current = v.Version == cur
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read policy history: %w", err)
	}
	return out, nil
}
