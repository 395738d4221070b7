package receipts

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/mod/sumdb/tlog"
	"modernc.org/sqlite"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// # The receipt journal
//
// A call waits for its receipt to be durable, and for nothing else. A
// receipt committed to the database cost a dozen write-ahead-log frames
// (its row, its payload, its tree hashes, the indexes of its columns) and
// an fsync: about three times the fsync alone. So a receipt is made durable
// first in the journal, a file of the home folder (receipts.journal) where
// it takes one write and one fdatasync; the database takes it a few
// milliseconds later, in a transaction shared with the outcomes and the
// receipts of that moment (commit.go), or at once when anyone reads or
// writes the log.
//
// The rules that keep the log one log, whoever crashes when:
//
//   - The journal is written and read only under the home's write lock
//     (writes.lock, the lock of every write transaction of the log), and
//     it is the log's tail: its records are the entries after the
//     database's last, in order, each signed over the tree that includes
//     the records before it.
//   - Every write transaction of the log on the durable connections
//     first stores the journal's records in the database (they are signed
//     already: no key is needed), then does its own work, commits with
//     synchronous=FULL, and then empties the journal: a new header, with a
//     new generation and the database's size, makes its records stale.
//     Emptying is not synced: until it is durable, a stale record's index
//     is below the database's size, and storing skips it.
//   - Before it appends, a writer compares the database's size with the
//     journal's: a database that got ahead (an emptying that failed) has
//     the journal stored and emptied first.
//   - A write transaction marks the journal's header before it commits;
//     the emptying takes the mark off. A process killed in SQLite's commit
//     can leave a commit in the write-ahead log that other connections do
//     not see until SQLite recovers the log, later: a receipt written to
//     the journal meanwhile, after the database's size as it looked, would
//     claim the place of an entry of that commit. So the next holder of
//     the lock that finds the mark settles the database first, with a
//     transaction that writes: its commit either follows the dead one,
//     seen, or writes over it.
//   - A record is valid only with the header's generation, the next index,
//     and its checksum: a record cut short by a crash ends the journal, and
//     the next record is written over it. A receipt is acknowledged only
//     after the fdatasync of its record; a record written but not yet
//     synced when its writer died may be taken by the next writer (it is a
//     signed entry whose call did not run), and is made durable by the next
//     sync, which syncs the whole file.
//   - Every read of the log ([Reader]) first stores what the journal holds,
//     so a reader sees every acknowledged receipt, even after the process
//     that wrote it died; versions of Gatehouse without the journal cannot
//     append to a log that has one (schema step 9).

// journalMigration is step 9 of the log's schema: entries are appended
// only by versions of Gatehouse that store the journal first, which give
// their connections the function gatehouse_journal(). An earlier version
// fails to append ("no such function"), closed, until it is updated.
const journalMigration = `CREATE TRIGGER entries_after_journal BEFORE INSERT ON entries
	WHEN gatehouse_journal() IS NOT 1
	BEGIN SELECT RAISE(ABORT, 'entries are appended by Gatehouse only, after its receipt journal'); END`

func init() {
	sqlite.MustRegisterDeterministicScalarFunction("gatehouse_journal", 0,
		func(*sqlite.FunctionContext, []driver.Value) (driver.Value, error) { return int64(1), nil })
}

// JournalFile is the home folder's receipt journal.
const JournalFile = "receipts.journal"

