package receipts

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Search.
//
// [Log.Search] finds entries by words in their server, tool, decision and
// client, in the text of their payloads (the arguments of a receipt, the
// result of an outcome: already redacted by the gateway) and, for a
// governed program's step, in its program's name, trace id and step name
// (programMigration), with filters on
// the same columns and on time, newest first, a page at a time.
//
// The full-text index is SQLite's FTS5 (compiled into modernc.org/sqlite),
// built as migration step 2 ([searchMigration]). It follows the log: an
// append does not wait for it, and an indexer takes in the entries after
// its cursor in transactions of its own (indexer.go), in the background of
// every process that appends and when the log is opened. A search says how
// many entries it has yet to take in ([Page.Unindexed]). Erasure updates
// the index in its own transaction, for the entries it holds.

// searchMigration is step 2 of the log's schema: the full-text index and
// the indexes the filters use.
//
// The design, and why:
//
//   - External content, read from a view (search_source) that computes each
//     entry's indexed text from the entries and payloads tables: the text is
//     not stored a second time (results can be large), and yet FTS5 can be
//     told exactly what it indexed for a row, because the view recomputes it
//     from the same bytes. Erasure needs that: in secure-delete mode, FTS5
//     removes a deleted row's terms from the index pages themselves, and
//     SQLite's secure_delete pragma (in the store's DSN) zeroes the freed
//     space; so an erased address or name is gone from the database file,
//     not merely hidden. A contentless table with contentless_delete=1 would
//     also not store the text, but it deletes by tombstone: measured, the
//     erased terms stay in the file until FTS5 happens to merge those
//     segments, which nothing bounds.
//   - Secure-delete is switched on only inside an erasure's transaction
//     ([Log.unindexTx]), not stored on: FTS5 in that mode also searches the
//     index, at every commit, for each term that occurs 64 times or more in
//     a new row (it mistakes part of the count for a delete flag), which
//     doubled the cost of appending a 100 KB result.
//   - The view extracts the string and integer values of a JSON payload
//     (json_tree, in document order), not its raw text: the raw form would
//     index keys and escapes ("line1\nline2" would give the token "nline2",
//     "é" written \u00e9 the token "u00e9"). A payload that is not JSON is
//     indexed as text (quoted, it is one JSON string). The view must give
//     the same text for a row for as long as the row is indexed: never
//     change it in place; a new extraction is a new migration that deletes
//     and re-inserts every row.
//     FTS5's own 'rebuild' and 'integrity-check' with rank=1 cannot read the
//     view (FTS5 reads its content without table-valued functions such as
//     json_tree); insert from the view instead, as this step does.
//   - Tokenizer unicode61 with remove_diacritics 2 and no extra tokenchars:
//     words are runs of letters and digits, folded for case and accents. An
//     email, a path or a tool name is several words ("alice", "example",
//     "com"), so that a search for "example.com", "notes.txt" or "file"
//     finds "alice@example.com", "/home/me/notes.txt" and "read_file".
//     tokenchars "@._-/" would make each of those one token and the parts
//     unsearchable. Exactness comes from the query side instead: a query
//     word with punctuation inside ("alice@example.com") is searched as the
//     phrase of its words, and each candidate is checked to contain it as
//     typed, at word boundaries ([Query]). The trigram tokenizer gives
//     substring matches with no such check, but measured on the benchmark's
//     payloads (docs/performance.md) its index was 5x larger (nearly as
//     large as the entries and payloads themselves, against a fifth of
//     them), indexing took 10x as long per entry and queries 2-6x as long;
//     and it finds "alice@example.com" inside "malice@example.com", another
//     person: the wrong answer for an erasure.
//   - detail=full (the default): phrases need token positions.
//   - No ranking: results come in log order, newest first, by rowid (the
//     entry's index), which FTS5 walks backwards without sorting. bm25 over a
//     common term at a million rows takes seconds.
//   - An outcome's row carries its receipt's server, tool, decision and
//     client (copied when it is appended), and a pin event's row its server
//     and tool, so that filters and words find the whole call, and history
//     shows who made it.
//   - A time range becomes a range of indexes, through the time index:
//     appends are serialized, so entries' times follow their order, unless
//     the wall clock stepped back between two appends. The append hook
//     watches for that and records it in search_meta (unordered_times);
//     from then on time filters scan instead, exact but slower.
//   - One b-tree index per filter column. An index on a column of few values
//     (decision, kind) still pays off for the rare values (DENY); each costs
//     an append a few microseconds next to its fsync.
const searchMigration = `
	CREATE INDEX entries_server ON entries (server);
	CREATE INDEX entries_decision ON entries (decision);
	CREATE INDEX entries_status ON entries (status);
	CREATE INDEX entries_kind ON entries (kind);
	UPDATE entries SET server = r.server, tool = r.tool, decision = r.decision, client = r.client
		FROM entries AS r WHERE entries.kind = 'outcome' AND r.kind = 'receipt' AND r.id = entries.receipt_id;
	UPDATE entries SET
		server = coalesce(json_extract(CAST(data AS TEXT), '$.body.server'), ''),
		tool = coalesce(json_extract(CAST(data AS TEXT), '$.body.tool'), '')
		WHERE kind = 'pin';
	CREATE TABLE search_meta (
		key   TEXT    NOT NULL PRIMARY KEY,
		value INTEGER NOT NULL
	) STRICT;
	INSERT INTO search_meta (key, value) SELECT 'unordered_times', 1 WHERE EXISTS (
		SELECT 1 FROM (SELECT time_ns < lag(time_ns) OVER (ORDER BY idx) AS back FROM entries) WHERE back);
	CREATE VIEW search_source (idx, server, tool, decision, client, text) AS
		SELECT e.idx, e.server, e.tool, e.decision, e.client, coalesce((
			SELECT group_concat(j.value, char(10) ORDER BY p.part, j.id)
			FROM payloads AS p, json_tree(iif(json_valid(CAST(p.data AS TEXT)),
				CAST(p.data AS TEXT), json_quote(CAST(p.data AS TEXT)))) AS j
			WHERE p.entry_idx = e.idx AND p.data IS NOT NULL AND j.type IN ('text', 'integer')), '')
		FROM entries AS e;
	CREATE VIRTUAL TABLE search_fts USING fts5 (server, tool, decision, client, text,
		content = 'search_source', content_rowid = 'idx', tokenize = 'unicode61 remove_diacritics 2');
	INSERT INTO search_fts (rowid, server, tool, decision, client, text)
		SELECT idx, server, tool, decision, client, text FROM search_source`

