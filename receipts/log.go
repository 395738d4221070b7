// Package receipts is Gatehouse's evidence log: every authorization receipt,
// execution outcome and event of the gate, signed and appended to a Merkle
// log in the shared SQLite database, with the payloads (arguments, results)
// kept beside it under salted commitments so that they can be erased without
// breaking a signature or a proof. A payload over [MaxStoredPayload] is
// committed to but not kept, and its entry says so.
//
// The format of an entry, a commitment and a checkpoint is package
// [entry]; this package stores them. Many processes append at once (every
// proxy an MCP client starts): each append is one IMMEDIATE transaction that
// reads the log's size and tree hash, signs the entry with them, and stores
// the entry with the tree's new hashes. The entry's index is its row's
// primary key, so two appends can never both claim a position: the log never
// forks, and an append cut short by a crash leaves nothing behind.
//
// The log knows nothing of MCP: callers give it receipts and outcomes.
package receipts

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Migrator is the home folder's database, where the log keeps its tables
// (*store.Store is one).
type Migrator interface {
	DB() *sql.DB
	Migrate(ctx context.Context, component string, steps []string) error
}

// ErrNotFound is returned for an entry or payload that does not exist.
var ErrNotFound = errors.New("not found")

// A Reader reads the evidence log of one home folder: its entries, search,
// proofs and keys. It holds no signing key and never writes to the
// database, so history, search and verification work while the keychain is
// locked. It is safe for concurrent use, and other processes may write the
// log meanwhile: each call reads the log as it is then.
type Reader struct {
	db    *sql.DB
	stmts stmts
	id    string // "" until the log's first writer named it

	// typedPrefixes makes search run word prefixes as typed, never
	// shortened (shortenPrefixes): tests compare the two.
	typedPrefixes bool

	// inlineIndex: the log is at a schema step before the indexer's
	// cursor, and appends index their entry as they did then (tests write
	// such logs).
	inlineIndex bool
	// programs: the log is at a schema step with entry_programs
	// (programStep); tests and benchmarks write logs of earlier steps.
	programs bool

	// writes is the lock of the home folder's file that every write
	// transaction of the log holds (nil when the database has no home
	// folder): see inTx.
	writes *filelock.Mutex
	// journal holds the receipts made durable before the database has
	// them (journal.go); nil without a home folder.
	journal *journal
}

// A Log is the evidence log of one home folder, appended to with one key:
// a [Reader] that also appends, erases, rotates keys and signs exports. It is safe
// for concurrent use, and other processes may use the same database at the
// same time.
type Log struct {
	*Reader
	commits committer
	index   indexer
	hashes  hashCache // the tree hashes appends need (hashReader)
	checked liveSince // the key of the last append here, and the size after it

	keyMu   sync.Mutex
	key     ed25519.PrivateKey                 // guarded by keyMu
	keyID   string                             // guarded by keyMu
	loadKey func() (ed25519.PrivateKey, error) // see FollowKeys; guarded by keyMu

	appended func() // see OnAppend; set before the first append

	home string // the home folder; "" for a database opened alone
}

// ErrForeignKey is returned by [Open] when the log already has signing keys
// and the key given is none of them: the keychain lost the log's key, or
// holds another log's.
var ErrForeignKey = errors.New("the signing key is not one of this log's keys")

// ErrRetiredKey is returned when the log's key was rotated (by another
// process, since this one opened the log): a retired key signs nothing
// more, as verification fails whatever it signs after its retirement.
// Open the log again with its current key.
var ErrRetiredKey = errors.New("the signing key was retired by a rotation")

// retiredAt returns the index of the rotation that retired key kid, the
// log's next key entry after the one that announced it; ok is false while
// kid is the log's latest key, or is not one of its keys.
func retiredAt(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, kid string) (index int64, ok bool, err error) {
	var r sql.NullInt64
	err = q.QueryRowContext(ctx, `SELECT min(added_idx) FROM keys
		WHERE added_idx > (SELECT added_idx FROM keys WHERE key_id = ?)`, kid).Scan(&r)
	if err != nil {
		return 0, false, fmt.Errorf("read the log's keys: %w", err)
	}
	return r.Int64, r.Valid, nil
}

// notRetired fails with ErrRetiredKey when kid was retired before size
// entries: what it signs over a tree of size entries would not verify.
func notRetired(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, kid string, size int64) error {
	r, retired, err := retiredAt(ctx, q, kid)
	if err != nil {
		return err
	}
	if retired && size > r {
		return fmt.Errorf("%w: key %s was retired at entry %d", ErrRetiredKey, kid, r)
	}
	return nil
}

