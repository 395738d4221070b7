package verify

import (
	"crypto/ed25519"
	"os/exec"
	"slices"
	"strings"
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

// TestDependencies keeps the verifier self-contained: the standard library,
// the wire format, tlog and note, and the canonicalizer. No database, no
// MCP, nothing an auditor would have to trust besides these.
func TestDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	allowed := []string{
		"github.com/gatehouse-dev/gatehouse/receipts/verify",
		"github.com/gatehouse-dev/gatehouse/receipts/entry",
		"golang.org/x/mod/sumdb/tlog",
		"golang.org/x/mod/sumdb/note",
		"github.com/gowebpki/jcs",
	}
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		std := !strings.Contains(first, ".")
		if !std && !slices.Contains(allowed, dep) {
			t.Errorf("the verifier depends on %s", dep)
		}
	}
}

// FuzzCheckSignature: the verifier's signature check, over the stored
// bytes, agrees with entry.Verify, which encodes the entry again, for any
// entry Parse accepts, changed or not.
func FuzzCheckSignature(f *testing.F) {
	f.Add([]byte(`{"reason":"x","sig":"AAAA"}`), "log", uint16(0), byte(0))
	f.Add([]byte(`{"a":{"sig":"b"},"z":",\"sig\":\""}`), "l", uint16(40), byte(1))
	f.Add([]byte(`{}`), "l", uint16(200), byte(4))
	key := ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))
	pub := key.Public().(ed25519.PublicKey)
	f.Fuzz(func(t *testing.T, body []byte, log string, at uint16, flip byte) {
		e := &entry.Entry{Log: log, Index: 1, ID: "e-1", Kind: entry.KindPolicy, Time: "2025-06-30T12:00:00Z",
			Prev: entry.FormatTreeHash(entry.EmptyTreeHash), Body: body}
		raw, err := entry.Sign(e, key)
		if err != nil {
			return
		}
		if flip != 0 {
			raw[int(at)%len(raw)] ^= flip
		}
		parsed, err := entry.Parse(raw)
		if err != nil {
			return
		}
		want, got := entry.Verify(parsed, pub), checkSignature(raw, parsed, pub)
		if (want == nil) != (got == nil) {
			t.Fatalf("entry.Verify = %v, checkSignature = %v, for %s", want, got, raw)
		}
		if flip == 0 && got != nil {
			t.Fatalf("a signed entry fails: %v", got)
		}
	})
}
