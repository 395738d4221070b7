package receipts

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"database/sql"
	"errors"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

func newKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

// MustOpen opens a log in a fresh home folder.
func MustOpen(tb testing.TB, key ed25519.PrivateKey) (*Log, *store.Store) {
	tb.Helper()
	st, err := store.Open(context.Background(), tb.TempDir(), nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	l, err := Open(context.Background(), st, key)
	if err != nil {
		tb.Fatal(err)
	}
	return l, st
}

func sampleReceipt() entry.Receipt {
	return entry.Receipt{
		Capability: "mcp.files.read_file", Server: "files", Tool: "read_file",
		Decision: entry.Allow, Rule: "default:low", Client: entry.Client{Name: "claude-code", Version: "2.1"},
	}
}

func TestAppendAndRead(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	l, _ := MustOpen(t, key)
	r, err := l.AppendReceipt(ctx, sampleReceipt(), []byte(`{"path":"/home/me/notes.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	o, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: 1.5}, []byte(`{"content":[]}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != 1 || o.Index != 2 {
		t.Errorf("indexes = %d, %d; want 1, 2 (0 is the key entry)", r.Index, o.Index)
	}
	if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: "r-nope", Status: entry.Failed}, nil); !errors.Is(err, ErrNotFound) {
		t.Errorf("outcome for an unknown receipt = %v, want ErrNotFound", err)
	}

	// Every stored entry parses, verifies, and its prev is the tree before it.
	n, _ := l.Size(ctx)
	if n != 3 {
		t.Fatalf("Size = %d, want 3", n)
	}
	var leaves []tlog.Hash
	for s, err := range l.Entries(ctx, 0, n) {
		if err != nil {
			t.Fatal(err)
		}
		e, err := entry.Parse(s.Data)
		if err != nil {
			t.Fatal(err)
		}
		if err := entry.Verify(e, key.Public().(ed25519.PublicKey)); err != nil {
			t.Errorf("entry %d: %v", s.Index, err)
		}
		want, _ := l.TreeHash(ctx, s.Index)
		if e.Prev != entry.FormatTreeHash(want) {
			t.Errorf("entry %d prev = %s, want %s", s.Index, e.Prev, entry.FormatTreeHash(want))
		}
		for _, p := range s.Payloads {
			if entry.Commit(p.Salt, p.Data) != p.Commitment {
				t.Errorf("entry %d %s: payload does not match its commitment", s.Index, p.Part)
			}
		}
		leaves = append(leaves, entry.LeafHash(s.Data))
	}
	// The stored tree is the tree of the entries.
	signed, cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := treeOf(leaves); got != cp.Hash || cp.Size != n {
		t.Errorf("checkpoint %d %v, want %d %v", cp.Size, cp.Hash, n, got)
	}
	got, kid, err := entry.OpenCheckpoint(signed, []ed25519.PublicKey{key.Public().(ed25519.PublicKey)})
	if err != nil || got != cp || kid != l.KeyID() {
		t.Errorf("OpenCheckpoint = %v, %s, %v", got, kid, err)
	}
	for i := range n {
		p, err := l.ProveInclusion(ctx, i, n)
		if err != nil {
			t.Fatal(err)
		}
		if err := tlog.CheckRecord(p, n, cp.Hash, i, leaves[i]); err != nil {
			t.Errorf("inclusion of %d: %v", i, err)
		}
	}
}

// treeOf computes an RFC 6962 tree hash from leaf hashes, independently of
// the stored hashes.
func treeOf(leaves []tlog.Hash) tlog.Hash {
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	for i, h := range leaves {
		hs, _ := tlog.StoredHashesForRecordHash(int64(i), h, r)
		stored = append(stored, hs...)
	}
	h, _ := tlog.TreeHash(int64(len(leaves)), r)
	return h
}

func TestEraseKeepsProofs(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	l, _ := MustOpen(t, key)
	r, _ := l.AppendReceipt(ctx, sampleReceipt(), []byte(`{"to":"alice@example.com"}`))
	l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte(`sent to alice@example.com`))
	_, before, _ := l.Checkpoint(ctx)

	er, err := l.Erase(ctx, []string{r.ID}, "GDPR request 42")
	if err != nil || er == nil {
		t.Fatalf("Erase = %v, %v", er, err)
	}
	s, err := l.EntryByID(ctx, r.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Payloads) != 1 || !s.Payloads[0].Erased() || s.Payloads[0].Data != nil || s.Payloads[0].Salt != nil {
		t.Errorf("payload after erasure = %+v, want a tombstone", s.Payloads)
	}
	// The old tree is a prefix of the new one, and the erased entry still
	// verifies.
	_, after, _ := l.Checkpoint(ctx)
	p, err := l.ProveConsistency(ctx, before.Size, after.Size)
	if err != nil {
		t.Fatal(err)
	}
	if err := tlog.CheckTree(p, after.Size, after.Hash, before.Size, before.Hash); err != nil {
		t.Errorf("consistency after erasure: %v", err)
	}
	e, _ := entry.Parse(s.Data)
	if err := entry.Verify(e, key.Public().(ed25519.PublicKey)); err != nil {
		t.Errorf("erased entry no longer verifies: %v", err)
	}
	if again, err := l.Erase(ctx, []string{r.ID}, "twice"); err != nil || again != nil {
		t.Errorf("erasing again = %v, %v; want nothing to do", again, err)
	}
}