const (
	journalMagic      = "GHRJRNL1"
	journalHeaderSize = 512     // the header's block; records follow it
	journalCapacity   = 1 << 20 // written with zeros when made, so that appends change no file size
	recordHeaderSize  = 24      // length, checksum, generation, index
	// maxRecord bounds a record's length: a receipt with arguments at
	// MaxStoredPayload is far below it.
	maxRecord = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// A journal is this process's view of the home's receipt journal. Its
// fields are used only while the home's write lock is held.
type journal struct {
	path string
	f    *os.File // nil until first used

	known  bool   // gen, base and off describe the file as last read
	gen    uint64 // the header's generation
	base   int64  // the database's size when the journal was emptied: the index of its first record
	off    int64  // where the next record goes
	recs   []*sealed
	hashes map[int64]tlog.Hash // the stored tree hashes recs add
	// dirty: the header carries the committing mark of a holder of the
	// write lock that did not empty the journal after its commit.
	dirty bool
}

// next is the index of the entry after the journal's records.
func (j *journal) next() int64 { return j.base + int64(len(j.recs)) }

// open opens the journal's file, making it (with its header, an empty
// journal after size entries) when it does not exist.
func (j *journal) open(size int64) error {
	if j.f != nil {
		return nil
	}
	f, err := os.OpenFile(j.path, os.O_RDWR, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return j.create(size)
	}
	if err != nil {
		return fmt.Errorf("open the receipt journal: %w", err)
	}
	j.f = f
	return nil
}

// create makes the journal's file under a temporary name, whole and
// synced, and renames it into place: a journal is never seen half made.
func (j *journal) create(size int64) error {
	tmp := j.path + ".new"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("make the receipt journal: %w", err)
	}
	fail := func(err error) error {
		f.Close()
		os.Remove(tmp)
		return fmt.Errorf("make the receipt journal: %w", err)
	}
	zeros := make([]byte, 64<<10)
	for off := 0; off < journalCapacity; off += len(zeros) {
		if _, err := f.Write(zeros); err != nil {
			return fail(err)
		}
	}
	gen := binary.LittleEndian.Uint64(entry.NewSalt())
	if _, err := f.WriteAt(journalHeader(gen, size, 0), 0); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fail(err)
	}
	if err := syncDir(filepath.Dir(j.path)); err != nil {
		return fail(err)
	}
	j.f, j.known = f, false
	return nil
}

