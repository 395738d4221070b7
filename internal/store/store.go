// Package store is the Gatehouse home folder and the SQLite database in it.
//
// Every Gatehouse process (the tray app, each proxy an MCP client starts, the
// CLI) opens the same home folder at once, so the database is shared by many
// writers: it runs in WAL mode, every write transaction begins IMMEDIATE, and
// nothing is cached in memory that another process could make stale.
//
// # Location
//
// The home folder is, in order: the path given to [Open]; the folder named by
// the GATEHOUSE_HOME environment variable; a "gatehouse" folder in the user's
// config folder ([os.UserConfigDir]). Tests and separate profiles set
// GATEHOUSE_HOME (or pass --home) so they never touch the user's real data.
//
// # Custody
//
// The home folder holds every governed call's arguments and results, so it
// is its user's alone, as ssh keeps ~/.ssh: Open creates it 0700 and the
// database 0600 (SQLite gives the -wal and -shm files the database's
// mode), and every file Gatehouse writes there (logs, backups, undo
// records, exports, sockets, locks) is created 0600, folders 0700, whatever
// the umask. Open refuses a home folder that another user owns, or that
// holds anything and has any permission bit for the group or others,
// naming the chmod that fixes it; an empty folder is taken as a new home
// and made owner-only. In an owner-only home folder it makes owner-only
// any file or folder under it that is not (as earlier versions left the
// database), logging each. Windows has no such mode bits and is not
// checked.
//
// # Schema
//
// Each package that keeps tables here registers numbered migrations under its
// own component name with [Store.Migrate]; applied steps are recorded in the
// migrations table and never run twice, even when several processes start at
// the same moment.
package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"modernc.org/sqlite" // registers the "sqlite" driver (pure Go)
	sqlite3 "modernc.org/sqlite/lib"
)

// EnvHome names the environment variable that overrides the home folder.
const EnvHome = "GATEHOUSE_HOME"

// DatabaseFile is the name of the database inside the home folder.
const DatabaseFile = "gatehouse.db"

// ErrNotFound is returned when a named record does not exist.
var ErrNotFound = errors.New("not found")

// ErrExists is returned when a record with the same name already exists.
var ErrExists = errors.New("already exists")

// DefaultDir returns the home folder used when none is given: $GATEHOUSE_HOME,
// or the "gatehouse" folder ("Gatehouse" on macOS and Windows) in the user's
// config folder.
func DefaultDir() (string, error) {
	if dir := os.Getenv(EnvHome); dir != "" {
		return filepath.Abs(dir)
	}
	return SystemDir()
}

// SystemDir returns the home folder in the user's config folder, where
// Gatehouse keeps its data when nothing says otherwise: "gatehouse"
// ("Gatehouse" on macOS and Windows) in [os.UserConfigDir].
func SystemDir() (string, error) {
	cfg, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("locate home folder: %w (set %s)", err, EnvHome)
	}
	name := "gatehouse"
	if runtime.GOOS == "darwin" || runtime.GOOS == "windows" {
		name = "Gatehouse"
	}
	return filepath.Join(cfg, name), nil
}

// A Store is an open Gatehouse home folder. It is safe for concurrent use.
type Store struct {
	dir string
	db  *sql.DB
}

// Options configure [Open]. The zero value is ready to use.
type Options struct {
	// BusyTimeout bounds how long a write waits for another process's
	// transaction before failing. Zero means 10 seconds.
	BusyTimeout time.Duration
	// Logger receives what Open changes in the home folder (files it made
	// owner-only). Nil discards it.
	Logger *slog.Logger
}