// programMigration is step 8 of the log's schema: a receipt of a
// governed program's step (its body's program) and that receipt's outcome
// are found by the program's name, the run's trace id and the step's name.
// A table, entry_programs, holds the three for those entries, on lines of
// their own ([programText]); search_source puts them before the payloads'
// text. An entry without a program reads as before, so the index keeps
// its rows; the rows of the entries with one are taken out of the index
// with the text they were indexed with, and put back with the new.
//
// A table of its own rather than a column of entries: adding a column to a
// STRICT table makes SQLite check every row (1.7 s at a million receipts),
// while the proxy that opens the log waits and holds its write lock.
//
// Only search_fts holds those rows: programs came after step 4, so a log
// with a program's receipt was past step 4 when it was written, and the
// entry is at or after reindex_from. The entries at or after the indexer's
// cursor are in no index yet, and are taken in as they read now.
//
// The program is in a receipt's signed body, so finding them reads the
// receipts' rows: 10.6 s at a million receipts. So only the receipts
// written since step 7 ran are read (from a day before it, through the
// time index): programs came after step 7, so a log's program receipts
// were all written after its step 7. A log whose clock ever stepped back
// (unordered_times) is read whole. The step took 3.7 ms on the
// million-receipt log of BenchmarkSearch, upgraded from step 7.
const programMigration = `
	CREATE TABLE entry_programs (
		idx     INTEGER NOT NULL PRIMARY KEY, -- the entry's index
		program TEXT    NOT NULL              -- its program, trace and step, a line each
	) STRICT;
	CREATE TEMP TABLE program_scan AS SELECT coalesce((
		SELECT CASE
			WHEN EXISTS (SELECT 1 FROM search_meta WHERE key = 'unordered_times') THEN 0
			WHEN unixepoch(substr(m.applied_at, 1, 19)) IS NULL THEN 0
			ELSE coalesce((SELECT idx FROM entries WHERE time_ns >= 1000000000 * (unixepoch(substr(m.applied_at, 1, 19)) - 86400)
					ORDER BY time_ns LIMIT 1),
				(SELECT coalesce(max(idx) + 1, 0) FROM entries)) END
		FROM migrations AS m WHERE m.component = 'receipts' AND m.version = 7), 0) AS from_idx;
	INSERT INTO entry_programs (idx, program)
		SELECT idx, json_extract(b, '$.body.program.name') || char(10) || json_extract(b, '$.body.program.trace')
			|| char(10) || json_extract(b, '$.body.program.step')
		FROM (SELECT idx, CAST(data AS TEXT) AS b FROM entries
			WHERE idx >= (SELECT from_idx FROM temp.program_scan) AND +kind = 'receipt' AND instr(data, '"program":{') > 0)
		WHERE json_type(b, '$.body.program') = 'object';
	DROP TABLE temp.program_scan;
	INSERT INTO entry_programs (idx, program)
		SELECT o.idx, p.program FROM entry_programs AS p JOIN entries AS r ON r.idx = p.idx
			JOIN entries AS o ON o.receipt_id = r.id AND o.kind = 'outcome';
	INSERT INTO search_fts (search_fts, rowid, server, tool, decision, client, text)
		SELECT 'delete', idx, server, tool, decision, client, text FROM search_source
		WHERE idx IN (SELECT idx FROM entry_programs)
			AND idx < (SELECT value FROM search_meta WHERE key = 'indexed_to')
			AND idx >= coalesce((SELECT value FROM search_meta WHERE key = 'reindex_from'), 0);
	DROP VIEW search_source;
	CREATE VIEW search_source (idx, server, tool, decision, client, text) AS
		SELECT e.idx, e.server, e.tool, e.decision, e.client,
			CASE WHEN p.program IS NULL THEN ` + payloadText + ` ELSE p.program || char(10) || ` + payloadText + ` END
		FROM entries AS e LEFT JOIN entry_programs AS p ON p.idx = e.idx;
	INSERT INTO search_fts (rowid, server, tool, decision, client, text)
		SELECT idx, server, tool, decision, client, text FROM search_source
		WHERE idx IN (SELECT idx FROM entry_programs)
			AND idx < (SELECT value FROM search_meta WHERE key = 'indexed_to')
			AND idx >= coalesce((SELECT value FROM search_meta WHERE key = 'reindex_from'), 0)`

