package receipts

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// legacyLog writes n calls into a new home folder as the previous version
// of the log did (schema step 3: an index without prefixes), each with a
// path holding "harbor<i>" and call i with the memo memos[i], and returns
// the store and the receipts' ids, newest first. Entry 0 announces the key;
// call i's receipt is entry 1+2i.
func legacyLog(t *testing.T, n int, memos map[int]string) (*store.Store, []string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	old, err := open(ctx, st, exampleKey(), false, migrations[:3])
	if err != nil {
		t.Fatal(err)
	}
	var receipts []string
	for i := range n {
		r, _ := call(t, old, "files", "read_file", entry.Allow, "cursor",
			fmt.Sprintf(`{"path":"/srv/harbor%d/notes.txt","memo":%q}`, i, memos[i]), entry.Succeeded, `"ok"`)
		receipts = append(receipts, r.ID)
	}
	slices.Reverse(receipts)
	return st, receipts
}

// allPages runs q page by page (small pages, so that pages straddle the
// indexes during an upgrade) and returns every id found, in order.
func allPages(t *testing.T, l *Log, q Query) []string {
	t.Helper()
	q.Limit = 7
	var out []string
	for {
		p := mustSearch(t, l, q)
		out = append(out, ids(p)...)
		if p.Next == 0 {
			return out
		}
		q.Before = p.Next
	}
}

