package verify_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// notKeptLog is a log whose calls are over the log's payload cap:
//
//	0 key                                  4 outcome for 3, its result kept
//	1 receipt files ALLOW, args not kept   5 receipt mail DENY, args not kept
//	2 outcome for 1, result not kept       6 erasure of 5's args
//	3 receipt files ALLOW, args kept
type notKeptLog struct {
	ids      []string
	args     []byte // entry 1's arguments, which the log did not keep
	result   []byte // entry 2's result, which it did not keep either
	complete string // the whole log
	files    string // the calls to files
}

func newNotKeptLog(t *testing.T) *notKeptLog {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	l, _ := newLog(t, filepath.Join(dir, "home"), "", newKey(t))
	big := func(w string) []byte {
		return fmt.Appendf(nil, `{"content":%q}`, w+strings.Repeat(" x", receipts.MaxStoredPayload/2))
	}
	must := func(e *entry.Entry, err error) *entry.Entry {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	f := &notKeptLog{args: big("draft"), result: big("written")}
	r1 := must(l.AppendReceipt(ctx, receipt("files", "write_file", entry.Allow), f.args))
	must(l.AppendOutcome(ctx, entry.Outcome{Receipt: r1.ID, Status: entry.Succeeded}, f.result))
	r3 := must(l.AppendReceipt(ctx, receipt("files", "read_file", entry.Allow), []byte(`{"path":"notes.txt"}`)))
	must(l.AppendOutcome(ctx, entry.Outcome{Receipt: r3.ID, Status: entry.Succeeded}, []byte(`"hello"`)))
	r5 := must(l.AppendReceipt(ctx, receipt("mail", "send", entry.Deny), big("to alice")))
	must(l.Erase(ctx, []string{r5.ID}, "GDPR request 7"))
	for s, err := range l.Entries(ctx, 0, 7) {
		if err != nil {
			t.Fatal(err)
		}
		e, _ := entry.Parse(s.Data)
		f.ids = append(f.ids, e.ID)
	}
	f.complete, f.files = filepath.Join(dir, "complete"), filepath.Join(dir, "files")
	if _, err := l.Export(ctx, f.complete, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Export(ctx, f.files, &receipts.ExportOptions{Filter: receipts.ExportFilter{Servers: []string{"files"}}}); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestNotKeptVerifies: a payload the log did not keep passes as such,
// where its entry signed so; the report names it, its size and the cap.
func TestNotKeptVerifies(t *testing.T) {
	f := newNotKeptLog(t)
	want := []verify.NotKept{
		{Entry: f.ids[1], Index: 1, Part: "args", Size: int64(len(f.args)), Cap: receipts.MaxStoredPayload},
		{Entry: f.ids[2], Index: 2, Part: "result", Size: int64(len(f.result)), Cap: receipts.MaxStoredPayload},
	}
	for _, tt := range []struct{ name, dir string }{{"complete", f.complete}, {"files", f.files}} {
		t.Run(tt.name, func(t *testing.T) {
			r := run(t, load(t, tt.dir), nil)
			wantOK(t, r)
			if !slices.Equal(r.NotKept, want) {
				t.Errorf("NotKept = %+v, want %+v", r.NotKept, want)
			}
			c := r.Check(verify.CheckPayloads)
			if !strings.Contains(c.Detail, "2 match") || !strings.Contains(c.Detail, "2 not kept") {
				t.Errorf("payloads check = %q; want 2 matched, 2 not kept", c.Detail)
			}
			note := fmt.Sprintf("not kept: the args of entry 1 (%s), %d bytes, over the log's cap of %d bytes", f.ids[1], len(f.args), receipts.MaxStoredPayload)
			if out := text(r); !strings.Contains(out, note) {
				t.Errorf("the text report does not say %q:\n%s", note, out)
			}
		})
	}
	// The erased one is an erasure, not a payload not kept.
	r := run(t, load(t, f.complete), nil)
	if len(r.Erasures) != 1 || r.Erasures[0].Index != 5 {
		t.Errorf("Erasures = %+v, want entry 5's args", r.Erasures)
	}
}

// TestNotKeptTamper: the entry's signed body says which payloads were not
// kept, and the bundle must agree with it exactly.
func TestNotKeptTamper(t *testing.T) {
	f := newNotKeptLog(t)
	size := fmt.Sprintf(`"size":%d`, len(f.args))
	// payloadLine edits the payload line of entry index.
	payloadLine := func(t *testing.T, m fstest.MapFS, index int64, edit func(p *verify.PayloadLine)) {
		t.Helper()
		for i, l := range lines(m, verify.FilePayloads) {
			var p verify.PayloadLine
			if err := json.Unmarshal(l, &p); err != nil {
				t.Fatal(err)
			}
			if p.Index == index {
				edit(&p)
				editLine(m, verify.FilePayloads, i, func([]byte) []byte { out, _ := json.Marshal(p); return out })
				return
			}
		}
		t.Fatalf("no payload line for entry %d", index)
	}
	str := func(b []byte) *string { s := base64.StdEncoding.EncodeToString(b); return &s }

	tests := []struct {
		name   string
		tamper func(t *testing.T, m fstest.MapFS)
		want   []failure
	}{
		{"change the size a receipt signed", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 1, func(l []byte) []byte { return replace(t, l, size, fmt.Sprintf(`"size":%d`, len(f.args)+1)) })
		}, []failure{
			{verify.CheckSignatures, 1, "bad signature"},
			{verify.CheckPrev, 2, "prev is not the tree hash"},
		}},
		{"claim the arguments were under the cap", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 1, func(l []byte) []byte { return replace(t, l, size, `"size":100`) })
		}, []failure{
			{verify.CheckCanonical, 1, "args_not_kept: a payload of 100 bytes is not over a cap of 65536"},
			{verify.CheckSignatures, 1, "bad signature"},
		}},
		{"commit to no result, but one not kept", func(t *testing.T, m fstest.MapFS) {
			editLine(m, verify.FileEntries, 2, func(l []byte) []byte {
				return regexp.MustCompile(`"result":"sha256:[0-9a-f]{64}"`).ReplaceAll(l, []byte(`"result":""`))
			})
		}, []failure{{verify.CheckCanonical, 2, "result_not_kept, but no result to commit to"}}},
		{"add the arguments the log did not keep", func(t *testing.T, m fstest.MapFS) {
			// The true arguments, which match the commitment: still not the
			// log's, as signed.
			payloadLine(t, m, 1, func(p *verify.PayloadLine) { p.Data, p.NotKept = str(f.args), false })
		}, []failure{{verify.CheckPayloads, 1, "carries the arguments, which the entry signed the log did not keep"}}},
		{"mark kept arguments not kept", func(t *testing.T, m fstest.MapFS) {
			payloadLine(t, m, 3, func(p *verify.PayloadLine) { p.Data, p.NotKept = nil, true })
		}, []failure{{verify.CheckPayloads, 3, "the entry signed no args_not_kept: the log kept them, and the bundle leaves them out"}}},
		{"drop the mark of arguments not kept", func(t *testing.T, m fstest.MapFS) {
			payloadLine(t, m, 1, func(p *verify.PayloadLine) { p.NotKept = false })
		}, []failure{{verify.CheckPayloads, 1, "neither data nor not_kept"}}},
		{"drop the salt of arguments not kept", func(t *testing.T, m fstest.MapFS) {
			payloadLine(t, m, 1, func(p *verify.PayloadLine) { p.Salt = nil })
		}, []failure{{verify.CheckPayloads, 1, "the salt of arguments not kept is missing"}}},
		{"drop the line of arguments not kept", func(t *testing.T, m fstest.MapFS) {
			setLines(m, verify.FilePayloads, slices.Delete(lines(m, verify.FilePayloads), 0, 1))
		}, []failure{{verify.CheckPayloads, 1, "no line for the arguments, which the entry signed were not kept"}}},
		{"undo the erasure of arguments not kept", func(t *testing.T, m fstest.MapFS) {
			payloadLine(t, m, 5, func(p *verify.PayloadLine) {
				p.ErasedBy, p.Salt, p.NotKept = "", str(make([]byte, entry.SaltSize)), true
			})
		}, []failure{{verify.CheckErasures, 6, "payloads.jsonl still holds their salt"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := load(t, f.complete)
			tt.tamper(t, m)
			wantFailures(t, run(t, m, nil), tt.want...)
		})
	}
}
