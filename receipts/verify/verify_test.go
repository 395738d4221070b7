package verify_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// These tests verify bundles exported from real logs (receipts.Open on a
// home folder's database, with generated keys), and then the same bundles
// tampered with as an attacker would.

func newKey(tb testing.TB) ed25519.PrivateKey {
	tb.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	return k
}

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

// withLogID is a home folder's database that gives the log a chosen id, as
// someone forging a log in place of another would.
type withLogID struct {
	*store.Store
	id string
}

func (m withLogID) Migrate(ctx context.Context, component string, steps []string) error {
	if err := m.Store.Migrate(ctx, component, steps); err != nil || component != "receipts" || m.id == "" {
		return err
	}
	_, err := m.DB().ExecContext(ctx, `INSERT OR IGNORE INTO log_meta (key, value) VALUES ('id', ?)`, m.id)
	return err
}

// newLog opens a log in a fresh home folder under dir, with log id id
// (random when empty).
func newLog(tb testing.TB, dir, id string, key ed25519.PrivateKey) (*receipts.Log, *store.Store) {
	tb.Helper()
	st, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	l, err := receipts.Open(context.Background(), withLogID{st, id}, key)
	if err != nil {
		tb.Fatal(err)
	}
	return l, st
}

func receipt(server, tool, decision string) entry.Receipt {
	return entry.Receipt{Capability: entry.Capability(server, tool), Server: server, Tool: tool, Decision: decision,
		Rule: "default", Client: entry.Client{Name: "claude-code", Version: "2.1"}}
}

// The fixture log, built once: two keys, calls to two servers, every kind of
// entry, and an erasure.
//
//	0 key added (key1)          7 pin files/read_file
//	1 receipt files ALLOW       8 erasure of 1's args and 2's result
//	2 outcome SUCCEEDED for 1   9 key rotated to key2 (signed by key1)
//	3 receipt mail DENY        10 receipt files ALLOW (key2)
//	4 policy v1                11 outcome SUCCEEDED for 10
//	5 receipt files ALLOW      12 receipt mail APPROVAL_REQUIRED
//	6 outcome FAILED for 5
type logFixture struct {
	key1, key2 ed25519.PrivateKey
	log        *receipts.Log
	ids        []string // by index
	// Bundles: the whole log; the calls to files (partial); the DENY calls
	// (partial); the whole log without payloads; the calls to files with a
	// proof from the checkpoint of the first 7 entries.
	complete, files, deny, bare, since string
	cp                                 []byte // the complete bundle's checkpoint file
}

var (
	fixtureOnce sync.Once
	theFixture  *logFixture
	fixtureDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	os.Exit(code)
}

func fixture(t testing.TB) *logFixture {
	t.Helper()
	fixtureOnce.Do(func() {
		dir, err := os.MkdirTemp("", "gatehouse-verify-test-")
		if err != nil {
			panic(err)
		}
		fixtureDir = dir
		theFixture = buildFixture(dir)
	})
	if theFixture == nil {
		t.Fatal("building the fixture log failed")
	}
	return theFixture
}

func buildFixture(dir string) *logFixture {
	ctx := context.Background()
	must := func(e *entry.Entry, err error) *entry.Entry {
		if err != nil {
			panic(err)
		}
		return e
	}
	_, k1, _ := ed25519.GenerateKey(rand.Reader)
	_, k2, _ := ed25519.GenerateKey(rand.Reader)
	st, err := store.Open(ctx, filepath.Join(dir, "home"), nil)
	if err != nil {
		panic(err)
	}
	l, err := receipts.Open(ctx, st, k1)
	if err != nil {
		panic(err)
	}
	r1 := must(l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{"path":"/home/me/notes.txt"}`)))
	o2 := must(l.AppendOutcome(ctx, entry.Outcome{Receipt: r1.ID, Status: entry.Succeeded, DurationMS: 2.5}, []byte(`{"content":[{"type":"text","text":"Dear Alice"}]}`)))
	must(l.AppendReceipt(ctx, receipt("mail", "send", entry.Deny), []byte(`{"to":"alice@example.com"}`)))
	must(l.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: 1, Hash: entry.Commit(nil, []byte("policy"))}))
	r5 := must(l.AppendReceipt(ctx, receipt("files", "write_file", entry.Allow), []byte(`{"path":"/tmp/x","content":"draft"}`)))
	must(l.AppendOutcome(ctx, entry.Outcome{Receipt: r5.ID, Status: entry.Failed, ErrorCode: -32603, DurationMS: 0.5}, nil))
	early := filepath.Join(dir, "early")
	if _, err := l.Export(ctx, early, nil); err != nil {
		panic(err)
	}
	earlyCP, _ := os.ReadFile(filepath.Join(early, verify.FileCheckpoint))
	must(l.AppendEvent(ctx, entry.KindPin, entry.PinEvent{Server: "files", Tool: "read_file", NewHash: entry.Commit(nil, []byte("tool"))}))
	must(l.Erase(ctx, []string{r1.ID, o2.ID}, "GDPR request 42"))
	if err := l.Rotate(ctx, k2); err != nil {
		panic(err)
	}
	r10 := must(l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{"path":"/home/me/todo.txt"}`)))
	must(l.AppendOutcome(ctx, entry.Outcome{Receipt: r10.ID, Status: entry.Succeeded, DurationMS: 1}, []byte(`{"content":[]}`)))
	must(l.AppendReceipt(ctx, receipt("mail", "send", entry.ApprovalRequired), []byte(`{"to":"bob@example.com"}`)))

	f := &logFixture{key1: k1, key2: k2, log: l}
	n, _ := l.Size(ctx)
	for s, err := range l.Entries(ctx, 0, n) {
		if err != nil {
			panic(err)
		}
		e, _ := entry.Parse(s.Data)
		f.ids = append(f.ids, e.ID)
	}
	export := func(name string, opts *receipts.ExportOptions) string {
		out := filepath.Join(dir, name)
		if _, err := l.Export(ctx, out, opts); err != nil {
			panic(err)
		}
		return out
	}
	f.complete = export("complete", nil)
	f.files = export("files", &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"files"}}})
	f.deny = export("deny", &receipts.ExportOptions{Filter: receipts.ExportFilter{Decisions: []string{entry.Deny}}})
	f.bare = export("bare", &receipts.ExportOptions{NoPayloads: true})
	f.since = export("since", &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"files"}}, Since: earlyCP})
	f.cp, _ = os.ReadFile(filepath.Join(f.complete, verify.FileCheckpoint))
	return f
}

// load reads a bundle folder into memory, to be tampered with.
func load(t testing.TB, dir string) fstest.MapFS {
	t.Helper()
	m := fstest.MapFS{}
	des, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[de.Name()] = &fstest.MapFile{Data: data, Mode: 0o600}
	}
	return m
}