// FollowKeys gives the log a way to load its current signing key (from the
// keychain that holds it) for when another process rotates the key: the
// log then signs with the key load returns, if it is the log's current
// key, instead of failing with [ErrRetiredKey]. A proxy that runs for
// days goes on across a rotation made in the app.
func (l *Log) FollowKeys(load func() (ed25519.PrivateKey, error)) {
	l.keyMu.Lock()
	l.loadKey = load
	l.keyMu.Unlock()
}

// liveKey returns a key that may sign over a tree of size entries: key, or,
// when another process retired it, the log's current key, if this process
// has it or can load it ([Log.FollowKeys]).
func (l *Log) liveKey(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, key ed25519.PrivateKey, size int64) (ed25519.PrivateKey, error) {
	err := notRetired(ctx, q, entry.KeyID(key.Public().(ed25519.PublicKey)), size)
	if !errors.Is(err, ErrRetiredKey) {
		return key, err
	}
	var latest string
	if qerr := q.QueryRowContext(ctx, `SELECT key_id FROM keys ORDER BY added_idx DESC LIMIT 1`).Scan(&latest); qerr != nil {
		return nil, fmt.Errorf("read the log's keys: %w", qerr)
	}
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	if l.keyID == latest {
		return l.key, nil // loaded already, by an earlier append
	}
	if l.loadKey == nil {
		return nil, err
	}
	next, lerr := l.loadKey()
	if lerr != nil {
		return nil, fmt.Errorf("%w; loading the current key: %v", err, lerr)
	}
	if id := entry.KeyID(next.Public().(ed25519.PublicKey)); id != latest {
		return nil, fmt.Errorf("%w; the key loaded is %s, not the log's current %s", err, id, latest)
	}
	l.key, l.keyID = next, latest
	return next, nil
}

// Open opens the log in m's database, creating it on first use, and makes
// sure key is announced in it: a new log begins with a key entry signed by
// key itself. A log that has keys opens only with one of them (the current
// one, or one it retired); any other key is refused with [ErrForeignKey],
// since adding it would break the chain of custody that verification
// checks. [Adopt] adds one knowingly.
func Open(ctx context.Context, m Migrator, key ed25519.PrivateKey) (*Log, error) {
	return open(ctx, m, key, false, migrations)
}

// Adopt is [Open] for a key the log does not know: it announces key,
// self-signed, even though the log has keys. That is a break in custody,
// and the verifier reports it at that entry: what key signs after it is
// vouched for by nothing before it. It is the way on after a keychain lost
// the log's key, chosen by a person, never by a proxy.
func Adopt(ctx context.Context, m Migrator, key ed25519.PrivateKey) (*Log, error) {
	return open(ctx, m, key, true, migrations)
}

// OpenReader opens the log in m's database for reading. It needs no
// signing key and writes nothing to the log: no entry, no key, no index
// upgrade. It does create or upgrade the log's tables when they are missing
// or older than this version reads (a change of schema, not of evidence),
// as every opener of the database does.
func OpenReader(ctx context.Context, m Migrator) (*Reader, error) {
	return openReader(ctx, m, migrations)
}

func openReader(ctx context.Context, m Migrator, steps []string) (*Reader, error) {
	if err := m.Migrate(ctx, "receipts", steps); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	}
	r := &Reader{db: m.DB(), inlineIndex: len(steps) < indexerStep, programs: len(steps) >= programStep}
	r.stmts.db = r.db
	if h, ok := m.(interface{ Dir() string }); ok {
		r.writes = filelock.New(filepath.Join(h.Dir(), WriteLockFile))
		if len(steps) == len(migrations) {
			r.journal = &journal{path: filepath.Join(h.Dir(), JournalFile)}
		}
	}
	err := r.db.QueryRowContext(ctx, `SELECT value FROM log_meta WHERE key = 'id'`).Scan(&r.id)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("open evidence log: %w", err)
	}
	return r, nil
}

