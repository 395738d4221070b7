package verify

import (
	"slices"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// TestFrontier: the tree a complete bundle is rebuilt into is tlog's, at
// every size.
func TestFrontier(t *testing.T) {
	var stored []tlog.Hash
	r := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	var f frontier
	for n := int64(0); n <= 300; n++ {
		want, err := tlog.TreeHash(n, r)
		if err != nil {
			t.Fatal(err)
		}
		if got := f.root(); got != want {
			t.Fatalf("frontier root at size %d = %v, want %v", n, got, want)
		}
		leaf := entry.LeafHash([]byte{byte(n), byte(n >> 8)})
		hs, err := tlog.StoredHashesForRecordHash(n, leaf, r)
		if err != nil {
			t.Fatal(err)
		}
		stored = append(stored, hs...)
		f.push(leaf)
	}
	// 301 = 256 + 32 + 8 + 4 + 1: five perfect subtrees.
	if len(f.roots) != 5 {
		t.Errorf("frontier of 301 leaves keeps %d roots, want 5", len(f.roots))
	}
}

func TestIndexes(t *testing.T) {
	for _, tt := range []struct {
		idx  []int64
		text string
	}{
		{nil, ""},
		{[]int64{0}, "0"},
		{[]int64{0, 1, 2, 5, 9, 10, 11}, "0-2,5,9-11"},
		{[]int64{3, 5, 7}, "3,5,7"},
	} {
		if got := FormatIndexes(tt.idx); got != tt.text {
			t.Errorf("FormatIndexes(%v) = %q, want %q", tt.idx, got, tt.text)
		}
		runs, err := parseIndexes(tt.text)
		if err != nil {
			t.Fatalf("parseIndexes(%q) = %v", tt.text, err)
		}
		var back []int64
		for _, r := range runs {
			for i := r[0]; i <= r[1]; i++ {
				back = append(back, i)
			}
		}
		if !slices.Equal(back, tt.idx) || runs.count() != int64(len(tt.idx)) {
			t.Errorf("parseIndexes(%q) = %v, want %v", tt.text, back, tt.idx)
		}
	}
	// Only what FormatIndexes writes.
	for _, bad := range []string{"1-1", "2-1", "1,1", "3,2", "0-2,2", "0-2,3", "01", "-1", "1,", ",1", "a", "1-", " 1"} {
		if _, err := parseIndexes(bad); err == nil {
			t.Errorf("parseIndexes(%q) succeeded, want an error", bad)
		}
	}
}
