package receipts

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// The test binary doubles as a Gatehouse process appending to a shared
// home folder: with roleEnv set, TestMain runs that role instead of the
// tests (as every proxy an MCP client starts appends to the same log).
const (
	roleEnv   = "GATEHOUSE_RECEIPTS_TEST_ROLE" // writer, looper, bench-writer
	homeEnv   = "GATEHOUSE_RECEIPTS_TEST_HOME"
	seedEnv   = "GATEHOUSE_RECEIPTS_TEST_SEED" // hex of the signing key's seed
	writerEnv = "GATEHOUSE_RECEIPTS_TEST_WRITER"
	countEnv  = "GATEHOUSE_RECEIPTS_TEST_COUNT"
)

func TestMain(m *testing.M) {
	role := os.Getenv(roleEnv)
	if role == "" {
		os.Exit(m.Run())
	}
	if err := runRole(role); err != nil {
		fmt.Fprintf(os.Stderr, "%s %s: %v\n", role, os.Getenv(writerEnv), err)
		os.Exit(1)
	}
	os.Exit(0)
}

func runRole(role string) error {
	ctx := context.Background()
	seed, err := hex.DecodeString(os.Getenv(seedEnv))
	if err != nil || len(seed) != ed25519.SeedSize {
		return fmt.Errorf("bad %s", seedEnv)
	}
	// The tests check what the log looks like after contention, not how
	// long a writer waits: under -race on a loaded two-core machine, eight
	// writers can keep one waiting longer than the default 10 s.
	st, err := store.Open(ctx, os.Getenv(homeEnv), &store.Options{BusyTimeout: time.Minute})
	if err != nil {
		return err
	}
	defer st.Close()
	l, err := Open(ctx, st, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		return err
	}
	w := os.Getenv(writerEnv)
	n, _ := strconv.Atoi(os.Getenv(countEnv))
	switch role {
	case "writer":
		return writeCalls(ctx, l, w, n, nil)
	case "looper", "shared-looper", "burst-looper":
		// Appends until killed, and says so after each commit; a
		// shared-looper shares the home's commits (writer.go); a
		// burst-looper also appends from eight goroutines at once, as a
		// proxy with calls in flight does.
		if role != "looper" {
			defer l.ShareCommits()()
		}
		var mu sync.Mutex
		out := bufio.NewWriter(os.Stdout)
		done := func(e *entry.Entry) {
			mu.Lock()
			fmt.Fprintln(out, e.ID)
			out.Flush()
			mu.Unlock()
		}
		if role != "burst-looper" {
			return writeCalls(ctx, l, w, -1, done)
		}
		errs := make(chan error, 8)
		for g := range 8 {
			go func() { errs <- writeCalls(ctx, l, fmt.Sprintf("%s.%d", w, g), -1, done) }()
		}
		return <-errs
	case "bench-writer":
		return benchWriter(ctx, l, w, n)
	case "bench-sharer":
		defer l.ShareCommits()()
		return benchWriter(ctx, l, w, n)
	case "sharer":
		// Becomes the home's writer, says so, and serves until killed.
		defer l.ShareCommits()()
		if _, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.files.read_file", Server: "files",
			Tool: "read_file", Decision: entry.Allow, Rule: "test"}, []byte(`{}`)); err != nil {
			return err
		}
		fmt.Println("writer", os.Getpid())
		select {}
	case "indexer":
		_, err := l.CatchUpIndex(ctx)
		return err
	}
	return fmt.Errorf("unknown role %q", role)
}

