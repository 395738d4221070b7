package receipts

import (
	"context"
	"database/sql"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

var benchAppenders = flag.Int("bench-appenders", 8, "callers appending in BenchmarkSearchWhileAppending")

// BenchmarkSearchWhileAppending measures search on a copy of
// BenchmarkSearch's million-receipt log while calls are appended to it as
// fast as the log takes them: -bench-appenders callers, each a receipt and
// then, off its path, the outcome, sharing commits as the calls of a
// home's proxies do through its writer. The appending log's indexer
// follows them. The searches run on a reader of their own, as the tray
// app's history and gatehouse history do, and see what the indexer has
// taken in. It reports the searches' p50, p95 and p99 over every query of
// BenchmarkSearch's families, the calls appended per second, and how far
// the index lagged behind the log (entries not yet searchable): at most,
// as the searches sampled it, and when the appends stopped.
//
//	go test -run '^$' -bench SearchWhileAppending -benchtime 400x -timeout 60m ./receipts/
func BenchmarkSearchWhileAppending(b *testing.B) {
	ctx := context.Background()
	cached, n0 := openSearchBench(b, *benchReceipts)
	dir := filepath.Join(b.TempDir(), "home")
	if err := snapshotDB(ctx, cached, searchBenchDir(migrations, *benchReceipts), dir); err != nil {
		b.Fatal(err)
	}
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	l, err := Open(ctx, st, benchKey())
	if err != nil {
		b.Fatal(err)
	}
	// The search starts from an index that has caught up with the log.
	t0 := time.Now()
	if k, err := l.CatchUpIndex(ctx); err != nil {
		b.Fatal(err)
	} else if k > 0 {
		b.Logf("indexed the %d entries the cached log lacked in %v", k, time.Since(t0).Round(time.Second))
	}
	rst, err := store.Open(ctx, dir, nil) // the searcher's own connections
	if err != nil {
		b.Fatal(err)
	}
	defer rst.Close()
	r, err := OpenReader(ctx, rst)
	if err != nil {
		b.Fatal(err)
	}
	var queries []Query
	for _, q := range [][]Query{
		{{Text: "quixote7"}, {Text: "quixote23"}, {Text: "quixote7@example.org"}, {Text: "quixote41@example.org"}},
		{{Text: "text"}, {Text: "files"}, {Text: g0.words[0]}, {Text: "text", Status: entry.Failed}, {Text: g0.words[2], Server: "github"}},
		{{Server: "github", Decision: entry.Deny}, {Kind: "outcome", Status: entry.Unknown}, {Decision: entry.ApprovalRequired}},
		{{From: benchStart.Add(30 * 24 * time.Hour), To: benchStart.Add(31 * 24 * time.Hour)}},
		{{Before: n0 / 2}, {Text: "text", Before: n0 / 2}, {Server: "github", Before: n0 / 10}},
	} {
		queries = append(queries, q...)
	}

	stop := make(chan struct{})
	var calls atomic.Int64
	var appenders, outcomes sync.WaitGroup
	for a := range *benchAppenders {
		appenders.Go(func() {
			g := newGen(uint64(1000 + a))
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				c := g.call(i)
				e, err := l.AppendReceipt(ctx, c.receipt, c.args)
				if err != nil {
					b.Error(err)
					return
				}
				calls.Add(1)
				if c.status != "" {
					outcomes.Go(func() {
						if _, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: e.ID, Status: c.status, DurationMS: 3}, c.result); err != nil {
							b.Error(err)
						}
					})
				}
			}
		})
	}
	time.Sleep(time.Second) // the appends under way
	start, before := time.Now(), calls.Load()
	lat := make([]time.Duration, 0, b.N)
	var maxLag int64
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		if _, err := r.Search(ctx, queries[i%len(queries)]); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
		if lag, err := r.IndexLag(ctx); err == nil {
			maxLag = max(maxLag, lag)
		}
	}
	b.StopTimer()
	appended := calls.Load() - before
	elapsed := time.Since(start)
	close(stop)
	appenders.Wait()
	outcomes.Wait()
	lag, err := r.IndexLag(ctx)
	if err != nil {
		b.Fatal(err)
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
	b.ReportMetric(float64(appended)/elapsed.Seconds(), "calls/s")
	b.ReportMetric(float64(maxLag), "max-lag")
	b.ReportMetric(float64(lag), "end-lag")
}

// snapshotDB copies the database of the home folder from, which l has open,
// to the home folder to, as one snapshot: the database file and its WAL,
// read while a read transaction keeps the WAL from being reset and the
// checkpoints from going past it.
func snapshotDB(ctx context.Context, l *Log, from, to string) error {
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var n int64
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM log_meta`).Scan(&n); err != nil {
		return err
	}
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	for _, name := range []string{store.DatabaseFile, store.DatabaseFile + "-wal"} {
		if err := copyFile(filepath.Join(from, name), filepath.Join(to, name)); err != nil && !os.IsNotExist(err) {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
