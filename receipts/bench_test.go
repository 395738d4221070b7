package receipts

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Benchmarks of the evidence log (docs/performance.md has the figures):
//
//	go test -run '^$' -bench 'Append' -benchtime 2000x ./receipts/
//	go test -run '^$' -bench 'Search' -benchtime 200x -timeout 60m ./receipts/
//
// BenchmarkSearch needs a database of a million receipts; it builds one
// the first time (about half an hour on two cores, 3.4 GB) in a
// folder under os.TempDir() named after the schema and the data, and reuses
// it after that. -bench-receipts picks another size.

var benchReceipts = flag.Int("bench-receipts", 1_000_000, "receipts in BenchmarkSearch's database")

// BenchmarkAppend measures durable appends (synchronous=FULL, one
// transaction each) of receipts with realistic arguments: by one writer in
// this process, and by four processes at once on one database.
func BenchmarkAppend(b *testing.B) {
	b.Run("writer=1", func(b *testing.B) {
		l, _ := MustOpen(b, newKey(b))
		g := newGen(1)
		ctx := context.Background()
		lat := make([]time.Duration, 0, b.N)
		b.ResetTimer()
		for i := range b.N {
			c := g.call(i)
			t0 := time.Now()
			if _, err := l.AppendReceipt(ctx, c.receipt, c.args); err != nil {
				b.Fatal(err)
			}
			lat = append(lat, time.Since(t0))
		}
		b.StopTimer()
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
		reportPercentiles(b, lat)
	})
	for _, c := range []struct{ name, role string }{
		{"processes=4", "bench-writer"},
		// The same processes sharing commits through the home's writer
		// (writer.go): BenchmarkAppend/shared.
		{"shared/processes=4", "bench-sharer"},
		{"shared/processes=8", "bench-sharer"},
	} {
		benchProcesses(b, c.name, c.role)
	}
}

// benchProcesses runs processes of role appending receipts at once.
func benchProcesses(b *testing.B, name, role string) {
	b.Run(name, func(b *testing.B) {
		procs := 4
		if strings.HasSuffix(name, "=8") {
			procs = 8
		}
		home, seed := b.TempDir(), newSeed(b)
		// Each process opens the log, says so, and starts appending when
		// told: start-up is not measured.
		type proc struct {
			in  *os.File
			out *bufio.Reader
		}
		var ps []proc
		b.StopTimer()
		for i := range procs {
			cmd := startRole(b, role, home, seed, strconv.Itoa(i), (b.N+procs-1)/procs)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				b.Fatal(err)
			}
			out, err := cmd.StdoutPipe()
			if err != nil {
				b.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			ps = append(ps, proc{in: stdin.(*os.File), out: bufio.NewReader(out)})
		}
		for _, p := range ps {
			if line, err := p.out.ReadString('\n'); err != nil || line != "ready\n" {
				b.Fatalf("writer: %q, %v", line, err)
			}
		}
		b.StartTimer()
		t0 := time.Now()
		for _, p := range ps {
			p.in.Write([]byte("go\n"))
		}
		for _, p := range ps {
			if line, err := p.out.ReadString('\n'); err != nil || line != "done\n" {
				b.Fatalf("writer: %q, %v", line, err)
			}
		}
		total := procs * ((b.N + procs - 1) / procs)
		b.ReportMetric(float64(total)/time.Since(t0).Seconds(), "appends/s")
	})
}

// benchWriter is the bench-writer role: it appends n receipts between a
// "go" on stdin and "done" on stdout.
func benchWriter(ctx context.Context, l *Log, w string, n int) error {
	g := newGen(uint64(len(w)) + 7)
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	for i := range n {
		c := g.call(i)
		if _, err := l.AppendReceipt(ctx, c.receipt, c.args); err != nil {
			return err
		}
	}
	fmt.Println("done")
	return nil
}