// Open opens (creating when needed) the home folder dir and its database, and
// applies the store's own migrations. An empty dir means [DefaultDir].
//
// The home folder and everything in it are its user's alone (see Custody
// in the package documentation): a home folder other users can reach is refused with a
// [*ModeError] that gives the command that fixes it.
func Open(ctx context.Context, dir string, opts *Options) (*Store, error) {
	if opts == nil {
		opts = &Options{}
	}
	if dir == "" {
		d, err := DefaultDir()
		if err != nil {
			return nil, err
		}
		dir = d
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("open home folder: %w", err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create home folder: %w", err)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := checkHome(dir, log.WithGroup("store")); err != nil {
		return nil, err
	}
	if err := createDatabase(filepath.Join(dir, DatabaseFile)); err != nil {
		return nil, err
	}
	busy := opts.BusyTimeout
	if busy <= 0 {
		busy = 10 * time.Second
	}
	db, err := sql.Open("sqlite", dsn(filepath.Join(dir, DatabaseFile), busy))
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	// database/sql keeps 2 idle connections by default and closes the
	// rest: a proxy that commits, indexes and reads at once opened a
	// connection (its pragmas) and prepared its statements again, again
	// and again (a tenth of the CPU of the home's writer under load).
	db.SetMaxIdleConns(maxIdleConns)
	s := &Store{dir: dir, db: db}
	// Several processes opening a new home folder at once race to switch it
	// to WAL and to create the schema; the loser of the journal-mode switch
	// gets SQLITE_BUSY without the busy handler being consulted. Retry
	// those, within the busy timeout.
	deadline := time.Now().Add(busy)
	for {
		err = s.check(ctx)
		if err == nil {
			err = s.Migrate(ctx, "store", storeMigrations)
		}
		if err == nil {
			return s, nil
		}
		if !isBusy(err) || time.Now().After(deadline) {
			db.Close()
			return nil, err
		}
		select {
		case <-ctx.Done():
			db.Close()
			return nil, ctx.Err()
		case <-time.After(time.Duration(5+rand.IntN(20)) * time.Millisecond):
		}
	}
}

// IsLocked reports whether err is SQLite's "database is locked" or "busy":
// another process holds a lock longer than the busy timeout. Trying again
// later may succeed.
func IsLocked(err error) bool { return isBusy(err) }

// isBusy reports whether err is SQLite's "database is locked" or "busy".
func isBusy(err error) bool {
	var serr *sqlite.Error
	if errors.As(err, &serr) {
		code := serr.Code() & 0xff
		return code == sqlite3.SQLITE_BUSY || code == sqlite3.SQLITE_LOCKED
	}
	return false
}

// maxIdleConns is how many open connections a Store keeps when idle.
const maxIdleConns = 8

// dsn builds the connection string. Pragmas go in the DSN because
// database/sql pools connections and an Exec'd pragma reaches only one;
// _txlock=immediate makes every BeginTx take the write lock up front, which is
// what keeps several writing processes free of SQLITE_BUSY_SNAPSHOT.
func dsn(path string, busy time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busy.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "synchronous(FULL)")
	q.Add("_pragma", "foreign_keys(ON)")
	// Erased payloads must not linger in free pages of the file.
	q.Add("_pragma", "secure_delete(ON)")
	q.Set("_txlock", "immediate")
	return "file:" + filepath.ToSlash(path) + "?" + q.Encode()
}

// check verifies that the database opened for real and runs in WAL mode.
func (s *Store) check(ctx context.Context) error {
	var mode string
	if err := s.db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return fmt.Errorf("open database %s: %w", s.DatabasePath(), err)
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("open database %s: journal mode is %q, want wal", s.DatabasePath(), mode)
	}
	return nil
}

// Dir returns the home folder's absolute path.
func (s *Store) Dir() string { return s.dir }

// DatabasePath returns the database file's path.
func (s *Store) DatabasePath() string { return filepath.Join(s.dir, DatabaseFile) }

// LogPath returns the path of the log file Gatehouse processes append to.
func (s *Store) LogPath() string { return filepath.Join(s.dir, "logs", "gatehouse.log") }