// writeCalls appends n entries (forever when n < 0): calls, each a receipt
// and its outcome, whose payloads carry the writer's marker; every seventh
// call also erases the arguments of an earlier one. done, if not nil, is
// told of every entry once it is committed.
func writeCalls(ctx context.Context, l *Log, writer string, n int, done func(*entry.Entry)) error {
	var receipts []string
	for i := 0; n < 0 || i < n; i += 2 {
		r, err := l.AppendReceipt(ctx, entry.Receipt{
			Capability: "mcp.files.read_file", Server: "files", Tool: "read_file", Decision: entry.Allow,
			Rule: "test", Client: entry.Client{Name: "writer-" + writer},
		}, fmt.Appendf(nil, `{"marker":"wq%sx","seq":%d,"path":"/tmp/%s/%d.txt"}`, writer, i, writer, i))
		if errors.Is(err, ErrWriterGone) {
			continue // the home's writer was killed: as a proxy, refuse this call and go on
		}
		if err != nil {
			return err
		}
		if done != nil {
			done(r)
		}
		receipts = append(receipts, r.ID)
		if n >= 0 && i+1 == n {
			break
		}
		o, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: r.ID, Status: entry.Succeeded, DurationMS: 1},
			fmt.Appendf(nil, `{"content":[{"type":"text","text":"read wq%sx %d"}]}`, writer, i))
		if errors.Is(err, ErrWriterGone) {
			continue
		}
		if err != nil {
			return err
		}
		if done != nil {
			done(o)
		}
		if n < 0 && len(receipts)%7 == 0 {
			e, err := l.Erase(ctx, []string{receipts[len(receipts)/2]}, "test erasure")
			if err != nil {
				return err
			}
			if done != nil && e != nil {
				done(e)
			}
		}
	}
	return nil
}

// startRole starts the test binary in role with the given environment.
func startRole(tb testing.TB, role, home string, seed []byte, writer string, count int) *exec.Cmd {
	tb.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), roleEnv+"="+role, homeEnv+"="+home, seedEnv+"="+hex.EncodeToString(seed),
		writerEnv+"="+writer, countEnv+"="+strconv.Itoa(count))
	cmd.Stderr = os.Stderr
	return cmd
}

func newSeed(tb testing.TB) []byte {
	tb.Helper()
	seed := make([]byte, ed25519.SeedSize)
	rand.Read(seed)
	return seed
}

