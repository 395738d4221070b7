package receipts

import (
	"context"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// BenchmarkSearchAsYouType measures what a person typing into the tray
// app's history search waits for: each keystroke runs one query, the text
// typed so far as TypedQuery makes it, for the first page of 100 calls
// (receipts), newest first, at a million receipts. Each family types one or
// more words a character at a time; the latencies of every keystroke are
// pooled into p50, p99 and the slowest.
//
//	go test -run '^$' -bench SearchAsYouType -benchtime 1x -timeout 60m ./receipts/
func BenchmarkSearchAsYouType(b *testing.B) {
	l, n := openSearchBench(b, *benchReceipts)
	ctx := context.Background()
	b.Logf("%d entries", n)
	families := []struct {
		name  string
		typed []string
		q     Query // filters the person set before typing
	}{
		{"rare-email", []string{"quixote7@example.org", "quixote41@example.org"}, Query{}},
		{"common-word", []string{g0.words[0], g0.words[3], g0.words[10]}, Query{}},
		{"tool-name", []string{"read_file", "create_issue"}, Query{}},
		{"two-words", []string{g0.words[1] + " " + g0.words[2], "files " + g0.words[5]}, Query{}},
		{"path", []string{"/home/dev/" + g0.words[3] + "/src"}, Query{}},
		{"word-and-filters", []string{g0.words[4], "quixote23"}, Query{Server: "github", Decision: entry.Allow}},
		{"word-last-7-days", []string{g0.words[6]}, Query{From: benchStart.Add(170 * 24 * time.Hour)}},
		{"no-match", []string{"zzyzx-nothing"}, Query{}},
	}
	for _, f := range families {
		b.Run(f.name, func(b *testing.B) {
			var lat []time.Duration
			hits := 0
			for range b.N {
				for _, s := range f.typed {
					for i := 1; i <= len(s); i++ {
						q := f.q
						q.Kind, q.Limit, q.Text = "receipt", 100, TypedQuery(s[:i])
						t0 := time.Now()
						p, err := l.Search(ctx, q)
						if err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t0))
						hits += len(p.Hits)
					}
				}
			}
			b.ReportMetric(float64(hits)/float64(len(lat)), "hits/key")
			reportPercentiles(b, lat)
			slowest := lat[len(lat)-1]
			b.ReportMetric(float64(slowest.Microseconds())/1000, "max-ms")
		})
	}
}

// BenchmarkActivity measures the chart's query at a million receipts (and
// their outcomes): calls by decision in about sixty buckets, over periods
// that hold ever more of the log.
//
//	go test -run '^$' -bench Activity -benchtime 5x -timeout 60m ./receipts/
func BenchmarkActivity(b *testing.B) {
	l, n := openSearchBench(b, *benchReceipts)
	ctx := context.Background()
	b.Logf("%d entries", n)
	end := benchStart.Add(180 * 24 * time.Hour)
	for _, p := range []struct {
		name string
		span time.Duration
		step time.Duration
	}{
		{"hour", time.Hour, time.Minute},
		{"day", 24 * time.Hour, 30 * time.Minute},
		{"week", 7 * 24 * time.Hour, 3 * time.Hour},
		{"month", 30 * 24 * time.Hour, 12 * time.Hour},
		{"all", 180 * 24 * time.Hour, 3 * 24 * time.Hour},
	} {
		b.Run(p.name, func(b *testing.B) {
			var lat []time.Duration
			var calls int64
			for range b.N {
				t0 := time.Now()
				bs, err := l.Activity(ctx, end.Add(-p.span), end, p.step, "")
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				calls = 0
				for _, x := range bs {
					calls += x.Calls()
				}
			}
			b.ReportMetric(float64(calls), "calls")
			reportPercentiles(b, lat)
		})
	}
}
