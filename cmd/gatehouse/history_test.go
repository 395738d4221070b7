package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// needKeychain skips a test that opens the evidence log (its key lives in
// the keychain) when none can be reached: make test provides a private one.
func needKeychain(tb testing.TB) {
	tb.Helper()
	if runtime.GOOS == "linux" && os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" {
		tb.Skip("no D-Bus session bus for the keychain: run under .ci/keyring-session.sh (make test does)")
	}
}

// seededHome returns a home folder whose evidence log, signed with the
// home's own key as the proxy's entries are, holds a few calls.
func seededHome(tb testing.TB) (home string, ids map[string]string) {
	tb.Helper()
	ctx := context.Background()
	home = tb.TempDir()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		tb.Fatal(err)
	}
	defer st.Close()
	key, err := vaultFor(st).SigningKey()
	if err != nil {
		tb.Fatal(err)
	}
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		tb.Fatal(err)
	}
	ids = map[string]string{}
	call := func(name, server, tool, decision, client, args, status, result string) {
		r, err := l.AppendReceipt(ctx, entry.Receipt{Capability: entry.Capability(server, tool), Server: server, Tool: tool,
			Decision: decision, Rule: "test", Client: entry.Client{Name: client}}, []byte(args))
		if err != nil {
			tb.Fatal(err)
		}
		ids[name] = r.ID
		if status != "" {
			o, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: status}, []byte(result))
			if err != nil {
				tb.Fatal(err)
			}
			ids[name+"-outcome"] = o.ID
		}
	}
	call("read", "files", "read_file", entry.Allow, "claude-code", `{"path":"/home/me/notes.txt"}`, entry.Succeeded, `{"content":[{"type":"text","text":"shopping list"}]}`)
	call("mail", "mail", "send_email", entry.Allow, "cursor", `{"to":"alice@example.com"}`, entry.Succeeded, `"sent to alice@example.com"`)
	call("denied", "mail", "send_email", entry.Deny, "cursor", `{"to":"malice@example.com"}`, "", "")
	call("write", "files", "write_file", entry.Allow, "claude-code", `{"path":"/etc/hosts"}`, entry.Failed, `{"isError":true}`)
	return home, ids
}