func run(t testing.TB, fsys fs.FS, opts *verify.Options) *verify.Report {
	t.Helper()
	r, err := verify.Bundle(context.Background(), fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func text(r *verify.Report) string {
	var b strings.Builder
	r.WriteText(&b)
	return b.String()
}

// failure is a failure a test expects: a check, the entry it names (-1 for
// none in particular) and words of its message.
type failure struct {
	check string
	index int64
	words string
}

// wantFailures checks that r fails, and fails each of want as described.
func wantFailures(t *testing.T, r *verify.Report, want ...failure) {
	t.Helper()
	if r.OK() {
		t.Fatalf("the tampered bundle verifies:\n%s", text(r))
	}
	for _, w := range want {
		c := r.Check(w.check)
		if c == nil || c.Status != verify.Failed {
			t.Errorf("check %q did not fail:\n%s", w.check, text(r))
			continue
		}
		found := slices.ContainsFunc(c.Problems, func(p verify.Problem) bool {
			return (w.index < 0 || p.Index == w.index) && strings.Contains(p.String(), w.words)
		})
		if !found {
			t.Errorf("check %q fails, but names no %q about entry %d:\n%s", w.check, w.words, w.index, text(r))
		}
	}
}

func wantOK(t *testing.T, r *verify.Report) {
	t.Helper()
	if !r.OK() {
		t.Fatalf("the bundle does not verify:\n%s", text(r))
	}
}

// lines of a JSON Lines file, without their newlines.
func lines(m fstest.MapFS, name string) [][]byte {
	return bytes.SplitAfter(bytes.TrimSuffix(m[name].Data, []byte("\n")), []byte("\n"))
}

func setLines(m fstest.MapFS, name string, ls [][]byte) {
	var b []byte
	for _, l := range ls {
		b = append(b, bytes.TrimSuffix(l, []byte("\n"))...)
		b = append(b, '\n')
	}
	m[name].Data = b
}

// lineOf returns the line of entries.jsonl (from 0) that holds entry index.
func lineOf(t testing.TB, m fstest.MapFS, index int64) int {
	t.Helper()
	for i, l := range lines(m, verify.FileEntries) {
		var e struct{ Index int64 }
		json.Unmarshal(l, &e)
		if e.Index == index {
			return i
		}
	}
	t.Fatalf("entry %d is not in the bundle", index)
	return -1
}

// editLine changes line i of a file.
func editLine(m fstest.MapFS, name string, i int, f func([]byte) []byte) {
	ls := lines(m, name)
	ls[i] = f(bytes.TrimSuffix(ls[i], []byte("\n")))
	setLines(m, name, ls)
}

// replace replaces the one occurrence of old in s.
func replace(t testing.TB, s []byte, old, new string) []byte {
	t.Helper()
	if n := bytes.Count(s, []byte(old)); n != 1 {
		t.Fatalf("%q occurs %d times in %s", old, n, s)
	}
	return bytes.Replace(s, []byte(old), []byte(new), 1)
}

// flipAfter changes the sixth character after the first occurrence of
// prefix in s, keeping base64 valid base64.
func flipAfter(t testing.TB, s []byte, prefix string) []byte {
	t.Helper()
	i := bytes.Index(s, []byte(prefix))
	if i < 0 {
		t.Fatalf("no %s in %s", prefix, s)
	}
	out := bytes.Clone(s)
	out[i+len(prefix)+5] = flipChar(out[i+len(prefix)+5])
	return out
}

func flipChar(c byte) byte {
	if c == 'A' {
		return 'B'
	}
	return 'A'
}

// flip changes the sixth character of a base64 string.
func flip(s string) string {
	b := []byte(s)
	b[5] = flipChar(b[5])
	return string(b)
}

func TestBundlesVerify(t *testing.T) {
	f := fixture(t)
	for _, tt := range []struct {
		name     string
		dir      string
		complete bool
		entries  int64
	}{
		{"complete", f.complete, true, 13},
		{"files", f.files, false, 10}, // 1, 2, 5, 6, 7 (pin), 10, 11 and keys 0, 9, erasure 8
		{"deny", f.deny, false, 3},    // 3 and keys 0, 9
		{"no payloads", f.bare, true, 13},
	} {
		t.Run(tt.name, func(t *testing.T) {
			fsys, err := verify.Open(tt.dir)
			if err != nil {
				t.Fatal(err)
			}
			r := run(t, fsys, nil)
			wantOK(t, r)
			if r.Entries != tt.entries || r.Complete != tt.complete || r.Size != 13 {
				t.Errorf("report: %d entries, complete %v, checkpoint %d; want %d, %v, 13", r.Entries, r.Complete, r.Size, tt.entries, tt.complete)
			}
			if r.FirstKey != entry.KeyID(pub(f.key1)) || r.SignedBy != entry.KeyID(pub(f.key2)) {
				t.Errorf("first key %s, signed by %s; want %s, %s", r.FirstKey, r.SignedBy, entry.KeyID(pub(f.key1)), entry.KeyID(pub(f.key2)))
			}
			if c := r.Check(verify.CheckConsistency); c.Status != verify.Skipped {
				t.Errorf("consistency without an earlier checkpoint = %s, want skipped", c.Status)
			}
		})
	}
}

// TestErasureIsReported: erased payloads pass, as erasures: the tombstones
// are covered by the erasure entry, and the report says what was erased,
// by which entry and why.
func TestErasureIsReported(t *testing.T) {
	f := fixture(t)
	r := run(t, load(t, f.files), nil)
	wantOK(t, r)
	want := []verify.Erasure{
		{Entry: f.ids[1], Index: 1, Part: "args", ErasedBy: f.ids[8], ErasedIndex: 8, Reason: "GDPR request 42"},
		{Entry: f.ids[2], Index: 2, Part: "result", ErasedBy: f.ids[8], ErasedIndex: 8, Reason: "GDPR request 42"},
	}
	for i := range r.Erasures {
		r.Erasures[i].Time = ""
	}
	if !slices.Equal(r.Erasures, want) {
		t.Errorf("Erasures = %+v, want %+v", r.Erasures, want)
	}
	if c := r.Check(verify.CheckErasures); c.Status != verify.OK || !strings.Contains(c.Detail, "2 payloads erased") {
		t.Errorf("erasures check = %s %q", c.Status, c.Detail)
	}
	if c := r.Check(verify.CheckPayloads); !strings.Contains(c.Detail, "3 match") || !strings.Contains(c.Detail, "2 erased") {
		t.Errorf("payloads check = %q, want 3 checked and 2 erased", c.Detail)
	}
	if out := text(r); !strings.Contains(out, `"GDPR request 42"`) || !strings.Contains(out, "erasure: the args of entry 1") {
		t.Errorf("the text report does not show the erasure:\n%s", out)
	}
	// Without payloads, commitments alone: the payload check is skipped,
	// not failed.
	if c := run(t, load(t, f.bare), nil).Check(verify.CheckPayloads); c.Status != verify.Skipped {
		t.Errorf("payloads of a bundle without them = %s, want skipped", c.Status)
	}
}

func TestPinnedKey(t *testing.T) {
	f := fixture(t)
	fsys := load(t, f.complete)
	for _, tt := range []struct {
		name string
		opts verify.Options
		ok   bool
	}{
		{"first key", verify.Options{PinKeys: []ed25519.PublicKey{pub(f.key1)}}, true},
		{"first key among others", verify.Options{PinKeys: []ed25519.PublicKey{pub(newKey(t)), pub(f.key1)}}, true},
		{"first key id", verify.Options{PinKeyID: entry.KeyID(pub(f.key1))}, true},
		{"a later key", verify.Options{PinKeys: []ed25519.PublicKey{pub(f.key2)}}, false},
		{"another key", verify.Options{PinKeyID: entry.KeyID(pub(newKey(t)))}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, fsys, &tt.opts)
			if !r.Pinned {
				t.Error("report does not say the key was pinned")
			}
			if tt.ok {
				wantOK(t, r)
				return
			}
			wantFailures(t, r, failure{verify.CheckKeyChain, 0, "not the pinned"})
		})
	}
}