// open opens the log at schema step len(steps): tests open it at earlier
// steps to write a log as an earlier version did.
func open(ctx context.Context, m Migrator, key ed25519.PrivateKey, adopt bool, steps []string) (*Log, error) {
	r, err := openReader(ctx, m, steps)
	if err != nil {
		return nil, err
	}
	l := &Log{Reader: r, key: key, keyID: entry.KeyID(key.Public().(ed25519.PublicKey))}
	if h, ok := m.(interface{ Dir() string }); ok {
		l.home = h.Dir()
	}
	l.commits = committer{l: l, wake: make(chan struct{}, 1)}
	l.index = indexer{l: l}
	if _, err := l.db.ExecContext(ctx, `INSERT OR IGNORE INTO log_meta (key, value) VALUES ('id', ?)`,
		strings.TrimPrefix(entry.NewID("l"), "l-")); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	}
	if err := l.db.QueryRowContext(ctx, `SELECT value FROM log_meta WHERE key = 'id'`).Scan(&l.id); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	}
	if err := l.announce(ctx, key, "added", "", adopt); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	}
	// What a process that died left out of the search index is indexed
	// now when it is little, else in the background.
	if lag, err := l.IndexLag(ctx); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	} else if lag > openCatchUp {
		l.index.kick()
	} else if lag > 0 {
		if _, err := l.CatchUpIndex(ctx); err != nil {
			return nil, fmt.Errorf("open evidence log: %w", err)
		}
	}
	// A new or small log gets its search index upgraded on the spot; a
	// larger one keeps the index it has until UpgradeIndex runs.
	if _, upgrading, err := l.IndexBacklog(ctx); err != nil {
		return nil, fmt.Errorf("open evidence log: %w", err)
	} else if upgrading {
		if n, err := l.Size(ctx); err != nil {
			return nil, fmt.Errorf("open evidence log: %w", err)
		} else if n <= smallUpgrade {
			if err := l.upgradeIndex(ctx, nil, false); err != nil {
				return nil, fmt.Errorf("open evidence log: %w", err)
			}
		}
	}
	return l, nil
}

// ID returns the log's id, the origin of its checkpoints: "" for a log no
// writer has opened yet.
func (r *Reader) ID() string { return r.id }

// KeyID returns the id of the key the log signs with.
func (l *Log) KeyID() string {
	_, id := l.signer()
	return id
}

func (l *Log) currentKey() ed25519.PrivateKey {
	k, _ := l.signer()
	return k
}

// signer returns the key the log signs with now, and its id.
func (l *Log) signer() (ed25519.PrivateKey, string) {
	l.keyMu.Lock()
	defer l.keyMu.Unlock()
	return l.key, l.keyID
}

