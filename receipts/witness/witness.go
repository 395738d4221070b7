// Package witness is both sides of the C2SP tlog-witness protocol for
// Gatehouse's evidence logs: a witness, which cosigns a log's checkpoints
// after checking that each is consistent with the last one it cosigned, and
// the client a log's writer submits its checkpoints with.
//
// # What a witness proves
//
// A log's owner holds its signing key, and could show one auditor a log and
// another a different one (a split view), or rewrite the log and sign it
// again. A witness run by someone else keeps, for each log it was told
// about, the latest checkpoint it cosigned, and cosigns a new one only with
// a consistency proof from it (RFC 6962): a checkpoint that forks from what
// it cosigned is refused, never cosigned. An auditor who requires
// cosignatures of witnesses they trust then knows that the checkpoint they
// hold is the one every other holder of a cosigned checkpoint extends. A
// witness does not see the entries, and proves nothing about what they say.
//
// # Protocol
//
// A witness answers POST <prefix>/add-checkpoint ([Witness.Handler]) with a
// body of
//
//	old <size of the checkpoint it last cosigned for the log>
//	<consistency proof, one base64 hash per line>
//	<empty line>
//	<the checkpoint, a signed note>
//
// and answers 200 with its cosignature (package entry's cosignature/v1
// signature line); 409 Conflict with its latest size (Content-Type
// text/x.tlog.size) when old is not that size, or when a checkpoint of
// the same size has another tree hash; 422 when the proof does not verify;
// 403 when no key it knows for the log signed the checkpoint; 404 for a log
// it was not told about; 400 for a request it cannot read. [Client] submits
// a checkpoint, and [Submitter] does it in the background for a log's
// writer.
package witness

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Migrator is the database the witness keeps its state in (*store.Store is
// one): the witness's own home, not a log's.
type Migrator interface {
	DB() *sql.DB
	Migrate(ctx context.Context, component string, steps []string) error
}

// An Error is a witness's refusal, with the HTTP status it answers: one of
// 400, 403, 404, 409, 422. Size is the witness's latest size for the log,
// with 409.
type Error struct {
	Status int
	Size   int64
	Msg    string

	fork bool // the log signed a checkpoint inconsistent with one cosigned
}

func (e *Error) Error() string {
	if e.Status == http.StatusConflict {
		return fmt.Sprintf("%d %s: %s (the witness has cosigned %d entries)", e.Status, http.StatusText(e.Status), e.Msg, e.Size)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Msg)
}

func refuse(status int, format string, args ...any) *Error {
	return &Error{Status: status, Msg: fmt.Sprintf(format, args...)}
}

// A Witness cosigns the checkpoints of the logs it was told about
// ([Witness.AddLog]). It is safe for concurrent use, and several processes
// may serve one witness's database.
type Witness struct {
	db   *sql.DB
	name string
	key  ed25519.PrivateKey
	log  *slog.Logger
	now  func() time.Time

	// mu serializes this process's checks and updates of a log's latest
	// checkpoint; the IMMEDIATE transaction they run in serializes them
	// with other processes.
	mu sync.Mutex
}

// Options configure [Open]. Nil options mean the defaults.
type Options struct {
	Logger *slog.Logger     // nil: discard
	Now    func() time.Time // the time cosignatures carry; nil: time.Now
}

// ErrName is returned by [Open] when the name given is not the witness's:
// its name is part of its verifier key, which log owners hold.
var ErrName = errors.New("the witness has another name")

// ErrUnnamed is returned by [Open] for a new witness without a name.
var ErrUnnamed = errors.New("a new witness needs a name")

// Open opens the witness kept in m's database, with its signing key and
// its name (the note name of its cosignatures). On first use name is
// required and kept; afterwards "" means the name kept, and another name is
// refused with [ErrName].
func Open(ctx context.Context, m Migrator, key ed25519.PrivateKey, name string, opts *Options) (*Witness, error) {
	if err := m.Migrate(ctx, "witness", migrations); err != nil {
		return nil, fmt.Errorf("open witness: %w", err)
	}
	w := &Witness{db: m.DB(), key: key, log: slog.New(slog.DiscardHandler), now: time.Now}
	if opts != nil && opts.Logger != nil {
		w.log = opts.Logger
	}
	if opts != nil && opts.Now != nil {
		w.now = opts.Now
	}
	var kept string
	err := w.db.QueryRowContext(ctx, `SELECT value FROM witness_meta WHERE key = 'name'`).Scan(&kept)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if name == "" {
			return nil, fmt.Errorf("open witness: %w", ErrUnnamed)
		}
		if err := validName(name); err != nil {
			return nil, fmt.Errorf("open witness: %w", err)
		}
		if _, err := w.db.ExecContext(ctx, `INSERT INTO witness_meta (key, value) VALUES ('name', ?)`, name); err != nil {
			return nil, fmt.Errorf("open witness: %w", err)
		}
		kept = name
	case err != nil:
		return nil, fmt.Errorf("open witness: %w", err)
	case name != "" && name != kept:
		return nil, fmt.Errorf("open witness: %w: it is %q, not %q", ErrName, kept, name)
	}
	w.name = kept
	return w, nil
}

