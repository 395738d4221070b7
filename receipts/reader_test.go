package receipts

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// A Reader needs no key and writes nothing: opened on a new home it finds an
// empty log and leaves the database without a log id or an entry; opened
// before a writer, it reads what the writer appends after.
func TestReaderNeedsNoKeyAndWritesNothing(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := OpenReader(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := r.Size(ctx); err != nil || n != 0 || r.ID() != "" {
		t.Fatalf("a new log: size %d, id %q, %v", n, r.ID(), err)
	}
	if p, err := r.Search(ctx, Query{Text: "anything"}); err != nil || len(p.Hits) != 0 {
		t.Fatalf("Search on a new log = %v, %v", p.Hits, err)
	}
	if tree, err := r.Tree(ctx); err != nil || tree.Size != 0 {
		t.Fatalf("Tree on a new log = %+v, %v", tree, err)
	}
	var rows int
	if err := st.DB().QueryRowContext(ctx, `SELECT (SELECT count(*) FROM log_meta) + (SELECT count(*) FROM entries) + (SELECT count(*) FROM keys)`).Scan(&rows); err != nil || rows != 0 {
		t.Fatalf("after reading: %d rows in log_meta, entries and keys (%v), want none", rows, err)
	}

	l, err := Open(ctx, st, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	rec, err := l.AppendReceipt(ctx, sampleReceipt(), []byte(`{"path":"/tmp/notes.txt"}`))
	if err != nil {
		t.Fatal(err)
	}
	if s, err := r.EntryByID(ctx, rec.ID); err != nil || s.Index != rec.Index {
		t.Fatalf("the reader reads the writer's receipt: %+v, %v", s, err)
	}
	_, cp, err := l.Checkpoint(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tree, err := r.Tree(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if tree != cp {
		t.Errorf("reader's Tree = %+v, writer's checkpoint = %+v", tree, cp)
	}
}

// The Reader's methods are reads: none appends, erases, rotates or upgrades.
func TestReaderHasNoWrites(t *testing.T) {
	rt := reflect.TypeFor[*Reader]()
	for i := range rt.NumMethod() {
		name := rt.Method(i).Name
		for _, w := range []string{"Append", "Erase", "Rotate", "Upgrade", "Adopt"} {
			if strings.HasPrefix(name, w) && name != "Erasable" {
				t.Errorf("Reader has the method %s, which writes", name)
			}
		}
	}
}
