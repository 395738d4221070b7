package verify_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

var update = flag.Bool("update", false, "write testdata/example again, from a new log")

// exampleKey signs testdata/example, the bundle docs/evidence.md works
// through. Its seed is public: it signs nothing else.
var exampleKey = func() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("gatehouse evidence example key"))
	return ed25519.NewKeyFromSeed(seed[:])
}()

const exampleDir = "testdata/example"

// writeExample writes testdata/example: a five-entry log (its key, a read
// and its outcome, a denied mail, the erasure of the read's arguments),
// exported for server files, so that entry 3 is left out and the bundle
// carries proofs.
func writeExample(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := receipts.Open(ctx, st, exampleKey)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{"path":"notes.txt"}`))
	l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: 3}, []byte(`{"content":[{"type":"text","text":"hello"}]}`))
	l.AppendReceipt(ctx, receipt("mail", "send", entry.Deny), []byte(`{"to":"alice@example.com"}`))
	if _, err := l.Erase(ctx, []string{r.ID}, "GDPR request 42"); err != nil {
		t.Fatal(err)
	}
	os.RemoveAll(exampleDir)
	if err := os.MkdirAll(filepath.Dir(exampleDir), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Export(ctx, exampleDir, &receipts.ExportOptions{
		Filter: receipts.ExportFilter{Servers: []string{"files"}}, Generator: "gatehouse (example)",
	}); err != nil {
		t.Fatal(err)
	}
}

// TestExampleBundle: the example bundle verifies, pinned to its key, and
// docs/evidence.md quotes it as it is.
func TestExampleBundle(t *testing.T) {
	if *update {
		writeExample(t)
	}
	fsys, err := verify.Open(exampleDir)
	if err != nil {
		t.Fatal(err)
	}
	r := run(t, fsys, &verify.Options{PinKeys: []ed25519.PublicKey{pub(exampleKey)}})
	wantOK(t, r)
	if r.Complete || r.Entries != 4 || r.Size != 5 {
		t.Errorf("example bundle: %d of %d entries, complete %v; want 4 of 5", r.Entries, r.Size, r.Complete)
	}

	doc, err := os.ReadFile("../../docs/evidence.md")
	if err != nil {
		t.Fatal(err)
	}
	quoted := func(name string, data []byte) {
		for l := range strings.SplitSeq(strings.TrimSuffix(string(data), "\n"), "\n") {
			if !bytes.Contains(doc, []byte(l)) {
				t.Errorf("docs/evidence.md does not quote this line of %s %s:\n%s", exampleDir, name, l)
			}
		}
	}
	for _, name := range []string{verify.FileEntries, verify.FileCheckpoint, verify.FileManifest, verify.FilePayloads} {
		data, _ := fs.ReadFile(fsys, name)
		quoted(name, data)
	}
	proofs, _ := fs.ReadFile(fsys, verify.FileProofs)
	quoted(verify.FileProofs, bytes.SplitAfter(proofs, []byte("\n"))[1])
}

// ExampleBundle verifies the bundle docs/evidence.md works through.
func ExampleBundle() {
	fsys, err := verify.Open("testdata/example")
	if err != nil {
		fmt.Println(err)
		return
	}
	report, err := verify.Bundle(context.Background(), fsys, &verify.Options{PinKeyID: "03c53d21a932bee1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, c := range report.Checks {
		fmt.Printf("%-22s %s\n", c.Name, c.Status)
	}
	for _, e := range report.Erasures {
		fmt.Printf("erased: the %s of entry %d, by entry %d: %s\n", e.Part, e.Index, e.ErasedIndex, e.Reason)
	}
	fmt.Println("ok:", report.OK())
	// Output:
	// manifest               ok
	// canonical form         ok
	// log order              ok
	// key chain              ok
	// key resolution         ok
	// signatures             ok
	// inclusion              ok
	// prior trees            ok
	// checkpoint             ok
	// consistency            skipped
	// receipts and outcomes  ok
	// payloads               ok
	// erasures               ok
	// erased: the args of entry 1, by entry 4: GDPR request 42
	// ok: true
}

// TestEveryByte changes every byte of every file of the example bundle
// (and of a consistency proof), one at a time: no change goes unnoticed,
// and the report names the file or the entry. A changed entry fails a check
// of its own (canonical form or signature), not only the manifest's digest.
func TestEveryByte(t *testing.T) {
	f := fixture(t)
	example, since := load(t, exampleDir), load(t, f.since)
	bundles := map[string]fstest.MapFS{}
	for name := range example {
		bundles[name] = example
	}
	bundles[verify.FileConsistency] = since
	for name, base := range bundles {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			stride := 1
			if name == verify.FileReport || name == verify.FileCSV {
				stride = 29 // bound by the digest check every file has
			}
			if testing.Short() {
				stride = 13
			}
			file := base[name]
			for i := 0; i < len(file.Data); i += stride {
				m := cloneFS(base)
				data := bytes.Clone(file.Data)
				data[i] ^= 1 << (i % 8)
				m[name] = &fstest.MapFile{Data: data}
				r := run(t, m, nil)
				if r.OK() {
					t.Fatalf("byte %d of %s changed (%q to %q), and the bundle verifies", i, name, file.Data[i], data[i])
				}
				if name == verify.FileEntries {
					if r.Check(verify.CheckCanonical).Status != verify.Failed && r.Check(verify.CheckSignatures).Status != verify.Failed {
						t.Fatalf("byte %d of %s changed: neither canonical form nor signatures fail:\n%s", i, name, text(r))
					}
					continue
				}
				if !strings.Contains(text(r), name) {
					t.Fatalf("byte %d of %s changed: the report does not name the file:\n%s", i, name, text(r))
				}
			}
		})
	}
}

// cloneFS copies a MapFS, sharing the files.
func cloneFS(m fstest.MapFS) fstest.MapFS {
	out := fstest.MapFS{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// archiveOf writes the files of m as a .tar.gz in folder top.
func archiveOf(t testing.TB, m fstest.MapFS, top string) []byte {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	for _, name := range slices.Sorted(maps.Keys(m)) {
		tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: top + name, Mode: 0o600, Size: int64(len(m[name].Data))})
		tw.Write(m[name].Data)
	}
	tw.Close()
	zw.Close()
	return b.Bytes()
}

func TestReadArchive(t *testing.T) {
	example := load(t, exampleDir)
	for _, top := range []string{"", "example/"} {
		fsys, err := verify.ReadArchive(bytes.NewReader(archiveOf(t, example, top)))
		if err != nil {
			t.Fatalf("ReadArchive (folder %q) = %v", top, err)
		}
		wantOK(t, run(t, fsys, nil))
	}
	bad := map[string]func(tw *tar.Writer){
		"two folders": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a/manifest.json"})
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "b/entries.jsonl"})
		},
		"nested": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "a/b/manifest.json"})
		},
		"escapes its folder": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "../manifest.json"})
		},
		"absolute": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "/etc/manifest.json"})
		},
		"symlink": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: "manifest.json", Linkname: "/etc/passwd"})
		},
		"twice": func(tw *tar.Writer) {
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json"})
			tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "manifest.json"})
		},
		"empty": func(tw *tar.Writer) {},
	}
	for name, write := range bad {
		var b bytes.Buffer
		zw := gzip.NewWriter(&b)
		tw := tar.NewWriter(zw)
		write(tw)
		tw.Close()
		zw.Close()
		// Either it is not a bundle at all, or it is one that fails: what
		// is in it besides the bundle's files fails the manifest check.
		fsys, err := verify.ReadArchive(&b)
		if err != nil {
			continue
		}
		if c := run(t, fsys, nil).Check(verify.CheckManifest); c.Status != verify.Failed {
			t.Errorf("manifest check of an archive %s = %s, want %s", name, c.Status, verify.Failed)
		}
	}
	if _, err := verify.ReadArchive(strings.NewReader("not gzip")); err == nil {
		t.Error("ReadArchive of plain text succeeded")
	}
}

// FuzzReadArchive: the archive reader never panics, and what it reads the
// verifier checks without panicking.
func FuzzReadArchive(f *testing.F) {
	example := load(f, exampleDir)
	f.Add(archiveOf(f, example, "example/"))
	f.Add(archiveOf(f, fstest.MapFS{"manifest.json": {Data: []byte("{}\n")}}, ""))
	f.Add([]byte{0x1f, 0x8b})
	f.Fuzz(func(t *testing.T, data []byte) {
		fsys, err := verify.ReadArchive(bytes.NewReader(data))
		if err != nil {
			return
		}
		if _, err := verify.Bundle(context.Background(), fsys, nil); err != nil {
			t.Fatal(err)
		}
	})
}

// FuzzBundleFile replaces one file of the example bundle with anything: the
// verifier never panics, and passes the bundle only if the file is as it
// was.
func FuzzBundleFile(f *testing.F) {
	example := load(f, exampleDir)
	names := slices.Sorted(maps.Keys(example))
	for i, name := range names {
		f.Add(uint8(i), example[name].Data)
		f.Add(uint8(i), bytes.ToUpper(example[name].Data))
		f.Add(uint8(i), append(bytes.Clone(example[name].Data), example[name].Data...))
	}
	f.Fuzz(func(t *testing.T, which uint8, data []byte) {
		name := names[int(which)%len(names)]
		m := cloneFS(example)
		m[name] = &fstest.MapFile{Data: data}
		r, err := verify.Bundle(context.Background(), m, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.OK() && !bytes.Equal(data, example[name].Data) {
			t.Fatalf("%s replaced by %q, and the bundle verifies", name, data)
		}
	})
}

// benchBundle exports the benchmarks' log of n entries (calls: a receipt
// and an outcome each, one call in ten to server "mail"), whole and for
// server mail. With $GATEHOUSE_BENCH_DIR set, the log is built there once
// and reused by later runs, and by BenchmarkExport in package receipts,
// which builds the same log the same way.
func benchBundle(b *testing.B, n int) (complete, partial string) {
	ctx := context.Background()
	dir := os.Getenv("GATEHOUSE_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	home := filepath.Join(dir, fmt.Sprintf("log-%d", n))
	keyFile, doneFile := home+".key", home+".done"
	if _, err := os.Stat(doneFile); err != nil {
		os.RemoveAll(home)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(keyFile, []byte(hex.EncodeToString(newKey(b).Seed())), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	raw, err := os.ReadFile(keyFile)
	if err != nil {
		b.Fatal(err)
	}
	seed, err := hex.DecodeString(string(raw))
	if err != nil {
		b.Fatal(err)
	}
	l, _ := newLog(b, home, "", ed25519.NewKeyFromSeed(seed))
	size, _ := l.Size(ctx)
	for i := size; i < int64(n); i += 2 {
		server := "files"
		if (i/2)%10 == 0 {
			server = "mail"
		}
		r, err := l.AppendReceipt(ctx, receipt(server, "read_file", entry.Allow), fmt.Appendf(nil, `{"path":"/home/me/notes-%d.txt"}`, i))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: 1.5},
			[]byte(`{"content":[{"type":"text","text":"hello"}]}`)); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(doneFile, nil, 0o600); err != nil {
		b.Fatal(err)
	}
	out := b.TempDir()
	complete, partial = filepath.Join(out, "complete"), filepath.Join(out, "partial")
	if _, err := l.Export(ctx, complete, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := l.Export(ctx, partial, &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"mail"}}}); err != nil {
		b.Fatal(err)
	}
	return complete, partial
}

// benchEntries is the size of the benchmarks' log: 10,000 by default;
// $GATEHOUSE_BENCH_ENTRIES otherwise.
func benchEntries() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("GATEHOUSE_BENCH_ENTRIES"), &n); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// BenchmarkVerify measures verification throughput in entries per second,
// of a whole log (tree rebuilt) and of a tenth of it (a proof per entry).
//
//	go test -run '^$' -bench Verify -benchtime 5x ./receipts/verify/
//	GATEHOUSE_BENCH_ENTRIES=1000000 GATEHOUSE_BENCH_DIR=/var/tmp/gatehouse-bench \
//	  go test -run '^$' -bench Verify -benchtime 1x -timeout 4h ./receipts/verify/
func BenchmarkVerify(b *testing.B) {
	complete, partial := benchBundle(b, benchEntries())
	for _, bb := range []struct{ name, dir string }{{"complete", complete}, {"partial", partial}} {
		b.Run(bb.name, func(b *testing.B) {
			fsys, err := verify.Open(bb.dir)
			if err != nil {
				b.Fatal(err)
			}
			var r *verify.Report
			for b.Loop() {
				r, err = verify.Bundle(context.Background(), fsys, nil)
				if err != nil {
					b.Fatal(err)
				}
			}
			if !r.OK() {
				b.Fatalf("bundle does not verify:\n%s", text(r))
			}
			b.ReportMetric(float64(r.Entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(r.Entries), "entries")
		})
	}
}

// ParsePublicKeys reads a pin in any of the forms keys are handed out in.
func ExampleParsePublicKeys() {
	for _, pin := range []string{
		"O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik=",
		`{"kty":"OKP","crv":"Ed25519","x":"O2onvM62pC1io6jQKm8Nc2UyFXcd4kOmOsBIoYtZ2ik"}`,
	} {
		keys, err := verify.ParsePublicKeys([]byte(pin))
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(entry.KeyID(keys[0]))
	}
	// Output:
	// 139e3940e64b5491
	// 139e3940e64b5491
}
