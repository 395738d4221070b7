package receipts

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// payloadOf returns a JSON payload of exactly n bytes that holds the word
// w: {"w":"w xxx...x"}.
func payloadOf(t testing.TB, n int, w string) []byte {
	t.Helper()
	head := `{"w":"` + w + ` `
	if n < len(head)+2 {
		t.Fatalf("payloadOf(%d, %q): too short", n, w)
	}
	return []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
}

// payloadRow is a payload's row in the database, as stored.
type payloadRow struct {
	salt, data       []byte
	dataNull         bool
	commitment       string
	notKept, keptCap *int64
}

func readPayloadRow(t testing.TB, st *store.Store, idx int64, part string) payloadRow {
	t.Helper()
	var r payloadRow
	if err := st.DB().QueryRow(`SELECT salt, data, data IS NULL, commitment, not_kept_size, not_kept_cap
		FROM payloads WHERE entry_idx = ? AND part = ?`, idx, part).
		Scan(&r.salt, &r.data, &r.dataNull, &r.commitment, &r.notKept, &r.keptCap); err != nil {
		t.Fatalf("payload %s of entry %d: %v", part, idx, err)
	}
	return r
}

// TestPayloadCap: a payload over MaxStoredPayload is not stored; its entry
// commits to all of it and says, signed, that it was not kept, its size and
// the cap. One at the cap is stored whole.
func TestPayloadCap(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	tests := []struct {
		name string
		size int // 0: no payload at all
		kept bool
	}{
		{"small", 40, true},
		{"at the cap", MaxStoredPayload, true},
		{"one byte over the cap", MaxStoredPayload + 1, false},
		{"near the proxy's message limit", 8<<20 - 512, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, result := payloadOf(t, tt.size, "argsword"), payloadOf(t, tt.size, "resultword")
			r := sampleReceipt()
			r.ArgsNotKept = &entry.NotKept{Size: 1, Cap: 0} // the log decides, not the caller
			re, err := l.AppendReceipt(ctx, r, args)
			if err != nil {
				t.Fatal(err)
			}
			oe, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: re.ID, Status: entry.Succeeded}, result)
			if err != nil {
				t.Fatal(err)
			}
			// The bodies as signed and stored.
			var rb entry.Receipt
			var ob entry.Outcome
			storedBody(t, l, re.ID, &rb)
			storedBody(t, l, oe.ID, &ob)
			var want *entry.NotKept
			if !tt.kept {
				want = &entry.NotKept{Size: int64(tt.size), Cap: MaxStoredPayload}
			}
			for _, c := range []struct {
				part       string
				e          *entry.Entry
				commitment string
				notKept    *entry.NotKept
				data       []byte
			}{
				{"args", re, rb.Args, rb.ArgsNotKept, args},
				{"result", oe, ob.Result, ob.ResultNotKept, result},
			} {
				// The signed body.
				if !equalNotKept(c.notKept, want) {
					t.Errorf("%s: signed body says %v, want %v", c.part, c.notKept, want)
				}
				stored, _ := l.EntryByID(ctx, c.e.ID)
				// The row: salt always, data only when kept.
				row := readPayloadRow(t, st, c.e.Index, c.part)
				if entry.Commit(row.salt, c.data) != c.commitment || row.commitment != c.commitment {
					t.Errorf("%s: the commitment is not to the whole payload with the stored salt", c.part)
				}
				if tt.kept {
					if row.dataNull || !bytes.Equal(row.data, c.data) || row.notKept != nil || row.keptCap != nil {
						t.Errorf("%s: row holds %d bytes (NULL %v), not_kept %v; want the payload whole", c.part, len(row.data), row.dataNull, row.notKept)
					}
				} else if !row.dataNull || row.notKept == nil || *row.notKept != int64(tt.size) || row.keptCap == nil || *row.keptCap != MaxStoredPayload {
					t.Errorf("%s: row holds %d bytes (NULL %v), not_kept %v; want no data and the size", c.part, len(row.data), row.dataNull, row.notKept)
				}
				// What readers get.
				if len(stored.Payloads) != 1 || !equalNotKept(stored.Payloads[0].NotKept, want) {
					t.Fatalf("%s: Payloads = %+v, want one, not kept %v", c.part, stored.Payloads, want)
				}
				if p := stored.Payloads[0]; tt.kept != bytes.Equal(p.Data, c.data) || (!tt.kept && p.Data != nil) {
					t.Errorf("%s: Payload.Data is %d bytes, kept %v", c.part, len(p.Data), tt.kept)
				}
			}
			// Search finds what was kept, and nothing of what was not.
			found := slices.Contains(ids(mustSearch(t, l, Query{Text: "argsword"})), re.ID)
			if found != tt.kept {
				t.Errorf("search finds the words of the arguments: %v, want %v", found, tt.kept)
			}
		})
	}
}