func validName(name string) error {
	if _, err := entry.ParseWitnessKey(entry.WitnessKey{Name: name, Key: make([]byte, ed25519.PublicKeySize)}.String()); err != nil {
		return fmt.Errorf("%q is not a valid witness name (no spaces, no plus sign)", name)
	}
	return nil
}

// Key returns the witness's verifier key, which log owners add with
// gatehouse witnesses add and auditors give gatehouse verify --witness.
func (w *Witness) Key() entry.WitnessKey {
	return entry.WitnessKey{Name: w.name, Key: w.key.Public().(ed25519.PublicKey)}
}

// A Log is a log the witness cosigns for.
type Log struct {
	Origin string   // the first line of its checkpoints
	Keys   []string // the verifier keys whose signature it accepts
	Size   int64    // of the latest checkpoint cosigned; 0 before the first
	Hash   string   // its tree hash, base64; "" before the first
	At     time.Time
}

// AddLog tells the witness to cosign for the log with this origin, whose
// checkpoints key vkey (a signed-note verifier key, Ed25519) signs. A log
// may have several keys (a rotated log's old and new); adding one again
// changes nothing. A witness never cosigns for a log it was not told about.
func (w *Witness) AddLog(ctx context.Context, origin, vkey string) error {
	if origin == "" || strings.ContainsAny(origin, "\n") {
		return fmt.Errorf("add log: %q is not a checkpoint origin", origin)
	}
	if _, err := note.NewVerifier(vkey); err != nil {
		return fmt.Errorf("add log: %q is not an Ed25519 verifier key: %w", vkey, err)
	}
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("add log: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO witness_logs (origin, size) VALUES (?, 0)`, origin); err != nil {
		return fmt.Errorf("add log: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO witness_log_keys (origin, vkey, added_ns) VALUES (?, ?, ?)`,
		origin, vkey, w.now().UnixNano()); err != nil {
		return fmt.Errorf("add log: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("add log: %w", err)
	}
	return nil
}

// Logs lists the logs the witness cosigns for.
func (w *Witness) Logs(ctx context.Context) ([]Log, error) {
	rows, err := w.db.QueryContext(ctx, `SELECT l.origin, l.size, l.hash, coalesce(l.cosigned_ns, 0), k.vkey
		FROM witness_logs l JOIN witness_log_keys k ON k.origin = l.origin ORDER BY l.origin, k.added_ns`)
	if err != nil {
		return nil, fmt.Errorf("list logs: %w", err)
	}
	defer rows.Close()
	var out []Log
	for rows.Next() {
		var (
			l    Log
			hash []byte
			at   int64
			vkey string
		)
		if err := rows.Scan(&l.Origin, &l.Size, &hash, &at, &vkey); err != nil {
			return nil, fmt.Errorf("list logs: %w", err)
		}
		if n := len(out); n > 0 && out[n-1].Origin == l.Origin {
			out[n-1].Keys = append(out[n-1].Keys, vkey)
			continue
		}
		if len(hash) == tlog.HashSize {
			l.Hash = tlog.Hash(hash).String()
		}
		if at != 0 {
			l.At = time.Unix(0, at).UTC()
		}
		l.Keys = []string{vkey}
		out = append(out, l)
	}
	return out, rows.Err()
}

// AddCheckpoint handles one add-checkpoint request and returns the
// witness's cosignature line, or an [*Error] with the status to answer.
//
// The witness MUST NOT cosign a checkpoint that is not consistent with the
// latest one it cosigned for the log: the request's old size MUST be that
// checkpoint's size, and its proof MUST prove the new tree extends it (or,
// at the same size, the tree hash MUST be the same). The check and the
// update of the latest checkpoint MUST be one transaction, and the update
// MUST be durable before the cosignature is returned: otherwise two
// requests could each pass against the same old tree, and a witness
// restarted could cosign a fork of what it cosigned before.
func (w *Witness) AddCheckpoint(ctx context.Context, body []byte) (string, error) {
	req, err := ParseAddCheckpoint(body)
	if err != nil {
		return "", refuse(http.StatusBadRequest, "%v", err)
	}
	origin, _, _ := strings.Cut(string(req.Checkpoint), "\n")
	w.mu.Lock()
	defer w.mu.Unlock()
	line, err := w.addCheckpoint(ctx, origin, req)
	var e *Error
	if errors.As(err, &e) && e.fork {
		// Kept after the transaction ended: it held the write lock.
		w.refused(ctx, origin, e.Status, e.Msg, body)
	}
	return line, err
}

func (w *Witness) addCheckpoint(ctx context.Context, origin string, req AddCheckpoint) (string, error) {
	tx, err := w.db.BeginTx(ctx, nil) // IMMEDIATE: the store's DSN says so
	if err != nil {
		return "", fmt.Errorf("add checkpoint: %w", err)
	}
	defer tx.Rollback()
	var (
		size int64
		hash []byte
	)
	err = tx.QueryRowContext(ctx, `SELECT size, hash FROM witness_logs WHERE origin = ?`, origin).Scan(&size, &hash)
	if errors.Is(err, sql.ErrNoRows) {
		return "", refuse(http.StatusNotFound, "this witness does not cosign for the log %q", origin)
	}
	if err != nil {
		return "", fmt.Errorf("add checkpoint: %w", err)
	}
	verifiers, err := w.logVerifiers(ctx, tx, origin)
	if err != nil {
		return "", err
	}
	n, err := note.Open(req.Checkpoint, verifiers)
	if err != nil {
		var unverified *note.UnverifiedNoteError
		var invalid *note.InvalidSignatureError
		if errors.As(err, &unverified) || errors.As(err, &invalid) {
			return "", refuse(http.StatusForbidden, "the checkpoint is not signed by a key of the log %q: %v", origin, err)
		}
		return "", refuse(http.StatusBadRequest, "the checkpoint is not a signed note: %v", err)
	}
	cp, err := parseCheckpointText(n.Text)
	if err != nil {
		return "", refuse(http.StatusBadRequest, "%v", err)
	}
	if req.Old > cp.Size {
		return "", refuse(http.StatusBadRequest, "old size %d is larger than the checkpoint's %d", req.Old, cp.Size)
	}
	if req.Old != size {
		return "", &Error{Status: http.StatusConflict, Size: size,
			Msg: fmt.Sprintf("old size %d is not the size of the checkpoint last cosigned", req.Old)}
	}
	switch {
	case cp.Size == size && size > 0:
		if tlog.Hash(hash) != cp.Hash {
			return "", &Error{Status: http.StatusConflict, Size: size, fork: true,
				Msg: fmt.Sprintf("the checkpoint cosigned at size %d has tree hash %s, this one %s: the log forked", size, tlog.Hash(hash), cp.Hash)}
		}
		if len(req.Proof) != 0 {
			return "", refuse(http.StatusBadRequest, "a checkpoint of the size already cosigned needs no proof")
		}
	case size == 0:
		if len(req.Proof) != 0 {
			return "", refuse(http.StatusBadRequest, "the proof must be empty when the old size is 0")
		}
	default:
		if err := tlog.CheckTree(req.Proof, cp.Size, cp.Hash, size, tlog.Hash(hash)); err != nil {
			e := refuse(http.StatusUnprocessableEntity, "the consistency proof from the checkpoint cosigned at size %d does not verify: %v", size, err)
			e.fork = true
			return "", e
		}
	}
	now := w.now()
	if _, err := tx.ExecContext(ctx, `UPDATE witness_logs SET size = ?, hash = ?, checkpoint = ?, cosigned_ns = ? WHERE origin = ?`,
		cp.Size, cp.Hash[:], req.Checkpoint, now.UnixNano(), origin); err != nil {
		return "", fmt.Errorf("add checkpoint: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("add checkpoint: %w", err)
	}
	line, err := entry.Cosign(n.Text, w.name, w.key, now)
	if err != nil {
		return "", fmt.Errorf("add checkpoint: %w", err)
	}
	w.log.Info("cosigned", slog.String("origin", origin), slog.Int64("size", cp.Size), slog.Int64("old", req.Old))
	return line, nil
}

func (w *Witness) logVerifiers(ctx context.Context, tx *sql.Tx, origin string) (note.Verifiers, error) {
	rows, err := tx.QueryContext(ctx, `SELECT vkey FROM witness_log_keys WHERE origin = ?`, origin)
	if err != nil {
		return nil, fmt.Errorf("add checkpoint: %w", err)
	}
	defer rows.Close()
	var vs []note.Verifier
	for rows.Next() {
		var vkey string
		if err := rows.Scan(&vkey); err != nil {
			return nil, fmt.Errorf("add checkpoint: %w", err)
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return nil, fmt.Errorf("add checkpoint: the key %q of log %q: %w", vkey, origin, err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("add checkpoint: %w", err)
	}
	return note.VerifierList(vs...), nil
}

// refused keeps a request the log signed that the witness refused as
// inconsistent: it is the log's own word for a fork. A failure to keep it
// is logged, and the refusal stands.
func (w *Witness) refused(ctx context.Context, origin string, status int, reason string, body []byte) {
	_, err := w.db.ExecContext(ctx, `INSERT INTO witness_refusals (origin, time_ns, status, reason, body) VALUES (?, ?, ?, ?, ?)`,
		origin, w.now().UnixNano(), status, reason, body)
	w.log.Warn("refused an inconsistent checkpoint", slog.String("origin", origin), slog.String("reason", reason), slog.Any("err", err))
}

// Refusals counts the signed checkpoints the witness refused as
// inconsistent with what it cosigned, for the log with this origin.
func (w *Witness) Refusals(ctx context.Context, origin string) (int64, error) {
	var n int64
	err := w.db.QueryRowContext(ctx, `SELECT count(*) FROM witness_refusals WHERE origin = ?`, origin).Scan(&n)
	return n, err
}

// migrations are the witness's schema steps. Append only.
var migrations = []string{
	// 1: the witness's name, the logs it cosigns for with their keys and
	// latest cosigned checkpoint, and the inconsistent checkpoints it
	// refused.
	`CREATE TABLE witness_meta (
		key   TEXT NOT NULL PRIMARY KEY,
		value TEXT NOT NULL
	) STRICT;
	CREATE TABLE witness_logs (
		origin      TEXT    NOT NULL PRIMARY KEY,
		size        INTEGER NOT NULL, -- of the latest checkpoint cosigned; 0 before the first
		hash        BLOB,             -- its tree hash
		checkpoint  BLOB,             -- the signed note submitted
		cosigned_ns INTEGER
	) STRICT;
	CREATE TABLE witness_log_keys (
		origin   TEXT    NOT NULL REFERENCES witness_logs (origin),
		vkey     TEXT    NOT NULL,
		added_ns INTEGER NOT NULL,
		PRIMARY KEY (origin, vkey)
	) STRICT;
	CREATE TABLE witness_refusals (
		id     INTEGER NOT NULL PRIMARY KEY,
		origin TEXT    NOT NULL,
		time_ns INTEGER NOT NULL,
		status INTEGER NOT NULL,
		reason TEXT    NOT NULL,
		body   BLOB    NOT NULL
	) STRICT`,
}