func schemaHas(t *testing.T, st *store.Store, pattern string) bool {
	t.Helper()
	var n int
	if err := st.DB().QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name LIKE ?`, pattern).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n > 0
}

// A log written before the prefix index keeps answering every search, the
// same way, while its entries move into the new index a transaction at a
// time, with appends and erasures going on; once they have moved, the old
// index is gone from the database, erased words with it.
func TestIndexUpgrade(t *testing.T) {
	ctx := context.Background()
	const n = 120
	// Words to erase (no other word shares their first letters, so they
	// are written out whole in the index's pages): call 10 stays in the
	// retired index only until the end, call 100 is in both when erased.
	memos := map[int]string{10: "quokkaretired", 100: "wombatboth"}
	st, receipts := legacyLog(t, n, memos)
	defer func(v int64) { smallUpgrade = v }(smallUpgrade)
	smallUpgrade = 0 // the log counts as large: Open leaves the upgrade to UpgradeIndex

	l, err := Open(ctx, st, exampleKey())
	if err != nil {
		t.Fatal(err)
	}
	size, _ := l.Size(ctx)
	if left, upgrading, err := l.IndexBacklog(ctx); err != nil || !upgrading || left != size {
		t.Fatalf("IndexBacklog after opening = %d, %v, %v; want %d entries to move", left, upgrading, err, size)
	}
	queries := []Query{
		{Text: "harbor7"}, {Text: "harb*"}, {Text: "notes.txt", Kind: "receipt"},
		{Text: "/srv/harbor1*"}, {Text: "read_file", Decision: entry.Allow}, {Text: "ok", Status: entry.Succeeded},
	}
	results := func() [][]string {
		var out [][]string
		for _, q := range queries {
			out = append(out, allPages(t, l, q))
		}
		return out
	}
	before := results()
	if got := before[1]; !slices.Equal(got, receipts) {
		t.Fatalf("harb* before the upgrade: %d hits, want the %d receipts", len(got), len(receipts))
	}

	// Part of the way, then interrupted.
	stop, cancel := context.WithCancel(ctx)
	err = l.UpgradeIndex(stop, func(left int64) {
		if left < size/2 {
			cancel()
		}
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted UpgradeIndex = %v", err)
	}
	mid, _ := readIndexState(ctx, st.DB())
	if mid.from <= 0 || mid.from >= size/2 || mid.retiredTo != size {
		t.Fatalf("state after the interruption: %+v", mid)
	}
	if got := results(); !slices.EqualFunc(got, before, slices.Equal) {
		t.Errorf("mid-upgrade results differ from before:\n got %v\nwant %v", got, before)
	}

	// Appends and erasures while it is under way: an entry only in the
	// retired index, one in both, one appended since.
	newR, _ := call(t, l, "files", "read_file", entry.Allow, "cursor", `{"path":"/srv/harbor-new/notes.txt","memo":"jackalnew"}`, entry.Succeeded, `"ok"`)
	if got := allPages(t, l, Query{Text: "harb*"}); len(got) != n+1 || got[0] != newR.ID {
		t.Errorf("harb* after an append mid-upgrade: %d hits, want %d, the new one first", len(got), n+1)
	}
	erased := []string{receipts[n-1-10], receipts[n-1-100], newR.ID}
	if idx := []int64{1 + 2*10, 1 + 2*100}; idx[0] >= mid.from || idx[1] < mid.from {
		t.Fatalf("calls 10 and 100 (entries %v) do not straddle the moved entries (from %d): pick others", idx, mid.from)
	}
	words := []string{"quokkaretired", "wombatboth", "jackalnew"}
	for i, w := range words {
		if got := ids(mustSearch(t, l, Query{Text: w})); !slices.Equal(got, erased[i:i+1]) {
			t.Fatalf("Search(%s) before erasure = %v", w, got)
		}
	}
	if _, err := l.Erase(ctx, erased, "request 9"); err != nil {
		t.Fatal(err)
	}
	for _, w := range words {
		if got := ids(mustSearch(t, l, Query{Text: w})); len(got) != 0 {
			t.Errorf("Search(%s) after erasure = %v", w, got)
		}
	}

	// Two processes finish it at once.
	var wg sync.WaitGroup
	errs := make([]error, 2)
	progress := make([][]int64, 2)
	var others []*store.Store
	for i := range 2 {
		other, err := store.Open(ctx, st.Dir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, other)
		ol, err := Open(ctx, other, exampleKey())
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = ol.UpgradeIndex(ctx, func(left int64) { progress[i] = append(progress[i], left) })
		}()
	}
	wg.Wait()
	for _, o := range others {
		o.Close()
	}
	for i := range 2 {
		if errs[i] != nil {
			t.Fatalf("UpgradeIndex: %v", errs[i])
		}
		if !slices.IsSortedFunc(progress[i], func(a, b int64) int { return int(b - a) }) || progress[i][len(progress[i])-1] != 0 {
			t.Errorf("progress reported %v: want entries left, falling to 0", progress[i])
		}
	}

	if left, upgrading, err := l.IndexBacklog(ctx); err != nil || upgrading || left != 0 {
		t.Errorf("IndexBacklog after the upgrade = %d, %v, %v", left, upgrading, err)
	}
	if schemaHas(t, st, "search_retired%") {
		t.Errorf("the retired index is still in the database")
	}
	var sql string
	st.DB().QueryRow(`SELECT sql FROM sqlite_schema WHERE name = 'search_fts'`).Scan(&sql)
	if !strings.Contains(sql, "prefix = '3 4'") {
		t.Errorf("search_fts is %s; want prefix indexes", sql)
	}
	if _, err := st.DB().Exec(`INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		t.Errorf("FTS integrity-check after the upgrade: %v", err)
	}
	var indexed, entries int64
	st.DB().QueryRow(`SELECT count(*) FROM search_fts_docsize`).Scan(&indexed)
	st.DB().QueryRow(`SELECT count(*) FROM entries`).Scan(&entries)
	if indexed != entries {
		t.Errorf("%d rows indexed for %d entries: each once", indexed, entries)
	}

	// The same answers as before, less what was erased, plus what was
	// added.
	want := slices.DeleteFunc(append([]string{newR.ID}, receipts...), func(id string) bool { return slices.Contains(erased, id) })
	if got := allPages(t, l, Query{Text: "harb*"}); !slices.Equal(got, want) {
		t.Errorf("harb* after the upgrade: %d hits, want %d", len(got), len(want))
	}
	if got, want := allPages(t, l, Query{Text: "harbor7"}), before[0]; !slices.Equal(got, want) {
		t.Errorf("harbor7 after the upgrade: %v, want %v", got, want)
	}
	if err := st.Close(); err != nil { // checkpoints the write-ahead log
		t.Fatal(err)
	}
	for _, w := range words {
		if dbContains(t, st, w) {
			t.Errorf("the database still holds %q after its erasure", w)
		}
	}
}

// A small log's index is upgraded when the new version first opens it.
func TestIndexUpgradeSmallLogOnOpen(t *testing.T) {
	ctx := context.Background()
	st, receipts := legacyLog(t, 20, nil)
	l, err := Open(ctx, st, exampleKey())
	if err != nil {
		t.Fatal(err)
	}
	if left, upgrading, err := l.IndexBacklog(ctx); err != nil || upgrading || left != 0 {
		t.Errorf("IndexBacklog = %d, %v, %v; want the upgrade done", left, upgrading, err)
	}
	if schemaHas(t, st, "search_retired%") {
		t.Errorf("the retired index is still in the database")
	}
	if got := allPages(t, l, Query{Text: "harb*"}); !slices.Equal(got, receipts) {
		t.Errorf("harb* = %d hits, want the %d receipts", len(got), len(receipts))
	}
}
