package receipts

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// journalRecords reads the receipts the home's journal holds now, without
// storing them: what the database does not have yet.
func journalRecords(t *testing.T, home string) []*sealed {
	t.Helper()
	j := &journal{path: filepath.Join(home, JournalFile)}
	f, err := os.Open(j.path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	j.f = f
	gen, base, _, ok, err := readHeader(f)
	if err != nil || !ok {
		t.Fatalf("journal header: %v, %v", ok, err)
	}
	j.known, j.gen, j.base, j.off = true, gen, base, journalHeaderSize
	var out []*sealed
	for {
		s, n, err := j.readRecord(j.off, j.next())
		if err != nil {
			t.Fatal(err)
		}
		if s == nil {
			return out
		}
		out, j.off = append(out, s), j.off+n
		j.recs = append(j.recs, s)
	}
}

// appendJournaled appends receipts straight to the journal, as the
// committer does, without the job that stores them in the database later:
// as if the process had died once they were acknowledged.
func appendJournaled(t *testing.T, l *Log, args ...string) []*entry.Entry {
	t.Helper()
	var batch []*job
	for _, a := range args {
		r := sampleReceipt()
		p := newPayload("args", []byte(a))
		r.Args = p.commitment
		batch = append(batch, &job{urgent: true, d: draft{kind: entry.KindReceipt, prefix: "r", body: r,
			index: columns{server: r.Server, tool: r.Tool, decision: r.Decision}, payloads: []payload{p}}})
	}
	if err := l.appendJournal(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	var out []*entry.Entry
	for _, j := range batch {
		if j.err != nil {
			t.Fatal(j.err)
		}
		out = append(out, j.e)
	}
	return out
}

// A receipt acknowledged from the journal is in the log for every reader,
// even when the process that wrote it never stored it in the database: a
// reader in another process stores it, with its arguments, and the log
// verifies.
func TestJournalAcknowledgedIsReadEverywhere(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	es := appendJournaled(t, l, `{"path":"/a"}`, `{"path":"/b"}`)
	if got := journalRecords(t, home); len(got) != 2 || got[0].e.ID != es[0].ID || got[1].e.ID != es[1].ID {
		t.Fatalf("journal holds %d records, want the 2 receipts", len(got))
	}
	// The database alone does not have them yet.
	st2, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close()
	var n int
	if err := st2.DB().QueryRowContext(ctx, `SELECT count(*) FROM entries WHERE id IN (?, ?)`, es[0].ID, es[1].ID).Scan(&n); err != nil || n != 0 {
		t.Fatalf("database rows of the journaled receipts = %d, %v; want 0 before a read", n, err)
	}
	r, err := OpenReader(ctx, st2)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		s, err := r.EntryByID(ctx, e.ID)
		if err != nil {
			t.Fatalf("reader in another store: %v", err)
		}
		if len(s.Payloads) != 1 || !strings.HasPrefix(string(s.Payloads[0].Data), `{"path":`) {
			t.Errorf("entry %s payloads = %+v", e.ID, s.Payloads)
		}
	}
	if got := journalRecords(t, home); len(got) != 0 {
		t.Errorf("journal holds %d records after a read stored them", len(got))
	}
	// The writer goes on after them.
	next, err := l.AppendReceipt(ctx, sampleReceipt(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if next.Index != es[1].Index+1 {
		t.Errorf("next receipt at %d, want %d", next.Index, es[1].Index+1)
	}
	verifyLog(t, l)
}

// A record cut short (a crash in its write, before its sync) ends the
// journal: the records before it are read, it is not, and the next append
// takes its place.
func TestJournalTornRecord(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	es := appendJournaled(t, l, `{"n":1}`, `{"n":2}`, `{"n":3}`)
	recs := journalRecords(t, home)
	// Damage the last record's last byte.
	f, err := os.OpenFile(filepath.Join(home, JournalFile), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	var end int64 = journalHeaderSize
	for _, s := range recs {
		end += int64(len(appendRecord(nil, 0, 0, s)))
	}
	if _, err := f.WriteAt([]byte{0xff}, end-1); err != nil {
		t.Fatal(err)
	}
	f.Close()

	l2, _ := openShared(t, home, seed)
	for i, e := range es {
		_, err := l2.EntryByID(ctx, e.ID)
		if i < 2 && err != nil {
			t.Errorf("receipt %d: %v", i, err)
		}
		if i == 2 && !errors.Is(err, ErrNotFound) {
			t.Errorf("the torn receipt: %v, want not found", err)
		}
	}
	next, err := l2.AppendReceipt(ctx, sampleReceipt(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if next.Index != es[2].Index {
		t.Errorf("next receipt at %d, want %d (the torn one's place)", next.Index, es[2].Index)
	}
	verifyLog(t, l2)
}

// Entries deleted from the database (or an older copy put back) stop the
// log: the next receipt is refused, not written over what was there.
func TestJournalRefusesAShrunkDatabase(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	for range 3 {
		call(t, l, "files", "read_file", entry.Allow, "c", `{}`, "ok", `{}`)
	}
	if _, err := l.Size(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `DELETE FROM entries WHERE idx >= (SELECT max(idx) - 1 FROM entries)`); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReceipt(ctx, sampleReceipt(), nil); !errors.Is(err, ErrShrunk) {
		t.Fatalf("append after entries were deleted: %v, want ErrShrunk", err)
	}
}

// Receipts with large arguments fill the journal faster than the
// database takes them: a full journal is stored first, and nothing is lost.
func TestJournalFull(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	big := `{"data":"` + strings.Repeat("x", MaxStoredPayload-20) + `"}`
	var ids []string
	for range 3 * journalCapacity / MaxStoredPayload {
		r, err := l.AppendReceipt(ctx, sampleReceipt(), []byte(big))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ID)
	}
	for _, id := range ids {
		s, err := l.EntryByID(ctx, id)
		if err != nil || len(s.Payloads) != 1 || len(s.Payloads[0].Data) != len(big) {
			t.Fatalf("entry %s: %v", id, err)
		}
	}
	verifyLog(t, l)
}

// FuzzJournalRecord: any bytes read as a record's body either fail to
// decode, or decode to a record that encodes to bytes that decode to the
// same record.
func FuzzJournalRecord(f *testing.F) {
	l, _ := MustOpen(f, newKey(f))
	e, err := l.AppendReceipt(context.Background(), sampleReceipt(), []byte(`{"a":1}`))
	if err != nil {
		f.Fatal(err)
	}
	s, err := l.EntryByID(context.Background(), e.ID)
	if err != nil {
		f.Fatal(err)
	}
	seed := &sealed{e: e, data: s.Data, timeNS: 42, index: columns{server: "files", tool: "read"},
		pays: []payload{{part: "args", salt: []byte("salt"), data: []byte(`{"a":1}`), commitment: "c"},
			{part: "result", salt: []byte("s2"), commitment: "c2", notKept: &entry.NotKept{Size: 1 << 20, Cap: 65536}}}}
	f.Add(appendRecord(nil, 1, 0, seed)[recordHeaderSize:])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := decodeRecord(b)
		if err != nil {
			return
		}
		again := appendRecord(nil, 1, 0, s)[recordHeaderSize:]
		s2, err := decodeRecord(again)
		if err != nil {
			t.Fatalf("a decoded record encodes to bytes that do not decode: %v", err)
		}
		s.e, s2.e = nil, nil
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("decoded %+v, encoded and decoded again %+v", s, s2)
		}
	})
}

// Erased arguments leave the journal too: the record that brought them
// stays in the file, emptied, until a later one is written over it.
func TestErasedArgumentsLeaveTheJournal(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	const secret = "vqpzlanternfish"
	call(t, l, "mail", "send_email", entry.Allow, "c", `{"to":"before@example.com"}`, entry.Succeeded, `"queued"`)
	r, _ := call(t, l, "mail", "send_email", entry.Allow, "c", `{"to":"`+secret+`@example.com"}`, "", "")
	if _, err := l.Size(ctx); err != nil { // stored in the database, the journal emptied
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(st.Dir(), JournalFile)); err != nil || !strings.Contains(string(b), secret) {
		t.Fatalf("the journal does not hold the emptied record (%v): the test shows nothing", err)
	}
	if _, err := l.Erase(ctx, []string{r.ID}, "request 9"); err != nil {
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if dbContains(t, st, secret) {
		t.Errorf("the home still holds %q after its erasure", secret)
	}
}

// A journal removed while it holds receipts the database does not have
// stops the log, closed; removed once empty, it is made again.
func TestJournalRemoved(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	appendJournaled(t, l, `{"n":1}`)
	path := filepath.Join(home, JournalFile)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReceipt(ctx, sampleReceipt(), nil); !errors.Is(err, ErrJournalReplaced) {
		t.Fatalf("append after the journal holding a receipt was removed: %v, want ErrJournalReplaced", err)
	}

	l2, _ := MustOpen(t, newKey(t))
	if _, err := l2.AppendReceipt(ctx, sampleReceipt(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l2.Size(ctx); err != nil { // stored: the journal is empty
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(l2.home, JournalFile)); err != nil {
		t.Fatal(err)
	}
	r, err := l2.AppendReceipt(ctx, sampleReceipt(), nil)
	if err != nil {
		t.Fatalf("append after an empty journal was removed: %v", err)
	}
	if _, err := os.Stat(filepath.Join(l2.home, JournalFile)); err != nil {
		t.Errorf("the journal was not made again: %v", err)
	}
	if _, err := l2.EntryByID(ctx, r.ID); err != nil {
		t.Error(err)
	}
	verifyLog(t, l2)
}

// Erasing what matches a query erases it in the receipts still in the
// journal too.
func TestEraseMatchingReachesTheJournal(t *testing.T) {
	ctx := context.Background()
	l, _ := openShared(t, t.TempDir(), newSeed(t))
	es := appendJournaled(t, l, `{"to":"zqxwhitecliff@example.com"}`)
	e, n, err := l.EraseMatching(ctx, Query{Text: "zqxwhitecliff"}, "request 11")
	if err != nil || e == nil || n != 1 {
		t.Fatalf("EraseMatching = %v, %d, %v; want the journaled receipt's arguments", e, n, err)
	}
	s, err := l.EntryByID(ctx, es[0].ID)
	if err != nil || len(s.Payloads) != 1 || s.Payloads[0].Data != nil {
		t.Errorf("the receipt's arguments after the erasure: %+v, %v", s.Payloads, err)
	}
}

// A holder of the write lock that died committing leaves the journal
// marked: the next write settles the database with a transaction that
// writes (a dead commit that SQLite has not shown yet is then either shown
// or written over), and takes the mark off.
func TestJournalSettlesADeadCommit(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	l, st := openShared(t, home, seed)
	appendJournaled(t, l, `{"n":1}`)
	// As a writer killed between the mark and the journal's emptying.
	unlock, err := l.lockWrites(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.journal.committing(); err != nil {
		t.Fatal(err)
	}
	unlock()

	l2, _ := openShared(t, home, seed)
	if _, err := l2.AppendReceipt(ctx, sampleReceipt(), nil); err != nil {
		t.Fatal(err)
	}
	var settled string
	if err := st.DB().QueryRowContext(ctx, `SELECT value FROM log_meta WHERE key = 'settled'`).Scan(&settled); err != nil {
		t.Errorf("no settling write after a commit that died: %v", err)
	}
	f, err := os.Open(filepath.Join(home, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, _, flags, ok, err := readHeader(f); err != nil || !ok || flags != 0 {
		t.Errorf("journal header after settling: flags %d, ok %v, %v; want the mark off", flags, ok, err)
	}
	verifyLog(t, l2)
}