// payloadText is the text of entry e's payloads, as search_source reads it
// (searchMigration explains).
const payloadText = `coalesce((
			SELECT group_concat(j.value, char(10) ORDER BY p.part, j.id)
			FROM payloads AS p, json_tree(iif(json_valid(CAST(p.data AS TEXT)),
				CAST(p.data AS TEXT), json_quote(CAST(p.data AS TEXT)))) AS j
			WHERE p.entry_idx = e.idx AND p.data IS NOT NULL AND j.type IN ('text', 'integer')), '')`

// programStep is the schema step of programMigration.
const programStep = 8

// programText is an entry's row in entry_programs: the program's name,
// the trace id and the step's name, a line each.
func programText(p *entry.Program) string {
	return p.Name + "\n" + p.Trace + "\n" + p.Step
}

// columnsTx fills in the searchable columns of a new entry that the
// append could not write with its row, inside the transaction that appends
// it (a hook in appendTx): an outcome its receipt's program (the append
// gave its row the receipt's other columns; receiptIdx is the receipt's
// index), a pin event its server and tool, a receipt its program (read
// from its signed body, so that what is found is what was signed). (The
// append itself records a step back of the wall clock.) The full-text
// index takes the entry in later (indexer.go). Its statements are
// prepared once (l.stmts).
func (l *Reader) columnsTx(ctx context.Context, tx *sql.Tx, e *entry.Entry, receiptIdx int64) error {
	switch e.Kind {
	case entry.KindOutcome:
		if !l.programs {
			break
		}
		// A look-up of the receipt's row by its key: most receipts have
		// no program, and then nothing is written.
		if _, err := l.stmts.exec(ctx, tx, `INSERT INTO entry_programs (idx, program)
			SELECT ?, program FROM entry_programs WHERE idx = ?`, e.Index, receiptIdx); err != nil {
			return fmt.Errorf("index entry %d: %w", e.Index, err)
		}
	case entry.KindReceipt:
		if !l.programs || !bytes.Contains(e.Body, []byte(`"program":{`)) {
			break
		}
		var r struct {
			Program *entry.Program `json:"program"`
		}
		if err := json.Unmarshal(e.Body, &r); err != nil || r.Program == nil {
			break
		}
		if _, err := l.stmts.exec(ctx, tx, `INSERT INTO entry_programs (idx, program) VALUES (?, ?)`, e.Index, programText(r.Program)); err != nil {
			return fmt.Errorf("index entry %d: %w", e.Index, err)
		}
	case entry.KindPin:
		var p entry.PinEvent
		if err := json.Unmarshal(e.Body, &p); err == nil {
			if _, err := l.stmts.exec(ctx, tx, `UPDATE entries SET server = ?, tool = ? WHERE idx = ?`, p.Server, p.Tool, e.Index); err != nil {
				return fmt.Errorf("index entry %d: %w", e.Index, err)
			}
		}
	}
	return nil
}

// unindexTx takes entries out of the search index; reindexTx puts them back
// as they are now. Erase calls the first before it deletes payloads (FTS5
// must be told what the row held to remove its terms) and the second after.
// While the index is being upgraded (reindex.go), an entry may be in two
// indexes: both are kept in step.
//
// The deletes run in FTS5's secure-delete mode, which rewrites the index
// pages that hold the terms instead of adding delete markers beside them;
// FTS5 applies the mode when it writes its pending changes, so they are
// written ('flush', an FTS5 command its documentation leaves out) before
// the mode is switched off again, in the same transaction: no other
// connection ever sees it on. TestEraseLeavesIndex checks that the terms
// leave the database file.
//
// Entries at or after the indexer's cursor are in no index yet: they are
// left alone, and the indexer, when it comes to them, reads them as they
// are then, erased.
func (l *Log) unindexTx(ctx context.Context, tx *sql.Tx, idxs []int64) error {
	st, err := readIndexState(ctx, tx)
	if err != nil {
		return fmt.Errorf("unindex: %w", err)
	}
	byIndex := map[string][]int64{}
	for _, idx := range dedup(idxs) {
		if idx >= st.indexedTo {
			continue
		}
		for _, fts := range st.indexes(idx) {
			byIndex[fts] = append(byIndex[fts], idx)
		}
	}
	for fts, idxs := range byIndex {
		if _, err := l.stmts.exec(ctx, tx, `INSERT INTO `+fts+` (`+fts+`, rank) VALUES ('secure-delete', 1)`); err != nil {
			return fmt.Errorf("unindex: %w", err)
		}
		for _, idx := range idxs {
			if _, err := l.stmts.exec(ctx, tx, `INSERT INTO `+fts+` (`+fts+`, rowid, server, tool, decision, client, text)
				SELECT 'delete', idx, server, tool, decision, client, text FROM search_source WHERE idx = ?`, idx); err != nil {
				return fmt.Errorf("unindex entry %d: %w", idx, err)
			}
		}
		for _, cmd := range []string{`INSERT INTO ` + fts + ` (` + fts + `) VALUES ('flush')`,
			`INSERT INTO ` + fts + ` (` + fts + `, rank) VALUES ('secure-delete', 0)`} {
			if _, err := l.stmts.exec(ctx, tx, cmd); err != nil {
				return fmt.Errorf("unindex: %w", err)
			}
		}
	}
	return nil
}