// TestTamper changes exported bundles as someone would who wants a record
// to say something else, or to be gone. Each change fails the check that
// concerns it, naming the entry.
func TestTamper(t *testing.T) {
	f := fixture(t)
	// Another export of the same log, to borrow genuine lines from.
	deny := load(t, f.deny)
	forged := func(t *testing.T, index int64) []byte {
		body, _ := json.Marshal(receipt("files", "read_file", entry.Allow))
		e := &entry.Entry{Log: f.log.ID(), Index: index, ID: entry.NewID("r"), Kind: entry.KindReceipt,
			Time: "2025-06-30T12:00:00Z", Prev: entry.FormatTreeHash(entry.EmptyTreeHash), Body: body}
		data, err := entry.Sign(e, newKey(t))
		if err != nil {
			t.Fatal(err)
		}
		return data
	}

	tests := []struct {
		name   string
		bundle string // complete or files
		tamper func(t *testing.T, m fstest.MapFS)
		want   []failure
	}{
		{"change a byte of an entry", "complete", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 3, func(l []byte) []byte { return replace(t, l, `"mail"`, `"mall"`) })
		}, nil},
		{"change the decision of a receipt", "complete", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 3, func(l []byte) []byte { return replace(t, l, `"decision":"DENY"`, `"decision":"ALLOW"`) })
		}, []failure{
			{verify.CheckSignatures, 3, "bad signature"},
			{verify.CheckPrev, 4, "prev is not the tree hash of the 4 entries before it"},
			{verify.CheckInclusion, -1, "the checkpoint says"},
			{verify.CheckManifest, -1, "entries.jsonl: does not match the SHA-256"},
		}},
		{"change a byte of an entry (partial bundle)", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, lineOf(t, m, 5), func(l []byte) []byte { return replace(t, l, `"write_file"`, `"read_file"`) })
		}, []failure{
			{verify.CheckSignatures, 5, "bad signature"},
			{verify.CheckInclusion, 5, "leaf_hash"},
		}},
		{"change a byte of a signature", "complete", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 6, func(l []byte) []byte { return flipAfter(t, l, `"sig":"`) })
		}, []failure{{verify.CheckSignatures, 6, "bad signature"}}},
		{"claim another key signed an entry", "complete", func(t *testing.T, m fstest.MapFS) {
			k1, k2 := entry.KeyID(pub(f.key1)), entry.KeyID(pub(f.key2))
			editLine(m, verify.FileEntries, 5, func(l []byte) []byte { return replace(t, l, `"key":"`+k1, `"key":"`+k2) })
		}, []failure{
			{verify.CheckKeys, 5, "does not announce before this entry"},
			{verify.CheckSignatures, 5, "bad signature"},
		}},
		{"make an entry non-canonical", "complete", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 2, func(l []byte) []byte { return replace(t, l, `"kind":`, `"kind": `) })
		}, []failure{{verify.CheckCanonical, -1, "entries.jsonl:3: not in canonical form"}}},
		{"change a byte of an inclusion proof", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileProofs, lineOf(t, m, 5), func(l []byte) []byte { return flipAfter(t, l, `"inclusion":["`) })
		}, []failure{{verify.CheckInclusion, 5, "audit path does not lead to the checkpoint"}}},
		{"change a byte of a prior-tree proof", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileProofs, lineOf(t, m, 6), func(l []byte) []byte { return flipAfter(t, l, `"prev_consistency":["`) })
		}, []failure{{verify.CheckPrev, 6, "is not a prefix of the checkpoint's"}}},
		{"change a byte of a leaf hash", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileProofs, lineOf(t, m, 2), func(l []byte) []byte { return flipAfter(t, l, `"leaf_hash":"`) })
		}, []failure{{verify.CheckInclusion, 2, "is not the entry's"}}},
		{"change the checkpoint's tree hash", "files", func(t *testing.T, m fstest.MapFS) {
			ls := strings.SplitN(string(m[verify.FileCheckpoint].Data), "\n", 4)
			ls[2] = flip(ls[2])
			m[verify.FileCheckpoint].Data = []byte(strings.Join(ls, "\n"))
		}, []failure{
			{verify.CheckCheckpoint, -1, "not signed by a key the log announces"},
			{verify.CheckInclusion, 1, "audit path does not lead to the checkpoint"},
		}},
		{"change the checkpoint's size", "complete", func(t *testing.T, m fstest.MapFS) {
			m[verify.FileCheckpoint].Data = replace(t, m[verify.FileCheckpoint].Data, "\n13\n", "\n12\n")
		}, []failure{
			{verify.CheckCheckpoint, -1, "not signed by a key the log announces"},
			{verify.CheckOrder, 12, "beyond the checkpoint"},
		}},
		{"change a byte of the checkpoint's signature", "complete", func(t *testing.T, m fstest.MapFS) {
			cp := m[verify.FileCheckpoint].Data
			i := bytes.LastIndexByte(cp[:len(cp)-1], ' ') + 10
			cp = bytes.Clone(cp)
			cp[i] ^= 1
			m[verify.FileCheckpoint].Data = cp
		}, []failure{{verify.CheckCheckpoint, -1, "not signed by a key the log announces"}}},
		{"change a byte of a public key in keys.jwks.json", "complete", func(t *testing.T, m fstest.MapFS) {
			var set verify.JWKS
			json.Unmarshal(m[verify.FileKeys].Data, &set)
			set.Keys[0].X = flip(set.Keys[0].X)
			m[verify.FileKeys].Data, _ = json.Marshal(set)
		}, []failure{{verify.CheckKeyChain, -1, "keys.jwks.json"}}},
		{"change the public key a key entry announces", "complete", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 0, func(l []byte) []byte { return flipAfter(t, l, `"public_key":"`) })
		}, []failure{
			{verify.CheckKeyChain, 0, "its public key's id is"},
			{verify.CheckSignatures, 0, "bad signature"},
		}},
		{"swap in another key", "complete", func(t *testing.T, m fstest.MapFS) {
			other := verify.JWKS{Keys: []verify.JWK{verify.NewJWK(pub(newKey(t))), verify.NewJWK(pub(f.key2))}}
			m[verify.FileKeys].Data, _ = json.Marshal(other)
		}, []failure{
			{verify.CheckKeyChain, 0, "does not list key " + entry.KeyID(pub(f.key1))},
			{verify.CheckKeyChain, -1, "which the log never announces"},
		}},
		{"delete an entry", "complete", func(t *testing.T, m fstest.MapFS) {
			ls := lines(m, verify.FileEntries)
			setLines(m, verify.FileEntries, slices.Delete(ls, 3, 4))
		}, []failure{
			{verify.CheckOrder, -1, "entry 3 listed in the signed manifest but missing"},
			{verify.CheckInclusion, -1, "holds 12 entries of the checkpoint's 13"},
			{verify.CheckManifest, -1, "counts 13 entries; entries.jsonl has 12"},
		}},
		{"delete an entry and its proof", "files", func(t *testing.T, m fstest.MapFS) {
			i := lineOf(t, m, 5)
			setLines(m, verify.FileEntries, slices.Delete(lines(m, verify.FileEntries), i, i+1))
			setLines(m, verify.FileProofs, slices.Delete(lines(m, verify.FileProofs), i, i+1))
		}, []failure{
			{verify.CheckOrder, -1, "entry 5 listed in the signed manifest but missing"},
			{verify.CheckLinkage, 6, "not in the bundle before it"},
			{verify.CheckPayloads, 5, "not in entries.jsonl"},
		}},
		{"duplicate an entry", "complete", func(t *testing.T, m fstest.MapFS) {
			ls := lines(m, verify.FileEntries)
			setLines(m, verify.FileEntries, slices.Insert(ls, 4, ls[3]))
		}, []failure{{verify.CheckOrder, 3, "appears twice"}}},
		{"reorder two entries", "complete", func(t *testing.T, m fstest.MapFS) {
			ls := lines(m, verify.FileEntries)
			ls[3], ls[4] = ls[4], ls[3]
			setLines(m, verify.FileEntries, ls)
		}, []failure{
			{verify.CheckOrder, 3, "out of order: comes after entry 4"},
			{verify.CheckInclusion, -1, "not entries 0 to 12 in order"},
		}},
		{"insert a forged entry", "complete", func(t *testing.T, m fstest.MapFS) {
			setLines(m, verify.FileEntries, append(lines(m, verify.FileEntries), forged(t, 13)))
		}, []failure{
			{verify.CheckKeys, 13, "does not announce"},
			{verify.CheckSignatures, 13, "no public key"},
			{verify.CheckOrder, 13, "beyond the checkpoint"},
			{verify.CheckOrder, 13, "not listed in the signed manifest"},
		}},
		{"insert a genuine entry from another export", "files", func(t *testing.T, m fstest.MapFS) {
			// Entry 3 and its proof, from the export of DENY calls: real,
			// signed, in the same tree; but not what this export held.
			di := lineOf(t, deny, 3)
			i := lineOf(t, m, 5)
			setLines(m, verify.FileEntries, slices.Insert(lines(m, verify.FileEntries), i, lines(deny, verify.FileEntries)[di]))
			setLines(m, verify.FileProofs, slices.Insert(lines(m, verify.FileProofs), i, lines(deny, verify.FileProofs)[di]))
		}, []failure{{verify.CheckOrder, 3, "not listed in the signed manifest: it was added after export"}}},
		{"remove the key entries", "files", func(t *testing.T, m fstest.MapFS) {
			for _, idx := range []int64{9, 0} {
				i := lineOf(t, m, idx)
				setLines(m, verify.FileEntries, slices.Delete(lines(m, verify.FileEntries), i, i+1))
				setLines(m, verify.FileProofs, slices.Delete(lines(m, verify.FileProofs), i, i+1))
			}
		}, []failure{
			{verify.CheckKeyChain, -1, "holds no key entry"},
			{verify.CheckKeys, 1, "does not announce"},
			{verify.CheckCheckpoint, -1, "not signed by a key the log announces"},
		}},
		{"remove the erasure entry", "complete", func(t *testing.T, m fstest.MapFS) {
			setLines(m, verify.FileEntries, slices.Delete(lines(m, verify.FileEntries), 8, 9))
		}, []failure{
			{verify.CheckPayloads, 1, "no erasure entry in the bundle erased them"},
			{verify.CheckOrder, -1, "entry 8 listed in the signed manifest but missing"},
		}},
		{"put data back where a payload was erased", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FilePayloads, 0, func(l []byte) []byte {
				var p verify.PayloadLine
				json.Unmarshal(l, &p)
				s, d := base64.StdEncoding.EncodeToString(make([]byte, 32)), base64.StdEncoding.EncodeToString([]byte(`{"path":"/elsewhere"}`))
				p.ErasedBy, p.Salt, p.Data = "", &s, &d
				out, _ := json.Marshal(p)
				return out
			})
		}, []failure{
			{verify.CheckPayloads, 1, "do not match the commitment"},
			{verify.CheckErasures, 8, "payloads.jsonl still holds them"},
		}},
		{"change a payload", "files", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FilePayloads, 2, func(l []byte) []byte {
				var p verify.PayloadLine
				json.Unmarshal(l, &p)
				d := base64.StdEncoding.EncodeToString([]byte(`{"path":"/tmp/y","content":"draft"}`))
				p.Data = &d
				out, _ := json.Marshal(p)
				return out
			})
		}, []failure{{verify.CheckPayloads, 5, "the arguments do not match the commitment the entry signed"}}},
		{"drop a payload", "complete", func(t *testing.T, m fstest.MapFS) {
			setLines(m, verify.FilePayloads, slices.Delete(lines(m, verify.FilePayloads), 2, 3))
		}, []failure{{verify.CheckPayloads, 3, "neither the args it commits to nor a tombstone"}}},
		{"change the manifest", "complete", func(t *testing.T, m fstest.MapFS) {
			m[verify.FileManifest].Data = replace(t, m[verify.FileManifest].Data, `"exported_at":"2`, `"exported_at":"1`)
		}, []failure{{verify.CheckManifest, -1, "bad signature"}}},
		{"change the report", "complete", func(t *testing.T, m fstest.MapFS) {
			m[verify.FileReport].Data = bytes.Replace(m[verify.FileReport].Data, []byte("DENY"), []byte("ALLOW"), -1)
		}, []failure{{verify.CheckManifest, -1, "report.html: does not match the SHA-256"}}},
		{"change the CSV", "complete", func(t *testing.T, m fstest.MapFS) {
			m[verify.FileCSV].Data = bytes.Replace(m[verify.FileCSV].Data, []byte("DENY"), []byte("ALLOW"), -1)
		}, []failure{{verify.CheckManifest, -1, "entries.csv: does not match the SHA-256"}}},
		{"add a file the manifest does not list", "complete", func(t *testing.T, m fstest.MapFS) {
			m[verify.FileProofs] = &fstest.MapFile{Data: []byte{}}
		}, []failure{{verify.CheckManifest, -1, "proofs.jsonl: not listed in the signed manifest"}}},
		{"remove the keys", "complete", func(t *testing.T, m fstest.MapFS) {
			delete(m, verify.FileKeys)
		}, []failure{
			{verify.CheckKeyChain, -1, "keys.jwks.json: missing"},
			{verify.CheckManifest, -1, "keys.jwks.json: listed in the signed manifest, but missing"},
		}},
		{"cut the last line short", "complete", func(t *testing.T, m fstest.MapFS) {
			d := m[verify.FileEntries].Data
			m[verify.FileEntries].Data = d[:len(d)-1]
		}, []failure{{verify.CheckCanonical, -1, "line 13 does not end in a newline"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := f.complete
			if tt.bundle == "files" {
				dir = f.files
			}
			m := load(t, dir)
			tt.tamper(t, m)
			r := run(t, m, nil)
			want := tt.want
			if want == nil {
				want = []failure{{verify.CheckSignatures, 3, "bad signature"}}
			}
			wantFailures(t, r, want...)
		})
	}
}

