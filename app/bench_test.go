package app

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"fyne.io/fyne/v2/test"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// BenchmarkHistoryScroll measures what scrolling the history costs the
// window, apart from the log's reads (which receipts' benchmarks measure):
// each iteration scrolls the list by one screen over a hundred thousand
// calls held, and the list binds the rows that come into view. A frame at
// 60 Hz has 16 ms.
//
//	go test -run '^$' -bench HistoryScroll ./app/
func BenchmarkHistoryScroll(b *testing.B) {
	a := test.NewTempApp(b)
	st := MustStore(b)
	u := New(a, st, &Options{Keychain: newFakeKeychain(), Poll: -1})
	b.Cleanup(u.Close)
	p := u.history
	now := time.Now()
	const n = 100_000
	hits := make([]receipts.Hit, n)
	servers := []string{"github", "filesystem", "postgres", "slack", "memory"}
	decisions := []string{entry.Allow, entry.Allow, entry.Allow, entry.Deny, entry.ApprovalRequired}
	for i := range hits {
		hits[i] = receipts.Hit{Index: int64(2 * (n - i)), ID: fmt.Sprintf("r-%08d", i), Kind: entry.KindReceipt,
			Time: now.Add(-time.Duration(i) * time.Second), Server: servers[i%5], Tool: "read_file",
			Decision: decisions[i%5], Status: entry.Succeeded, Client: "claude-code"}
	}
	p.hl = historyList{hits: hits}
	p.loaded = true
	u.shell.show(u.shell.views[3])
	u.win.Resize(windowDefaultSize)
	p.list.Refresh()
	screen := p.list.Size().Height
	if screen <= 0 {
		b.Fatal("the list has no height")
	}
	var offset float32
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		offset += screen
		t0 := time.Now()
		p.list.ScrollToOffset(offset)
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(screen/p.rowHeight()), "rows/screen")
}