func (l *Log) reindexTx(ctx context.Context, tx *sql.Tx, idxs []int64) error {
	st, err := readIndexState(ctx, tx)
	if err != nil {
		return fmt.Errorf("index: %w", err)
	}
	for _, idx := range dedup(idxs) {
		if idx >= st.indexedTo {
			continue
		}
		for _, fts := range st.indexes(idx) {
			if _, err := l.stmts.exec(ctx, tx, `INSERT INTO `+fts+` (rowid, server, tool, decision, client, text)
				SELECT idx, server, tool, decision, client, text FROM search_source WHERE idx = ?`, idx); err != nil {
				return fmt.Errorf("index entry %d: %w", idx, err)
			}
		}
	}
	return nil
}

func dedup(idxs []int64) []int64 {
	seen := make(map[int64]bool, len(idxs))
	out := idxs[:0:0]
	for _, i := range idxs {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	return out
}

// Page sizes of [Log.Search].
const (
	DefaultLimit = 50
	MaxLimit     = 1000
)

// ErrQuery wraps the errors of a query that cannot run (an unknown kind, a
// negative limit). Words never cause one: any text is a valid query.
var ErrQuery = errors.New("invalid query")

// A Query selects entries of the log. The zero Query selects them all.
//
// Text is words to find, each of which must appear in an entry's server,
// tool, decision, client or payload text, or the program, trace and step
// it was a step of (case and accents aside). Words
// are letters and digits; other characters separate them, except that:
//
//   - a word with punctuation inside, such as alice@example.com,
//     /home/me/notes.txt or read_file, must appear exactly so (case aside),
//     starting and ending at word boundaries: alice@example.com does not
//     find malice@example.com or alice.example.com;
//   - "double quotes" make a phrase: its words must appear in that order,
//     next to each other;
//   - a star at the end of a word or phrase (invoice*) matches any word
//     that starts so.
//
// Nothing else is an operator: AND, OR, NOT, NEAR, parentheses, colons and
// other stars are searched for as text or ignored. A Text with no letters
// or digits matches nothing.
type Query struct {
	Text     string
	From, To time.Time // entries at or after From and before To; zero means unbounded
	Server   string    // exact
	Decision string    // ALLOW, DENY, APPROVAL_REQUIRED (any case)
	Status   string    // SUCCEEDED, FAILED, UNKNOWN (any case): an outcome's, or a receipt's outcome's
	Kind     string    // receipt, outcome, key, policy, pin, erasure
	Before   int64     // cursor: only entries with a smaller index; 0 starts at the newest
	Limit    int       // page size; 0 means DefaultLimit, more than MaxLimit means MaxLimit

	erasable bool // only entries with a payload not yet erased
}

// IsZero reports whether q selects every entry (paging aside).
func (q Query) IsZero() bool {
	return strings.TrimSpace(q.Text) == "" && q.From.IsZero() && q.To.IsZero() &&
		q.Server == "" && q.Decision == "" && q.Status == "" && q.Kind == ""
}

// A Hit is one entry found, as its columns describe it.
type Hit struct {
	Index    int64
	ID       string
	Kind     entry.Kind
	Time     time.Time
	Server   string
	Tool     string
	Decision string // a receipt's; an outcome shows its receipt's
	Status   string // an outcome's; a receipt shows its outcome's, once written
	Client   string
	Receipt  string // outcomes: the id of their receipt
}

// Capability is the hit's capability name (mcp.<server>.<tool>), or "" for
// an entry that names none.
func (h Hit) Capability() string {
	if h.Server == "" || h.Tool == "" {
		return ""
	}
	return entry.Capability(h.Server, h.Tool)
}

// A Page is one page of hits, newest first. Next, when not 0, is the
// Before of the next page.
type Page struct {
	Hits []Hit
	Next int64
	// Unindexed is how many of the log's newest entries the full-text
	// index had yet to take in when a query with words ran: words cannot
	// find them yet (filters alone do). The indexer catches up in the
	// background of the processes that append.
	Unindexed int64
}

// Search returns the entries that match q, newest first, at most q.Limit
// of them. Paging is by entry index (keyset): a page continues from
// q.Before, so entries appended while someone pages through never shift
// or repeat what they see.
func (l *Reader) Search(ctx context.Context, q Query) (Page, error) {
	if err := l.sync(ctx); err != nil {
		return Page{}, err
	}
	p, err := l.search(ctx, q)
	if err != nil {
		return Page{}, fmt.Errorf("search: %w", err)
	}
	if len(parseQuery(q.Text)) > 0 {
		if p.Unindexed, err = l.IndexLag(ctx); err != nil {
			return Page{}, fmt.Errorf("search: %w", err)
		}
	}
	return p, nil
}

// Erasable returns how many payloads [Log.EraseMatching] would erase now.
func (l *Reader) Erasable(ctx context.Context, q Query) (int, error) {
	if err := l.sync(ctx); err != nil {
		return 0, err
	}
	ids, err := l.erasable(ctx, q)
	return len(ids), err
}

// EraseMatching erases the payloads of every entry that matches q (its
// Before and Limit aside), as [Log.Erase] does, and returns the erasure
// entry and how many payloads it erased: nil and 0 when none was left. A
// query that selects everything is refused: erase by ids, or give a time
// range. Entries appended while it runs may be left out.
func (l *Log) EraseMatching(ctx context.Context, q Query, reason string) (*entry.Entry, int, error) {
	if q.IsZero() {
		return nil, 0, fmt.Errorf("erase matching: %w: the query selects every entry", ErrQuery)
	}
	if err := l.sync(ctx); err != nil { // the newest receipts may be in the journal
		return nil, 0, fmt.Errorf("erase matching: %w", err)
	}
	if _, err := l.CatchUpIndex(ctx); err != nil {
		return nil, 0, fmt.Errorf("erase matching: %w", err)
	}
	ids, err := l.erasable(ctx, q)
	if err != nil || len(ids) == 0 {
		return nil, 0, err
	}
	e, err := l.Erase(ctx, ids, reason)
	if err != nil || e == nil {
		return nil, 0, err
	}
	var body entry.ErasureEvent
	if err := json.Unmarshal(e.Body, &body); err != nil {
		return e, 0, fmt.Errorf("erase matching: %w", err)
	}
	return e, len(body.Erased), nil
}

// erasable returns the ids of the entries that match q and hold a payload
// not yet erased (an entry has one payload at most).
func (l *Reader) erasable(ctx context.Context, q Query) ([]string, error) {
	q.erasable, q.Before, q.Limit = true, 0, MaxLimit
	var ids []string
	for {
		p, err := l.search(ctx, q)
		if err != nil {
			return nil, fmt.Errorf("erase matching: %w", err)
		}
		for _, h := range p.Hits {
			ids = append(ids, h.ID)
		}
		if p.Next == 0 {
			return ids, nil
		}
		q.Before = p.Next
	}
}

// OutcomeOf returns the outcome of the receipt with the given id, or
// ErrNotFound while it has none.
func (l *Reader) OutcomeOf(ctx context.Context, receiptID string) (Stored, error) {
	if err := l.sync(ctx); err != nil {
		return Stored{}, err
	}
	var idx int64
	err := l.db.QueryRowContext(ctx, `SELECT idx FROM entries WHERE receipt_id = ? AND kind = 'outcome' ORDER BY idx LIMIT 1`, receiptID).Scan(&idx)
	if errors.Is(err, sql.ErrNoRows) {
		return Stored{}, fmt.Errorf("outcome of %s: %w", receiptID, ErrNotFound)
	}
	if err != nil {
		return Stored{}, err
	}
	for s, err := range l.Entries(ctx, idx, idx+1) {
		return s, err
	}
	return Stored{}, fmt.Errorf("outcome of %s: %w", receiptID, ErrNotFound)
}

const hitColumns = `e.idx, e.id, e.kind, e.time_ns, e.server, e.tool, e.decision, e.status, e.client, e.receipt_id`

func (l *Reader) search(ctx context.Context, q Query) (Page, error) {
	// One read transaction: its queries see one state of the log and of
	// its search indexes, whatever other processes commit meanwhile.
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Page{}, err
	}
	defer tx.Rollback()
	limit := q.Limit
	switch {
	case limit < 0:
		return Page{}, fmt.Errorf("%w: negative limit %d", ErrQuery, limit)
	case limit == 0:
		limit = DefaultLimit
	case limit > MaxLimit:
		limit = MaxLimit
	}
	var where []string
	var args []any
	filter := func(cond string, v any) {
		where = append(where, cond)
		args = append(args, v)
	}
	if q.Kind != "" && !entry.Kind(q.Kind).Known() {
		return Page{}, fmt.Errorf("%w: unknown kind %q", ErrQuery, q.Kind)
	}
	// Equality filters. SQLite, which keeps no statistics here, cannot tell
	// a rare value (DENY) from a common one (ALLOW) and may walk an index
	// over half the log; the filter most likely to be rare gets its index,
	// the others are checked row by row (unary + hides an index), and none
	// gets one when all are common: walking the log newest first then
	// finds a page soonest.
	eqs := []struct{ col, val string }{
		{"kind", q.Kind}, {"status", strings.ToUpper(q.Status)},
		{"decision", strings.ToUpper(q.Decision)}, {"server", q.Server},
	}
	best := -1
	for i, f := range eqs {
		if r := rarity(f.col, f.val); r > 0 && (best < 0 || r > rarity(eqs[best].col, eqs[best].val)) {
			best = i
		}
	}
	for i, f := range eqs {
		if f.val == "" {
			continue
		}
		if i == best {
			filter("e."+f.col+" = ?", f.val)
		} else {
			filter("+e."+f.col+" = ?", f.val)
		}
	}
	lo, hi, err := timeBounds(ctx, tx, q.From, q.To)
	if err != nil {
		return Page{}, err
	}
	if lo > hi {
		return Page{}, nil // nothing in the time range
	}
	if lo > 0 {
		filter("e.idx >= ?", lo)
	}
	// With bounds from the time index, the time conditions only make sure
	// (+ keeps SQLite from choosing that index over the rowid range).
	if !q.From.IsZero() {
		filter("+e.time_ns >= ?", q.From.UnixNano())
	}
	if !q.To.IsZero() {
		filter("+e.time_ns < ?", q.To.UnixNano())
	}
	if q.erasable {
		where = append(where, "EXISTS (SELECT 1 FROM payloads AS p WHERE p.entry_idx = e.idx AND p.erased_by IS NULL)")
	}

	// The sources of candidates, newest first: the entries themselves, or
	// the full-text index, which drives (CROSS JOIN fixes the order): it
	// yields rowids newest first, and each is looked up in entries. While
	// the index is being upgraded (reindex.go), the older entries are found
	// in the retired one.
	type source struct {
		stmt string
		lo   int64 // the oldest entry it can give
	}
	var sources []source
	terms := parseQuery(q.Text)
	switch {
	case strings.TrimSpace(q.Text) != "" && len(terms) == 0:
		return Page{}, nil // nothing in it can match a word
	case len(terms) > 0:
		st, err := readIndexState(ctx, tx)
		if err != nil {
			return Page{}, err
		}
		ftsSource := func(fts string, lo int64) source {
			stmt := `SELECT ` + hitColumns + ` FROM ` + fts + ` AS f CROSS JOIN entries AS e
				WHERE ` + fts + ` MATCH ? AND f.rowid < ? AND f.rowid >= ? AND e.idx = f.rowid`
			for _, w := range where {
				stmt += " AND " + w
			}
			return source{stmt + ` ORDER BY f.rowid DESC LIMIT ?`, lo}
		}
		sources = append(sources, ftsSource("search_fts", max(lo, st.from)))
		if st.from > lo {
			sources = append(sources, ftsSource("search_retired", lo))
		}
		args = append([]any{matchExpr(terms), nil, nil}, args...)
	default:
		stmt := `SELECT ` + hitColumns + ` FROM entries AS e WHERE e.idx < ? AND e.idx >= ?`
		for _, w := range where {
			stmt += " AND " + w
		}
		sources = append(sources, source{stmt + ` ORDER BY e.idx DESC LIMIT ?`, lo})
		args = append([]any{nil, nil}, args...)
	}
	cur := 0 // args[cur] is the cursor (rowids below it), args[cur+1] the source's lo
	if len(terms) > 0 {
		cur = 1
	}
	start := q.Before
	if start <= 0 {
		start = math.MaxInt64
	}
	if hi < math.MaxInt64 {
		start = min(start, hi+1)
	}

	// collect fills a page with the candidates of the sources for the FTS
	// query match that contain every literal of exact. With a budget, it
	// gives up with errBudget once it has checked that many candidates
	// without filling the page.
	collect := func(match string, exact []literal, budget int) (Page, error) {
		// One row more than the page tells whether there is a next page.
		// When candidates must be checked for exact text, fetch in larger
		// batches, and go on until the page is full or the candidates run
		// out.
		batch := limit + 1
		if len(exact) > 0 {
			batch = max(batch, 64)
		}
		if cur > 0 {
			args[0] = match
		}
		before, checked := start, 0
		var page Page
		for _, src := range sources {
			if before <= src.lo {
				continue
			}
			args[cur+1] = src.lo
			for {
				if budget > 0 && checked >= budget {
					return Page{}, errBudget
				}
				args[cur] = before
				cands, err := queryHits(ctx, tx, src.stmt, append(args, batch)...)
				if err != nil {
					return Page{}, err
				}
				fetched := len(cands)
				if fetched > 0 {
					before = cands[fetched-1].Index
				}
				if len(exact) > 0 {
					checked += fetched
					if cands, err = checkExact(ctx, tx, cands, exact); err != nil {
						return Page{}, err
					}
				}
				page.Hits = append(page.Hits, cands...)
				if len(page.Hits) > limit {
					page.Hits = page.Hits[:limit]
					page.Next = page.Hits[limit-1].Index
					return page, nil
				}
				if fetched < batch {
					break // this source has no candidates left
				}
			}
			before = min(before, src.lo)
		}
		return page, nil
	}

	var exact []literal
	for _, t := range terms {
		exact = append(exact, t.exact...)
	}
	// A word being typed that is longer than the index's prefixes is
	// searched by its first letters, which the index lists, and checked in
	// the text (shortenPrefixes): FTS5 would otherwise merge the lists of
	// every word that starts so before it returned the first. Where that
	// check cannot be exact, or finds too few, the query runs as typed.
	if short, checks, ok := shortenPrefixes(terms); ok && !l.typedPrefixes {
		page, err := collect(matchExpr(short), append(exact, checks...), shortBudget)
		if !errors.Is(err, errBudget) && !errors.Is(err, errUncertain) {
			return page, err
		}
	}
	return collect(matchExpr(terms), exact, 0)
}