// DB returns the shared database handle for packages that keep their own
// tables here (after registering them with [Store.Migrate]).
func (s *Store) DB() *sql.DB { return s.db }

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// Migrate applies, in order, the steps of component that this database has not
// applied yet. Step i (from 1) is recorded as version i; steps are never
// renumbered or edited once released, only appended. Each step runs in its own
// IMMEDIATE transaction, so processes starting together apply it once.
func (s *Store) Migrate(ctx context.Context, component string, steps []string) error {
	if _, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS migrations (
		component  TEXT    NOT NULL,
		version    INTEGER NOT NULL,
		applied_at TEXT    NOT NULL,
		PRIMARY KEY (component, version)
	) STRICT`); err != nil {
		return fmt.Errorf("migrate %s: %w", component, err)
	}
	for i, step := range steps {
		if err := s.migrateStep(ctx, component, i+1, step); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) migrateStep(ctx context.Context, component string, version int, step string) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate %s to %d: %w", component, version, err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM migrations WHERE component = ? AND version = ?`,
		component, version).Scan(&n); err != nil {
		return fmt.Errorf("migrate %s to %d: %w", component, version, err)
	}
	if n > 0 {
		return nil
	}
	if _, err := tx.ExecContext(ctx, step); err != nil {
		return fmt.Errorf("migrate %s to %d: %w", component, version, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO migrations (component, version, applied_at) VALUES (?, ?, ?)`,
		component, version, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return fmt.Errorf("migrate %s to %d: %w", component, version, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migrate %s to %d: %w", component, version, err)
	}
	return nil
}

// storeMigrations are the store's own schema steps. Append only.
var storeMigrations = []string{
	// 1: the server registry.
	`CREATE TABLE servers (
		name       TEXT NOT NULL PRIMARY KEY,
		transport  TEXT NOT NULL,
		command    TEXT NOT NULL,
		args       TEXT NOT NULL, -- JSON array of strings
		env        TEXT NOT NULL, -- JSON object of strings
		cwd        TEXT NOT NULL,
		created_at TEXT NOT NULL,
		updated_at TEXT NOT NULL
	) STRICT`,
	// 2: the ids of the secrets the keychain holds for this home (the
	// keychain cannot list them; values never come here).
	`CREATE TABLE secrets (
		id         TEXT NOT NULL PRIMARY KEY,
		created_at TEXT NOT NULL,
		updated_at TEXT NOT NULL
	) STRICT`,
	// 3: remote servers, reached over streamable HTTP.
	`ALTER TABLE servers ADD COLUMN url TEXT NOT NULL DEFAULT '';
	ALTER TABLE servers ADD COLUMN headers TEXT NOT NULL DEFAULT '{}'`,
	// 4: settings every process of the home reads (see Settings).
	`CREATE TABLE settings (
		key        TEXT NOT NULL PRIMARY KEY,
		value      TEXT NOT NULL,
		updated_at TEXT NOT NULL
	) STRICT`,
	// 5: servers whose tool annotations the user trusts.
	`ALTER TABLE servers ADD COLUMN trusted INTEGER NOT NULL DEFAULT 0 CHECK (trusted IN (0, 1))`,
	// 6: confinement of stdio servers, and quarantine. Servers registered
	// before are neither confined nor quarantined: they keep running as
	// they did until the user says otherwise.
	`ALTER TABLE servers ADD COLUMN confine INTEGER NOT NULL DEFAULT 0 CHECK (confine IN (0, 1));
	ALTER TABLE servers ADD COLUMN allow_read TEXT NOT NULL DEFAULT '[]';
	ALTER TABLE servers ADD COLUMN allow_write TEXT NOT NULL DEFAULT '[]';
	ALTER TABLE servers ADD COLUMN allow_net TEXT NOT NULL DEFAULT '[]';
	ALTER TABLE servers ADD COLUMN unconfined_ok INTEGER NOT NULL DEFAULT 0 CHECK (unconfined_ok IN (0, 1));
	ALTER TABLE servers ADD COLUMN quarantined INTEGER NOT NULL DEFAULT 0 CHECK (quarantined IN (0, 1))`,
	// 7: signing in to remote servers with OAuth. The tokens live in the
	// keychain, never here.
	`ALTER TABLE servers ADD COLUMN auth TEXT NOT NULL DEFAULT '';
	ALTER TABLE servers ADD COLUMN oauth_client_id TEXT NOT NULL DEFAULT '';
	ALTER TABLE servers ADD COLUMN oauth_scopes TEXT NOT NULL DEFAULT '[]'`,
	// 8: the capability pack a server matched when it was registered
	// ("filesystem@1"; empty: none).
	`ALTER TABLE servers ADD COLUMN pack TEXT NOT NULL DEFAULT ''`,
}