// BenchmarkSearch measures search on a log of a million receipts (and
// their outcomes), newest first, pages of 50. Each iteration runs one query
// of the family, cycling through several, and the latencies' p50 and p99
// are reported.
func BenchmarkSearch(b *testing.B) {
	l, n := openSearchBench(b, *benchReceipts)
	ctx := context.Background()
	b.Logf("%d entries", n)
	families := []struct {
		name    string
		queries []Query
	}{
		{"rare-word", []Query{{Text: "quixote7"}, {Text: "quixote23"}, {Text: "quixote41"}, {Text: "quixote3"}}},
		{"rare-email", []Query{{Text: "quixote7@example.org"}, {Text: "quixote23@example.org"}, {Text: "quixote41@example.org"}}},
		{"common-word", []Query{{Text: "text"}, {Text: "files"}, {Text: g0.words[0]}, {Text: g0.words[1]}}},
		{"common-words-and-filter", []Query{{Text: "text", Status: entry.Failed}, {Text: g0.words[2], Server: "github"}}},
		{"filters", []Query{{Server: "github", Decision: entry.Deny}, {Kind: "outcome", Status: entry.Unknown},
			{Server: "jira", Kind: "receipt"}, {Decision: entry.ApprovalRequired}}},
		{"time-range", []Query{{From: benchStart.Add(30 * 24 * time.Hour), To: benchStart.Add(31 * 24 * time.Hour)},
			{From: benchStart.Add(150 * 24 * time.Hour), To: benchStart.Add(150*24*time.Hour + time.Hour), Server: "files"}}},
		{"deep-page", []Query{{Before: n / 2}, {Text: "text", Before: n / 2}, {Server: "github", Before: n / 10},
			{Text: "files", Before: n / 3}}},
	}
	for _, f := range families {
		b.Run(f.name, func(b *testing.B) {
			lat := make([]time.Duration, 0, b.N)
			hits := 0
			for i := range b.N {
				t0 := time.Now()
				p, err := l.Search(ctx, f.queries[i%len(f.queries)])
				if err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
				hits += len(p.Hits)
			}
			b.ReportMetric(float64(hits)/float64(b.N), "hits/op")
			reportPercentiles(b, lat)
		})
	}
}

