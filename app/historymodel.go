package app

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// historyPageSize is how many entries one read of the history fetches.
const historyPageSize = 200

// historyPrefetch is how close to the end of what is loaded a row on
// screen makes the list fetch the next page, so that scrolling never waits.
const historyPrefetch = 60

// A historyFilter is what the person chose above the list.
type historyFilter struct {
	text     string        // as typed
	span     time.Duration // how far back; 0 for all time
	server   string
	decision string
	status   string
	all      bool // every entry, not only calls (receipts)
}

// query returns the log query for f at now, for a first page.
// onlyServer reports whether f chooses calls by their server and time at
// most: what the log's activity count can count by itself.
func (f historyFilter) onlyServer() bool {
	return receipts.TypedQuery(f.text) == "" && f.decision == "" && f.status == ""
}

func (f historyFilter) query(now time.Time) receipts.Query {
	q := receipts.Query{
		Text:     receipts.TypedQuery(f.text),
		Server:   f.server,
		Decision: f.decision,
		Status:   f.status,
		Limit:    historyPageSize,
	}
	if f.span > 0 {
		q.From = now.Add(-f.span)
	}
	if !f.all {
		q.Kind = "receipt"
	}
	return q
}

// historyList is what the history's list holds: the entries read so far,
// newest first, a page at a time (keyset paging on the entry index), and
// where to go on. It is a thin window on the log: nothing in it is kept
// beyond what the person scrolled through.
type historyList struct {
	q    receipts.Query // the query of the first page
	hits []receipts.Hit
	next int64 // Before of the next page; 0 when the last page is in
	more bool  // a next page exists
	// observed and answered are the receipts' notes (see [notes]).
	observed map[string]entry.Observed
	answered map[string]string
}

// notes is what the list shows of its receipts beyond their columns.
type notes struct {
	// observed holds, by receipt id, what a rule in observe mode would
	// have decided, where it would have decided otherwise.
	observed map[string]entry.Observed
	// answered holds, by the id of a receipt held for approval that
	// nobody answered in time, the decision on the agent's retry of the
	// same call, once a person answered it: the call is no longer awaiting.
	answered map[string]string
}

// answerKeep is how long after a call held for approval a retry of it can
// pick up the answer (the approval server's Keep).
const answerKeep = 10 * time.Minute

// readNotes reads the notes of the receipts of hits. A receipt that cannot
// be read is left out: the list still shows the call.
func readNotes(ctx context.Context, l *receipts.Reader, hits []receipts.Hit) notes {
	n := notes{observed: map[string]entry.Observed{}, answered: map[string]string{}}
	for _, h := range hits {
		if h.Kind != entry.KindReceipt {
			continue
		}
		s, err := l.EntryByID(ctx, h.ID)
		if err != nil {
			continue
		}
		r, ok := receiptOf(s)
		if !ok {
			continue
		}
		if r.Observed != nil {
			n.observed[h.ID] = *r.Observed
		}
		if h.Decision == entry.ApprovalRequired {
			if d := retryAnswer(ctx, l, h, r, s); d != "" {
				n.answered[h.ID] = d
			}
		}
	}
	return n
}

func receiptOf(s receipts.Stored) (entry.Receipt, bool) {
	var r entry.Receipt
	e, err := entry.Parse(s.Data)
	if err != nil || e.Kind != entry.KindReceipt {
		return r, false
	}
	return r, json.Unmarshal(e.Body, &r) == nil
}

