package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

const queryHelp = `
QUERY is words that must all appear in an entry's server, tool, decision,
client, payload text (arguments, results) or, for a step of a governed
program, the program's name, trace id or step name, case and accents
aside. A word
with punctuation inside, such as alice@example.com, /home/me/notes.txt or
read_file, must appear exactly so; "double quotes" (inside shell quotes)
make a phrase; a final * matches any ending (invoice*). Nothing else is
special.

Times (--from, --to) are a date (2026-05-01), a local date and time
(2026-05-01T14:30), RFC 3339, or a duration ago (90m, 24h, 7d).`

// queryFlags are the flags that select entries, for history and erase.
type queryFlags struct {
	from, to                       timeValue
	server, decision, status, kind string
}

func (f *queryFlags) declare(fs *flag.FlagSet) {
	fs.Var(&f.from, "from", "only entries at or after `TIME`")
	fs.Var(&f.to, "to", "only entries before `TIME`")
	fs.StringVar(&f.server, "server", "", "only calls to server `NAME`")
	fs.StringVar(&f.decision, "decision", "", "only `DECISION`s: allow, deny or approval_required")
	fs.StringVar(&f.status, "status", "", "only calls that ended with `STATUS`: succeeded, failed or unknown")
	fs.StringVar(&f.kind, "kind", "", "only entries of `KIND`: receipt, outcome, key, policy, pin or erasure")
}

// query reads the query flags and the words into a query.
func (f *queryFlags) query(fs *flag.FlagSet, words string) (receipts.Query, error) {
	q := receipts.Query{
		Text:     words,
		From:     f.from.t,
		To:       f.to.t,
		Server:   f.server,
		Decision: strings.ToUpper(f.decision),
		Status:   strings.ToUpper(f.status),
		Kind:     strings.ToLower(f.kind),
	}
	switch q.Decision {
	case "", entry.Allow, entry.Deny, entry.ApprovalRequired:
	default:
		return q, usagef("%s: --decision %q: want allow, deny or approval_required", fs.Name(), q.Decision)
	}
	switch q.Status {
	case "", entry.Succeeded, entry.Failed, entry.Unknown:
	default:
		return q, usagef("%s: --status %q: want succeeded, failed or unknown", fs.Name(), q.Status)
	}
	if q.Kind != "" && !entry.Kind(q.Kind).Known() {
		return q, usagef("%s: --kind %q: want receipt, outcome, key, policy, pin or erasure", fs.Name(), q.Kind)
	}
	return q, nil
}

// timeValue is a --from or --to flag.
type timeValue struct {
	s string
	t time.Time
}

func (v *timeValue) String() string { return v.s }

func (v *timeValue) Set(s string) error {
	t, err := parseTime(s, time.Now())
	if err != nil {
		return err
	}
	v.s, v.t = s, t
	return nil
}