func reportPercentiles(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	pct := func(p float64) float64 {
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	b.ReportMetric(pct(0.50), "p50-ms")
	b.ReportMetric(pct(0.95), "p95-ms")
	b.ReportMetric(pct(0.99), "p99-ms")
}

// benchStart is the time of the benchmark log's first entry; its entries
// span 180 days from there.
var benchStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// genVersion names the generator's output: change it with the generator.
const genVersion = "1"

// searchBenchDir is the cache folder of the benchmark database of n
// receipts at schema step len(steps).
func searchBenchDir(steps []string, n int) string {
	sum := sha256.Sum256([]byte(strings.Join(steps, "\x00") + "\x00" + genVersion))
	return filepath.Join(os.TempDir(), "gatehouse-bench", fmt.Sprintf("search-%x-%d", sum[:6], n))
}

// benchKey signs the benchmark logs.
func benchKey() ed25519.PrivateKey {
	seed := sha256.Sum256([]byte("gatehouse benchmark key"))
	return ed25519.NewKeyFromSeed(seed[:])
}

// openSearchBench opens the benchmark database of n receipts, building it
// first when the cache has none for this schema and generator: from the
// cached database of an earlier schema when there is one (opening it
// migrates it, as a user's log is, and its search index is upgraded to
// the end), else from nothing.
func openSearchBench(b *testing.B, n int) (*Log, int64) {
	b.Helper()
	ctx := context.Background()
	dir, key := searchBenchDir(migrations, n), benchKey()
	if _, err := os.Stat(filepath.Join(dir, store.DatabaseFile)); err != nil {
		t0 := time.Now()
		if older := olderSearchBench(n); older != "" {
			b.Logf("upgrading a copy of %s into %s (once)", older, dir)
			var took time.Duration
			took, err = upgradeSearchBench(ctx, older, dir, key)
			b.Logf("its schema steps took %v", took.Round(time.Millisecond))
		} else {
			b.Logf("building %s (once)", dir)
			err = buildSearchBench(ctx, dir, key, n, migrations)
		}
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("done in %v", time.Since(t0).Round(time.Second))
	}
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	l, err := Open(ctx, st, key)
	if err != nil {
		b.Fatal(err)
	}
	size, err := l.Size(ctx)
	if err != nil {
		b.Fatal(err)
	}
	return l, size
}

// olderSearchBench returns the folder of the newest cached benchmark
// database of n receipts at an earlier schema step (from step 2, the first
// with search), or "".
func olderSearchBench(n int) string {
	for k := len(migrations) - 1; k >= 2; k-- {
		dir := searchBenchDir(migrations[:k], n)
		if _, err := os.Stat(filepath.Join(dir, store.DatabaseFile)); err == nil {
			return dir
		}
	}
	return ""
}

// upgradeSearchBench copies the database in older to dir, opens it (which
// migrates it) and upgrades its search index. It returns how long opening
// took: the schema steps a user's log goes through when a proxy opens it.
func upgradeSearchBench(ctx context.Context, older, dir string, key ed25519.PrivateKey) (time.Duration, error) {
	tmp := dir + ".building"
	os.RemoveAll(tmp)
	if err := copyDB(older, tmp); err != nil {
		return 0, err
	}
	t0 := time.Now()
	st, err := store.Open(ctx, tmp, nil)
	if err != nil {
		return 0, err
	}
	defer st.Close()
	l, err := Open(ctx, st, key)
	if err != nil {
		return 0, err
	}
	took := time.Since(t0)
	if err := l.upgradeIndex(ctx, nil, false); err != nil {
		return 0, err
	}
	return took, finishBenchDB(ctx, st, tmp, dir)
}

// finishBenchDB checkpoints and closes the benchmark database built in the
// home folder tmp, and renames tmp to dir: a cache entry is whole or absent.
func finishBenchDB(ctx context.Context, st *store.Store, tmp, dir string) error {
	if _, err := st.DB().ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return err
	}
	if err := st.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dir)
}