// syncDir makes the names in dir durable (a new file's among them).
// Windows cannot sync a folder, and needs not: NTFS journals names.
func syncDir(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// The header: magic, generation, base, flags, CRC-32C of what precedes it.
const headerCommitting = 1 // a write transaction of the log was committing

func journalHeader(gen uint64, base int64, flags uint32) []byte {
	h := make([]byte, 32)
	copy(h, journalMagic)
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint64(h[16:], uint64(base))
	binary.LittleEndian.PutUint32(h[24:], flags)
	binary.LittleEndian.PutUint32(h[28:], crc32.Checksum(h[:28], castagnoli))
	return h
}

// readHeader reads the journal's header; ok is false for one that is not
// whole (a journal being emptied when the machine stopped: it held nothing
// the database did not).
func readHeader(f *os.File) (gen uint64, base int64, flags uint32, ok bool, err error) {
	h := make([]byte, 32)
	if _, err := f.ReadAt(h, 0); err != nil && !errors.Is(err, io.EOF) {
		return 0, 0, 0, false, fmt.Errorf("read the receipt journal: %w", err)
	}
	if string(h[:8]) != journalMagic || binary.LittleEndian.Uint32(h[28:]) != crc32.Checksum(h[:28], castagnoli) {
		return 0, 0, 0, false, nil
	}
	return binary.LittleEndian.Uint64(h[8:]), int64(binary.LittleEndian.Uint64(h[16:])), binary.LittleEndian.Uint32(h[24:]), true, nil
}

// committing marks the journal, before a write transaction of the log
// commits, as that transaction's: the mark is taken off when the journal
// is emptied after the commit. A holder of the write lock that finds it
// knows that the last holder died committing (settle).
func (j *journal) committing() error {
	if _, err := j.f.WriteAt(journalHeader(j.gen, j.base, headerCommitting), 0); err != nil {
		j.known = false
		return fmt.Errorf("mark the receipt journal: %w", err)
	}
	return nil
}

// refresh brings j up to date with the file: a new generation (another
// process emptied it) or records another process appended. size is the
// database's size, read under the same lock.
func (j *journal) refresh(ctx context.Context, r *Reader, size int64) error {
	if j.f != nil && !j.inPlace() {
		// The file was removed or replaced behind the log's back. What
		// this process wrote to it is readable only here: without records
		// the database lacks, it takes the file that is there now;
		// with some, it stops, closed.
		if j.known && j.next() > size {
			return fmt.Errorf("%w: it held entries %d to %d, which the database does not have", ErrJournalReplaced, size, j.next()-1)
		}
		j.f.Close()
		j.f, j.known = nil, false
	}
	if err := j.open(size); err != nil {
		return err
	}
	gen, base, flags, ok, err := readHeader(j.f)
	if err != nil {
		return err
	}
	if !ok {
		// A header cut short by a crash: the journal was being emptied,
		// and the database holds what it held. It is emptied again once
		// the database is settled.
		if err := j.reset(size); err != nil {
			return err
		}
		gen, base, flags = j.gen, size, headerCommitting
	}
	j.dirty = flags&headerCommitting != 0
	if !j.known || gen != j.gen {
		j.known, j.gen, j.base, j.off, j.recs, j.hashes = true, gen, base, journalHeaderSize, nil, map[int64]tlog.Hash{}
	}
	// Records appended since this process last looked.
	hr := &hashReader{ctx: ctx, q: r.db, pending: j.hashes}
	for {
		s, n, err := j.readRecord(j.off, j.next())
		if err != nil {
			return err
		}
		if s == nil {
			return nil
		}
		hashes, err := tlog.StoredHashes(s.e.Index, s.data, hr)
		if err != nil {
			return fmt.Errorf("read the receipt journal: entry %d: %w", s.e.Index, err)
		}
		s.hashes = hashes
		j.add(s)
		j.off += n
	}
}

// ErrJournalForked is the error of storing a journal record that does not
// extend the log in the database: something wrote the database or the
// journal behind the log's rules. Nothing more is stored or appended.
var ErrJournalForked = errors.New("the receipt journal does not extend the log")

// ErrJournalReplaced is the error of a write to a log whose receipt
// journal was removed or replaced while it held receipts the database
// does not have.
var ErrJournalReplaced = errors.New("the receipt journal was removed or replaced")

// inPlace reports whether j's open file is still the one at its path.
func (j *journal) inPlace() bool {
	open, err := j.f.Stat()
	if err != nil {
		return false
	}
	named, err := os.Stat(j.path)
	return err == nil && os.SameFile(open, named)
}

// add takes s, written at j.off, as the journal's next record.
func (j *journal) add(s *sealed) {
	j.recs = append(j.recs, s)
	base := tlog.StoredHashIndex(0, s.e.Index)
	for i, h := range s.hashes {
		j.hashes[base+int64(i)] = h
	}
}

// readRecord reads the record at off if it is the valid record of entry
// idx, and returns it with its length on the file; nil at the journal's
// end.
func (j *journal) readRecord(off, idx int64) (*sealed, int64, error) {
	var h [recordHeaderSize]byte
	if _, err := j.f.ReadAt(h[:], off); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("read the receipt journal: %w", err)
	}
	n := binary.LittleEndian.Uint32(h[0:])
	if n == 0 || n > maxRecord || binary.LittleEndian.Uint64(h[8:]) != j.gen || int64(binary.LittleEndian.Uint64(h[16:])) != idx {
		return nil, 0, nil
	}
	body := make([]byte, n)
	if _, err := j.f.ReadAt(body, off+recordHeaderSize); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, 0, nil
		}
		return nil, 0, fmt.Errorf("read the receipt journal: %w", err)
	}
	c := crc32.Update(crc32.Checksum(h[8:], castagnoli), castagnoli, body)
	if c != binary.LittleEndian.Uint32(h[4:]) {
		return nil, 0, nil // cut short by a crash: the journal ends here
	}
	s, err := decodeRecord(body)
	if err != nil || s.e.Index != idx {
		// A whole record with its checksum that does not read: written by
		// something else than this code.
		return nil, 0, fmt.Errorf("read the receipt journal: record of entry %d at %d: %v", idx, off, err)
	}
	return s, recordHeaderSize + int64(n), nil
}