// retryAnswer returns the decision on the first retry of the call held for
// approval h (receipt r, stored as s): a later receipt of the same proxy
// session, server and tool, with the same arguments, decided by a person's
// answer. It returns "" when there is none (yet).
func retryAnswer(ctx context.Context, l *receipts.Reader, h receipts.Hit, r entry.Receipt, s receipts.Stored) string {
	args := payloadData(s, "args")
	if r.Session == "" || args == nil {
		return ""
	}
	p, err := l.Search(ctx, receipts.Query{Server: h.Server, Kind: "receipt", From: h.Time, To: h.Time.Add(answerKeep), Limit: receipts.MaxLimit})
	if err != nil {
		return ""
	}
	answer := ""
	for _, c := range p.Hits { // newest first: the last one that fits is the first retry
		if c.Index <= h.Index || c.Tool != h.Tool || c.Decision == entry.ApprovalRequired {
			continue
		}
		cs, err := l.EntryByID(ctx, c.ID)
		if err != nil {
			continue
		}
		cr, ok := receiptOf(cs)
		if ok && cr.Approver != nil && cr.Session == r.Session && bytes.Equal(payloadData(cs, "args"), args) {
			answer = c.Decision
		}
	}
	return answer
}

// payloadData returns the stored payload part of s, or nil when it is not
// kept (erased, too large, absent).
func payloadData(s receipts.Stored, part string) []byte {
	for _, p := range s.Payloads {
		if p.Part == part && !p.Erased() && p.NotKept == nil {
			return p.Data
		}
	}
	return nil
}

// note keeps what readNotes read.
func (h *historyList) note(n notes) {
	if h.observed == nil {
		h.observed = map[string]entry.Observed{}
	}
	if h.answered == nil {
		h.answered = map[string]string{}
	}
	maps.Copy(h.observed, n.observed)
	maps.Copy(h.answered, n.answered)
}

// waiting returns the calls of h held for approval, unanswered, recent
// enough for a retry to pick up an answer at now: those to look at again
// when new entries arrive.
func (h *historyList) waiting(now time.Time) []receipts.Hit {
	var out []receipts.Hit
	for _, x := range h.hits {
		if x.Decision == entry.ApprovalRequired && x.Kind == entry.KindReceipt && h.answered[x.ID] == "" && now.Sub(x.Time) < answerKeep {
			out = append(out, x)
		}
	}
	return out
}

// first reads the first page of q.
func readFirst(ctx context.Context, l *receipts.Reader, q receipts.Query) (historyList, error) {
	q.Before = 0
	p, err := l.Search(ctx, q)
	if err != nil {
		return historyList{}, err
	}
	hl := historyList{q: q, hits: p.Hits, next: p.Next, more: p.Next != 0}
	hl.note(readNotes(ctx, l, p.Hits))
	return hl, nil
}

// readMore reads the page after what h holds.
func readMore(ctx context.Context, l *receipts.Reader, h historyList) ([]receipts.Hit, int64, error) {
	q := h.q
	q.Before = h.next
	p, err := l.Search(ctx, q)
	if err != nil {
		return nil, 0, err
	}
	return p.Hits, p.Next, nil
}

// readNewer reads the entries that matched q since the newest one h holds
// (its index top), newest first: what live updates add at the top. full is
// false when more arrived than one page holds, so that the caller reads
// the first page again instead.
func readNewer(ctx context.Context, l *receipts.Reader, q receipts.Query, top int64) (hits []receipts.Hit, full bool, err error) {
	q.Before = 0
	p, err := l.Search(ctx, q)
	if err != nil {
		return nil, false, err
	}
	for i, h := range p.Hits {
		if h.Index <= top {
			return p.Hits[:i], true, nil
		}
	}
	// Every hit of the page is new: there may be more between.
	return p.Hits, p.Next == 0, nil
}

// add appends a page read with readMore.
func (h *historyList) add(hits []receipts.Hit, next int64) {
	h.hits = append(h.hits, hits...)
	h.next, h.more = next, next != 0
}

// prepend puts newer hits at the top.
func (h *historyList) prepend(hits []receipts.Hit) {
	if len(hits) == 0 {
		return
	}
	h.hits = append(append(make([]receipts.Hit, 0, len(hits)+len(h.hits)), hits...), h.hits...)
}

// top returns the index of the newest entry held, or -1.
func (h *historyList) top() int64 {
	if len(h.hits) == 0 {
		return -1
	}
	return h.hits[0].Index
}