func TestRotate(t *testing.T) {
	ctx := context.Background()
	old, next := newKey(t), newKey(t)
	l, st := MustOpen(t, old)
	l.AppendReceipt(ctx, sampleReceipt(), nil)
	if err := l.Rotate(ctx, next); err != nil {
		t.Fatal(err)
	}
	// An append that took the old key just before the rotation (the
	// committer reads the key before its transaction) is signed with the
	// new one: the old key signed the log's last entry, the rotation, but
	// it is retired.
	var late *entry.Entry
	err := l.inTx(ctx, func(tx *sql.Tx) (err error) {
		late, err = l.appendTx(ctx, tx, old, draft{kind: entry.KindReceipt, prefix: "r", body: sampleReceipt()})
		return err
	})
	if err != nil || late.Key != entry.KeyID(next.Public().(ed25519.PublicKey)) {
		t.Errorf("append with the old key after the rotation: %v, %v; want it signed by the new key", late, err)
	}
	r, _ := l.AppendReceipt(ctx, sampleReceipt(), nil)
	if r.Key != entry.KeyID(next.Public().(ed25519.PublicKey)) {
		t.Errorf("after rotation entries are signed by %s", r.Key)
	}
	keys, _ := l.Keys(ctx)
	if len(keys) != 2 {
		t.Fatalf("keys = %v, want 2", keys)
	}
	// The rotation entry is signed by the old key.
	for s, err := range l.Entries(ctx, keys[1].AddedIdx, keys[1].AddedIdx+1) {
		if err != nil {
			t.Fatal(err)
		}
		if e, _ := entry.Parse(s.Data); e.Key != keys[0].ID {
			t.Errorf("rotation signed by %s, want the old key %s", e.Key, keys[0].ID)
		}
	}
	// Reopening with the new key does not announce it again; the old one
	// is retired and signs nothing more.
	if _, err := Open(ctx, st, next); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, st, old); !errors.Is(err, ErrForeignKey) {
		t.Errorf("reopening with the retired key = %v, want ErrForeignKey", err)
	}
	if keys, _ := l.Keys(ctx); len(keys) != 2 {
		t.Errorf("keys after reopening = %d, want 2", len(keys))
	}
}