// write appends recs, sealed as the entries from j.next(), and syncs them.
// On failure nothing of them counts: their first header is zeroed, so that
// no one takes what may not be durable.
func (j *journal) write(recs []*sealed) error {
	var buf []byte
	for i, s := range recs {
		buf = appendRecord(buf, j.gen, j.next()+int64(i), s)
	}
	if _, err := j.f.WriteAt(buf, j.off); err != nil {
		j.unwrite()
		return fmt.Errorf("write the receipt journal: %w", err)
	}
	if err := datasync(j.f); err != nil {
		j.unwrite()
		return fmt.Errorf("sync the receipt journal: %w", err)
	}
	for _, s := range recs {
		j.add(s)
	}
	j.off += int64(len(buf))
	return nil
}

func (j *journal) unwrite() {
	j.f.WriteAt(make([]byte, recordHeaderSize), j.off)
	datasync(j.f)
	j.known = false
}

// reset empties the journal: its database has size entries, every record
// among them.
func (j *journal) reset(size int64) error {
	gen := j.gen + 1
	if _, err := j.f.WriteAt(journalHeader(gen, size, 0), 0); err != nil {
		j.known = false
		return fmt.Errorf("empty the receipt journal: %w", err)
	}
	j.dirty = false
	j.known, j.gen, j.base, j.off, j.recs, j.hashes = true, gen, size, journalHeaderSize, nil, map[int64]tlog.Hash{}
	return nil
}

// fits reports whether records of about n bytes fit after the journal's.
func (j *journal) fits(n int64) bool {
	return len(j.recs) == 0 || j.off+n <= journalCapacity
}

// A record's body: the signed entry, its time, its search columns and its
// payloads, each field length-prefixed.
func appendRecord(buf []byte, gen uint64, idx int64, s *sealed) []byte {
	start := len(buf)
	buf = append(buf, make([]byte, recordHeaderSize)...)
	buf = appendBytes(buf, s.data)
	buf = binary.AppendVarint(buf, s.timeNS)
	c := s.index
	for _, f := range []string{c.server, c.tool, c.decision, c.status, c.client, c.receipt} {
		buf = appendBytes(buf, []byte(f))
	}
	buf = binary.AppendUvarint(buf, uint64(len(s.pays)))
	for _, p := range s.pays {
		buf = appendBytes(buf, []byte(p.part))
		buf = appendBytes(buf, p.salt)
		buf = appendBytes(buf, []byte(p.commitment))
		switch {
		case p.notKept != nil:
			buf = append(buf, 2)
			buf = binary.AppendVarint(buf, p.notKept.Size)
			buf = binary.AppendVarint(buf, p.notKept.Cap)
		default:
			buf = append(buf, 1)
			buf = appendBytes(buf, p.data)
		}
	}
	h := buf[start : start+recordHeaderSize]
	binary.LittleEndian.PutUint32(h[0:], uint32(len(buf)-start-recordHeaderSize))
	binary.LittleEndian.PutUint64(h[8:], gen)
	binary.LittleEndian.PutUint64(h[16:], uint64(idx))
	c32 := crc32.Update(crc32.Checksum(h[8:], castagnoli), castagnoli, buf[start+recordHeaderSize:])
	binary.LittleEndian.PutUint32(h[4:], c32)
	return buf
}

func appendBytes(buf, b []byte) []byte {
	return append(binary.AppendUvarint(buf, uint64(len(b))), b...)
}

var errRecord = errors.New("malformed journal record")

