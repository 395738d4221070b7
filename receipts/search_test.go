package receipts

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// call appends a receipt and, unless status is "", its outcome.
func call(tb testing.TB, l *Log, server, tool, decision, client, args, status, result string) (r, o *entry.Entry) {
	tb.Helper()
	ctx := context.Background()
	r, err := l.AppendReceipt(ctx, entry.Receipt{
		Capability: entry.Capability(server, tool), Server: server, Tool: tool,
		Decision: decision, Rule: "test", Client: entry.Client{Name: client},
	}, []byte(args))
	if err != nil {
		tb.Fatal(err)
	}
	if status == "" {
		return r, nil
	}
	var res []byte
	if result != "" {
		res = []byte(result)
	}
	o, err = l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: status}, res)
	if err != nil {
		tb.Fatal(err)
	}
	return r, o
}

// ids returns the ids of the hits, in order.
func ids(p Page) []string {
	var out []string
	for _, h := range p.Hits {
		out = append(out, h.ID)
	}
	return out
}

// mustSearch runs q and fails the test on an error.
func mustSearch(tb testing.TB, l interface {
	Search(context.Context, Query) (Page, error)
}, q Query) Page {
	tb.Helper()
	p, err := l.Search(context.Background(), q)
	if err != nil {
		tb.Fatalf("Search(%+v) = %v", q, err)
	}
	return p
}

func TestSearchWords(t *testing.T) {
	l, _ := MustOpen(t, newKey(t))
	rA, oA := call(t, l, "files", "read_file", entry.Allow, "claude-code",
		`{"path":"/home/me/notes.txt"}`, entry.Succeeded, `{"content":[{"type":"text","text":"line1\nline2 caf\u00e9"}]}`)
	rB, oB := call(t, l, "mail", "send_email", entry.Allow, "cursor",
		`{"to":"alice@example.com","subject":"Invoice 42","copies":7}`, entry.Succeeded, `"sent to Alice@Example.com"`)
	rC, _ := call(t, l, "mail", "send_email", entry.Deny, "cursor", `{"to":"malice@example.com"}`, "", "")
	rD, oD := call(t, l, "mail", "send_email", entry.Allow, "cursor",
		`{"to":"alice.example.com","note":"alice example com"}`, entry.Failed, "")
	rE, _ := call(t, l, "github", "create_issue", entry.ApprovalRequired, "claude-code",
		`{"title":"Bump deps","body":"see invoices.pdf and C:\\Users\\me"}`, "", "")
	rF, oF := call(t, l, "shell", "run", entry.Allow, "zed", `plain text, not JSON: zebra`, entry.Unknown, "")
	_ = oF

	tests := []struct {
		name, q string
		want    []*entry.Entry // newest first
	}{
		{"a word in arguments", "zebra", []*entry.Entry{rF}},
		{"an email, exactly", "alice@example.com", []*entry.Entry{oB, rB}},
		{"an email, case aside", "ALICE@Example.COM", []*entry.Entry{oB, rB}},
		{"part of an email, at word boundaries", "example.com", []*entry.Entry{rD, rC, oB, rB}},
		{"a word is a whole word", "alice", []*entry.Entry{rD, oB, rB}},
		{"a tool name, exactly", "read_file", []*entry.Entry{oA, rA}},
		{"part of a tool name", "file", []*entry.Entry{oA, rA}},
		{"a path's file name", "notes.txt", []*entry.Entry{rA}},
		{"a whole path", "/home/me/notes.txt", []*entry.Entry{rA}},
		{"a Windows path", `C:\Users\me`, []*entry.Entry{rE}},
		{"text after a JSON escape", "line2", []*entry.Entry{oA}},
		{"accents folded", "cafe", []*entry.Entry{oA}},
		{"accents folded in the query", "CAFÉ", []*entry.Entry{oA}},
		{"an integer value", "7", []*entry.Entry{rB}},
		{"prefix", "invoice*", []*entry.Entry{rE, rB}},
		{"no prefix", "invoice", []*entry.Entry{rB}},
		{"prefix with punctuation", "alice@exa*", []*entry.Entry{oB, rB}},
		{"a phrase", `"send email" cursor`, []*entry.Entry{oD, rD, rC, oB, rB}},
		{"a phrase in order only", `"email send"`, nil},
		{"every word must match", "alice zebra", nil},
		{"a decision", "deny", []*entry.Entry{rC}},
		{"a client", "zed", []*entry.Entry{oF, rF}},
		{"a server, in outcomes too", "github", []*entry.Entry{rE}},
		{"keys are not text", "path", nil},
		{"only punctuation", "@@ -- ()", nil},
		{"operators are words", "alice OR zebra", nil},
		{"NOT is a word", "alice NOT zebra", nil},
		{"NEAR is a word", "NEAR(alice zebra)", nil},
		{"a column filter is text", "server:files", nil},
		{"a column set is text", "{server tool}: files", nil},
		{"parentheses", "(alice)", []*entry.Entry{rD, oB, rB}},
		{"unbalanced quote", `"send email`, []*entry.Entry{oD, rD, rC, oB, rB}},
		{"a leading caret", "^zebra", []*entry.Entry{rF}},
		{"a lone star", "* zebra", []*entry.Entry{rF}},
		{"a star inside", "ze*ra", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, e := range tt.want {
				want = append(want, e.ID)
			}
			got := ids(mustSearch(t, l, Query{Text: tt.q}))
			if !slices.Equal(got, want) {
				t.Errorf("Search(%q) = %v, want %v", tt.q, got, want)
			}
		})
	}
}