// parseTime reads a time as people type it: a date or a date and time
// (local), RFC 3339, or a duration before now.
func parseTime(s string, now time.Time) (time.Time, error) {
	if n, ok := strings.CutSuffix(s, "d"); ok {
		if days, err := strconv.ParseFloat(n, 64); err == nil && days >= 0 {
			return now.Add(-time.Duration(days * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{"2006-01-02", "2006-01-02T15:04", "2006-01-02T15:04:05", "2006-01-02 15:04", "2006-01-02 15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, fmt.Errorf("want a date (2026-05-01), a date and time (2026-05-01T14:30, RFC 3339) or a duration ago (90m, 24h, 7d)")
}

// historyFlags are the flags of gatehouse history.
type historyFlags struct {
	queryFlags
	limit        int
	before       int64
	json         bool
	upgradeIndex bool
}

var historyCmd = &command{
	name:    "history",
	usage:   "[QUERY] [--from TIME] [--to TIME] [--server NAME] [--decision D] [--status S] [--kind K] [--limit N] [--before N] [--json] | --upgrade-index",
	summary: "search the evidence log: calls, decisions and events, newest first",
	help: `
Lists the entries of the evidence log that match QUERY and the filters,
newest first, a page at a time; the last line says how to get the next
page. Each call appears as its receipt (the decision, before the call) and,
if it ran, its outcome. See one entry whole with: gatehouse history show ID.
` + queryHelp + `

After an update that changes the search index, a large log's older entries
move into the new index in the background while the tray app runs; until
then, searches for words typed part way are slower over them. --upgrade-index
does it now, in short steps that let proxies write in between.

Examples:
  gatehouse history --decision deny --from 7d
  gatehouse history alice@example.com
  gatehouse history '"drop table"' --server postgres --json`,
	flags: flagged(func(fs *flag.FlagSet, f *historyFlags) {
		f.queryFlags.declare(fs)
		fs.IntVar(&f.limit, "limit", 20, "show `N` entries per page, at most 1000")
		fs.Int64Var(&f.before, "before", 0, "start below entry `INDEX` (the next page's cursor)")
		fs.BoolVar(&f.json, "json", false, "print JSON")
		fs.BoolVar(&f.upgradeIndex, "upgrade-index", false, "finish the upgrade of the search index now, and search nothing")
	}, runHistory),
}

func runHistory(ctx context.Context, c *cli, fs *flag.FlagSet, f *historyFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	q, err := f.query(fs, strings.Join(pos, " "))
	if err != nil {
		return err
	}
	q.Limit = f.limit
	q.Before = f.before
	if q.Limit < 1 || q.Before < 0 {
		return usagef("history: --limit must be at least 1 and --before not negative")
	}
	upgrade := f.upgradeIndex
	if upgrade && (!q.IsZero() || q.Before != 0) {
		return usagef("history: --upgrade-index searches nothing: give it alone")
	}
	if upgrade {
		st, l, err := c.openLog(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		return upgradeIndex(ctx, c, l)
	}
	st, l, err := c.openReader(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if strings.TrimSpace(q.Text) != "" {
		// Best effort: what the index lacks is indexed first, when the
		// database can be written; else the note below says so.
		receipts.CatchUpIndex(ctx, st)
	}
	page, err := l.Search(ctx, q)
	if err != nil {
		return err
	}
	if page.Unindexed > 0 {
		fmt.Fprintf(c.stderr, "note: the search index has yet to take in the newest %d entries: words do not find them yet\nhint: a running proxy or the tray app indexes them within moments; search again\n", page.Unindexed)
	}
	if left, upgrading, err := l.IndexBacklog(ctx); err == nil && upgrading && left > 0 && q.Text != "" {
		fmt.Fprintf(c.stderr, "note: the search index is being upgraded; %d older entries have yet to move, and words typed part way are slower to find in them\nhint: the tray app finishes it in the background, or run: gatehouse history --upgrade-index\n", left)
	}
	if f.json {
		return printHitsJSON(c.stdout, page)
	}
	if len(page.Hits) == 0 {
		if q.Before > 0 {
			fmt.Fprintln(c.stderr, "gatehouse: no more entries match")
		} else {
			fmt.Fprintln(c.stderr, "gatehouse: no entries match")
		}
		return nil
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TIME\tKIND\tDECISION\tSTATUS\tCAPABILITY\tCLIENT\tID")
	for _, h := range page.Hits {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", h.Time.Local().Format("2006-01-02 15:04:05"), h.Kind,
			dash(h.Decision), dash(h.Status), dash(h.Capability()), dash(h.Client), h.ID)
		if h.Kind == entry.KindReceipt {
			if note := observedNote(ctx, l, h.ID); note != "" {
				fmt.Fprintf(tw, "\t\t\t\t  %s\t\t\n", note)
			}
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.Next != 0 {
		fmt.Fprintf(c.stderr, "hint: next page: --before %d\n", page.Next)
	}
	return nil
}

// upgradeIndex finishes the upgrade of the search index, saying how it goes
// every few seconds.
func upgradeIndex(ctx context.Context, c *cli, l *receipts.Log) error {
	left, upgrading, err := l.IndexBacklog(ctx)
	if err != nil {
		return err
	}
	if !upgrading {
		fmt.Fprintln(c.stderr, "gatehouse: the search index is up to date")
		return nil
	}
	fmt.Fprintf(c.stderr, "gatehouse: upgrading the search index: %d entries to move\n", left)
	t0, said := time.Now(), time.Now()
	err = l.UpgradeIndex(ctx, func(left int64) {
		if time.Since(said) >= 5*time.Second {
			fmt.Fprintf(c.stderr, "gatehouse: %d entries to move\n", left)
			said = time.Now()
		}
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "gatehouse: the search index is up to date (%v)\n", time.Since(t0).Round(100*time.Millisecond))
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func printHitsJSON(w io.Writer, page receipts.Page) error {
	type hit struct {
		Index      int64     `json:"index"`
		ID         string    `json:"id"`
		Kind       string    `json:"kind"`
		Time       time.Time `json:"time"`
		Server     string    `json:"server,omitempty"`
		Tool       string    `json:"tool,omitempty"`
		Capability string    `json:"capability,omitempty"`
		Decision   string    `json:"decision,omitempty"`
		Status     string    `json:"status,omitempty"`
		Client     string    `json:"client,omitempty"`
		Receipt    string    `json:"receipt,omitempty"`
	}
	out := struct {
		Hits []hit `json:"hits"`
		Next int64 `json:"next,omitempty"`
	}{Hits: []hit{}, Next: page.Next}
	for _, h := range page.Hits {
		out.Hits = append(out.Hits, hit{h.Index, h.ID, string(h.Kind), h.Time, h.Server, h.Tool, h.Capability(),
			h.Decision, h.Status, h.Client, h.Receipt})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

var historyShowCmd = &command{
	name:    "history show",
	usage:   "ID",
	summary: "print one entry of the evidence log, its payloads and, for a receipt, its outcome",
	help: `
Prints the signed entry as JSON, then its payload (a receipt's arguments,
an outcome's result) as the gateway stored it, after redaction, or the
erasure that removed it. For a receipt, the outcome of its call follows.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("history show: want exactly one entry ID")
		}
		st, l, err := c.openReader(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		s, err := l.EntryByID(ctx, pos[0])
		if errors.Is(err, receipts.ErrNotFound) {
			return withHint(err, "find entries and their ids with: gatehouse history")
		}
		if err != nil {
			return err
		}
		e, err := showEntry(ctx, c.stdout, l, s)
		if err != nil || e.Kind != entry.KindReceipt {
			return err
		}
		o, err := l.OutcomeOf(ctx, e.ID)
		if errors.Is(err, receipts.ErrNotFound) {
			fmt.Fprintln(c.stdout, "\nno outcome: the call did not run, or its outcome was not written")
			return nil
		}
		if err != nil {
			return err
		}
		fmt.Fprintln(c.stdout)
		_, err = showEntry(ctx, c.stdout, l, o)
		return err
	},
}

// showEntry prints a stored entry and its payloads, and returns it parsed.
func showEntry(ctx context.Context, w io.Writer, l *receipts.Reader, s receipts.Stored) (*entry.Entry, error) {
	e, err := entry.Parse(s.Data)
	if err != nil {
		return nil, fmt.Errorf("entry %d: %w", s.Index, err)
	}
	t, _ := time.Parse(time.RFC3339Nano, e.Time)
	fmt.Fprintf(w, "%s %s (index %d, %s)\n", e.Kind, e.ID, e.Index, t.Local().Format("2006-01-02 15:04:05 MST"))
	if note := observedText(e); note != "" {
		fmt.Fprintln(w, note)
	}
	fmt.Fprintln(w, indentJSON(s.Data))
	for _, p := range s.Payloads {
		switch {
		case p.Erased():
			fmt.Fprintf(w, "%s: erased by %s\n", p.Part, erasureID(ctx, l, p.ErasedBy))
		case p.NotKept != nil:
			fmt.Fprintf(w, "%s: %s; the entry commits to all of it\n", p.Part, p.NotKept)
		case len(p.Data) == 0:
			fmt.Fprintf(w, "%s: none\n", p.Part)
		default:
			fmt.Fprintf(w, "%s:\n%s\n", p.Part, indentJSON(p.Data))
		}
	}
	return e, nil
}

// indentJSON returns JSON indented for reading, and anything else as it is.
func indentJSON(data []byte) string {
	var b bytes.Buffer
	if err := json.Indent(&b, data, "", "  "); err != nil {
		return strings.TrimRight(string(data), "\n")
	}
	return b.String()
}

// erasureID returns the id of the entry at index idx (an erasure), or its
// index when it cannot be read.
func erasureID(ctx context.Context, l *receipts.Reader, idx int64) string {
	for s, err := range l.Entries(ctx, idx, idx+1) {
		if err == nil {
			if e, err := entry.Parse(s.Data); err == nil {
				return e.ID
			}
		}
	}
	return fmt.Sprintf("the entry at index %d", idx)
}

// eraseFlags are the flags of gatehouse erase.
type eraseFlags struct {
	queryFlags
	reason string
	match  matchValue
	yes    bool
}

var eraseCmd = &command{
	name:    "erase",
	usage:   "ID... --reason TEXT | --match QUERY --reason TEXT [--yes] [--from TIME] [--to TIME] [--server NAME] ...",
	summary: "erase the payloads (arguments, results) of entries; the log stays verifiable",
	help: `
Deletes the stored arguments or result of each entry named, or of every
entry that matches --match QUERY and the filters (as gatehouse history
shows them), and appends an erasure entry that names what was erased and
why. The entries themselves stay: they hold salted commitments, not the
payloads, so every signature and proof still verifies. The text leaves the
search index too. Erasure cannot be undone.

With --match, the number of payloads is shown and confirmation asked for,
unless --yes is given. A query that selects every entry is refused; to
erase everything older than a date, give --match '' --to DATE.
` + queryHelp + `

Examples:
  gatehouse erase r-k3x2... o-9fqa... --reason "GDPR request 42"
  gatehouse erase --match alice@example.com --reason "GDPR request 42"
  gatehouse erase --match '' --to 2026-01-01 --reason "retention: 90 days" --yes`,
	flags: flagged(func(fs *flag.FlagSet, f *eraseFlags) {
		fs.StringVar(&f.reason, "reason", "", "why, recorded in the erasure entry (required; no personal data: it cannot be erased)")
		fs.Var(&f.match, "match", "erase the payloads of the entries that match `QUERY`")
		fs.BoolVar(&f.yes, "yes", false, "with --match, do not ask for confirmation")
		f.queryFlags.declare(fs)
	}, runErase),
}

// matchValue is --match: a query, and whether it was given at all (an
// empty query with filters is a query).
type matchValue struct {
	s   string
	set bool
}

func (v *matchValue) String() string     { return v.s }
func (v *matchValue) Set(s string) error { v.s, v.set = s, true; return nil }

func runErase(ctx context.Context, c *cli, fs *flag.FlagSet, f *eraseFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	reason := strings.TrimSpace(f.reason)
	match := &f.match
	q, err := f.query(fs, match.s)
	if err != nil {
		return err
	}
	switch {
	case reason == "":
		return usagef("erase: --reason is required: it is recorded with the erasure")
	case match.set && len(pos) > 0:
		return usagef("erase: give entry IDs or --match, not both")
	case !match.set && len(pos) == 0:
		return usagef("erase: want entry IDs, or --match QUERY")
	case !match.set && (q != receipts.Query{}):
		return usagef("erase: the filters apply to --match only")
	case match.set && q.IsZero():
		return usagef("erase: the query selects every entry; give words or filters (everything before a date: --match '' --to DATE)")
	}
	st, l, err := c.openLog(ctx)
	if err != nil {
		return err
	}
	defer st.Close()

	if !match.set {
		for _, id := range pos {
			if _, err := l.EntryByID(ctx, id); err != nil {
				if errors.Is(err, receipts.ErrNotFound) {
					return withHint(err, "find entries and their ids with: gatehouse history")
				}
				return err
			}
		}
		e, err := l.Erase(ctx, pos, reason)
		if err != nil {
			return err
		}
		return reportErasure(c, e)
	}

	n, err := l.Erasable(ctx, q)
	if err != nil {
		return err
	}
	if n == 0 {
		fmt.Fprintln(c.stderr, "gatehouse: no payloads to erase: no entry that matches holds one")
		return nil
	}
	if !f.yes {
		fmt.Fprintf(c.stderr, "gatehouse: erase the payloads of %d %s? This cannot be undone. [y/N] ", n, plural(n, "entry", "entries"))
		answer, _ := bufio.NewReader(c.stdin).ReadString('\n')
		if a := strings.ToLower(strings.TrimSpace(answer)); a != "y" && a != "yes" {
			fmt.Fprintln(c.stderr, "gatehouse: nothing erased")
			return &exitError{1}
		}
	}
	e, _, err := l.EraseMatching(ctx, q, reason)
	if err != nil {
		return err
	}
	return reportErasure(c, e)
}

func reportErasure(c *cli, e *entry.Entry) error {
	if e == nil {
		fmt.Fprintln(c.stderr, "gatehouse: nothing to erase: those payloads were erased already")
		return nil
	}
	var body entry.ErasureEvent
	if err := json.Unmarshal(e.Body, &body); err != nil {
		return err
	}
	n := len(body.Erased)
	fmt.Fprintf(c.stderr, "gatehouse: erased %d %s (erasure entry %s)\nhint: see it with: gatehouse history show %s\n",
		n, plural(n, "payload", "payloads"), e.ID, e.ID)
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// observedNote is [observedText] of the receipt with id id, or "" when it
// cannot be read.
func observedNote(ctx context.Context, l *receipts.Reader, id string) string {
	s, err := l.EntryByID(ctx, id)
	if err != nil {
		return ""
	}
	e, err := entry.Parse(s.Data)
	if err != nil {
		return ""
	}
	return observedText(e)
}

// observedText says what a rule in observe mode would have decided on a
// receipt's call, or "" when none would have.
func observedText(e *entry.Entry) string {
	if e.Kind != entry.KindReceipt {
		return ""
	}
	var r entry.Receipt
	if json.Unmarshal(e.Body, &r) != nil || r.Observed == nil {
		return ""
	}
	would := map[string]string{entry.Allow: "ALLOWED", entry.Deny: "DENIED", entry.ApprovalRequired: "held for approval"}[r.Observed.Decision]
	if would == "" {
		would = r.Observed.Decision
	}
	return fmt.Sprintf("observe mode: would have been %s by rule %s (observe mode); decided %s by %s", would, r.Observed.Rule, r.Decision, r.Rule)
}