// decodeRecord reads a record's body; its entry is parsed from the signed
// bytes.
func decodeRecord(b []byte) (*sealed, error) {
	d := recordReader{b: b}
	s := &sealed{data: d.bytes()}
	s.timeNS = d.varint()
	c := &s.index
	for _, f := range []*string{&c.server, &c.tool, &c.decision, &c.status, &c.client, &c.receipt} {
		*f = string(d.bytes())
	}
	n := d.uvarint()
	if n > 16 {
		return nil, errRecord
	}
	for range n {
		p := payload{part: string(d.bytes()), salt: d.bytes(), commitment: string(d.bytes())}
		switch d.byte() {
		case 1:
			p.data = d.bytes()
		case 2:
			p.notKept = &entry.NotKept{Size: d.varint(), Cap: d.varint()}
		default:
			d.err = errRecord
		}
		s.pays = append(s.pays, p)
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errRecord
	}
	e, err := entry.Parse(s.data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errRecord, err)
	}
	s.e = e
	return s, nil
}

type recordReader struct {
	b   []byte
	err error
}

func (d *recordReader) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.err, d.b = errRecord, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

// varint reads what binary.AppendVarint wrote: a zigzag-encoded uvarint.
func (d *recordReader) varint() int64 {
	u := d.uvarint()
	return int64(u>>1) ^ -int64(u&1)
}