func TestSearchFilters(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	r1, o1 := call(t, l, "files", "read_file", entry.Allow, "claude-code", `{}`, entry.Succeeded, `"ok"`)
	r2, _ := call(t, l, "files", "write_file", entry.Deny, "claude-code", `{}`, "", "")
	r3, o3 := call(t, l, "github", "create_issue", entry.Allow, "cursor", `{}`, entry.Failed, "")
	pin, err := l.AppendEvent(ctx, entry.KindPin, entry.PinEvent{Server: "files", Tool: "read_file", NewHash: entry.Commit(nil, []byte("tool"))})
	if err != nil {
		t.Fatal(err)
	}
	r4, _ := call(t, l, "files", "read_file", entry.Allow, "claude-code", `{}`, "", "")

	all := mustSearch(t, l, Query{})
	if n := len(all.Hits); n != 8 || all.Hits[n-1].Kind != entry.KindKey {
		t.Fatalf("Search({}) = %d hits ending with %v, want 8 ending with the key entry", n, all.Hits[n-1].Kind)
	}
	at := func(e *entry.Entry) time.Time {
		for _, h := range all.Hits {
			if h.ID == e.ID {
				return h.Time
			}
		}
		t.Fatalf("%s not found", e.ID)
		return time.Time{}
	}
	tests := []struct {
		name string
		q    Query
		want []*entry.Entry
	}{
		{"server", Query{Server: "files"}, []*entry.Entry{r4, pin, r2, o1, r1}},
		{"server and kind", Query{Server: "files", Kind: "receipt"}, []*entry.Entry{r4, r2, r1}},
		{"decision, any case", Query{Decision: "deny"}, []*entry.Entry{r2}},
		{"decision of outcomes too", Query{Decision: entry.Allow, Kind: "outcome"}, []*entry.Entry{o3, o1}},
		{"status of receipts and outcomes", Query{Status: "failed"}, []*entry.Entry{o3, r3}},
		{"kind", Query{Kind: "pin"}, []*entry.Entry{pin}},
		{"time range", Query{From: at(r2), To: at(pin)}, []*entry.Entry{o3, r3, r2}},
		{"from", Query{From: at(pin)}, []*entry.Entry{r4, pin}},
		{"words and filters", Query{Text: "read_file", Kind: "receipt"}, []*entry.Entry{r4, r1}},
		{"words and a time range", Query{Text: "files", To: at(pin)}, []*entry.Entry{r2, o1, r1}},
		{"before", Query{Server: "files", Before: pin.Index}, []*entry.Entry{r2, o1, r1}},
		{"empty range", Query{From: at(pin), To: at(r2)}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []string
			for _, e := range tt.want {
				want = append(want, e.ID)
			}
			if got := ids(mustSearch(t, l, tt.q)); !slices.Equal(got, want) {
				t.Errorf("Search(%+v) = %v, want %v", tt.q, got, want)
			}
		})
	}

	// A hit describes the call: an outcome names its receipt and shows
	// the receipt's columns; a receipt shows its outcome's status.
	p := mustSearch(t, l, Query{Kind: "outcome", Status: "succeeded"})
	want := Hit{Index: o1.Index, ID: o1.ID, Kind: entry.KindOutcome, Time: at(o1), Server: "files", Tool: "read_file",
		Decision: entry.Allow, Status: entry.Succeeded, Client: "claude-code", Receipt: r1.ID}
	if len(p.Hits) != 1 || p.Hits[0] != want {
		t.Errorf("outcome hit = %+v, want %+v", p.Hits, want)
	}
	if c := want.Capability(); c != "mcp.files.read_file" {
		t.Errorf("Capability() = %q", c)
	}
	if h := mustSearch(t, l, Query{Kind: "receipt", Status: "succeeded"}).Hits; len(h) != 1 || h[0].ID != r1.ID || h[0].Receipt != "" {
		t.Errorf("receipt with a succeeded outcome = %+v, want %s", h, r1.ID)
	}

	for _, q := range []Query{{Kind: "call"}, {Limit: -1}} {
		if _, err := l.Search(ctx, q); !errors.Is(err, ErrQuery) {
			t.Errorf("Search(%+v) = %v, want ErrQuery", q, err)
		}
	}
}

