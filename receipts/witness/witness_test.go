package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// testLog is a log in memory: its leaves' tree, and a key that signs its
// checkpoints as a Gatehouse log does.
type testLog struct {
	id     string
	key    ed25519.PrivateKey
	hashes map[int64]tlog.Hash
	size   int64
}

func newTestLog(t testing.TB, id, seed string) *testLog {
	s := sha256.Sum256([]byte(seed))
	return &testLog{id: id, key: ed25519.NewKeyFromSeed(s[:]), hashes: map[int64]tlog.Hash{}}
}

func (l *testLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(idx))
	for i, x := range idx {
		h, ok := l.hashes[x]
		if !ok {
			return nil, fmt.Errorf("no hash %d", x)
		}
		out[i] = h
	}
	return out, nil
}

// grow appends n leaves, each its text.
func (l *testLog) grow(t testing.TB, n int, text string) *testLog {
	t.Helper()
	for range n {
		hs, err := tlog.StoredHashes(l.size, []byte(fmt.Sprintf("%s %d", text, l.size)), l)
		if err != nil {
			t.Fatal(err)
		}
		base := tlog.StoredHashIndex(0, l.size)
		for i, h := range hs {
			l.hashes[base+int64(i)] = h
		}
		l.size++
	}
	return l
}

func (l *testLog) origin() string { return entry.Origin(l.id) }

func (l *testLog) vkey(t testing.TB) string {
	v, err := entry.LogVerifierKey(l.key.Public().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func (l *testLog) checkpoint(t testing.TB) []byte {
	t.Helper()
	h, err := tlog.TreeHash(l.size, l)
	if err != nil {
		t.Fatal(err)
	}
	b, err := entry.SignCheckpoint(entry.Checkpoint{Log: l.id, Size: l.size, Hash: h}, l.key)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (l *testLog) prove(old int64) (tlog.TreeProof, error) { return tlog.ProveTree(l.size, old, l) }

// request is an add-checkpoint request for the log's checkpoint now, with
// a proof from old.
func (l *testLog) request(t testing.TB, old int64) AddCheckpoint {
	t.Helper()
	r := AddCheckpoint{Old: old, Checkpoint: l.checkpoint(t)}
	if old > 0 && old < l.size {
		p, err := l.prove(old)
		if err != nil {
			t.Fatal(err)
		}
		r.Proof = p
	}
	return r
}

func witnessKey(name string) ed25519.PrivateKey {
	s := sha256.Sum256([]byte("witness " + name))
	return ed25519.NewKeyFromSeed(s[:])
}

// openWitness opens the witness in dir (a new one when dir is empty).
func openWitness(t testing.TB, dir string) (*Witness, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	st, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	w, err := Open(context.Background(), st, witnessKey("w1"), "witness.test/w1", nil)
	if err != nil {
		t.Fatal(err)
	}
	return w, dir
}

func serve(t testing.TB, w *Witness) *Client {
	t.Helper()
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	return &Client{URL: srv.URL, Key: w.Key()}
}

func status(err error) int {
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	return 0
}

func TestWitnessCosignsAGrowingLog(t *testing.T) {
	ctx := context.Background()
	w, _ := openWitness(t, "")
	l := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 3, "a")
	if err := w.AddLog(ctx, l.origin(), l.vkey(t)); err != nil {
		t.Fatal(err)
	}
	c := serve(t, w)
	known := int64(0)
	for _, n := range []int{0, 2, 5, 1, 0} {
		l.grow(t, n, "a")
		cp := l.checkpoint(t)
		line, _, size, err := c.Submit(ctx, cp, l.size, known, l.prove)
		if err != nil {
			t.Fatalf("Submit at %d from %d: %v", l.size, known, err)
		}
		if size != l.size {
			t.Errorf("Submit at %d: the witness is at %d", l.size, size)
		}
		text, _ := noteText(cp)
		sl, _ := entry.ParseSignatureLine(strings.TrimSuffix(line, "\n"))
		if _, err := entry.VerifyCosignature(w.Key(), text, sl); err != nil {
			t.Errorf("the cosignature at %d: %v", l.size, err)
		}
		known = size
	}
	// A client that knows nothing learns the size from the 409 and goes on.
	l.grow(t, 4, "a")
	if _, _, _, err := c.Submit(ctx, l.checkpoint(t), l.size, 0, l.prove); err != nil {
		t.Fatalf("Submit from 0 after the witness cosigned: %v", err)
	}
	logs, err := w.Logs(ctx)
	if err != nil || len(logs) != 1 || logs[0].Size != l.size {
		t.Fatalf("Logs() = %+v, %v; want one log at %d", logs, err, l.size)
	}
}

func TestWitnessRefusesAFork(t *testing.T) {
	ctx := context.Background()
	w, dir := openWitness(t, "")
	// Two logs with the same id and key: one shown to the witness, the
	// other written from the same start and then rewritten.
	a := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 4, "a")
	b := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 2, "a").grow(t, 2, "rewritten")
	if err := w.AddLog(ctx, a.origin(), a.vkey(t)); err != nil {
		t.Fatal(err)
	}
	c := serve(t, w)
	if _, _, err := c.AddCheckpoint(ctx, a.request(t, 0)); err != nil {
		t.Fatal(err)
	}

	// The same size, another tree: 409, and the witness stays at 4.
	_, _, err := c.AddCheckpoint(ctx, b.request(t, 4))
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusConflict || e.Size != 4 {
		t.Fatalf("a fork at the same size: %v; want 409 with size 4", err)
	}
	// Larger, with b's own proof from 4: it cannot lead from a's tree: 422.
	b.grow(t, 3, "b")
	if _, _, err := c.AddCheckpoint(ctx, b.request(t, 4)); status(err) != http.StatusUnprocessableEntity {
		t.Fatalf("a fork with a proof from its own tree: %v; want 422", err)
	}
	// Submitted by a client that does everything right: still refused.
	if _, _, _, err := c.Submit(ctx, b.checkpoint(t), b.size, 0, b.prove); status(err) != http.StatusUnprocessableEntity {
		t.Fatalf("Submit of a fork: %v; want 422", err)
	}
	if n, err := w.Refusals(ctx, a.origin()); err != nil || n != 3 {
		t.Errorf("Refusals = %d, %v; want 3", n, err)
	}

	// A restarted witness remembers what it cosigned.
	w2, _ := openWitness(t, dir)
	c2 := serve(t, w2)
	if _, _, err := c2.AddCheckpoint(ctx, b.request(t, 0)); status(err) != http.StatusConflict {
		t.Fatalf("after a restart, a fork from 0: %v; want 409", err)
	}
	if _, _, err := c2.AddCheckpoint(ctx, b.request(t, 4)); status(err) != http.StatusUnprocessableEntity {
		t.Fatalf("after a restart, a fork from 4: %v; want 422", err)
	}
	a.grow(t, 2, "a")
	if _, _, err := c2.AddCheckpoint(ctx, a.request(t, 4)); err != nil {
		t.Fatalf("after a restart, the log's next checkpoint: %v", err)
	}
}