// TestRetiredKeySignsNothing: a process that opened the log before another
// rotated its key holds a retired key; it appends, checkpoints and exports
// nothing with it, as all of that would fail verification.
func TestRetiredKeySignsNothing(t *testing.T) {
	ctx := context.Background()
	old, next := newKey(t), newKey(t)
	rotator, st := MustOpen(t, old)
	stale, err := Open(ctx, st, old) // the other process, opened first
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stale.AppendReceipt(ctx, sampleReceipt(), nil); err != nil {
		t.Fatalf("append before the rotation: %v", err)
	}
	if err := rotator.Rotate(ctx, next); err != nil {
		t.Fatal(err)
	}
	if _, err := stale.AppendReceipt(ctx, sampleReceipt(), nil); !errors.Is(err, ErrRetiredKey) {
		t.Errorf("append with the retired key = %v, want ErrRetiredKey", err)
	}
	if _, err := stale.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: 2, Hash: entry.Commit(nil, []byte("p"))}); !errors.Is(err, ErrRetiredKey) {
		t.Errorf("append an event with the retired key = %v, want ErrRetiredKey", err)
	}
	if _, _, err := stale.Checkpoint(ctx); !errors.Is(err, ErrRetiredKey) {
		t.Errorf("checkpoint with the retired key = %v, want ErrRetiredKey", err)
	}
	if _, err := stale.Export(ctx, t.TempDir()+"/bundle", nil); !errors.Is(err, ErrRetiredKey) {
		t.Errorf("export with the retired key = %v, want ErrRetiredKey", err)
	}
	// The rotator signs on with the new key.
	if _, err := rotator.AppendReceipt(ctx, sampleReceipt(), nil); err != nil {
		t.Errorf("append with the new key: %v", err)
	}
	if n, _ := rotator.Size(ctx); n != 4 {
		t.Errorf("log size = %d, want 4 (key, receipt, rotation, receipt)", n)
	}

	// Given a way to load the current key, the stale process signs on
	// with it; a key that is not the log's current one does not serve.
	stale.FollowKeys(func() (ed25519.PrivateKey, error) { return newKey(t), nil })
	if _, err := stale.AppendReceipt(ctx, sampleReceipt(), nil); !errors.Is(err, ErrRetiredKey) {
		t.Errorf("append, loading a key that is not the log's = %v, want ErrRetiredKey", err)
	}
	stale.FollowKeys(func() (ed25519.PrivateKey, error) { return next, nil })
	e, err := stale.AppendReceipt(ctx, sampleReceipt(), nil)
	if err != nil {
		t.Fatalf("append, loading the current key: %v", err)
	}
	if want := entry.KeyID(next.Public().(ed25519.PublicKey)); e.Key != want || stale.KeyID() != want {
		t.Errorf("the stale process signs with %s (entry %s), want the current key %s", stale.KeyID(), e.Key, want)
	}
	if _, _, err := stale.Checkpoint(ctx); err != nil {
		t.Errorf("checkpoint after loading the current key: %v", err)
	}
}

// A log opens only with its current key: a key the keychain made after it
// lost the log's (or a retired one) is refused, and Adopt adds it knowingly,
// as a break in custody the verifier reports.
func TestOpenRefusesForeignKeys(t *testing.T) {
	ctx := context.Background()
	first, second, lost := newKey(t), newKey(t), newKey(t)
	l, st := MustOpen(t, first)
	if err := l.Rotate(ctx, second); err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]ed25519.PrivateKey{"a new key": lost, "a retired key": first} {
		if _, err := Open(ctx, st, key); !errors.Is(err, ErrForeignKey) {
			t.Errorf("Open with %s = %v, want ErrForeignKey", name, err)
		}
	}
	if _, err := Open(ctx, st, second); err != nil {
		t.Errorf("Open with the current key: %v", err)
	}
	l, err := Adopt(ctx, st, lost)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.a.b", Server: "a", Tool: "b", Decision: "ALLOW"}, []byte(`{}`)); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(ctx, st, lost); err != nil {
		t.Errorf("Open with the adopted key: %v", err)
	}
	keys, err := l.Keys(ctx)
	if err != nil || len(keys) != 3 {
		t.Errorf("keys after adopting = %+v, %v; want 3", keys, err)
	}
}

