package receipts

import (
	"context"
	"fmt"
	"os/exec"
	"testing"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// noIndexer stops l's background indexer, so that what the index lacks
// stays lacking until a test indexes it.
func noIndexer(l *Log) {
	l.index.mu.Lock()
	l.index.off = true
	l.index.mu.Unlock()
}

// A receipt does not wait for the search index: a search says how many
// entries it has yet to take in, and finds them once it has.
func TestSearchSaysHowFarBehindTheIndexIs(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	noIndexer(l)
	for i := range 5 {
		call(t, l, "files", "read_file", entry.Allow, "cursor", fmt.Sprintf(`{"path":"/srv/laggard%d.txt"}`, i), entry.Succeeded, `"ok"`)
	}
	r, err := OpenReader(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	p := mustSearch(t, r, Query{Text: "laggard3"})
	if len(p.Hits) != 0 || p.Unindexed != 10 {
		t.Fatalf("Search(laggard3) before indexing = %d hits, %d unindexed; want 0, 10", len(p.Hits), p.Unindexed)
	}
	if p := mustSearch(t, r, Query{Server: "files"}); len(p.Hits) != 10 || p.Unindexed != 0 {
		t.Errorf("Search(--server files) = %d hits, %d unindexed; want 10 (filters need no index), 0 (not asked)", len(p.Hits), p.Unindexed)
	}
	if n, err := l.CatchUpIndex(ctx); err != nil || n != 10 {
		t.Fatalf("CatchUpIndex = %d, %v; want 10", n, err)
	}
	p = mustSearch(t, r, Query{Text: "laggard3"})
	if len(p.Hits) != 1 || p.Unindexed != 0 {
		t.Errorf("Search(laggard3) after indexing = %d hits, %d unindexed; want 1, 0", len(p.Hits), p.Unindexed)
	}
	if n, err := l.CatchUpIndex(ctx); err != nil || n != 0 {
		t.Errorf("CatchUpIndex again = %d, %v; want 0", n, err)
	}
}

// What a process appended and did not index before it died is indexed by
// the next process that opens the log.
func TestOpenIndexesWhatADeadProcessLeft(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	l, st := openShared(t, home, seed)
	noIndexer(l)
	for i := range 20 {
		call(t, l, "files", "read_file", entry.Allow, "cursor", fmt.Sprintf(`{"path":"/srv/orphan%d.txt"}`, i), entry.Succeeded, `"ok"`)
	}
	if n, _ := l.IndexLag(ctx); n != 40 {
		t.Fatalf("IndexLag = %d, want 40", n)
	}
	st.Close()
	l2, st2 := openShared(t, home, seed)
	if n, err := l2.IndexLag(ctx); err != nil || n != 0 {
		t.Errorf("IndexLag after Open = %d, %v; want 0", n, err)
	}
	r, err := OpenReader(ctx, st2)
	if err != nil {
		t.Fatal(err)
	}
	if p := mustSearch(t, r, Query{Text: "orphan17"}); len(p.Hits) != 1 {
		t.Errorf("Search(orphan17) = %d hits, want 1", len(p.Hits))
	}
	verifyLog(t, l2)
}

// An entry erased before the indexer reached it is indexed as erased: its
// words never enter the index, and the late indexer does not bring them
// back.
func TestEraseBeforeIndexing(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	noIndexer(l)
	const secret = "zanzibarsecret"
	r, _ := call(t, l, "mail", "send_email", entry.Allow, "cursor", `{"to":"`+secret+`@example.com"}`, entry.Succeeded, `"sent"`)
	call(t, l, "mail", "send_email", entry.Allow, "cursor", `{"to":"kept@example.com"}`, entry.Succeeded, `"sent"`)
	if _, err := l.Erase(ctx, []string{r.ID}, "test"); err != nil {
		t.Fatal(err)
	}
	if _, err := l.CatchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	if p := mustSearch(t, l, Query{Text: secret}); len(p.Hits) != 0 {
		t.Errorf("Search(%s) after erasure and indexing = %v, want nothing", secret, ids(p))
	}
	if p := mustSearch(t, l, Query{Text: "kept"}); len(p.Hits) != 1 {
		t.Errorf("Search(kept) = %v, want the other receipt", ids(p))
	}
	verifyLog(t, l)
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if dbContains(t, st, secret) {
		t.Errorf("the database still holds %q", secret)
	}
}

// Indexers in several processes at once take in every entry exactly once:
// each transaction starts where the last, of whichever process, ended.
func TestConcurrentIndexers(t *testing.T) {
	const indexers, calls = 4, 600
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	noIndexer(l)
	for i := range calls {
		call(t, l, "files", "read_file", entry.Allow, "cursor", fmt.Sprintf(`{"path":"/srv/many%d.txt"}`, i), entry.Succeeded, `"ok"`)
	}
	cmds := make([]*exec.Cmd, indexers)
	for i := range cmds {
		cmds[i] = startRole(t, "indexer", home, seed, fmt.Sprint(i), 0)
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("indexer %d: %v", i, err)
		}
	}
	if n, err := l.IndexLag(context.Background()); err != nil || n != 0 {
		t.Errorf("IndexLag = %d, %v; want 0", n, err)
	}
	verifyLog(t, l) // the index holds each entry once, below its cursor
	if p := mustSearch(t, l, Query{Text: "many599"}); len(p.Hits) != 1 {
		t.Errorf("Search(many599) = %d hits, want 1", len(p.Hits))
	}
}