// TestLogTamper writes what a log should never hold into a real log, and
// exports it: the verifier reports it.
func TestLogTamper(t *testing.T) {
	ctx := context.Background()
	t.Run("a denied call that ran", func(t *testing.T) {
		l, _ := newLog(t, t.TempDir(), "", newKey(t))
		r, _ := l.AppendReceipt(ctx, receipt("mail", "send", entry.Deny), nil)
		o, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte("sent"))
		if err != nil {
			t.Fatal(err)
		}
		wantFailures(t, exportAndVerify(t, l, nil, nil),
			failure{verify.CheckLinkage, o.Index, "whose decision is DENY: a call ran that was not allowed"})
	})
	t.Run("two outcomes for one call", func(t *testing.T) {
		l, _ := newLog(t, t.TempDir(), "", newKey(t))
		r, _ := l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), nil)
		l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte("a"))
		o, _ := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Failed}, []byte("b"))
		wantFailures(t, exportAndVerify(t, l, nil, nil), failure{verify.CheckLinkage, o.Index, "a second outcome"})
	})
	t.Run("a key added without a rotation", func(t *testing.T) {
		dir := t.TempDir()
		l, st := newLog(t, dir, "", newKey(t))
		l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), nil)
		// A key that the log's key never vouched for: Open refuses it,
		// Adopt adds it, and verification reports the break.
		stranger := newKey(t)
		if _, err := receipts.Open(ctx, st, stranger); !errors.Is(err, receipts.ErrForeignKey) {
			t.Fatalf("Open with a stranger's key = %v, want ErrForeignKey", err)
		}
		l2, err := receipts.Adopt(ctx, st, stranger)
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := l2.Keys(ctx)
		wantFailures(t, exportAndVerify(t, l2, nil, nil),
			failure{verify.CheckKeyChain, keys[1].AddedIdx, "with no rotation signed by a key before it: custody of the log breaks here"})
	})
}