// An append that fails, alone or in a batch, leaves nothing of itself: the
// appends after it, here or in another process, take its place, and every
// entry's prev is the tree of the entries stored before it (appends keep
// the tree hashes they need in memory; those of an append rolled back must
// not be among them).
func TestFailedAppendLeavesTreeWhole(t *testing.T) {
	ctx := context.Background()
	key := newKey(t)
	l, st := MustOpen(t, key)
	other, err := Open(ctx, st, key) // another process's log
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.AppendReceipt(ctx, sampleReceipt(), []byte(`{"n":1}`))
	if err != nil {
		t.Fatal(err)
	}
	unknown := draft{kind: entry.KindOutcome, prefix: "o", body: entry.Outcome{Receipt: "r-nope", Status: entry.Failed},
		index: columns{status: entry.Failed, receipt: "r-nope"}}
	receipt := draft{kind: entry.KindReceipt, prefix: "r", body: sampleReceipt(), index: columns{server: "files"}}
	for _, batch := range [][]draft{{unknown}, {receipt, unknown, receipt}, {unknown, receipt}, {receipt, unknown}, {receipt}} {
		var jobs []*job
		for _, d := range batch {
			jobs = append(jobs, &job{d: d, urgent: true, done: make(chan struct{})})
		}
		l.commits.commit(jobs)
		for i, j := range jobs {
			if failed := batch[i].kind == entry.KindOutcome; failed != (j.err != nil) || failed != (j.e == nil) {
				t.Fatalf("job %d of %d: %v, %v", i, len(batch), j.e, j.err)
			}
		}
		// The other process appends in the place of the one that failed.
		if _, err := other.AppendReceipt(ctx, sampleReceipt(), nil); err != nil {
			t.Fatal(err)
		}
	}
	for range 8 {
		if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := verifyLog(t, l); n != 2+2+1+1+1+5+8 {
		t.Errorf("size %d, want 20", n)
	}
}

// A write given with a receipt is committed with it, or neither is.
func TestAppendReceiptWith(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	if _, err := st.DB().ExecContext(ctx, `CREATE TABLE notes (n TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	note := func(text string) TxWrite {
		return func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO notes (n) VALUES (?)`, text)
			return err
		}
	}
	r, err := l.AppendReceiptWith(ctx, sampleReceipt(), nil, note("with the receipt"))
	if err != nil {
		t.Fatal(err)
	}
	failing := errors.New("the note could not be written")
	_, err = l.AppendReceiptWith(ctx, sampleReceipt(), nil, func(ctx context.Context, tx *sql.Tx) error {
		note("rolled back")(ctx, tx)
		return failing
	})
	if !errors.Is(err, failing) {
		t.Errorf("AppendReceiptWith with a failing write = %v, want its error", err)
	}
	var notes []string
	rows, err := st.DB().QueryContext(ctx, `SELECT n FROM notes`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var n string
		rows.Scan(&n)
		notes = append(notes, n)
	}
	rows.Close()
	if n, _ := l.Size(ctx); n != r.Index+1 || len(notes) != 1 || notes[0] != "with the receipt" {
		t.Errorf("after a receipt with a note and one whose note failed: log size %d, notes %q; want %d and only the first note", n, notes, r.Index+1)
	}
}

// An outcome for an unknown receipt that shares its transaction with other
// outcomes fails alone: the others are committed.
func TestOutcomeFailsAlone(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	var rs []*entry.Entry
	for range 5 {
		r, err := l.AppendReceipt(ctx, sampleReceipt(), nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = append(rs, r)
	}
	// Outcomes wait up to outcomeDelay for company: these six share one
	// transaction.
	errs := make([]error, len(rs)+1)
	var wg sync.WaitGroup
	for i := range errs {
		receipt := "r-nope"
		if i < len(rs) {
			receipt = rs[i].ID
		}
		wg.Go(func() {
			_, errs[i] = l.AppendOutcome(ctx, entry.Outcome{Receipt: receipt, Status: entry.Succeeded}, []byte(`{}`))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if i < len(rs) && err != nil {
			t.Errorf("outcome %d: %v", i, err)
		}
		if i == len(rs) && !errors.Is(err, ErrNotFound) {
			t.Errorf("outcome for an unknown receipt = %v, want ErrNotFound", err)
		}
	}
	for _, r := range rs {
		if _, err := l.OutcomeOf(ctx, r.ID); err != nil {
			t.Errorf("outcome of %s: %v", r.ID, err)
		}
	}
	verifyLog(t, l)
}