// storedBody decodes the signed body of entry id, as the log stores it.
func storedBody(t testing.TB, l *Log, id string, body any) {
	t.Helper()
	s, err := l.EntryByID(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	e, err := entry.Parse(s.Data)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Body, body); err != nil {
		t.Fatal(err)
	}
}

func equalNotKept(a, b *entry.NotKept) bool {
	return (a == nil) == (b == nil) && (a == nil || *a == *b)
}

// TestPayloadCapKeepsTheDatabaseSmall: arguments and a result near the
// proxy's 8 MiB message limit add a few pages to the database, not
// megabytes, and their text is nowhere in its file.
func TestPayloadCapKeepsTheDatabaseSmall(t *testing.T) {
	l, st := MustOpen(t, newKey(t))
	call(t, l, "files", "read_file", entry.Allow, "cursor", `{"path":"a"}`, entry.Succeeded, `"ok"`)
	size := func() int64 {
		var pages, pageSize int64
		if err := st.DB().QueryRow(`PRAGMA page_count`).Scan(&pages); err != nil {
			t.Fatal(err)
		}
		if err := st.DB().QueryRow(`PRAGMA page_size`).Scan(&pageSize); err != nil {
			t.Fatal(err)
		}
		return pages * pageSize
	}
	before := size()
	const big = 8<<20 - 512
	const word = "zqxjlargeblob"
	r, o := call(t, l, "files", "write_file", entry.Allow, "cursor", string(payloadOf(t, big, word)), entry.Succeeded, string(payloadOf(t, big, word)))
	grown := size() - before
	if grown > 2*MaxStoredPayload {
		t.Errorf("the database grew by %d bytes for two payloads of %d bytes; want at most %d", grown, big, 2*MaxStoredPayload)
	}
	var stored int64
	if err := st.DB().QueryRow(`SELECT coalesce(sum(length(data)), 0) FROM payloads WHERE entry_idx IN (?, ?)`, r.Index, o.Index).Scan(&stored); err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Errorf("the payloads rows hold %d bytes, want none", stored)
	}
	if dbContains(t, st, word) {
		t.Errorf("the database file holds %q, from a payload that was not kept", word)
	}
}

// TestExportNotKept: a bundle holds, for a payload that was not kept, its
// salt and the not_kept mark, and verifies; with the salt, whoever kept
// the payload shows it is the one committed to. The views say so.
func TestExportNotKept(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	args := payloadOf(t, MaxStoredPayload+100, "argsword")
	r, o := call(t, l, "files", "write_file", entry.Allow, "cursor", string(args), entry.Succeeded, `"written"`)
	out := filepath.Join(t.TempDir(), "b")
	x, err := l.Export(ctx, out, nil)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(out, verify.FilePayloads))
	var got []verify.PayloadLine
	for line := range bytes.Lines(data) {
		var pl verify.PayloadLine
		if err := json.Unmarshal(line, &pl); err != nil {
			t.Fatal(err)
		}
		got = append(got, pl)
	}
	if len(got) != 2 || got[0].Entry != r.ID || got[1].Entry != o.ID {
		t.Fatalf("payloads.jsonl = %s", data)
	}
	pl := got[0]
	if !pl.NotKept || pl.Data != nil || pl.Salt == nil || pl.Erased() {
		t.Fatalf("the line of arguments not kept = %s; want the salt and not_kept, no data", bytes.SplitAfter(data, []byte("\n"))[0])
	}
	salt, _ := base64.StdEncoding.DecodeString(*pl.Salt)
	if entry.Commit(salt, args) != pl.Commitment {
		t.Error("the exported salt and the arguments do not give the commitment")
	}
	if got[1].NotKept || got[1].Data == nil {
		t.Errorf("the result, kept, is exported as %+v", got[1])
	}
	if x.Manifest.Counts.Payloads != 2 || x.Manifest.Counts.Erased != 0 {
		t.Errorf("manifest counts %+v; want 2 payloads, none erased", x.Manifest.Counts)
	}

	rep := verifyDir(t, out)
	want := []verify.NotKept{{Entry: r.ID, Index: r.Index, Part: "args", Size: int64(len(args)), Cap: MaxStoredPayload}}
	if !slices.Equal(rep.NotKept, want) {
		t.Errorf("report NotKept = %+v, want %+v", rep.NotKept, want)
	}
	if c := rep.Check(verify.CheckPayloads); !strings.Contains(c.Detail, "1 match") || !strings.Contains(c.Detail, "1 not kept") {
		t.Errorf("payloads check: %q; want 1 matched and 1 not kept", c.Detail)
	}
	for name, note := range map[string]string{
		verify.FileCSV:    "arguments not kept: 65636 bytes, over the log's cap of 65536 bytes",
		verify.FileReport: "arguments not kept: 65636 bytes, over the log&#39;s cap of 65536 bytes",
	} {
		if b, _ := os.ReadFile(filepath.Join(out, name)); !bytes.Contains(b, []byte(note)) {
			t.Errorf("%s does not say %q", name, note)
		}
	}
}