// exportAndVerify exports l (whole, or as opts says) and verifies the bundle.
func exportAndVerify(t *testing.T, l *receipts.Log, opts *receipts.ExportOptions, vopts *verify.Options) *verify.Report {
	t.Helper()
	out := filepath.Join(t.TempDir(), "bundle")
	if _, err := l.Export(context.Background(), out, opts); err != nil {
		t.Fatal(err)
	}
	fsys, err := verify.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	return run(t, fsys, vopts)
}

// TestTruncateAndResign: someone who controls the machine truncates the log
// and writes it again, keeping its id. Signed with a fresh key, the new log
// is consistent in itself, and a bundle of it alone verifies; the first
// key pinned, or the checkpoint of an earlier export, shows it.
func TestTruncateAndResign(t *testing.T) {
	ctx := context.Background()
	f := fixture(t)
	forge := func(t *testing.T, key ed25519.PrivateKey, n int) *receipts.Log {
		l, _ := newLog(t, t.TempDir(), f.log.ID(), key)
		for range n {
			if _, err := l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{}`)); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}

	t.Run("fresh key", func(t *testing.T) {
		l := forge(t, newKey(t), 4)
		// Alone, nothing in the bundle tells: this is the claim boundary.
		wantOK(t, exportAndVerify(t, l, nil, nil))
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{PinKeys: []ed25519.PublicKey{pub(f.key1)}}),
			failure{verify.CheckKeyChain, 0, "not the pinned " + entry.KeyID(pub(f.key1))})
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{PinKeyID: entry.KeyID(pub(f.key1))}),
			failure{verify.CheckKeyChain, 0, "not the pinned"})
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "signed by " + entry.KeyID(pub(f.key2)) + ", a key this log never announces"})
		// The export itself refuses to prove consistency with the earlier
		// checkpoint.
		_, err := l.Export(ctx, filepath.Join(t.TempDir(), "b"), &receipts.ExportOptions{Since: f.cp})
		if !errors.Is(err, receipts.ErrInconsistent) {
			t.Errorf("Export --since-checkpoint of the forged log = %v, want ErrInconsistent", err)
		}
	})
	t.Run("same keys, fewer entries", func(t *testing.T) {
		// Whoever holds the keys (and rotates as the log did) can rewrite
		// it from the start; an earlier checkpoint still shows it.
		l := forge(t, f.key1, 2)
		if err := l.Rotate(ctx, f.key2); err != nil {
			t.Fatal(err)
		}
		wantOK(t, exportAndVerify(t, l, nil, &verify.Options{PinKeys: []ed25519.PublicKey{pub(f.key1)}}))
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "fewer than the 13 of the earlier checkpoint: it was truncated"})
	})
	t.Run("same keys, same length, other entries", func(t *testing.T) {
		l := forge(t, f.key1, 8)
		if err := l.Rotate(ctx, f.key2); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{}`))
		}
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "of the same 13 entries, with tree hash"})
		// A partial bundle shows it as well, without a proof.
		wantFailures(t, exportAndVerify(t, l, &receipts.ExportOptions{Filter: receipts.ExportFilter{Kinds: []entry.Kind{entry.KindKey}}}, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "of the same 13 entries, with tree hash"})
		// One more entry, and the tree of its first 13 is not the
		// checkpoint's; a partial bundle has no proof from it.
		l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{}`))
		wantFailures(t, exportAndVerify(t, l, nil, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "the log's first 13 entries hash to"})
		wantFailures(t, exportAndVerify(t, l, &receipts.ExportOptions{Filter: receipts.ExportFilter{Kinds: []entry.Kind{entry.KindKey}}}, &verify.Options{Since: f.cp}),
			failure{verify.CheckConsistency, -1, "no consistency proof from the earlier checkpoint's 13 entries"})
	})
}

// TestSinceCheckpoint: a later export proves the log extends an earlier
// export's checkpoint, and the verifier checks it, for whole and partial
// bundles.
func TestSinceCheckpoint(t *testing.T) {
	ctx := context.Background()
	l, _ := newLog(t, t.TempDir(), "", newKey(t))
	for range 5 {
		l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{}`))
	}
	first := filepath.Join(t.TempDir(), "first")
	if _, err := l.Export(ctx, first, nil); err != nil {
		t.Fatal(err)
	}
	cp, _ := os.ReadFile(filepath.Join(first, verify.FileCheckpoint))
	for range 7 {
		l.AppendReceipt(ctx, receipt("mail", "send", entry.Deny), []byte(`{}`))
	}
	for _, filter := range []receipts.ExportFilter{{}, {Servers: []string{"mail"}}} {
		t.Run(fmt.Sprint(filter.Servers), func(t *testing.T) {
			r := exportAndVerify(t, l, &receipts.ExportOptions{Filter: filter, Since: cp}, &verify.Options{Since: cp})
			wantOK(t, r)
			if c := r.Check(verify.CheckConsistency); c.Status != verify.OK || !strings.Contains(c.Detail, "6 entries (--since-checkpoint) and 6 entries (consistency.json)") {
				t.Errorf("consistency = %s %q", c.Status, c.Detail)
			}
		})
	}
	t.Run("tampered consistency proof", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "b")
		if _, err := l.Export(ctx, out, &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"mail"}}, Since: cp}); err != nil {
			t.Fatal(err)
		}
		m := load(t, out)
		var c verify.Consistency
		json.Unmarshal(m[verify.FileConsistency].Data, &c)
		c.Proof[0] = flip(c.Proof[0])
		m[verify.FileConsistency].Data, _ = json.Marshal(c)
		wantFailures(t, run(t, m, &verify.Options{Since: cp}), failure{verify.CheckConsistency, -1, "consistency proof from 6 to 13 entries fails"})
	})
}

func TestArchive(t *testing.T) {
	f := fixture(t)
	out := filepath.Join(t.TempDir(), "evidence.tar.gz")
	x, err := f.log.Export(context.Background(), out, &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"files"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !x.Archive {
		t.Error("Exported.Archive = false for a .tar.gz")
	}
	fsys, err := verify.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, fsys, nil)
	wantOK(t, r)
	// The archive holds the same files a folder export does.
	folder := load(t, f.files)
	for name := range folder {
		if _, err := fs.Stat(fsys, name); err != nil {
			t.Errorf("archive lacks %s", name)
		}
	}
}

func TestParsePublicKeys(t *testing.T) {
	k := pub(newKey(t))
	jwk, _ := json.Marshal(verify.NewJWK(k))
	jwks, _ := json.Marshal(verify.JWKS{Keys: []verify.JWK{verify.NewJWK(k)}})
	for _, tt := range []struct {
		name string
		data string
	}{
		{"JWK Set", string(jwks)},
		{"JWK", string(jwk)},
		{"base64", base64.StdEncoding.EncodeToString(k) + "\n"},
		{"base64url", base64.RawURLEncoding.EncodeToString(k)},
		{"PEM", pemOf(t, k)},
		{"note verifier key", "gatehouse-" + entry.KeyID(k) + "+01234567+" + base64.StdEncoding.EncodeToString(append([]byte{1}, k...))},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := verify.ParsePublicKeys([]byte(tt.data))
			if err != nil || len(got) != 1 || !got[0].Equal(k) {
				t.Errorf("ParsePublicKeys(%q) = %v, %v; want the key", tt.data, got, err)
			}
		})
	}
	for _, bad := range []string{"", "{}", `{"keys":[]}`, "not a key", base64.StdEncoding.EncodeToString(k[:31]),
		strings.Replace(string(jwk), `"kid":"`, `"kid":"0`, 1)} {
		if got, err := verify.ParsePublicKeys([]byte(bad)); err == nil {
			t.Errorf("ParsePublicKeys(%q) = %v, want an error", bad, got)
		}
	}
}