// announce appends a key entry for key unless the log already has one.
// "added" is signed by the key itself, and only begins a log (or adopts a
// key, when adopt is set); "rotated" is signed by the log's current key.
func (l *Log) announce(ctx context.Context, key ed25519.PrivateKey, action, previous string, adopt bool) error {
	pub := key.Public().(ed25519.PublicKey)
	kid := entry.KeyID(pub)
	signWith := key
	if action == "rotated" {
		signWith = l.currentKey()
	}
	return l.inTx(ctx, func(tx *sql.Tx) error {
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM keys WHERE key_id = ?`, kid).Scan(&n); err != nil {
			return err
		}
		if n > 0 {
			if action != "added" {
				return nil
			}
			var latest string
			if err := tx.QueryRowContext(ctx, `SELECT key_id FROM keys ORDER BY added_idx DESC LIMIT 1`).Scan(&latest); err != nil {
				return err
			}
			if latest != kid {
				return fmt.Errorf("%w: %s is retired; the log is signed by %s now", ErrForeignKey, kid, latest)
			}
			return nil
		}
		if action == "added" && !adopt {
			var known []string
			rows, err := tx.QueryContext(ctx, `SELECT key_id FROM keys ORDER BY added_idx`)
			if err != nil {
				return err
			}
			for rows.Next() {
				var id string
				if err := rows.Scan(&id); err != nil {
					rows.Close()
					return err
				}
				known = append(known, id)
			}
			rows.Close()
			if len(known) > 0 {
				return fmt.Errorf("%w: it is %s; the log is signed by %s", ErrForeignKey, kid, strings.Join(known, ", "))
			}
		}
		body := entry.KeyEvent{Action: action, KeyID: kid, PublicKey: base64.StdEncoding.EncodeToString(pub), Previous: previous}
		e, err := l.appendTx(ctx, tx, signWith, draft{kind: entry.KindKey, prefix: "k", body: body})
		if err != nil {
			return err
		}
		l.checked.set(nil, 0) // a rotation: the key that signed it may be retired now
		_, err = tx.ExecContext(ctx, `INSERT INTO keys (key_id, public_key, added_idx) VALUES (?, ?, ?)`, kid, []byte(pub), e.Index)
		return err
	})
}

// Rotate announces next as the log's signing key, in an entry signed by the
// current one, and signs with it from then on. The rotation retires the old
// key: what it signed before still verifies (its public key stays in the
// log), and it signs nothing more ([ErrRetiredKey]).
func (l *Log) Rotate(ctx context.Context, next ed25519.PrivateKey) error {
	if err := l.announce(ctx, next, "rotated", l.KeyID(), false); err != nil {
		return fmt.Errorf("rotate key: %w", err)
	}
	l.keyMu.Lock()
	l.key = next
	l.keyID = entry.KeyID(next.Public().(ed25519.PublicKey))
	l.keyMu.Unlock()
	return nil
}

// A draft is an entry before it has a place in the log.
type draft struct {
	kind     entry.Kind
	prefix   string // of the id
	body     any
	index    columns
	payloads []payload
	// A draft is data only, so another process may commit it (writer.go);
	// except with, a write of the caller's own into the transaction that
	// appends the draft, which keeps the draft in this process.
	with TxWrite
}

// A TxWrite is a caller's write committed in the transaction that appends
// an entry: it is durable exactly when the entry is, and the entry is not
// appended if it fails.
type TxWrite func(ctx context.Context, tx *sql.Tx) error

// columns are an entry's searchable fields, stored beside it (not signed).
type columns struct {
	server, tool, decision, status, client, receipt string
}

type payload struct {
	part       string // args, result
	salt, data []byte // data is nil when not kept
	commitment string
	notKept    *entry.NotKept // the payload was over the cap: its data is not stored
}

// MaxStoredPayload is the most the log keeps of one payload (a call's
// arguments, or its result), in bytes. A larger payload is not stored: its
// entry still commits to the whole of it, with a fresh salt that the log
// keeps, and says in its signed body that the payload was not kept, its
// size and this cap ([entry.NotKept]). A payload of exactly this size is
// kept whole.
//
// Without a cap, a call whose arguments and result come near the proxy's
// message limit (8 MiB each) adds both to the database whole: 16.8 MB for
// one such call in TestPayloadCapKeepsTheDatabaseSmall; with it, the file
// did not grow by a page.
const MaxStoredPayload = 64 << 10

// newPayload commits to data with a fresh salt, and keeps data unless it
// is over MaxStoredPayload.
func newPayload(part string, data []byte) payload {
	p := payload{part: part, salt: entry.NewSalt()}
	p.commitment = entry.Commit(p.salt, data)
	if n := int64(len(data)); n > MaxStoredPayload {
		p.notKept = &entry.NotKept{Size: n, Cap: MaxStoredPayload}
	} else {
		p.data = data
	}
	return p
}

// AppendReceipt appends an authorization receipt for a call with arguments
// args (nil when there are none). It fills in r.Args with their commitment,
// and r.ArgsNotKept when args are over [MaxStoredPayload]: such arguments
// are committed to whole but not stored. Arguments up to the cap are stored
// beside the log. It returns when the receipt is durable.
func (l *Log) AppendReceipt(ctx context.Context, r entry.Receipt, args []byte) (*entry.Entry, error) {
	return l.AppendReceiptWith(ctx, r, args, nil)
}

// AppendReceiptWith is AppendReceipt, running also, when not nil, in the
// receipt's transaction before the receipt is appended: the receipt is
// appended only if it succeeds, and it is durable when the receipt is.
// Such a receipt is committed by this process, never by the home's writer
// for it.
func (l *Log) AppendReceiptWith(ctx context.Context, r entry.Receipt, args []byte, also TxWrite) (*entry.Entry, error) {
	p := newPayload("args", args)
	r.Args, r.ArgsNotKept = p.commitment, p.notKept
	return l.append(ctx, draft{
		kind: entry.KindReceipt, prefix: "r", body: r,
		index:    columns{server: r.Server, tool: r.Tool, decision: r.Decision, client: r.Client.Name},
		payloads: []payload{p},
		with:     also,
	})
}

// AppendOutcome appends the outcome of the call that receipt o.Receipt
// authorized, with its result (nil when none came). It fills in o.Result,
// and o.ResultNotKept when the result is over [MaxStoredPayload]: such a
// result is committed to whole but not stored.
func (l *Log) AppendOutcome(ctx context.Context, o entry.Outcome, result []byte) (*entry.Entry, error) {
	d := draft{kind: entry.KindOutcome, prefix: "o", index: columns{status: o.Status, receipt: o.Receipt}}
	o.ResultNotKept = nil
	if result != nil {
		p := newPayload("result", result)
		o.Result, o.ResultNotKept = p.commitment, p.notKept
		d.payloads = []payload{p}
	}
	d.body = o
	return l.append(ctx, d)
}

// AppendEvent appends a policy or pin entry.
func (l *Log) AppendEvent(ctx context.Context, kind entry.Kind, body any) (*entry.Entry, error) {
	switch kind {
	case entry.KindPolicy, entry.KindPin:
	default:
		return nil, fmt.Errorf("append %s: not an event kind", kind)
	}
	return l.append(ctx, draft{kind: kind, prefix: "e", body: body})
}

func (l *Log) append(ctx context.Context, d draft) (*entry.Entry, error) {
	// Receipts are urgent (a call waits for its receipt); outcomes ride
	// with the next commit.
	e, err := l.commits.submit(ctx, d, d.kind != entry.KindOutcome)
	if err != nil {
		return nil, fmt.Errorf("append %s: %w", d.kind, err)
	}
	return e, nil
}

// appendTx appends d as the log's next entry inside tx.
func (l *Log) appendTx(ctx context.Context, tx *sql.Tx, key ed25519.PrivateKey, d draft) (*entry.Entry, error) {
	e, _, err := l.appendTxData(ctx, tx, key, d)
	return e, err
}

// appendTxData is appendTx, returning the signed entry's bytes too.
func (l *Log) appendTxData(ctx context.Context, tx *sql.Tx, key ed25519.PrivateKey, d draft) (*entry.Entry, []byte, error) {
	if d.with != nil {
		if err := d.with(ctx, tx); err != nil {
			return nil, nil, err
		}
	}
	// The log's size, and the time of its last entry.
	var n, last int64
	rows, err := l.stmts.query(ctx, tx, `SELECT idx + 1, time_ns FROM entries ORDER BY idx DESC LIMIT 1`)
	if err != nil {
		return nil, nil, err
	}
	for rows.Next() {
		err = rows.Scan(&n, &last)
	}
	rows.Close()
	if err != nil {
		return nil, nil, err
	}
	hr := &hashReader{ctx: ctx, q: tx, tx: tx, stmts: &l.stmts, cache: &l.hashes, seen: map[int64]tlog.Hash{}}
	s, err := l.seal(ctx, inTx{&l.stmts, tx}, hr, key, n, d)
	if err != nil {
		return nil, nil, err
	}
	if err := l.store(ctx, tx, s, last); err != nil {
		return nil, nil, err
	}
	l.hashes.add(hr.seen)
	return s.e, s.data, nil
}

// A sealed entry is signed in its place in the log, with the tree hashes it
// adds: all that storing it needs (store), in this transaction or, from the
// journal, in a later one.
type sealed struct {
	e      *entry.Entry
	data   []byte // the signed entry
	timeNS int64
	index  columns
	pays   []payload
	hashes []tlog.Hash // the tree's stored hashes the entry adds, from tlog.StoredHashIndex(0, e.Index)
}

// seal signs d as the log's entry n with key, or with the log's current key
// when another process retired key (q reads the log's keys), over the tree
// of n entries that hr reads.
func (l *Log) seal(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, hr *hashReader, key ed25519.PrivateKey, n int64, d draft) (*sealed, error) {
	// A key another process retired signs no more entries: an entry after
	// the rotation signed by the key it retired fails verification. A
	// rotation is an entry: when none came since this process's last
	// append, with this key, the key is as live as it was then.
	if !l.checked.still(key, n) {
		var err error
		if key, err = l.liveKey(ctx, q, key, n+1); err != nil {
			return nil, err
		}
	}
	prev, err := tlog.TreeHash(n, hr)
	if err != nil {
		return nil, fmt.Errorf("tree hash at %d: %w", n, err)
	}
	body, err := json.Marshal(d.body)
	if err != nil {
		return nil, err
	}
	now := time.Now().UTC()
	e := &entry.Entry{
		Log: l.id, Index: n, ID: entry.NewID(d.prefix), Kind: d.kind,
		Time: now.Format(time.RFC3339Nano), Prev: entry.FormatTreeHash(prev), Body: body,
	}
	data, err := entry.Sign(e, key)
	if err != nil {
		return nil, err
	}
	hashes, err := tlog.StoredHashes(n, data, hr)
	if err != nil {
		return nil, err
	}
	base := tlog.StoredHashIndex(0, n)
	for i, h := range hashes {
		hr.seen[base+int64(i)] = h
	}
	l.checked.set(key, n+1)
	return &sealed{e: e, data: data, timeNS: now.UnixNano(), index: d.index, pays: d.payloads, hashes: hashes}, nil
}

// store writes s, the entry after one of time last (in ns; 0 for none),
// into tx: its row, tree hashes, payloads and search columns.
func (r *Reader) store(ctx context.Context, tx *sql.Tx, s *sealed, last int64) error {
	e, n := s.e, s.e.Index
	base := tlog.StoredHashIndex(0, n)
	for i, h := range s.hashes {
		if _, err := r.stmts.exec(ctx, tx, `INSERT INTO log_hashes (idx, hash) VALUES (?, ?)`, base+int64(i), h[:]); err != nil {
			return err
		}
	}
	if n > 0 && s.timeNS < last {
		// The wall clock stepped back: entries' times no longer follow
		// their order, which search's time ranges rely on (search.go).
		if _, err := r.stmts.exec(ctx, tx, `INSERT OR IGNORE INTO search_meta (key, value) VALUES ('unordered_times', 1)`); err != nil {
			return err
		}
	}
	c := s.index
	var receiptIdx int64
	if e.Kind == entry.KindOutcome {
		// The receipt's row carries the status, for search (the signed
		// receipt itself never changes), and gives the outcome's row its
		// server, tool, decision and client: one statement, before the
		// insert, so that the outcome's row is written once, whole.
		rows, err := r.stmts.query(ctx, tx, `UPDATE entries SET status = ? WHERE id = ? AND kind = 'receipt'
			RETURNING idx, server, tool, decision, client`, c.status, c.receipt)
		if err != nil {
			return err
		}
		found := false
		for rows.Next() {
			found = true
			err = rows.Scan(&receiptIdx, &c.server, &c.tool, &c.decision, &c.client)
		}
		if err == nil {
			err = rows.Err()
		}
		rows.Close()
		if err != nil {
			return err
		}
		if !found {
			return fmt.Errorf("outcome for receipt %s: %w", c.receipt, ErrNotFound)
		}
	}
	if _, err := r.stmts.exec(ctx, tx, `INSERT INTO entries
		(idx, id, kind, time_ns, key_id, server, tool, decision, status, client, receipt_id, data)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		n, e.ID, string(e.Kind), s.timeNS, e.Key, c.server, c.tool, c.decision, c.status, c.client, c.receipt, s.data); err != nil {
		return err
	}
	for _, p := range s.pays {
		// A payload not kept is a row with its salt, no data, and its size
		// and the cap (schema step 5); a kept one is written as before.
		var err error
		if p.notKept != nil {
			_, err = r.stmts.exec(ctx, tx, `INSERT INTO payloads (entry_idx, part, salt, data, commitment, not_kept_size, not_kept_cap)
				VALUES (?, ?, ?, NULL, ?, ?, ?)`, n, p.part, p.salt, p.commitment, p.notKept.Size, p.notKept.Cap)
		} else {
			_, err = r.stmts.exec(ctx, tx, `INSERT INTO payloads (entry_idx, part, salt, data, commitment) VALUES (?, ?, ?, ?, ?)`,
				n, p.part, p.salt, nonNil(p.data), p.commitment)
		}
		if err != nil {
			return err
		}
	}
	// Search follows the log: the entry gets its searchable columns now,
	// and the full-text index takes it in later (indexer.go).
	if err := r.columnsTx(ctx, tx, e, receiptIdx); err != nil {
		return err
	}
	if r.inlineIndex {
		if _, err := r.stmts.exec(ctx, tx, `INSERT INTO search_fts (rowid, server, tool, decision, client, text)
			SELECT idx, server, tool, decision, client, text FROM search_source WHERE idx = ?`, e.Index); err != nil {
			return fmt.Errorf("index entry %d: %w", e.Index, err)
		}
	}
	return nil
}

// liveSince remembers the key of this process's last append, and the
// log's size after it: until another entry comes, the key needs no check.
// Like hashCache, it is reset when a write transaction fails.
type liveSince struct {
	mu   sync.Mutex
	key  ed25519.PrivateKey // guarded by mu
	size int64              // guarded by mu
}

// still reports whether key signed the log's last entry, of size entries
// now, in this process.
func (c *liveSince) still(key ed25519.PrivateKey, size int64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.key != nil && c.size == size && c.key.Equal(key)
}

func (c *liveSince) set(key ed25519.PrivateKey, size int64) {
	c.mu.Lock()
	c.key, c.size = key, size
	c.mu.Unlock()
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// WriteLockFile is the file of the home folder whose lock the log's write
// transactions take (inTx), and WriteLockWait bounds the wait for it:
// longer than a holder keeps it, since its own wait for SQLite is bounded
// by the store's busy timeout (10 s). Other writers of the home's database
// that write as often as calls come (a program's trace) queue on it too.
const (
	WriteLockFile = "writes.lock"
	WriteLockWait = 15 * time.Second
)

// inTx runs f in one IMMEDIATE transaction (the store opens the database with
// _txlock=immediate), committing when f returns nil.
//
// Proxies append to one database from several processes. SQLite lets one
// write at a time, and the others wait in its busy handler, which sleeps
// in growing steps (up to 100 ms) and is not woken when the lock frees: a
// writer can sleep through many others' commits, and with 8 proxies some
// calls waited for seconds. So the log's writers first queue on a file
// lock of the home folder, on which the kernel wakes the next waiter at
// once; they find SQLite's lock free as they get it.
func (l *Log) inTx(ctx context.Context, f func(tx *sql.Tx) error) error {
	return l.inTxOn(ctx, nil, f)
}

// inTxOn is inTx on the connection conn, or on any of the pool's when conn
// is nil.
func (l *Log) inTxOn(ctx context.Context, conn *sql.Conn, f func(tx *sql.Tx) error) error {
	if err := l.writeTx(ctx, conn, f); err != nil {
		l.hashes.clear() // it may hold hashes of entries rolled back
		l.checked.set(nil, 0)
		return err
	}
	return nil
}

// querier is a *sql.DB or a *sql.Tx.
type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// hashReader reads the tree's stored hashes for tlog: in tx with cached
// statements when stmts is set, else with q. With cache set, it reads
// those it can from the cache, and notes in seen (not nil then) every hash
// it read: an append adds them to the cache once it has its place.
type hashReader struct {
	ctx   context.Context
	q     querier
	tx    *sql.Tx
	stmts *stmts
	cache *hashCache
	seen  map[int64]tlog.Hash
	// pending are the hashes of the journal's records, which the
	// database does not have yet (journal.go).
	pending map[int64]tlog.Hash
}

// hashCache keeps the tree hashes an append needs (those of the complete
// subtrees before the log's end, about log2 of its size): reading them
// took a query per append. A stored hash never changes once its entry is
// committed, whoever committed it; what a transaction that did not commit
// read or wrote is not: the cache is cleared when a write transaction of
// the log fails (inTxOn), and an append adds what it saw only once it
// succeeded.
type hashCache struct {
	mu sync.Mutex
	m  map[int64]tlog.Hash // guarded by mu
}

// maxCachedHashes bounds the cache: past it, it starts again.
const maxCachedHashes = 1 << 12

func (c *hashCache) get(idx int64) (tlog.Hash, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h, ok := c.m[idx]
	return h, ok
}

func (c *hashCache) add(seen map[int64]tlog.Hash) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m)+len(seen) > maxCachedHashes {
		c.m = make(map[int64]tlog.Hash, len(seen))
	}
	for idx, h := range seen {
		c.m[idx] = h
	}
}