func TestWitnessRefusals(t *testing.T) {
	ctx := context.Background()
	w, _ := openWitness(t, "")
	l := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 5, "a")
	if err := w.AddLog(ctx, l.origin(), l.vkey(t)); err != nil {
		t.Fatal(err)
	}
	other := newTestLog(t, "bbbbbbbbbbbbbbbbbbb", "other").grow(t, 5, "a")
	impostor := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "impostor").grow(t, 5, "a")
	c := serve(t, w)
	post := func(body string) (int, string, string) {
		resp, err := http.Post(c.URL+"/add-checkpoint", "text/plain", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	for _, tc := range []struct {
		name string
		body string
		want int
	}{
		{"unknown log", string(other.request(t, 0).Format()), http.StatusNotFound},
		{"another key", string(impostor.request(t, 0).Format()), http.StatusForbidden},
		{"no old line", string(l.checkpoint(t)), http.StatusBadRequest},
		{"old beyond the checkpoint", "old 9\n\n" + string(l.checkpoint(t)), http.StatusBadRequest},
		{"a proof from 0", "old 0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n\n" + string(l.checkpoint(t)), http.StatusBadRequest},
		{"unsigned", "old 0\n\n" + strings.SplitAfter(string(l.checkpoint(t)), "\n\n")[0], http.StatusBadRequest},
	} {
		if got, _, body := post(tc.body); got != tc.want {
			t.Errorf("%s: status %d (%s), want %d", tc.name, got, body, tc.want)
		}
	}
	if got, _, _ := post(string(l.request(t, 0).Format())); got != http.StatusOK {
		t.Fatalf("the log's checkpoint: %d", got)
	}
	got, ctype, body := post(string(l.request(t, 0).Format()))
	if got != http.StatusConflict || ctype != ContentTypeSize || body != "5\n" {
		t.Errorf("a stale old size: %d %q %q; want 409 %q \"5\\n\"", got, ctype, body, ContentTypeSize)
	}
	resp, err := http.Get(c.URL + "/add-checkpoint")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d, want 405", resp.StatusCode)
	}
}

// Two processes serving one witness's database, each asked to cosign one
// of two forks at once: one fork is cosigned, the other never is.
func TestWitnessNeverCosignsTwoForks(t *testing.T) {
	ctx := context.Background()
	w1, dir := openWitness(t, "")
	w2, _ := openWitness(t, dir)
	a := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 5, "a")
	b := newTestLog(t, "aaaaaaaaaaaaaaaaaaa", "log").grow(t, 5, "b")
	if err := w1.AddLog(ctx, a.origin(), a.vkey(t)); err != nil {
		t.Fatal(err)
	}
	bodyA, bodyB := a.request(t, 0).Format(), b.request(t, 0).Format()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		signed = map[string]int{}
	)
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, body, name := w1, bodyA, "a"
			if i%2 == 1 {
				w, body, name = w2, bodyB, "b"
			}
			if _, err := w.AddCheckpoint(ctx, body); err == nil {
				mu.Lock()
				signed[name]++
				mu.Unlock()
			} else if status(err) != http.StatusConflict {
				t.Errorf("fork %s: %v", name, err)
			}
		}()
	}
	wg.Wait()
	if len(signed) != 1 || signed["a"]+signed["b"] != 1 {
		t.Fatalf("cosigned %v; want one checkpoint of one fork, once", signed)
	}
}