// openShared opens the log of home with the key of seed, as the writers do.
func openShared(tb testing.TB, home string, seed []byte) (*Log, *store.Store) {
	tb.Helper()
	st, err := store.Open(context.Background(), home, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	l, err := Open(context.Background(), st, ed25519.NewKeyFromSeed(seed))
	if err != nil {
		tb.Fatal(err)
	}
	return l, st
}

// verifyLog checks the whole log as an auditor would, without trusting the
// tree hashes it stores: indexes run 0, 1, 2, ... with no gap; each entry
// is well formed, names this log, is signed by a key announced at or before
// it, and its prev is the tree hash of the entries before it, recomputed
// from their leaves; each payload not erased matches the commitment its
// entry signed; the stored tree equals the recomputed one; and the search
// index holds every entry and is sound. It returns the log's size.
func verifyLog(tb testing.TB, l *Log) int64 {
	tb.Helper()
	ctx := context.Background()
	n, err := l.Size(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	keys, err := l.Keys(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	byID := map[string]Key{}
	for _, k := range keys {
		byID[k.ID] = k
	}
	var stored []tlog.Hash // the tree, recomputed in memory
	hr := tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			out[i] = stored[x]
		}
		return out, nil
	})
	next := int64(0)
	for s, err := range l.Entries(ctx, 0, n) {
		if err != nil {
			tb.Fatal(err)
		}
		if s.Index != next {
			tb.Fatalf("entry %d follows entry %d: indexes are not contiguous", s.Index, next-1)
		}
		e, err := entry.Parse(s.Data)
		if err != nil {
			tb.Fatalf("entry %d: %v", s.Index, err)
		}
		if e.Index != s.Index || e.Log != l.ID() {
			tb.Errorf("entry %d says index %d of log %s", s.Index, e.Index, e.Log)
		}
		prev, err := tlog.TreeHash(s.Index, hr)
		if err != nil {
			tb.Fatal(err)
		}
		if e.Prev != entry.FormatTreeHash(prev) {
			tb.Errorf("entry %d: prev is not the tree hash of the %d entries before it", s.Index, s.Index)
		}
		k, ok := byID[e.Key]
		if !ok || k.AddedIdx > s.Index {
			tb.Errorf("entry %d: signed by key %s, not announced before it", s.Index, e.Key)
		} else if err := entry.Verify(e, k.Public); err != nil {
			tb.Errorf("entry %d: %v", s.Index, err)
		}
		var body struct {
			Args   string `json:"args"`
			Result string `json:"result"`
		}
		json.Unmarshal(e.Body, &body)
		for _, p := range s.Payloads {
			signed := body.Args
			if p.Part == "result" {
				signed = body.Result
			}
			if p.Commitment != signed {
				tb.Errorf("entry %d: %s payload's commitment %s, the entry signed %s", s.Index, p.Part, p.Commitment, signed)
			}
			if !p.Erased() && entry.Commit(p.Salt, p.Data) != p.Commitment {
				tb.Errorf("entry %d: %s payload does not match its commitment", s.Index, p.Part)
			}
		}
		hs, err := tlog.StoredHashes(s.Index, s.Data, hr)
		if err != nil {
			tb.Fatal(err)
		}
		stored = append(stored, hs...)
		next++
	}
	if next != n {
		tb.Fatalf("read %d entries, size %d", next, n)
	}
	want, _ := tlog.TreeHash(n, hr)
	if got, err := l.TreeHash(ctx, n); err != nil || got != want {
		tb.Errorf("stored tree hash %v (%v), recomputed from the entries %v", got, err, want)
	}
	// The index holds exactly the entries below its cursor (each once),
	// and then, caught up, every entry.
	var indexed, cursor int64
	if err := l.db.QueryRowContext(ctx, `SELECT (SELECT count(*) FROM search_fts_docsize),
		(SELECT value FROM search_meta WHERE key = 'indexed_to')`).Scan(&indexed, &cursor); err != nil || indexed != cursor {
		tb.Errorf("search index holds %d entries (%v), its cursor is at %d", indexed, err, cursor)
	}
	if _, err := l.CatchUpIndex(ctx); err != nil {
		tb.Errorf("catch up the search index: %v", err)
	}
	if _, err := l.db.ExecContext(ctx, `INSERT INTO search_fts (search_fts) VALUES ('integrity-check')`); err != nil {
		tb.Errorf("search index: %v", err)
	}
	if err := l.db.QueryRowContext(ctx, `SELECT count(*) FROM search_fts_docsize`).Scan(&indexed); err != nil || indexed != n {
		tb.Errorf("search index holds %d entries (%v), the log %d", indexed, err, n)
	}
	return n
}

// count pages through every hit of q.
func count(tb testing.TB, l *Log, q Query) int {
	tb.Helper()
	q.Limit = MaxLimit
	total := 0
	for {
		p := mustSearch(tb, l, q)
		total += len(p.Hits)
		if p.Next == 0 {
			return total
		}
		q.Before = p.Next
	}
}

// Eight processes append to one log at once: it stays one log, whole and
// verifiable, with every entry in the search index.
func TestConcurrentProcesses(t *testing.T) {
	const writers = 8
	per := 1000
	if testing.Short() {
		per = 100
	}
	// The home exists, as it does after Gatehouse's first run: the writers
	// only append. (Many processes creating a home at once: store tests.)
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	cmds := make([]*exec.Cmd, writers)
	for i := range cmds {
		cmds[i] = startRole(t, "writer", home, seed, strconv.Itoa(i), per)
		if err := cmds[i].Start(); err != nil {
			t.Fatal(err)
		}
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	if n := verifyLog(t, l); n != 1+writers*int64(per) {
		t.Errorf("size %d, want %d: the key entry and %d from each of %d writers", n, 1+writers*per, per, writers)
	}
	for i := range writers {
		if got := count(t, l, Query{Text: fmt.Sprintf("wq%dx", i)}); got != per {
			t.Errorf("search finds %d entries of writer %d, want %d", got, i, per)
		}
	}
}