func (c *hashCache) clear() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}

func (r *hashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(indexes))
	if len(indexes) == 0 {
		return out, nil
	}
	var missing []int64
	if r.seen != nil || r.pending != nil {
		for i, idx := range indexes {
			h, ok := r.pending[idx]
			if !ok && r.seen != nil {
				h, ok = r.seen[idx]
			}
			if !ok && r.cache != nil {
				h, ok = r.cache.get(idx)
			}
			if !ok {
				missing = append(missing, idx)
				continue
			}
			out[i] = h
			if r.seen != nil {
				r.seen[idx] = h
			}
		}
		if len(missing) == 0 {
			return out, nil
		}
	} else {
		missing = indexes
	}
	// One query for all of them: a tree hash needs about log2(size).
	var q strings.Builder
	q.WriteString(`SELECT idx, hash FROM log_hashes WHERE idx IN (`)
	args := make([]any, len(missing))
	for i, idx := range missing {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('?')
		args[i] = idx
	}
	q.WriteByte(')')
	var rows *sql.Rows
	var err error
	if r.stmts != nil {
		rows, err = r.stmts.query(r.ctx, r.tx, q.String(), args...)
	} else {
		rows, err = r.q.QueryContext(r.ctx, q.String(), args...)
	}
	if err != nil {
		return nil, fmt.Errorf("read tree hashes: %w", err)
	}
	defer rows.Close()
	found := make(map[int64][]byte, len(missing))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("read tree hashes: %w", err)
		}
		found[idx] = b
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tree hashes: %w", err)
	}
	for i, idx := range indexes {
		if (r.seen != nil || r.pending != nil) && !slices.Contains(missing, idx) {
			continue // out[i] is set
		}
		b, ok := found[idx]
		if !ok {
			return nil, fmt.Errorf("read tree hash %d: %w", idx, sql.ErrNoRows)
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("read tree hash %d: %d bytes", idx, len(b))
		}
		copy(out[i][:], b)
		if r.seen != nil {
			r.seen[idx] = out[i]
		}
	}
	return out, nil
}