// shortBudget is how many candidates a search by shortened prefixes checks
// before it runs the query as typed instead (5-10 ms of checking).
const shortBudget = 256

var (
	errBudget    = errors.New("shortened prefixes: budget spent")
	errUncertain = errors.New("shortened prefixes: text the check cannot decide")
)

// rarity says how selective a filter's value usually is, from what a log
// holds: about half its entries are receipts and half outcomes, most calls
// are allowed and succeed, and a server takes a share of the calls. 0 means
// common: not worth an index walk.
func rarity(col, val string) int {
	switch {
	case val == "":
		return 0
	case col == "kind":
		if val == string(entry.KindReceipt) || val == string(entry.KindOutcome) {
			return 0
		}
		return 4
	case col == "status" && val != entry.Succeeded, col == "decision" && val != entry.Allow:
		return 3
	case col == "server":
		return 2
	}
	return 0
}

// timeBounds returns the range of indexes [lo, hi] that holds the entries
// with from <= time < to: through the time index while the entries' times
// follow their order, else the whole log (the time conditions then filter
// row by row). Zero times are unbounded; lo > hi means no entry is in range.
func timeBounds(ctx context.Context, q querier, from, to time.Time) (lo, hi int64, err error) {
	lo, hi = 0, math.MaxInt64
	if from.IsZero() && to.IsZero() {
		return lo, hi, nil
	}
	var unordered int
	err = q.QueryRowContext(ctx, `SELECT count(*) FROM search_meta WHERE key = 'unordered_times'`).Scan(&unordered)
	if err != nil || unordered > 0 {
		return lo, hi, err
	}
	if !from.IsZero() {
		err = q.QueryRowContext(ctx, `SELECT idx FROM entries WHERE time_ns >= ? ORDER BY time_ns, idx LIMIT 1`, from.UnixNano()).Scan(&lo)
		if errors.Is(err, sql.ErrNoRows) {
			return 1, 0, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
	if !to.IsZero() {
		err = q.QueryRowContext(ctx, `SELECT idx FROM entries WHERE time_ns < ? ORDER BY time_ns DESC, idx DESC LIMIT 1`, to.UnixNano()).Scan(&hi)
		if errors.Is(err, sql.ErrNoRows) {
			return 1, 0, nil
		}
		if err != nil {
			return 0, 0, err
		}
	}
	return lo, hi, nil
}

func queryHits(ctx context.Context, q querier, stmt string, args ...any) ([]Hit, error) {
	rows, err := q.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var hits []Hit
	for rows.Next() {
		var h Hit
		var kind string
		var ns int64
		if err := rows.Scan(&h.Index, &h.ID, &kind, &ns, &h.Server, &h.Tool, &h.Decision, &h.Status, &h.Client, &h.Receipt); err != nil {
			return nil, err
		}
		h.Kind = entry.Kind(kind)
		h.Time = time.Unix(0, ns).UTC()
		hits = append(hits, h)
	}
	return hits, rows.Err()
}

// checkExact keeps the candidates whose text contains every literal.
func checkExact(ctx context.Context, q querier, cands []Hit, exact []literal) ([]Hit, error) {
	if len(cands) == 0 {
		return cands, nil
	}
	idxs := make([]int64, len(cands))
	for i, h := range cands {
		idxs[i] = h.Index
	}
	list, _ := json.Marshal(idxs)
	rows, err := q.QueryContext(ctx, `SELECT idx, server || char(10) || tool || char(10) || decision || char(10) || client || char(10) || text
		FROM search_source WHERE idx IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	ok := make(map[int64]bool, len(cands))
	for rows.Next() {
		var idx int64
		var text string
		if err := rows.Scan(&idx, &text); err != nil {
			return nil, err
		}
		text = strings.ToLower(text)
		ok[idx] = true
		for _, lit := range exact {
			if lit.ascii && hasNonASCIIWord(text) {
				return nil, errUncertain
			}
			if !lit.in(text) {
				ok[idx] = false
				break
			}
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	out := cands[:0]
	for _, h := range cands {
		if ok[h.Index] {
			out = append(out, h)
		}
	}
	return out, nil
}

// Query text.
//
// User text never reaches FTS5's query syntax: each word or phrase becomes
// an FTS5 string ("..." with quotes doubled, which FTS5 splits into words
// with the table's tokenizer), optionally followed by the prefix operator,
// and the strings are joined with AND. Nothing the user types can be an
// operator, a column filter or a syntax error.

// A term is one word or quoted phrase of a query.
type term struct {
	words  string    // its words, separated by spaces, as typed
	prefix bool      // a final star
	exact  []literal // words with punctuation inside, to find as typed
}

// A literal is a word with punctuation inside, which candidates must
// contain as typed (lowercased), at word boundaries; or the start of a word
// being typed, checked in place of the index (shortenPrefixes).
type literal struct {
	text   string // lowercase
	prefix bool   // the last word of a prefix term: no boundary after it
	// ascii: the literal stands for an FTS5 prefix query, which folds
	// accents too; it is exact only in text whose words are ASCII.
	ascii bool
}

// in reports whether text (lowercase) contains lit starting and ending at
// word boundaries. The literal begins and ends with a word character.
func (lit literal) in(text string) bool {
	for off := 0; off <= len(text); {
		i := strings.Index(text[off:], lit.text)
		if i < 0 {
			return false
		}
		i += off
		end := i + len(lit.text)
		r0, _ := utf8.DecodeLastRuneInString(text[:i])
		r1, _ := utf8.DecodeRuneInString(text[end:])
		if (i == 0 || !isWordRune(r0)) && (lit.prefix || end == len(text) || !isWordRune(r1)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(text[i:])
		off = i + size
	}
	return false
}

// isWordRune reports whether FTS5's unicode61 tokenizer, with its default
// categories (L*, N*, Co), keeps r in a word rather than splitting there.
func isWordRune(r rune) bool {
	return unicode.In(r, unicode.L, unicode.N, unicode.Co)
}

func isSpace(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }

// parseQuery splits text into terms. Terms with no word characters are
// dropped: they could never match.
func parseQuery(text string) []term {
	s := strings.ToValidUTF8(text, " ")
	var terms []term
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case isSpace(r):
			i += size
		case r == '"':
			body := s[i+1:]
			if j := strings.IndexByte(body, '"'); j >= 0 {
				body = body[:j]
				i += j + 2
			} else {
				i = len(s)
			}
			if t, ok := newTerm(body); ok {
				terms = append(terms, t)
			}
		default:
			j := i
			for j < len(s) {
				r, size := utf8.DecodeRuneInString(s[j:])
				if isSpace(r) || r == '"' {
					break
				}
				j += size
			}
			if t, ok := newTerm(s[i:j]); ok {
				terms = append(terms, t)
			}
			i = j
		}
	}
	return terms
}

func newTerm(body string) (term, bool) {
	body = strings.TrimRightFunc(body, isSpace)
	var t term
	if strings.HasSuffix(body, "*") {
		t.prefix = true
		body = strings.TrimRight(body, "*")
	}
	var words []string
	for _, w := range strings.FieldsFunc(body, isSpace) {
		w = strings.TrimFunc(w, func(r rune) bool { return !isWordRune(r) })
		if w == "" {
			continue
		}
		words = append(words, w)
		if strings.IndexFunc(w, func(r rune) bool { return !isWordRune(r) }) >= 0 {
			t.exact = append(t.exact, literal{text: strings.ToLower(w)})
		}
	}
	if len(words) == 0 {
		return term{}, false
	}
	// The star belongs to the last word; it is no boundary for its literal.
	if n := len(t.exact); t.prefix && n > 0 && t.exact[n-1].text == strings.ToLower(words[len(words)-1]) {
		t.exact[n-1].prefix = true
	}
	t.words = strings.Join(words, " ")
	return t, true
}

// fts is the term as an FTS5 query: a string, and the prefix operator.
func (t term) fts() string {
	s := `"` + strings.ReplaceAll(t.words, `"`, `""`) + `"`
	if t.prefix {
		s += " *"
	}
	return s
}

// maxIndexedPrefix is the longest prefix the full-text index keeps a list
// of entries for (prefixMigration).
const maxIndexedPrefix = 4

// shortenPrefixes returns terms with each final word being typed that is
// longer than maxIndexedPrefix cut to that length, and the literals that
// check what was cut, when that gives the same results: ok is false when
// no term was cut. Two kinds of term qualify:
//
//   - one word with punctuation inside (alice@exampl*): its literal already
//     checks the word as typed, and implies the FTS5 phrase;
//   - one plain ASCII word (exampl*): a literal checks that a word starts
//     so, which is what FTS5 checks, in text whose words are ASCII (FTS5
//     also folds accents: é matches e). Text with other words makes the
//     check uncertain, and the search runs as typed.
//
// Phrases of several words are left as typed: a literal would not tie the
// word to its place in the phrase.
func shortenPrefixes(terms []term) (short []term, checks []literal, ok bool) {
	short = slices.Clone(terms)
	for i, t := range terms {
		if !t.prefix || strings.ContainsFunc(t.words, isSpace) {
			continue
		}
		// The last word as FTS5 splits it: the last run of word runes.
		end := len(t.words)
		start := strings.LastIndexFunc(t.words, func(r rune) bool { return !isWordRune(r) }) + 1
		last := t.words[start:end]
		if utf8.RuneCountInString(last) <= maxIndexedPrefix {
			continue
		}
		cut := start
		for range maxIndexedPrefix {
			_, n := utf8.DecodeRuneInString(t.words[cut:])
			cut += n
		}
		switch {
		case len(t.exact) == 1 && t.exact[0].prefix:
		case len(t.exact) == 0 && isASCII(t.words):
			checks = append(checks, literal{text: strings.ToLower(t.words), prefix: true, ascii: true})
		default:
			continue
		}
		short[i].words = t.words[:cut]
		ok = true
	}
	return short, checks, ok
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// hasNonASCIIWord reports whether text has a word rune outside ASCII.
func hasNonASCIIWord(text string) bool {
	for _, r := range text {
		if r >= utf8.RuneSelf && isWordRune(r) {
			return true
		}
	}
	return false
}

// matchExpr is the FTS5 query of terms: all of them.
func matchExpr(terms []term) string {
	parts := make([]string, len(terms))
	for i, t := range terms {
		parts[i] = t.fts()
	}
	return strings.Join(parts, " AND ")
}
