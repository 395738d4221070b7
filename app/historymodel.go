package app

import (
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
	// observed holds, by receipt id, what a rule in observe mode would
	// have decided on the calls held that it would have decided otherwise.
	observed map[string]entry.Observed
}

// readObserved reads, for each receipt of hits, what a rule in observe mode
// would have decided, where one would have decided otherwise. A receipt
// that cannot be read is left out: the list still shows the call.
func readObserved(ctx context.Context, l *receipts.Reader, hits []receipts.Hit) map[string]entry.Observed {
	out := map[string]entry.Observed{}
	for _, h := range hits {
		if h.Kind != entry.KindReceipt {
			continue
		}
		s, err := l.EntryByID(ctx, h.ID)
		if err != nil {
			continue
		}
		e, err := entry.Parse(s.Data)
		if err != nil {
			continue
		}
		var r entry.Receipt
		if json.Unmarshal(e.Body, &r) == nil && r.Observed != nil {
			out[h.ID] = *r.Observed
		}
	}
	return out
}

// note keeps what readObserved read.
func (h *historyList) note(obs map[string]entry.Observed) {
	if h.observed == nil {
		h.observed = map[string]entry.Observed{}
	}
	maps.Copy(h.observed, obs)
}

// first reads the first page of q.
func readFirst(ctx context.Context, l *receipts.Reader, q receipts.Query) (historyList, error) {
	q.Before = 0
	p, err := l.Search(ctx, q)
	if err != nil {
		return historyList{}, err
	}
	return historyList{q: q, hits: p.Hits, next: p.Next, more: p.Next != 0, observed: readObserved(ctx, l, p.Hits)}, nil
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