// runIn runs the command line in this process on home, with stdin.
func runIn(tb testing.TB, home, stdin string, args ...string) (code int, stdout, stderr string) {
	tb.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), append([]string{"--home", home}, args...), strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestHistory(t *testing.T) {
	needKeychain(t)
	home, ids := seededHome(t)

	// The table: newest first, one line per entry, the key entry last.
	code, out, errs := runIn(t, home, "", "history")
	if code != 0 {
		t.Fatalf("history: exit %d, %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 9 || !regexp.MustCompile(`^TIME +KIND +DECISION +STATUS +CAPABILITY +CLIENT +ID$`).MatchString(lines[0]) {
		t.Fatalf("history =\n%s", out)
	}
	want := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d +outcome +ALLOW +FAILED +mcp\.files\.write_file +claude-code +` + ids["write-outcome"] + `$`)
	if !want.MatchString(lines[1]) {
		t.Errorf("newest line = %q, want %v", lines[1], want)
	}
	if !regexp.MustCompile(`key +- +- +- +- +k-`).MatchString(lines[8]) {
		t.Errorf("oldest line = %q, want the key entry", lines[8])
	}

	// Words, filters, pages.
	code, out, _ = runIn(t, home, "", "history", "alice@example.com")
	if code != 0 || strings.Count(out, "\n") != 3 || !strings.Contains(out, ids["mail"]) || strings.Contains(out, ids["denied"]) {
		t.Errorf("history alice@example.com =\n%s", out)
	}
	code, out, _ = runIn(t, home, "", "history", "--decision", "deny", "--kind", "receipt")
	if code != 0 || strings.Count(out, "\n") != 2 || !strings.Contains(out, ids["denied"]) {
		t.Errorf("history --decision deny =\n%s", out)
	}
	code, out, errs = runIn(t, home, "", "history", "--server", "files", "--limit", "2")
	if code != 0 || strings.Count(out, "\n") != 3 {
		t.Errorf("history --limit 2 =\n%s", out)
	}
	m := regexp.MustCompile(`hint: next page: --before (\d+)`).FindStringSubmatch(errs)
	if m == nil {
		t.Fatalf("no next-page hint in %q", errs)
	}
	_, out, errs = runIn(t, home, "", "history", "--server", "files", "--limit", "2", "--before", m[1])
	if strings.Count(out, "\n") != 3 || !strings.Contains(out, ids["read"]) || strings.Contains(errs, "next page") {
		t.Errorf("second page =\n%s%s", out, errs)
	}

	// JSON.
	_, out, _ = runIn(t, home, "", "history", "--status", "failed", "--json")
	var page struct {
		Hits []map[string]any `json:"hits"`
		Next int64            `json:"next"`
	}
	if err := json.Unmarshal([]byte(out), &page); err != nil || len(page.Hits) != 2 || page.Hits[0]["receipt"] != ids["write"] ||
		page.Hits[0]["capability"] != "mcp.files.write_file" || page.Next != 0 {
		t.Errorf("history --json = %s (%v)", out, err)
	}

	// Mistakes.
	for _, args := range [][]string{
		{"history", "--decision", "maybe"}, {"history", "--kind", "call"}, {"history", "--from", "yesterday"},
		{"history", "--limit", "0"}, {"history", "show"}, {"erase", ids["read"]},
	} {
		if code, _, errs := runIn(t, home, "", args...); code != 2 || !strings.Contains(errs, "hint:") {
			t.Errorf("%q: exit %d, %q; want a usage error", args, code, errs)
		}
	}
}

func TestHistoryShowAndErase(t *testing.T) {
	needKeychain(t)
	home, ids := seededHome(t)

	// A receipt, its arguments, and its outcome with its result.
	code, out, errs := runIn(t, home, "", "history", "show", ids["mail"])
	if code != 0 {
		t.Fatalf("history show: exit %d, %s", code, errs)
	}
	for _, want := range []string{
		"receipt " + ids["mail"] + " (index ", `"decision": "ALLOW"`, "args:\n{\n  \"to\": \"alice@example.com\"\n}",
		"outcome " + ids["mail-outcome"], `"status": "SUCCEEDED"`, "result:\n\"sent to alice@example.com\"",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history show %s lacks %q:\n%s", ids["mail"], want, out)
		}
	}
	_, out, _ = runIn(t, home, "", "history", "show", ids["denied"])
	if !strings.Contains(out, "no outcome") {
		t.Errorf("history show of a denied call:\n%s", out)
	}
	if code, _, errs := runIn(t, home, "", "history", "show", "r-nope"); code != 1 || !strings.Contains(errs, "not found") || !strings.Contains(errs, "hint:") {
		t.Errorf("history show r-nope: exit %d, %q", code, errs)
	}

	// Erase by id.
	code, _, errs = runIn(t, home, "", "erase", ids["read"], ids["read-outcome"], "--reason", "test")
	if code != 0 || !regexp.MustCompile(`erased 2 payloads \(erasure entry e-\w+\)`).MatchString(errs) {
		t.Fatalf("erase: exit %d, %s", code, errs)
	}
	eid := regexp.MustCompile(`e-\w+`).FindString(errs)
	_, out, _ = runIn(t, home, "", "history", "show", ids["read"])
	if !strings.Contains(out, "args: erased by "+eid) || !strings.Contains(out, "result: erased by "+eid) || strings.Contains(out, "notes.txt") {
		t.Errorf("history show after erasure:\n%s", out)
	}
	if _, out, _ := runIn(t, home, "", "history", "shopping"); out != "" {
		t.Errorf("erased text still found:\n%s", out)
	}
	_, _, errs = runIn(t, home, "", "erase", ids["read"], "--reason", "again")
	if !strings.Contains(errs, "nothing to erase") {
		t.Errorf("erasing again: %s", errs)
	}

	// Erase by query: confirmation, refused then given.
	code, _, errs = runIn(t, home, "n\n", "erase", "--match", "alice@example.com", "--reason", "GDPR request 42")
	if code != 1 || !strings.Contains(errs, "erase the payloads of 2 entries?") || !strings.Contains(errs, "nothing erased") {
		t.Errorf("erase --match, answered n: exit %d, %s", code, errs)
	}
	code, _, errs = runIn(t, home, "y\n", "erase", "--match", "alice@example.com", "--reason", "GDPR request 42")
	if code != 0 || !strings.Contains(errs, "erased 2 payloads") {
		t.Errorf("erase --match, answered y: exit %d, %s", code, errs)
	}
	if _, out, _ := runIn(t, home, "", "history", "alice@example.com"); out != "" {
		t.Errorf("erased address still found:\n%s", out)
	}
	// malice@example.com is someone else.
	if _, out, _ := runIn(t, home, "", "history", "malice@example.com"); !strings.Contains(out, ids["denied"]) {
		t.Errorf("malice@example.com no longer found:\n%s", out)
	}
	code, _, errs = runIn(t, home, "", "erase", "--match", "alice@example.com", "--reason", "again", "--yes")
	if code != 0 || !strings.Contains(errs, "no payloads to erase") {
		t.Errorf("erase --match again: exit %d, %s", code, errs)
	}
	// Everything is refused; by time range is not.
	if code, _, errs := runIn(t, home, "", "erase", "--match", "", "--reason", "all", "--yes"); code != 2 || !strings.Contains(errs, "selects every entry") {
		t.Errorf("erase --match '': exit %d, %s", code, errs)
	}
	soon := time.Now().Add(time.Hour).Format(time.RFC3339)
	code, _, errs = runIn(t, home, "", "erase", "--match", "", "--to", soon, "--reason", "retention", "--yes")
	if code != 0 || !strings.Contains(errs, "erased 3 payloads") { // the denied call's arguments, the failed write's and its result
		t.Errorf("erase --match '' --to: exit %d, %s", code, errs)
	}
}

// TestHistoryShowNotKept: arguments and a result over the log's payload
// cap are shown as not kept, with their size and the cap, and the bundle
// of the log verifies.
func TestHistoryShowNotKept(t *testing.T) {
	needKeychain(t)
	ctx := context.Background()
	home, _ := seededHome(t)
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	key, err := vaultFor(st).SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	big := []byte(`{"content":"` + strings.Repeat("x", receipts.MaxStoredPayload) + `"}`)
	r, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.write_file", Server: "files", Tool: "write_file",
		Decision: entry.Allow, Rule: "test", Client: entry.Client{Name: "cursor"}}, big)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded}, big); err != nil {
		t.Fatal(err)
	}
	st.Close()

	code, out, errs := runIn(t, home, "", "history", "show", r.ID)
	if code != 0 {
		t.Fatalf("history show: exit %d, %s", code, errs)
	}
	notKept := fmt.Sprintf("not kept: %d bytes, over the log's cap of %d bytes; the entry commits to all of it", len(big), receipts.MaxStoredPayload)
	for _, want := range []string{
		`"args_not_kept": {`, fmt.Sprintf(`"size": %d`, len(big)), `"result_not_kept": {`,
		"args: " + notKept, "result: " + notKept,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("history show %s lacks %q:\n%s", r.ID, want, out)
		}
	}
	if strings.Contains(out, "xxxxxxxx") {
		t.Errorf("history show prints a payload that was not kept:\n%.2000s", out)
	}

	bundle := filepath.Join(t.TempDir(), "bundle")
	if code, _, errs := runIn(t, home, "", "export", "--out", bundle); code != 0 {
		t.Fatalf("export: exit %d, %s", code, errs)
	}
	code, out, errs = runIn(t, home, "", "verify", bundle)
	if code != 0 || !strings.Contains(out, "2 not kept") || !strings.Contains(out, "not kept: the args of entry ") {
		t.Errorf("verify: exit %d\n%s%s", code, out, errs)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 5, 10, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		in, want string
	}{
		{"2026-05-01T10:00:00Z", "2026-05-01T10:00:00Z"},
		{"2026-05-01T10:00:00+02:00", "2026-05-01T08:00:00Z"},
		{"90m", "2026-05-10T10:30:00Z"},
		{"7d", "2026-05-03T12:00:00Z"},
		{"1.5d", "2026-05-09T00:00:00Z"},
	}
	for _, tt := range tests {
		got, err := parseTime(tt.in, now)
		if err != nil || got.UTC().Format("2006-01-02T15:04:05Z07:00") != tt.want {
			t.Errorf("parseTime(%q) = %v, %v; want %s", tt.in, got.UTC(), err, tt.want)
		}
	}
	if got, err := parseTime("2026-05-01", now); err != nil || got.Hour() != 0 || got.Location() != time.Local {
		t.Errorf("parseTime(a date) = %v, %v; want local midnight", got, err)
	}
	for _, bad := range []string{"", "yesterday", "-5m", "2026-13-01", "d"} {
		if _, err := parseTime(bad, now); err == nil {
			t.Errorf("parseTime(%q) succeeded", bad)
		}
	}
}

// After an update that changes the search index, a small log's entries
// move into the new one when a writer first opens it (a large one's move in
// the background: receipts' and the app's tests): --upgrade-index is one,
// and says there is nothing left to do after.
func TestHistoryUpgradeIndex(t *testing.T) {
	needKeychain(t)
	home, ids := seededHome(t)
	ctx := context.Background()
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The state schema step 4 of the log leaves a log in.
	for _, stmt := range []string{
		`ALTER TABLE search_fts RENAME TO search_retired`,
		`CREATE VIRTUAL TABLE search_fts USING fts5 (server, tool, decision, client, text,
			content = 'search_source', content_rowid = 'idx', tokenize = 'unicode61 remove_diacritics 2', prefix = '3 4')`,
		`INSERT OR REPLACE INTO search_meta (key, value) SELECT 'reindex_from', max(idx) + 1 FROM entries`,
		`INSERT OR REPLACE INTO search_meta (key, value) SELECT 'retired_to', max(idx) + 1 FROM entries`,
	} {
		if _, err := st.DB().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()

	// history reads and writes nothing: it finds the entries in both
	// indexes, and says the upgrade is under way.
	code, out, errs := runIn(t, home, "", "history", "ali*")
	if code != 0 || !strings.Contains(out, ids["mail"]) || !strings.Contains(errs, "the search index is being upgraded") {
		t.Fatalf("history ali* after the update: exit %d\n%s%s", code, out, errs)
	}
	if code, _, errs := runIn(t, home, "", "history", "--upgrade-index", "ali*"); code != 2 || !strings.Contains(errs, "give it alone") {
		t.Errorf("--upgrade-index with words: exit %d, %s", code, errs)
	}
	code, _, errs = runIn(t, home, "", "history", "--upgrade-index")
	if code != 0 || strings.Contains(errs, "to move") || !strings.Contains(errs, "is up to date") {
		t.Fatalf("history --upgrade-index: exit %d, %s", code, errs)
	}
	st, err = store.Open(ctx, home, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var retired int
	st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE name LIKE 'search_retired%'`).Scan(&retired)
	if retired != 0 {
		t.Errorf("the retired index is still in the database")
	}
}