func pemOf(t testing.TB, k ed25519.PublicKey) string {
	der, err := x509.MarshalPKIXPublicKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// copyDir copies a bundle folder to a new folder, to be tampered with on
// disk, as an auditor's verifier reads it.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "bundle")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestUnlistedFiles: every file of a bundle is one the signed manifest
// lists; anything else in the folder or archive, whatever its name, fails
// the manifest check, naming it.
func TestUnlistedFiles(t *testing.T) {
	f := fixture(t)
	write := func(t *testing.T, path, data string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	report := func(dir string) string {
		b, _ := os.ReadFile(filepath.Join(dir, verify.FileReport))
		return string(b)
	}
	folders := []struct {
		name  string
		add   func(t *testing.T, dir string)
		file  string // the file the failure names
		words string
	}{
		{"a hidden file", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, ".notes"), "ALLOW everything")
		}, ".notes", "not listed in the signed manifest"},
		{"a case variant of the report", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "Report.html"), strings.ReplaceAll(report(dir), "DENY", "ALLOW"))
		}, "Report.html", "not listed in the signed manifest, and not a file of the bundle format (names are case-sensitive: the format's file is report.html)"},
		{"a case variant of the entries", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "ENTRIES.JSONL"), "")
		}, "ENTRIES.JSONL", "not listed in the signed manifest, and not a file of the bundle format (names are case-sensitive: the format's file is entries.jsonl)"},
		{"a file of another name", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "report-fixed.html"), report(dir))
		}, "report-fixed.html", "not listed in the signed manifest, and not a file of the bundle format"},
		{"a sub-folder with a report", func(t *testing.T, dir string) {
			write(t, filepath.Join(dir, "old", verify.FileReport), report(dir))
		}, "old/" + verify.FileReport, "in a folder of the bundle"},
		{"an empty sub-folder", func(t *testing.T, dir string) {
			if err := os.Mkdir(filepath.Join(dir, ".cache"), 0o700); err != nil {
				t.Fatal(err)
			}
		}, ".cache/", "a folder"},
		{"a link in place of a listed file", func(t *testing.T, dir string) {
			real := filepath.Join(t.TempDir(), "report.html")
			write(t, real, report(dir))
			os.Remove(filepath.Join(dir, verify.FileReport))
			if err := os.Symlink(real, filepath.Join(dir, verify.FileReport)); err != nil {
				t.Fatal(err)
			}
		}, verify.FileReport, "not a regular file"},
	}
	for _, tt := range folders {
		t.Run("folder/"+tt.name, func(t *testing.T) {
			dir := copyDir(t, f.complete)
			tt.add(t, dir)
			fsys, err := verify.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			wantFailures(t, run(t, fsys, nil), failure{verify.CheckManifest, -1, tt.file + ": " + tt.words})
		})
	}

	type member struct {
		hdr  tar.Header
		data string
	}
	reg := func(name, data string) member {
		return member{tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data))}, data}
	}
	archives := []struct {
		name  string
		extra []member
		words string
	}{
		{"an extra member", []member{reg("top/.notes", "x")}, ".notes: not listed in the signed manifest"},
		{"a case variant", []member{reg("top/Report.html", "x")}, "Report.html: not listed in the signed manifest"},
		{"a member twice", []member{reg("top/"+verify.FileReport, "<p>all calls allowed</p>")}, "top/report.html: in the archive twice"},
		{"a second folder", []member{{tar.Header{Typeflag: tar.TypeDir, Name: "top/old/", Mode: 0o700}, ""}}, "top/old/: a folder"},
		{"a member in a sub-folder", []member{reg("top/old/"+verify.FileReport, "x")}, "nested more than one folder deep"},
		{"a member beside the folder", []member{reg(verify.FileReport, "x")}, "in another folder than the bundle's files"},
		{"a symbolic link", []member{{tar.Header{Typeflag: tar.TypeSymlink, Name: "top/keys.pem", Linkname: "/etc/passwd"}, ""}}, "a link"},
		{"a hard link", []member{{tar.Header{Typeflag: tar.TypeLink, Name: "top/Report.html", Linkname: "top/report.html"}, ""}}, "a link"},
		{"a path out of the archive", []member{reg("top/../manifest.json", "x")}, "not a relative path inside the archive"},
	}
	bundle := load(t, f.complete)
	for _, tt := range archives {
		t.Run("archive/"+tt.name, func(t *testing.T) {
			var b bytes.Buffer
			zw := gzip.NewWriter(&b)
			tw := tar.NewWriter(zw)
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "top/", Mode: 0o700})
			for _, name := range slices.Sorted(maps.Keys(bundle)) {
				tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "top/" + name, Mode: 0o600, Size: int64(len(bundle[name].Data))})
				tw.Write(bundle[name].Data)
			}
			for _, m := range tt.extra {
				if err := tw.WriteHeader(&m.hdr); err != nil {
					t.Fatal(err)
				}
				tw.Write([]byte(m.data))
			}
			tw.Close()
			zw.Close()
			fsys, err := verify.ReadArchive(&b)
			if err != nil {
				t.Fatal(err)
			}
			wantFailures(t, run(t, fsys, nil), failure{verify.CheckManifest, -1, tt.words})
		})
	}
}

// TestAbsentContent: what the signed manifest says the export left out is
// not in the bundle, even listed in the manifest and signed with the log's
// key.
func TestAbsentContent(t *testing.T) {
	f := fixture(t)
	complete := load(t, f.complete)
	resign := func(t *testing.T, m fstest.MapFS, edit func(*verify.Manifest)) {
		t.Helper()
		man, err := verify.ParseManifest(m[verify.FileManifest].Data)
		if err != nil {
			t.Fatal(err)
		}
		edit(man)
		data, err := verify.SignManifest(man, f.key2)
		if err != nil {
			t.Fatal(err)
		}
		m[verify.FileManifest].Data = data
	}
	digest := func(data []byte) string {
		sum := sha256.Sum256(data)
		return verify.FileDigest(sum[:])
	}
	for _, tt := range []struct {
		name   string
		bundle string
		tamper func(t *testing.T, m fstest.MapFS)
		want   failure
	}{
		{"payloads in a bundle without them, signed", f.bare, func(t *testing.T, m fstest.MapFS) {
			m[verify.FilePayloads] = &fstest.MapFile{Data: complete[verify.FilePayloads].Data}
			resign(t, m, func(man *verify.Manifest) { man.Files[verify.FilePayloads] = digest(m[verify.FilePayloads].Data) })
		}, failure{verify.CheckManifest, -1, "payloads.jsonl: present, but the signed manifest says the export left payloads out"}},
		{"payloads in a bundle without them, unsigned", f.bare, func(t *testing.T, m fstest.MapFS) {
			m[verify.FilePayloads] = &fstest.MapFile{Data: complete[verify.FilePayloads].Data}
		}, failure{verify.CheckManifest, -1, "payloads.jsonl: present, but the signed manifest says the export left payloads out"}},
		{"payloads counted in a bundle without them", f.bare, func(t *testing.T, m fstest.MapFS) {
			resign(t, m, func(man *verify.Manifest) { man.Counts.Payloads = 3 })
		}, failure{verify.CheckManifest, -1, "left payloads out, but counts 3 payloads"}},
		{"proofs in a complete bundle, signed", f.complete, func(t *testing.T, m fstest.MapFS) {
			m[verify.FileProofs] = &fstest.MapFile{Data: []byte("{}\n")}
			resign(t, m, func(man *verify.Manifest) { man.Files[verify.FileProofs] = digest(m[verify.FileProofs].Data) })
		}, failure{verify.CheckManifest, -1, "proofs.jsonl: present, but the signed manifest says the bundle holds the whole log"}},
		{"a consistency proof the manifest does not name, signed", f.complete, func(t *testing.T, m fstest.MapFS) {
			since := load(t, f.since)
			m[verify.FileConsistency] = &fstest.MapFile{Data: since[verify.FileConsistency].Data}
			resign(t, m, func(man *verify.Manifest) { man.Files[verify.FileConsistency] = digest(m[verify.FileConsistency].Data) })
		}, failure{verify.CheckManifest, -1, "consistency.json: present, but the signed manifest names no earlier checkpoint"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := load(t, tt.bundle)
			tt.tamper(t, m)
			wantFailures(t, run(t, m, nil), tt.want)
		})
	}
}