func (d *recordReader) byte() byte {
	if len(d.b) == 0 {
		d.err = errRecord
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *recordReader) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.err, d.b = errRecord, nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

// lockWrites takes the home's write lock (nothing without a home folder).
func (r *Reader) lockWrites(ctx context.Context) (unlock func(), err error) {
	if r.writes == nil {
		return func() {}, nil
	}
	lctx, cancel := context.WithTimeout(ctx, WriteLockWait)
	u, err := r.writes.Lock(lctx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("wait for the other writers of the evidence log: %w", err)
	}
	return u, nil
}

// writeTx runs f in one IMMEDIATE write transaction under the home's write
// lock (see Log.inTx), on conn or on any of the pool's connections when conn
// is nil. On the pool's (durable) connections the journal's records are
// stored first and the journal emptied after the commit.
func (r *Reader) writeTx(ctx context.Context, conn *sql.Conn, f func(tx *sql.Tx) error) error {
	unlock, err := r.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return r.txLocked(ctx, conn, f)
}

// txLocked is writeTx with the lock held.
func (r *Reader) txLocked(ctx context.Context, conn *sql.Conn, f func(tx *sql.Tx) error) error {
	var tx *sql.Tx
	var err error
	if conn != nil {
		tx, err = conn.BeginTx(ctx, nil)
	} else {
		tx, err = r.db.BeginTx(ctx, nil)
	}
	if err != nil {
		return err
	}
	defer tx.Rollback()
	journaled := conn == nil && r.journal != nil && r.writes != nil
	if journaled {
		if err := r.storeJournal(ctx, tx); err != nil {
			return err
		}
		if r.journal.dirty {
			// The last holder of the lock died committing: its commit may
			// be in the write-ahead log unseen, and seen later, once
			// SQLite recovers the log. This transaction writes, so that
			// its commit settles it: after it, what the database holds is
			// final (the dead commit was seen, or is written over).
			if _, err := r.stmts.exec(ctx, tx, `INSERT INTO log_meta (key, value) VALUES ('settled', ?)
				ON CONFLICT (key) DO UPDATE SET value = excluded.value`, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
				return err
			}
		}
	}
	if err := f(tx); err != nil {
		return err
	}
	var size int64
	if journaled {
		if size, err = sizeIn(ctx, &r.stmts, tx); err != nil {
			return err
		}
		if err := r.journal.committing(); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if journaled && size >= r.journal.base {
		// A database that has fewer entries than the journal's base lost
		// some (ErrShrunk): the journal keeps the size it had, and refuses
		// receipts.
		return r.journal.reset(size)
	}
	return nil
}

// ErrShrunk is the error of a receipt for a log whose database has fewer
// entries than it had: entries were deleted, or an older copy of the
// database put back. No receipt is written (the calls waiting for one do
// not run) until a person looks: verification against an earlier export
// shows what is missing, and moving the journal file aside (once no
// receipt of it is missing from the database, which this error says
// otherwise) lets the log go on from the database as it is.
var ErrShrunk = errors.New("the evidence log's database has fewer entries than it had: entries were deleted or an older copy was put back")

func shrunk(size, had int64) error {
	return fmt.Errorf("%w (%d now, %d before)", ErrShrunk, size, had)
}

// sizeIn reads the database's size in tx, or outside any with tx nil.
func sizeIn(ctx context.Context, s *stmts, tx *sql.Tx) (int64, error) {
	const q = `SELECT coalesce(max(idx) + 1, 0) FROM entries`
	var n int64
	if tx != nil {
		return n, inTx{s, tx}.QueryRowContext(ctx, q).Scan(&n)
	}
	st, err := s.get(ctx, q)
	if err != nil {
		return 0, err
	}
	return n, st.QueryRowContext(ctx).Scan(&n)
}

// storeJournal stores in tx the journal's records that the database does
// not have yet.
func (r *Reader) storeJournal(ctx context.Context, tx *sql.Tx) error {
	size, err := sizeIn(ctx, &r.stmts, tx)
	if err != nil {
		return err
	}
	j := r.journal
	if err := j.refresh(ctx, r, size); err != nil {
		return err
	}
	var last int64
	for _, s := range j.recs {
		if s.e.Index < size {
			continue // stored before the journal was emptied
		}
		if s.e.Index != size {
			return shrunk(size, s.e.Index)
		}
		if last == 0 {
			q := inTx{&r.stmts, tx}
			if err := q.QueryRowContext(ctx, `SELECT coalesce(max(time_ns), 0) FROM entries WHERE idx = ?`, size-1).Scan(&last); err != nil {
				return err
			}
		}
		// The record must extend the log the database holds: its prev is
		// the tree of the entries before it, read from the database (not
		// from any process's memory).
		prev, err := tlog.TreeHash(size, &hashReader{ctx: ctx, q: tx})
		if err != nil {
			return fmt.Errorf("store entry %d from the receipt journal: %w", s.e.Index, err)
		}
		if entry.FormatTreeHash(prev) != s.e.Prev {
			return fmt.Errorf("%w: entry %d in the receipt journal was signed over another tree than the database's", ErrJournalForked, s.e.Index)
		}
		if err := r.store(ctx, tx, s, last); err != nil {
			return fmt.Errorf("store entry %d from the receipt journal: %w", s.e.Index, err)
		}
		last, size = s.timeNS, size+1
	}
	return nil
}

// sync stores what the journal holds in the database, when it holds
// anything: every read of the log sees every receipt acknowledged, even
// one whose writer died before the database had it. It takes the write
// lock: no code that holds it calls it.
func (r *Reader) sync(ctx context.Context) error {
	if r.journal == nil || r.writes == nil || !r.journalPending() {
		return nil
	}
	if err := r.writeTx(ctx, nil, func(*sql.Tx) error { return nil }); err != nil {
		return fmt.Errorf("store the receipt journal: %w", err)
	}
	return nil
}

// journalPending reports, without the lock, whether the journal may hold
// a record: its first record is of its generation.
func (r *Reader) journalPending() bool {
	f, err := os.Open(r.journal.path)
	if err != nil {
		return false // none yet
	}
	defer f.Close()
	gen, base, flags, ok, err := readHeader(f)
	if err != nil || !ok || flags&headerCommitting != 0 {
		return true // let the locked look decide, and settle
	}
	var h [recordHeaderSize]byte
	if _, err := f.ReadAt(h[:], journalHeaderSize); err != nil {
		return false
	}
	return binary.LittleEndian.Uint32(h[0:]) != 0 && binary.LittleEndian.Uint64(h[8:]) == gen &&
		int64(binary.LittleEndian.Uint64(h[16:])) == base
}

// appendJournal seals the receipts of batch as the log's next entries and
// makes them durable in the journal; each job gets its entry, or its error.
func (l *Log) appendJournal(ctx context.Context, batch []*job) error {
	unlock, err := l.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	j := l.journal
	// The database's size, read in a write transaction that is rolled
	// back: a database another process holds locked refuses receipts as
	// it refuses every write, rather than taking them in a journal it
	// cannot store.
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	size, err := sizeIn(ctx, &l.stmts, tx)
	tx.Rollback()
	if err != nil {
		return fmt.Errorf("read the log's size: %w", err)
	}
	if err := j.refresh(ctx, l.Reader, size); err != nil {
		return err
	}
	if size < j.base {
		return shrunk(size, j.base)
	}
	// A database ahead of the journal (an emptying that failed), a
	// journal too full for the batch, or a holder of the lock that died
	// committing (its commit may show in the database later, and a record
	// written now could claim its place): store and settle first.
	var need int64
	for _, jb := range batch {
		need += 4 << 10
		for _, p := range jb.d.payloads {
			need += int64(len(p.data))
		}
	}
	if size > j.base || !j.fits(need) || j.dirty {
		if err := l.txLocked(ctx, nil, func(*sql.Tx) error { return nil }); err != nil {
			l.hashes.clear()
			l.checked.set(nil, 0)
			return fmt.Errorf("store the receipt journal: %w", err)
		}
		if err := j.refresh(ctx, l.Reader, size); err != nil {
			return err
		}
	}
	key, _ := l.signer()
	hr := &hashReader{ctx: ctx, q: l.db, stmts: &l.stmts, cache: &l.hashes, seen: map[int64]tlog.Hash{}, pending: j.hashes}
	var recs []*sealed
	var jobs []*job
	n := j.next()
	for _, jb := range batch {
		s, err := l.seal(ctx, l.db, hr, key, n, jb.d)
		if err != nil {
			jb.err = fmt.Errorf("append %s: %w", jb.d.kind, err)
			continue
		}
		recs, jobs, n = append(recs, s), append(jobs, jb), n+1
	}
	if len(recs) == 0 {
		return nil
	}
	if err := j.write(recs); err != nil {
		l.hashes.clear()
		l.checked.set(nil, 0)
		return err
	}
	l.hashes.add(hr.seen)
	for i, jb := range jobs {
		jb.e, jb.data = recs[i].e, recs[i].data
	}
	return nil
}

// scrubJournal writes zeros over every byte of the journal after its
// records (those the database has, emptied but not yet written over), and
// syncs them.
func (l *Log) scrubJournal(ctx context.Context) error {
	if l.journal == nil || l.writes == nil {
		return nil
	}
	unlock, err := l.lockWrites(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	j := l.journal
	size, err := sizeIn(ctx, &l.stmts, nil)
	if err != nil {
		return err
	}
	if err := j.refresh(ctx, l.Reader, size); err != nil {
		return err
	}
	fi, err := j.f.Stat()
	if err != nil {
		return fmt.Errorf("scrub the receipt journal: %w", err)
	}
	zeros := make([]byte, 64<<10)
	for off := j.off; off < fi.Size(); off += int64(len(zeros)) {
		n := min(int64(len(zeros)), fi.Size()-off)
		if _, err := j.f.WriteAt(zeros[:n], off); err != nil {
			return fmt.Errorf("scrub the receipt journal: %w", err)
		}
	}
	if err := datasync(j.f); err != nil {
		return fmt.Errorf("scrub the receipt journal: %w", err)
	}
	return nil
}