// migrations are the log's schema steps. Append only.
var migrations = []string{
	// 1: the log, its tree, its keys and the payloads beside it.
	`CREATE TABLE log_meta (
		key   TEXT NOT NULL PRIMARY KEY,
		value TEXT NOT NULL
	) STRICT;
	CREATE TABLE entries (
		idx        INTEGER NOT NULL PRIMARY KEY, -- position; one row per position, so the log cannot fork
		id         TEXT    NOT NULL UNIQUE,
		kind       TEXT    NOT NULL,
		time_ns    INTEGER NOT NULL,
		key_id     TEXT    NOT NULL,
		server     TEXT    NOT NULL,
		tool       TEXT    NOT NULL,
		decision   TEXT    NOT NULL,
		status     TEXT    NOT NULL, -- receipts: their outcome's status, once written
		client     TEXT    NOT NULL,
		receipt_id TEXT    NOT NULL, -- outcomes: the receipt they complete
		data       BLOB    NOT NULL  -- the signed entry, canonical JSON
	) STRICT;
	CREATE INDEX entries_time ON entries (time_ns);
	CREATE INDEX entries_receipt ON entries (receipt_id) WHERE receipt_id != '';
	CREATE TABLE log_hashes (
		idx  INTEGER NOT NULL PRIMARY KEY, -- tlog stored hash index
		hash BLOB    NOT NULL
	) STRICT;
	CREATE TABLE keys (
		key_id     TEXT    NOT NULL PRIMARY KEY,
		public_key BLOB    NOT NULL,
		added_idx  INTEGER NOT NULL
	) STRICT;
	CREATE TABLE payloads (
		entry_idx  INTEGER NOT NULL,
		part       TEXT    NOT NULL, -- args, result
		salt       BLOB,             -- NULL once erased
		data       BLOB,             -- NULL once erased
		commitment TEXT    NOT NULL,
		erased_by  INTEGER,          -- index of the erasure entry
		PRIMARY KEY (entry_idx, part)
	) STRICT`,
	// 2: full-text search and the filters' indexes (search.go explains).
	searchMigration,
	// 3: the calls allowed to each server over time, for budgets
	// (CallsAllowed).
	`CREATE INDEX entries_allowed ON entries (server, time_ns) WHERE kind = 'receipt' AND decision = 'ALLOW'`,
	// 4: prefix indexes in full-text search; the entries move into the new
	// index after the step (reindex.go explains).
	prefixMigration,
	// 5: payloads over MaxStoredPayload are not kept: their row holds the
	// salt, no data, and what the entry's signed body says of them (its
	// args_not_kept or result_not_kept): their size and the cap. Both are
	// NULL for a payload kept.
	`ALTER TABLE payloads ADD COLUMN not_kept_size INTEGER;
	ALTER TABLE payloads ADD COLUMN not_kept_cap INTEGER`,
	// 6: witnesses' cosignatures of the log's checkpoints (cosign.go), and
	// how each witness last answered.
	cosignMigration,
	// 7: the full-text index follows the log, from a cursor (indexer.go).
	indexerMigration,
	// 8: the program, trace and step a call was made for are searchable
	// (search.go).
	programMigration,
	// 9: the receipt journal (journal.go): a version without it would
	// append after the database's last entry, before the journal's; so
	// only a version that knows the journal may append.
	journalMigration,
}