// TestFieldRules: each member of an entry and of its body has the form
// docs/evidence.md gives it, and the canonical form check reports any
// other, for entries signed as they are and for entries edited after.
func TestFieldRules(t *testing.T) {
	ctx := context.Background()
	hash := entry.Commit(nil, []byte("policy"))
	signed := []struct {
		name   string
		append func(l *receipts.Log) (*entry.Entry, error)
		words  string
	}{
		{"a capability that is not mcp.<server>.<tool>", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Capability = "mcp.files.delete_file"
			return l.AppendReceipt(ctx, r, nil)
		}, `capability "mcp.files.delete_file" is not "mcp.files.read_file"`},
		{"an unknown decision", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendReceipt(ctx, receipt("files", "read_file", "MAYBE"), nil)
		}, `decision "MAYBE"`},
		{"a policy hash in upper case", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.PolicyHash = strings.ToUpper(hash)
			return l.AppendReceipt(ctx, r, nil)
		}, "policy_hash"},
		{"an unknown approver scope", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Approver = &entry.Approver{Kind: "terminal", Scope: "forever"}
			return l.AppendReceipt(ctx, r, nil)
		}, `approver scope "forever"`},
		{"an approver's until not in UTC", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Approver = &entry.Approver{Kind: "terminal", Scope: "minutes", Until: "2026-01-01T12:00:00+01:00"}
			return l.AppendReceipt(ctx, r, nil)
		}, "approver until"},
		{"an unknown approver via", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Approver = &entry.Approver{Kind: "terminal", Scope: "once", Via: "a person, honestly"}
			return l.AppendReceipt(ctx, r, nil)
		}, `approver via "a person, honestly"`},
		{"a confined server without its mechanism", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Confinement = &entry.Confinement{Confined: true, ABI: 7}
			return l.AppendReceipt(ctx, r, nil)
		}, `confinement mechanism ""`},
		{"a confined server at ABI 0", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Confinement = &entry.Confinement{Confined: true, Mechanism: entry.MechanismLandlock}
			return l.AppendReceipt(ctx, r, nil)
		}, "confinement abi 0"},
		{"an unconfined server naming an ABI", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Confinement = &entry.Confinement{ABI: 7}
			return l.AppendReceipt(ctx, r, nil)
		}, "an unconfined server's receipt names"},
		{"an observed rule that decided the call", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Observed = &entry.Observed{Decision: entry.Deny, Rule: r.Rule}
			return l.AppendReceipt(ctx, r, nil)
		}, "is the rule that decided the call"},
		{"an observed decision that is not one", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Observed = &entry.Observed{Decision: "BLOCK", Rule: "shadow"}
			return l.AppendReceipt(ctx, r, nil)
		}, `observed decision "BLOCK"`},
		{"an observed decision without its rule", func(l *receipts.Log) (*entry.Entry, error) {
			r := receipt("files", "read_file", entry.Allow)
			r.Observed = &entry.Observed{Decision: entry.Deny}
			return l.AppendReceipt(ctx, r, nil)
		}, "observed rule must not be empty"},
		{"a negative duration", func(l *receipts.Log) (*entry.Entry, error) {
			r, err := l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), nil)
			if err != nil {
				return nil, err
			}
			return l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: -1}, nil)
		}, "duration_ms -1 is negative"},
		{"a redaction counted 0 times", func(l *receipts.Log) (*entry.Entry, error) {
			r, err := l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), nil)
			if err != nil {
				return nil, err
			}
			return l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded,
				Redactions: []entry.Finding{{Secret: "github", Encoding: "raw"}}}, nil)
		}, "count must be at least 1"},
		{"a policy hash that is not a SHA-256", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: 1, Hash: "sha256:00"})
		}, `hash "sha256:00"`},
		{"a pin without a tool", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPin, entry.PinEvent{Server: "files", NewHash: hash})
		}, "server and tool must not be empty"},
		{"a body member in another case", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPolicy, map[string]any{"Version": 1, "hash": hash})
		}, "not exactly the format's"},
		{"a required body member missing", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPolicy, map[string]any{"hash": hash})
		}, "not exactly the format's"},
		{"an optional body member present but empty", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPin, map[string]any{"server": "files", "tool": "read_file", "old_hash": "", "new_hash": hash})
		}, "not exactly the format's"},
		{"an unknown body member", func(l *receipts.Log) (*entry.Entry, error) {
			return l.AppendEvent(ctx, entry.KindPolicy, map[string]any{"version": 1, "hash": hash, "note": "x"})
		}, "unknown field"},
	}
	for _, tt := range signed {
		t.Run("signed/"+tt.name, func(t *testing.T) {
			l, _ := newLog(t, t.TempDir(), "", newKey(t))
			e, err := tt.append(l)
			if err != nil {
				t.Fatal(err)
			}
			wantFailures(t, exportAndVerify(t, l, nil, nil), failure{verify.CheckCanonical, e.Index, tt.words})
		})
	}

	f := fixture(t)
	k1 := entry.KeyID(pub(f.key1))
	edited := []struct {
		name     string
		index    int64
		old, new string
		words    string
	}{
		{"an id of another kind's prefix", 3, `"id":"r-`, `"id":"o-`, "is not the id of a receipt entry"},
		{"an id one character longer", 3, `"id":"r-`, `"id":"r-a`, "is not the id of a receipt entry"},
		{"a key id in upper case", 3, `"key":"` + k1, `"key":"` + strings.ToUpper(k1), "is not a key id"},
		{"a time with an offset", 3, `Z","v":1}`, `+00:00","v":1}`, "is not RFC 3339 in UTC"},
		{"a time with a lower-case z", 3, `Z","v":1}`, `z","v":1}`, "entries.jsonl:4: malformed entry: time"},
		{"an outcome for an id that is not a receipt's", 2, `"receipt":"r-`, `"receipt":"x-`, "is not a receipt's id"},
	}
	for _, tt := range edited {
		t.Run("edited/"+tt.name, func(t *testing.T) {
			m := load(t, f.complete)
			editLine(m, verify.FileEntries, int(tt.index), func(l []byte) []byte { return replace(t, l, tt.old, tt.new) })
			index := tt.index
			if strings.HasPrefix(tt.words, "entries.jsonl:") {
				index = -1 // not an entry at all: named by its line
			}
			wantFailures(t, run(t, m, nil), failure{verify.CheckCanonical, index, tt.words})
		})
	}
}

// TestSinceSameCheckpoint: a bundle whose checkpoint is the earlier one
// (nothing was appended in between) needs no consistency proof; one of the
// same size and another tree fails.
func TestSinceSameCheckpoint(t *testing.T) {
	f := fixture(t)
	for _, dir := range []string{f.complete, f.files} {
		r := run(t, load(t, dir), &verify.Options{Since: f.cp})
		wantOK(t, r)
		if c := r.Check(verify.CheckConsistency); c.Status != verify.OK || !strings.Contains(c.Detail, "13 entries (--since-checkpoint)") {
			t.Errorf("consistency of %s = %s %q, want ok", filepath.Base(dir), c.Status, c.Detail)
		}
	}
	cp, err := entry.ParseCheckpoint(strings.SplitN(string(f.cp), "\n\n", 2)[0] + "\n")
	if err != nil {
		t.Fatal(err)
	}
	cp.Hash[0] ^= 1
	other, err := entry.SignCheckpoint(cp, f.key2)
	if err != nil {
		t.Fatal(err)
	}
	wantFailures(t, run(t, load(t, f.files), &verify.Options{Since: other}),
		failure{verify.CheckConsistency, -1, "of the same 13 entries, with tree hash"})
}