// copyDB copies the database file of home folder from into a new home
// folder to (the cached databases are checkpointed: no write-ahead log).
func copyDB(from, to string) error {
	if err := os.MkdirAll(to, 0o700); err != nil {
		return err
	}
	src, err := os.Open(filepath.Join(from, store.DatabaseFile))
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(filepath.Join(to, store.DatabaseFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// BenchmarkIndexUpgrade measures the upgrade of a million-receipt log's
// search index (schema step 4) as a user lives it: a copy of the benchmark
// database at step 3 (cached by an earlier BenchmarkSearch) is opened,
// which must not wait for the upgrade, and UpgradeIndex runs in the
// background while another connection appends receipts, as a governed
// proxy does, one every 10 ms; their latencies are reported beside those
// of the same appends with no upgrade running, on the same log, right
// before.
//
//	go test -run '^$' -bench IndexUpgrade -benchtime 1x -timeout 60m ./receipts/
func BenchmarkIndexUpgrade(b *testing.B) {
	older := searchBenchDir(migrations[:3], *benchReceipts)
	ctx := context.Background()
	if _, err := os.Stat(filepath.Join(older, store.DatabaseFile)); err != nil {
		b.Logf("building %s (once)", older)
		if err := buildSearchBench(ctx, older, benchKey(), *benchReceipts, migrations[:3]); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		b.StopTimer()
		home := filepath.Join(os.TempDir(), "gatehouse-bench", "upgrade")
		os.RemoveAll(home)
		if err := copyDB(older, home); err != nil {
			b.Fatal(err)
		}
		st, err := store.Open(ctx, home, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		t0 := time.Now()
		l, err := Open(ctx, st, benchKey())
		if err != nil {
			b.Fatal(err)
		}
		opened := time.Since(t0)
		proxy, err := store.Open(ctx, home, nil)
		if err != nil {
			b.Fatal(err)
		}
		pl, err := Open(ctx, proxy, benchKey())
		if err != nil {
			b.Fatal(err)
		}
		g := newGen(9)
		appendFor := func(d time.Duration) []time.Duration {
			var lat []time.Duration
			for end := time.Now().Add(d); time.Now().Before(end); {
				c := g.call(len(lat))
				t := time.Now()
				if _, err := pl.AppendReceipt(ctx, c.receipt, c.args); err != nil {
					b.Error(err)
					return lat
				}
				lat = append(lat, time.Since(t))
				time.Sleep(10 * time.Millisecond)
			}
			return lat
		}
		quiet := appendFor(20 * time.Second)
		done := make(chan error, 1)
		// A transaction is reported as it ends, and the upgrade then rests as
		// long as it took: half the time between two reports is one
		// transaction's hold of the write lock.
		var holds []time.Duration
		t1 := time.Now()
		go func() {
			last := t1
			done <- l.UpgradeIndex(ctx, func(int64) {
				holds = append(holds, time.Since(last)/2)
				last = time.Now()
			})
		}()
		var during []time.Duration
		for {
			during = append(during, appendFor(time.Second)...)
			select {
			case err := <-done:
				if err != nil {
					b.Fatal(err)
				}
			default:
				continue
			}
			break
		}
		upgraded := time.Since(t1)
		b.StopTimer()
		b.ReportMetric(float64(opened.Microseconds())/1000, "open-ms")
		b.ReportMetric(upgraded.Seconds(), "upgrade-s")
		b.ReportMetric(float64(len(holds)), "transactions")
		for _, x := range []struct {
			name string
			lat  []time.Duration
		}{{"append-quiet", quiet}, {"append-upgrading", during}, {"upgrade-tx", holds}} {
			slices.Sort(x.lat)
			pct := func(p float64) float64 {
				return float64(x.lat[min(len(x.lat)-1, int(p*float64(len(x.lat))))].Microseconds()) / 1000
			}
			b.ReportMetric(pct(0.5), x.name+"-p50-ms")
			b.ReportMetric(pct(0.99), x.name+"-p99-ms")
			b.ReportMetric(pct(1), x.name+"-max-ms")
		}
		proxy.Close()
		st.Close()
		os.RemoveAll(home)
	}
}

// buildSearchBench writes n calls (receipts, and outcomes for those that
// ran) into a new home folder dir at schema step len(steps), through the
// log's own append path, a thousand appends per transaction. It builds in a
// sibling folder and renames it, so that an interrupted build is never
// taken for a finished one.
func buildSearchBench(ctx context.Context, dir string, key ed25519.PrivateKey, n int, steps []string) error {
	tmp := dir + ".building"
	os.RemoveAll(tmp)
	st, err := store.Open(ctx, tmp, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := open(ctx, st, key, false, steps)
	if err != nil {
		return err
	}
	g := newGen(42)
	const batch = 1000
	for i := 0; i < n; i += batch {
		err := l.inTx(ctx, func(tx *sql.Tx) error {
			for j := i; j < min(n, i+batch); j++ {
				c := g.call(j)
				salt := entry.NewSalt()
				c.receipt.Args = entry.Commit(salt, c.args)
				r, err := l.appendTx(ctx, tx, l.key, draft{kind: entry.KindReceipt, prefix: "r", body: c.receipt,
					index:    columns{server: c.receipt.Server, tool: c.receipt.Tool, decision: c.receipt.Decision, client: c.receipt.Client.Name},
					payloads: []payload{{part: "args", salt: salt, data: c.args, commitment: c.receipt.Args}}})
				if err != nil {
					return err
				}
				if c.status == "" {
					continue
				}
				o := entry.Outcome{Receipt: r.ID, Status: c.status, DurationMS: 12}
				d := draft{kind: entry.KindOutcome, prefix: "o", index: columns{status: c.status, receipt: r.ID}}
				if c.result != nil {
					salt = entry.NewSalt()
					o.Result = entry.Commit(salt, c.result)
					d.payloads = []payload{{part: "result", salt: salt, data: c.result, commitment: o.Result}}
				}
				d.body = o
				if _, err := l.appendTx(ctx, tx, l.key, d); err != nil {
					return err
				}
				if _, err := tx.ExecContext(ctx, `UPDATE entries SET status = ? WHERE idx = ?`, c.status, r.Index); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("build benchmark log at %d: %w", i, err)
		}
	}
	// The entries were written within minutes; spread their search times
	// over 180 days, in log order, as a long-used log's would be. (Only
	// time_ns, which search reads, changes: the signed times stay.)
	size, err := l.Size(ctx)
	if err != nil {
		return err
	}
	span := int64(180 * 24 * time.Hour)
	if _, err := st.DB().ExecContext(ctx, `UPDATE entries SET time_ns = ? + idx * ?`, benchStart.UnixNano(), span/max(size, 1)); err != nil {
		return err
	}
	return finishBenchDB(ctx, st, tmp, dir)
}

// A gen makes realistic calls: a mix of servers and tools, clients,
// decisions and outcomes, and payloads of paths, emails, URLs, SQL and
// prose over a vocabulary whose words follow Zipf's law, as text does.
// The same seed gives the same calls.
type gen struct {
	rng    *rand.Rand
	zipf   *rand.Zipf
	words  []string
	people []string
}

var g0 = newGen(42) // for the benchmark's query words

func newGen(seed uint64) *gen {
	rng := rand.New(rand.NewPCG(seed, 7))
	g := &gen{rng: rng}
	syll := []string{"ka", "lo", "mi", "ne", "ta", "ri", "so", "vu", "pe", "da", "ch", "st", "ar", "en", "or", "il", "um", "ex", "qu", "ba"}
	wr := rand.New(rand.NewPCG(1, 2)) // the vocabulary is the same for every seed
	seen := map[string]bool{}
	for len(g.words) < 8000 {
		var w strings.Builder
		for range 2 + wr.IntN(3) {
			w.WriteString(syll[wr.IntN(len(syll))])
		}
		if s := w.String(); !seen[s] && !strings.HasPrefix(s, "quixote") {
			seen[s] = true
			g.words = append(g.words, s)
		}
	}
	for i := range 20000 {
		g.people = append(g.people, fmt.Sprintf("%s.%s%d", g.words[wr.IntN(2000)], g.words[wr.IntN(2000)], i%7))
	}
	g.zipf = rand.NewZipf(rng, 1.1, 2, uint64(len(g.words)-1))
	return g
}

type benchCall struct {
	receipt      entry.Receipt
	args, result []byte
	status       string // "" for a call that did not run
}

var benchTools = []struct {
	server string
	tools  []string
	weight int
}{
	{"files", []string{"read_file", "write_file", "list_directory", "search_files"}, 35},
	{"github", []string{"create_issue", "get_issue", "list_pull_requests", "search_code"}, 20},
	{"fetch", []string{"fetch"}, 10},
	{"slack", []string{"post_message", "get_history"}, 8},
	{"postgres", []string{"query"}, 8},
	{"browser", []string{"navigate", "click"}, 7},
	{"mail", []string{"send_email", "search_inbox"}, 5},
	{"memory", []string{"create_entities", "search_nodes"}, 4},
	{"jira", []string{"create_ticket"}, 3},
}

var benchClients = []string{"claude-code", "claude-code", "claude-code", "claude-code", "cursor", "cursor", "vscode", "windsurf", "zed"}

func (g *gen) word() string { return g.words[g.zipf.Uint64()] }

func (g *gen) prose(n int) string {
	var s strings.Builder
	for i := range n {
		if i > 0 {
			s.WriteByte(' ')
		}
		s.WriteString(g.word())
		if g.rng.IntN(12) == 0 {
			s.WriteString(".")
		}
	}
	return s.String()
}

func (g *gen) email() string {
	// One call in about 40,000 mentions one of the 50 rare people.
	if g.rng.IntN(800) == 0 {
		return fmt.Sprintf("quixote%d@example.org", g.rng.IntN(50))
	}
	return g.people[g.rng.IntN(len(g.people))] + "@" + []string{"example.com", "example.org", "mail.example.net"}[g.rng.IntN(3)]
}

func (g *gen) path() string {
	return fmt.Sprintf("/home/dev/%s/%s/%s_%s.%s", g.words[g.rng.IntN(200)], []string{"src", "internal", "cmd", "docs", "tests"}[g.rng.IntN(5)],
		g.word(), g.word(), []string{"go", "md", "ts", "py", "json"}[g.rng.IntN(5)])
}

func (g *gen) call(i int) benchCall {
	w := g.rng.IntN(100)
	t := benchTools[0]
	for _, x := range benchTools {
		if w < x.weight {
			t = x
			break
		}
		w -= x.weight
	}
	tool := t.tools[g.rng.IntN(len(t.tools))]
	c := benchCall{receipt: entry.Receipt{
		Capability: entry.Capability(t.server, tool), Server: t.server, Tool: tool, Decision: entry.Allow,
		Rule: "default:low", Client: entry.Client{Name: benchClients[g.rng.IntN(len(benchClients))], Version: "1.0"},
	}}
	var args, text any
	switch t.server {
	case "files":
		args = map[string]any{"path": g.path()}
		text = g.prose(40 + g.rng.IntN(200))
	case "github":
		args = map[string]any{"owner": "acme", "repo": g.words[g.rng.IntN(100)], "title": g.prose(6), "body": g.prose(30), "assignee": g.email()}
		text = map[string]any{"number": 1000 + g.rng.IntN(9000), "url": "https://github.example.com/acme/" + g.words[g.rng.IntN(100)], "state": "open"}
	case "fetch":
		args = map[string]any{"url": "https://docs.example.com/" + g.word() + "/" + g.word()}
		text = g.prose(100 + g.rng.IntN(300))
	case "slack":
		args = map[string]any{"channel": "#" + g.words[g.rng.IntN(50)], "text": g.prose(20) + " cc " + g.email()}
		text = map[string]any{"ok": true, "ts": strconv.Itoa(1700000000 + i)}
	case "postgres":
		args = map[string]any{"sql": fmt.Sprintf("SELECT id, email, total FROM orders WHERE customer_id = %d", g.rng.IntN(100000))}
		text = []any{map[string]any{"id": i, "email": g.email(), "total": g.rng.IntN(50000)}}
	case "mail":
		args = map[string]any{"to": g.email(), "subject": g.prose(5), "body": g.prose(60)}
		text = "sent to " + g.email()
	default:
		args = map[string]any{"query": g.prose(4), "ref": g.email()}
		text = g.prose(30)
	}
	c.args, _ = json.Marshal(args)
	switch d := g.rng.IntN(1000); {
	case d < 45:
		c.receipt.Decision = entry.Deny
		return c
	case d < 60:
		c.receipt.Decision = entry.ApprovalRequired
		return c
	}
	switch s := g.rng.IntN(100); {
	case s < 90:
		c.status = entry.Succeeded
	case s < 99:
		c.status = entry.Failed
		text = "error: " + g.prose(8)
	default:
		c.status = entry.Unknown
		return c
	}
	if s, ok := text.(string); !ok {
		b, _ := json.Marshal(text)
		text = string(b)
	} else {
		text = s
	}
	c.result, _ = json.Marshal(map[string]any{"content": []any{map[string]any{"type": "text", "text": text}}})
	return c
}