// Time filters stay exact after the wall clock stepped back between two
// appends, when the order of the entries' times is no longer theirs.
func TestSearchClockStepsBack(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	r1, _ := call(t, l, "files", "read_file", entry.Allow, "c", `{}`, "", "")
	// r1 was written while the clock was an hour ahead (it may be in the
	// receipt journal still: Size stores it in the database first).
	if _, err := l.Size(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := st.DB().ExecContext(ctx, `UPDATE entries SET time_ns = time_ns + ? WHERE idx = ?`, int64(time.Hour), r1.Index); err != nil {
		t.Fatal(err)
	}
	r2, _ := call(t, l, "files", "read_file", entry.Allow, "c", `{}`, "", "")
	r3, _ := call(t, l, "files", "read_file", entry.Allow, "c", `{}`, "", "")
	t2, _ := time.Parse(time.RFC3339Nano, r2.Time)
	t3, _ := time.Parse(time.RFC3339Nano, r3.Time)
	for _, tt := range []struct {
		q    Query
		want []string
	}{
		{Query{From: t2}, []string{r3.ID, r2.ID, r1.ID}},
		{Query{From: t2, To: t3}, []string{r2.ID}},
		{Query{From: t3, Text: "read_file"}, []string{r3.ID, r1.ID}},
	} {
		if got := ids(mustSearch(t, l, tt.q)); !slices.Equal(got, tt.want) {
			t.Errorf("Search(%+v) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

// Pages are stable while entries are appended: each page continues where
// the last one ended, nothing repeats and nothing is skipped.
func TestSearchPaging(t *testing.T) {
	l, _ := MustOpen(t, newKey(t))
	var want []string
	for i := range 25 {
		r, _ := call(t, l, "files", "read_file", entry.Allow, "claude-code", fmt.Sprintf(`{"path":"/tmp/page-%d.txt"}`, i), "", "")
		want = append([]string{r.ID}, want...)
	}
	for _, q := range []Query{
		{Kind: "receipt", Limit: 10},
		{Text: "read_file", Limit: 10}, // exact checks, in batches
		{Text: "tmp", Limit: 7},
	} {
		var got []string
		q.Before = 0
		for pages := 1; ; pages++ {
			p := mustSearch(t, l, q)
			got = append(got, ids(p)...)
			// Someone appends between pages.
			call(t, l, "files", "read_file", entry.Allow, "claude-code", `{"path":"/tmp/new.txt"}`, "", "")
			if p.Next == 0 {
				break
			}
			if pages > 10 {
				t.Fatalf("%+v: more than 10 pages", q)
			}
			q.Before = p.Next
		}
		if len(got) < len(want) || !slices.Equal(got[len(got)-len(want):], want) {
			t.Errorf("pages of %+v = %v, want ending with %v", q, got, want)
		}
	}

	// Most candidates fail the exact check: the pages still fill.
	l2, _ := MustOpen(t, newKey(t))
	var exact []string
	for i := range 300 {
		args := `{"to":"alice.example.com"}`
		if i%50 == 0 {
			args = `{"to":"alice@example.com"}`
		}
		r, _ := call(t, l2, "mail", "send", entry.Allow, "c", args, "", "")
		if i%50 == 0 {
			exact = append([]string{r.ID}, exact...)
		}
	}
	q := Query{Text: "alice@example.com", Limit: 2}
	var got []string
	for {
		p := mustSearch(t, l2, q)
		if len(p.Hits) > 2 {
			t.Fatalf("page of %d hits, limit 2", len(p.Hits))
		}
		got = append(got, ids(p)...)
		if p.Next == 0 {
			break
		}
		q.Before = p.Next
	}
	if !slices.Equal(got, exact) {
		t.Errorf("pages of exact matches = %v, want %v", got, exact)
	}
}

// dbContains reports whether the database file, its write-ahead log or the
// receipt journal holds s anywhere, in any page, live or free.
func dbContains(tb testing.TB, st *store.Store, s string) bool {
	tb.Helper()
	for _, p := range []string{st.DatabasePath(), st.DatabasePath() + "-wal", filepath.Join(st.Dir(), JournalFile)} {
		b, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			tb.Fatal(err)
		}
		if bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// An erased payload leaves the index in the same transaction, and its words
// leave the database file.
func TestEraseLeavesIndex(t *testing.T) {
	ctx := context.Background()
	l, st := MustOpen(t, newKey(t))
	const secret = "zqxjbrightwater"
	r, o := call(t, l, "mail", "send_email", entry.Allow, "cursor",
		`{"to":"`+secret+`@example.com"}`, entry.Succeeded, `"queued for `+secret+`@example.com"`)
	for i := range 200 { // other entries around it, so that pages are shared
		call(t, l, "mail", "send_email", entry.Allow, "cursor", fmt.Sprintf(`{"to":"user%d@example.com"}`, i), entry.Succeeded, `"queued"`)
	}
	if got := ids(mustSearch(t, l, Query{Text: secret})); !slices.Equal(got, []string{o.ID, r.ID}) {
		t.Fatalf("before erasure: %v", got)
	}

	if _, err := l.Erase(ctx, []string{r.ID}, "request 7"); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, l, Query{Text: secret})); !slices.Equal(got, []string{o.ID}) {
		t.Errorf("after erasing the receipt's arguments: %v, want only the outcome", got)
	}
	// Its other columns are still found.
	if p := mustSearch(t, l, Query{Text: "send_email", Kind: "receipt", Limit: MaxLimit}); !slices.Contains(ids(p), r.ID) {
		t.Errorf("erased receipt no longer found by its tool")
	}
	e, n, err := l.EraseMatching(ctx, Query{Text: secret + "@example.com"}, "request 7")
	if err != nil || e == nil || n != 1 {
		t.Fatalf("EraseMatching = %v, %d, %v; want one payload", e, n, err)
	}
	if got := ids(mustSearch(t, l, Query{Text: secret})); len(got) != 0 {
		t.Errorf("after erasing both: %v", got)
	}
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		t.Errorf("FTS integrity-check after erasure: %v", err)
	}
	var on int
	st.DB().QueryRowContext(ctx, `SELECT count(*) FROM search_fts_config WHERE k = 'secure-delete' AND v != 0`).Scan(&on)
	if on != 0 {
		t.Errorf("FTS5 secure-delete left on after the erasure: appends pay for it")
	}
	if err := st.Close(); err != nil { // checkpoints the write-ahead log
		t.Fatal(err)
	}
	if dbContains(t, st, secret) {
		t.Errorf("the database still holds %q after its erasure", secret)
	}
}

func TestEraseMatching(t *testing.T) {
	ctx := context.Background()
	l, _ := MustOpen(t, newKey(t))
	rA, oA := call(t, l, "mail", "send_email", entry.Allow, "cursor", `{"to":"alice@example.com"}`, entry.Succeeded, `"sent"`)
	rB, _ := call(t, l, "mail", "send_email", entry.Allow, "cursor", `{"to":"malice@example.com"}`, entry.Succeeded, `"sent to alice@example.com"`)
	rC, _ := call(t, l, "files", "read_file", entry.Allow, "claude-code", `{"path":"alice@example.com.txt"}`, "", "")

	if _, _, err := l.EraseMatching(ctx, Query{}, "all"); !errors.Is(err, ErrQuery) {
		t.Errorf("EraseMatching(everything) = %v, want ErrQuery", err)
	}
	q := Query{Text: "alice@example.com", Server: "mail"}
	if n, err := l.Erasable(ctx, q); err != nil || n != 2 {
		t.Errorf("Erasable(%+v) = %d, %v; want 2", q, n, err)
	}
	e, n, err := l.EraseMatching(ctx, q, "GDPR request 42")
	if err != nil || n != 2 {
		t.Fatalf("EraseMatching = %v, %d, %v; want 2", e, n, err)
	}
	var erased []string
	for s, err := range l.Entries(ctx, 0, e.Index) {
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range s.Payloads {
			if p.Erased() {
				x, _ := entry.Parse(s.Data)
				erased = append(erased, x.ID)
			}
		}
	}
	slices.Sort(erased)
	want := []string{rA.ID, outcomeOf(t, l, rB).ID}
	slices.Sort(want)
	if !slices.Equal(erased, want) {
		t.Errorf("erased %v, want %v (not %s, %s)", erased, want, oA.ID, rC.ID)
	}
	if e, n, err := l.EraseMatching(ctx, q, "again"); e != nil || n != 0 || err != nil {
		t.Errorf("EraseMatching again = %v, %d, %v; want nothing to do", e, n, err)
	}
	// The erasure entry itself has no payload to erase.
	if n, err := l.Erasable(ctx, Query{Kind: "erasure"}); n != 0 || err != nil {
		t.Errorf("Erasable(erasures) = %d, %v", n, err)
	}
}

// outcomeOf returns the outcome of receipt r.
func outcomeOf(tb testing.TB, l *Log, r *entry.Entry) *entry.Entry {
	tb.Helper()
	s, err := l.OutcomeOf(context.Background(), r.ID)
	if err != nil {
		tb.Fatal(err)
	}
	e, err := entry.Parse(s.Data)
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

// A log written before search existed is indexed when step 2 runs.
func TestSearchMigrationIndexesExistingEntries(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.Migrate(ctx, "receipts", migrations[:1]); err != nil {
		t.Fatal(err)
	}
	// Rows as step 1's code wrote them: an outcome's columns were empty.
	for _, stmt := range []string{
		`INSERT INTO entries VALUES (0, 'r-old', 'receipt', 1, 'k', 'files', 'read_file', 'ALLOW', 'SUCCEEDED', 'claude-code', '', x'7b7d')`,
		`INSERT INTO entries VALUES (1, 'o-old', 'outcome', 2, 'k', '', '', '', 'SUCCEEDED', '', 'r-old', x'7b7d')`,
		`INSERT INTO entries VALUES (2, 'e-old', 'pin', 3, 'k', '', '', '', '', '', '', CAST('{"body":{"server":"files","tool":"read_file"}}' AS BLOB))`,
		`INSERT INTO payloads VALUES (0, 'args', x'00', CAST('{"path":"/srv/legacy.txt"}' AS BLOB), 'sha256:00', NULL)`,
		`INSERT INTO payloads VALUES (1, 'result', x'00', CAST('not json: legacy' AS BLOB), 'sha256:00', NULL)`,
	} {
		if _, err := st.DB().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	l := &Reader{db: st.DB()}
	if err := st.Migrate(ctx, "receipts", migrations); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, l, Query{Text: "legacy"})); !slices.Equal(got, []string{"o-old", "r-old"}) {
		t.Errorf("Search(legacy) = %v", got)
	}
	if got := ids(mustSearch(t, l, Query{Server: "files"})); !slices.Equal(got, []string{"e-old", "o-old", "r-old"}) {
		t.Errorf("Search(server files) = %v; want the outcome and the pin too", got)
	}
}

// Whatever a person types, search answers without an error, and never
// with an FTS5 syntax error.
func FuzzSearchQuery(f *testing.F) {
	for _, s := range []string{
		"alice@example.com", `"unbalanced`, `""`, `"a" "b"`, "a OR b", "a AND b", "NOT a", "a NOT b",
		"NEAR(a b, 2)", "NEAR(a b", "server:files", "{server tool}: x", "-server: x", "^a", "a*", "*", "**",
		"a * b", "(a OR b) AND c", ")", "(", "a:", ":", "+a", "-", `\"`, "'", "a'b", "\x00", "a\x00b", "\xff\xfe",
		"\u2028", "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "日本語テキスト", "café*", "a.b.c.", "...", "a\tb\nc", `"a b" *`, `"*"`, "NEAR", "AND",
		`col : "x" * OR y`, "read_file", "C:\\Users\\me", "%", "_", "a_b*", "\"a\"b\"c",
		"exampl*", "Exampl*", "alice@exampl*", "examina*", "naïv*", "example_te*", "/srv/exam2*", "read_fil*",
	} {
		f.Add(s)
	}
	l, _ := MustOpen(f, newKey(f))
	typed := &Reader{db: l.db, typedPrefixes: true}
	call(f, l, "files", "read_file", entry.Allow, "claude-code", `{"path":"/home/me/a b.txt","to":"alice@example.com"}`, entry.Succeeded, `"NEAR AND OR NOT a b c"`)
	call(f, l, "mail", "send_email", entry.Allow, "cursor", `{"to":"Alice@Examples.org","body":"Exámple naïve examination"}`, entry.Succeeded, `"queued: example_test"`)
	call(f, l, "files", "read_files", entry.Deny, "cursor", `{"paths":["/srv/example/readme.md","/srv/exam2024"]}`, "", "")
	f.Fuzz(func(t *testing.T, text string) {
		p, err := l.Search(context.Background(), Query{Text: text, Limit: 5})
		if err != nil {
			t.Fatalf("Search(%q) = %v", text, err)
		}
		// Shortened prefixes find what the query as typed finds.
		if want, err := typed.Search(context.Background(), Query{Text: text, Limit: 5}); err != nil || !slices.Equal(ids(p), ids(want)) {
			t.Errorf("Search(%q) = %v, as typed %v, %v", text, ids(p), ids(want), err)
		}
		for _, tm := range parseQuery(text) {
			if tm.words == "" || strings.Count(tm.fts(), `"`)%2 != 0 {
				t.Errorf("term %+v of %q", tm, text)
			}
			for _, lit := range tm.exact {
				if lit.text == "" || !isWordRune([]rune(lit.text)[0]) {
					t.Errorf("literal %+v of %q", lit, text)
				}
			}
		}
		if len(p.Hits) > 5 {
			t.Errorf("Search(%q): %d hits, limit 5", text, len(p.Hits))
		}
	})
}

func TestParseQuery(t *testing.T) {
	tests := []struct {
		in   string
		want string // FTS5 expression
	}{
		{"alice", `"alice"`},
		{"alice@example.com notes", `"alice@example.com" AND "notes"`},
		{`"send email" cursor`, `"send email" AND "cursor"`},
		{`invoice* "big inv*"`, `"invoice" * AND "big inv" *`},
		{"a OR b", `"a" AND "OR" AND "b"`},
		{`NEAR(a b)`, `"NEAR(a" AND "b"`},
		{`x"y z`, `"x" AND "y z"`},
		{`(alice)`, `"alice"`},
		{`@@ -- *`, ``},
		{"", ``},
	}
	for _, tt := range tests {
		if got := matchExpr(parseQuery(tt.in)); got != tt.want {
			t.Errorf("matchExpr(parseQuery(%q)) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func ExampleLog_Search() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "gatehouse-example-")
	defer os.RemoveAll(dir)
	st, _ := store.Open(ctx, filepath.Join(dir, "home"), nil)
	defer st.Close()
	l, _ := Open(ctx, st, exampleKey())

	r, _ := l.AppendReceipt(ctx, entry.Receipt{Server: "mail", Tool: "send_email", Decision: entry.Allow,
		Client: entry.Client{Name: "cursor"}}, []byte(`{"to":"alice@example.com"}`))
	l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte(`"sent"`))

	page, _ := l.Search(ctx, Query{Text: "alice@example.com"})
	for _, h := range page.Hits {
		fmt.Println(h.Kind, h.Capability(), h.Decision, h.Status, h.Client)
	}
	// Output:
	// receipt mcp.mail.send_email ALLOW SUCCEEDED cursor
}

// exampleKey is a fixed signing key for examples (a real one lives in the
// keychain).
func exampleKey() ed25519.PrivateKey { return ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize)) }

// Words typed past the index's prefix lengths are searched by their first
// letters and checked in the text (shortenPrefixes): the results must be
// exactly those of the query as typed, page for page, whatever the case,
// the accents, the punctuation or the filters.
func TestShortenedPrefixesFindTheSame(t *testing.T) {
	l, _ := MustOpen(t, newKey(t))
	typed := &Reader{db: l.db, typedPrefixes: true}
	words := []string{"example", "examples", "Example", "EXAMPLE", "exam", "examine", "examination", "exámple", "éxample",
		"example_test", "exam2024", "examp", "exampler", "naïve", "alice@example.com", "alice@examplz.org", "bob@example.com",
		"/srv/example/notes.txt", "read_file", "read_files", "reader", "readme", "readiness"}
	for i := range 240 {
		args, _ := json.Marshal(map[string]string{"note": words[i%len(words)] + " " + words[(i*7+3)%len(words)], "n": fmt.Sprint(i)})
		server := []string{"files", "mail"}[i%2]
		call(t, l, server, "read_file", []string{entry.Allow, entry.Deny}[i%3/2], "cursor", string(args), entry.Succeeded, `"done: `+words[(i*5+1)%len(words)]+`"`)
	}
	var queries []Query
	shortened := 0
	for _, w := range words {
		for n := 5; n <= len(w); n++ {
			text := TypedQuery(w[:n])
			if _, _, ok := shortenPrefixes(parseQuery(text)); ok {
				shortened++
			}
			queries = append(queries, Query{Text: text}, Query{Text: text, Server: "mail"}, Query{Text: "read* " + text, Decision: entry.Allow})
		}
	}
	if shortened < 20 {
		t.Fatalf("only %d queries take the shortened path", shortened)
	}
	if _, err := l.CatchUpIndex(context.Background()); err != nil {
		t.Fatal(err)
	}
	found := 0
	for _, q := range queries {
		q.Limit = 9
		for {
			want, err := typed.Search(context.Background(), q)
			if err != nil {
				t.Fatal(err)
			}
			got := mustSearch(t, l, q)
			if !slices.Equal(ids(got), ids(want)) || got.Next != want.Next {
				t.Fatalf("Search(%+v) = %v (next %d), as typed %v (next %d)", q, ids(got), got.Next, ids(want), want.Next)
			}
			found += len(got.Hits)
			if got.Next == 0 {
				break
			}
			q.Before = got.Next
		}
	}
	if found == 0 {
		t.Fatal("no query found anything")
	}
}

// programCall appends the receipt and outcome of step step of a run of
// program name.
func programCall(tb testing.TB, l *Log, name, trace, step string, seq int, args string) (r, o *entry.Entry) {
	tb.Helper()
	ctx := context.Background()
	r, err := l.AppendReceipt(ctx, entry.Receipt{
		Capability: entry.Capability("fs", "read_text_file"), Server: "fs", Tool: "read_text_file",
		Decision: entry.Allow, Rule: "reads", Client: entry.Client{Name: "claude-code"},
		Program: &entry.Program{Name: name, Hash: "sha256:00", Trace: trace, Step: step, Seq: seq},
	}, []byte(args))
	if err != nil {
		tb.Fatal(err)
	}
	o, err = l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, []byte(`"done"`))
	if err != nil {
		tb.Fatal(err)
	}
	return r, o
}

// A program's step is found by the program's name, the run's trace id and
// the step's name: in a log written before step 8 (whose index then holds
// the step without them), once the step has run, and in a new one.
func TestSearchProgramFields(t *testing.T) {
	ctx := context.Background()
	dir, key := t.TempDir(), newKey(t)
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	old, err := open(ctx, st, key, false, migrations[:programStep-1])
	if err != nil {
		t.Fatal(err)
	}
	const trace = "tr_K7QX2M4PZB3N5RT6VW8Y"
	r1, o1 := programCall(t, old, "tidy-notes", trace, "readtoday", 1, `{"path":"/n/today.md"}`)
	call(t, old, "fs", "read_text_file", entry.Allow, "claude-code", `{"path":"/n/tidy.md"}`, entry.Succeeded, `"x"`)
	if _, err := old.CatchUpIndex(ctx); err != nil {
		t.Fatal(err)
	}
	// One step the index has not taken in yet when the schema changes.
	old.index.mu.Lock()
	old.index.off = true
	old.index.mu.Unlock()
	r2, o2 := programCall(t, old, "tidy-notes", trace, "savetoday", 2, `{"path":"/n/out.md"}`)
	if got := ids(mustSearch(t, &Reader{db: st.DB()}, Query{Text: trace})); len(got) != 0 {
		t.Fatalf("before step 8, Search(trace) = %v, want nothing (the schema has no program text)", got)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}

	st, err = store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	l, err := Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	run := []string{o2.ID, r2.ID, o1.ID, r1.ID}
	for _, q := range []Query{{Text: trace}, {Text: strings.ToLower(trace)}, {Text: "tidy-notes", Kind: "receipt"}, {Text: "readtoday"}} {
		want := run
		switch {
		case q.Kind == "receipt":
			want = []string{r2.ID, r1.ID}
		case q.Text == "readtoday":
			want = []string{o1.ID, r1.ID}
		}
		if got := ids(mustSearch(t, l, q)); !slices.Equal(got, want) {
			t.Errorf("Search(%+v) = %v, want %v", q, got, want)
		}
	}
	// The payloads are found as before, and the index is whole.
	if got := ids(mustSearch(t, l, Query{Text: "today.md"})); !slices.Equal(got, []string{r1.ID}) {
		t.Errorf("Search(today.md) = %v, want %v", got, []string{r1.ID})
	}
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		t.Errorf("FTS integrity-check after step 8: %v", err)
	}

	// A step appended now, and an erasure of a step's arguments.
	r3, o3 := programCall(t, l, "weekly", "tr_AAAABBBBCCCCDDDDEEEE", "summarize", 1, `{"path":"/n/week.md"}`)
	if got := ids(mustSearch(t, l, Query{Text: "summarize"})); !slices.Equal(got, []string{o3.ID, r3.ID}) {
		t.Errorf("Search(summarize) = %v, want %v", got, []string{o3.ID, r3.ID})
	}
	if _, err := l.Erase(ctx, []string{r1.ID}, "request 9"); err != nil {
		t.Fatal(err)
	}
	if got := ids(mustSearch(t, l, Query{Text: "today.md"})); len(got) != 0 {
		t.Errorf("Search(today.md) after its erasure = %v, want nothing", got)
	}
	if got := ids(mustSearch(t, l, Query{Text: trace})); !slices.Equal(got, run) {
		t.Errorf("Search(trace) after an erasure = %v, want %v: the step is still named", got, run)
	}
	if _, err := st.DB().ExecContext(ctx, `INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		t.Errorf("FTS integrity-check after the erasure: %v", err)
	}
}