// mth is RFC 6962's Merkle tree hash of leaves.
func mth(leaves []tlog.Hash) tlog.Hash {
	if len(leaves) == 0 {
		return entry.EmptyTreeHash
	}
	if len(leaves) == 1 {
		return leaves[0]
	}
	k := 1
	for k*2 < len(leaves) {
		k *= 2
	}
	return tlog.NodeHash(mth(leaves[:k]), mth(leaves[k:]))
}

// TestRetiredKey: a rotation retires the key it replaces. Whoever still
// holds that key can sign entries, checkpoints and manifests that are
// otherwise perfect; each fails, with the first key pinned and the earlier
// checkpoint given as well.
func TestRetiredKey(t *testing.T) {
	f := fixture(t)
	// bundle is the whole fixture log and one more entry, index 13, signed
	// by entryKey; the checkpoint of its 14 entries is signed by cpKey, the
	// manifest by manKey. Nothing else is wrong with it.
	bundle := func(t *testing.T, entryKey, cpKey, manKey ed25519.PrivateKey) fstest.MapFS {
		m := load(t, f.complete)
		var leaves []tlog.Hash
		for _, l := range lines(m, verify.FileEntries) {
			leaves = append(leaves, entry.LeafHash(bytes.TrimSuffix(l, []byte("\n"))))
		}
		body, _ := json.Marshal(entry.PolicyEvent{Version: 9, Hash: entry.Commit(nil, []byte("allow everything"))})
		e := &entry.Entry{Log: f.log.ID(), Index: 13, ID: entry.NewID("e"), Kind: entry.KindPolicy,
			Time: "2026-12-01T12:00:00Z", Prev: entry.FormatTreeHash(mth(leaves)), Body: body}
		data, err := entry.Sign(e, entryKey)
		if err != nil {
			t.Fatal(err)
		}
		setLines(m, verify.FileEntries, append(lines(m, verify.FileEntries), data))
		leaves = append(leaves, entry.LeafHash(data))
		cp := entry.Checkpoint{Log: f.log.ID(), Size: 14, Hash: mth(leaves)}
		note, err := entry.SignCheckpoint(cp, cpKey)
		if err != nil {
			t.Fatal(err)
		}
		m[verify.FileCheckpoint].Data = note
		man, err := verify.ParseManifest(m[verify.FileManifest].Data)
		if err != nil {
			t.Fatal(err)
		}
		man.Checkpoint = verify.TreeHead{Size: 14, Hash: entry.FormatTreeHash(cp.Hash)}
		man.Indexes, man.Counts.Entries, man.Counts.Selected = "0-13", 14, man.Counts.Selected+1
		for _, name := range []string{verify.FileEntries, verify.FileCheckpoint} {
			sum := sha256.Sum256(m[name].Data)
			man.Files[name] = verify.FileDigest(sum[:])
		}
		if m[verify.FileManifest].Data, err = verify.SignManifest(man, manKey); err != nil {
			t.Fatal(err)
		}
		return m
	}
	k1, k2 := f.key1, f.key2
	pinned := func(since []byte) *verify.Options {
		return &verify.Options{PinKeys: []ed25519.PublicKey{pub(k1)}, Since: since}
	}
	// The fixture rotated key1 to key2 at entry 9.
	wantOK(t, run(t, bundle(t, k2, k2, k2), pinned(f.cp)))

	retired := "which the rotation at entry 9 retired"
	for _, tt := range []struct {
		name            string
		entry, cp, mani ed25519.PrivateKey
		want            failure
	}{
		{"an entry signed by the retired key", k1, k2, k2, failure{verify.CheckKeys, 13, retired}},
		{"a checkpoint signed by the retired key", k2, k1, k2, failure{verify.CheckCheckpoint, -1, retired}},
		{"a manifest signed by the retired key", k2, k2, k1, failure{verify.CheckManifest, -1, retired}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			m := bundle(t, tt.entry, tt.cp, tt.mani)
			wantFailures(t, run(t, m, nil), tt.want)
			wantFailures(t, run(t, m, pinned(f.cp)), tt.want)
		})
	}
	t.Run("an earlier checkpoint signed by the retired key", func(t *testing.T) {
		cp, _ := entry.ParseCheckpoint(strings.SplitN(string(f.cp), "\n\n", 2)[0] + "\n")
		old, err := entry.SignCheckpoint(cp, k1)
		if err != nil {
			t.Fatal(err)
		}
		wantFailures(t, run(t, bundle(t, k2, k2, k2), pinned(old)), failure{verify.CheckConsistency, -1, retired})
		// Of the tree before the rotation, the old key's checkpoint is
		// its own.
		early := entry.Checkpoint{Log: f.log.ID(), Size: 9}
		var leaves []tlog.Hash
		for _, l := range lines(load(t, f.complete), verify.FileEntries)[:9] {
			leaves = append(leaves, entry.LeafHash(bytes.TrimSuffix(l, []byte("\n"))))
		}
		early.Hash = mth(leaves)
		earlyNote, _ := entry.SignCheckpoint(early, k1)
		wantOK(t, run(t, bundle(t, k2, k2, k2), pinned(earlyNote)))
	})
	t.Run("a second rotation from the retired key", func(t *testing.T) {
		// Entry 13 rotates key1 to a key of the forger's: signed by key1,
		// which entry 9 already retired.
		m := load(t, f.complete)
		ls := lines(m, verify.FileEntries)
		var leaves []tlog.Hash
		for _, l := range ls {
			leaves = append(leaves, entry.LeafHash(bytes.TrimSuffix(l, []byte("\n"))))
		}
		k3 := pub(newKey(t))
		body, _ := json.Marshal(entry.KeyEvent{Action: "rotated", KeyID: entry.KeyID(k3), PublicKey: base64.StdEncoding.EncodeToString(k3), Previous: entry.KeyID(pub(k1))})
		e := &entry.Entry{Log: f.log.ID(), Index: 13, ID: entry.NewID("k"), Kind: entry.KindKey,
			Time: "2026-12-01T12:00:00Z", Prev: entry.FormatTreeHash(mth(leaves)), Body: body}
		data, _ := entry.Sign(e, k1)
		setLines(m, verify.FileEntries, append(ls, data))
		wantFailures(t, run(t, m, nil), failure{verify.CheckKeyChain, 13, "which the rotation at entry 9 already retired"})
	})
}

// TestSinceStrictNote: an earlier checkpoint is held to the checkpoint's
// rules: one signature line, in canonical base64.
func TestSinceStrictNote(t *testing.T) {
	f := fixture(t)
	cp, _ := entry.ParseCheckpoint(strings.SplitN(string(f.cp), "\n\n", 2)[0] + "\n")
	byKey1, err := entry.SignCheckpoint(cp, f.key1)
	if err != nil {
		t.Fatal(err)
	}
	// The same checkpoint with key1's signature line added to key2's.
	twice := append(bytes.Clone(f.cp), byKey1[bytes.LastIndex(byKey1, []byte("\n—"))+1:]...)
	wantFailures(t, run(t, load(t, f.complete), &verify.Options{Since: twice}),
		failure{verify.CheckConsistency, -1, "2 signature lines, want 1"})
}