// TestEraseNotKept: the salt of a payload that was not kept is erased like
// any payload: a tombstone, an erasure entry that names the commitment,
// and a bundle that verifies.
func TestEraseNotKept(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	r, _ := call(t, l, "files", "write_file", entry.Allow, "cursor", string(payloadOf(t, MaxStoredPayload+1, "w")), "", "")
	if n, err := l.Erasable(ctx, Query{Server: "files"}); err != nil || n != 1 {
		t.Errorf("Erasable = %d, %v; want the salt of the arguments", n, err)
	}
	er, err := l.Erase(ctx, []string{r.ID}, "request 7")
	if err != nil || er == nil {
		t.Fatalf("Erase = %v, %v", er, err)
	}
	var body entry.ErasureEvent
	json.Unmarshal(er.Body, &body)
	var rb entry.Receipt
	json.Unmarshal(r.Body, &rb)
	if len(body.Erased) != 1 || body.Erased[0] != (entry.Erased{Entry: r.ID, Part: "args", Commitment: rb.Args}) {
		t.Errorf("erasure entry = %+v", body)
	}
	row := readPayloadRow(t, st, r.Index, "args")
	if row.salt != nil || !row.dataNull {
		t.Errorf("after erasure the row holds salt %x, data %d bytes", row.salt, len(row.data))
	}
	s, _ := l.EntryByID(ctx, r.ID)
	if p := s.Payloads[0]; !p.Erased() || p.NotKept == nil {
		t.Errorf("payload after erasure = %+v; want erased, and still not kept", p)
	}
	out := filepath.Join(t.TempDir(), "b")
	if _, err := l.Export(ctx, out, nil); err != nil {
		t.Fatal(err)
	}
	rep := verifyDir(t, out)
	if len(rep.Erasures) != 1 || len(rep.NotKept) != 0 {
		t.Errorf("report: erasures %+v, not kept %+v; want the erasure alone", rep.Erasures, rep.NotKept)
	}
}

// TestExportApproverVia: the views of an export say how an approval came,
// and a receipt written before they said so reads as before.
func TestExportApproverVia(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	for _, a := range []entry.Approver{
		{Kind: "terminal", Scope: "once", Via: entry.ViaPiped},
		{Kind: "tray", Scope: "session"},
	} {
		if _, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.write_file", Server: "files", Tool: "write_file",
			Decision: entry.Allow, Rule: "default:high", Approver: &a, Client: entry.Client{Name: "cursor"}}, []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	out := filepath.Join(t.TempDir(), "b")
	if _, err := l.Export(ctx, out, nil); err != nil {
		t.Fatal(err)
	}
	verifyDir(t, out)
	for _, name := range []string{verify.FileCSV, verify.FileReport} {
		b, _ := os.ReadFile(filepath.Join(out, name))
		for _, want := range []string{"terminal once (piped)", "tray session"} {
			if !bytes.Contains(b, []byte(want)) {
				t.Errorf("%s does not say %q", name, want)
			}
		}
		if bytes.Contains(b, []byte("tray session (")) {
			t.Errorf("%s says how an answer came for a receipt that does not", name)
		}
	}
}
