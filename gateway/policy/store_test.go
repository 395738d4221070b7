package policy

import (
	"context"
	"errors"
	"reflect"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// logRecorder remembers what it recorded, and fails while fail is set.
type logRecorder struct {
	mu      sync.Mutex
	entries []string
	fail    error
}

func (l *logRecorder) RecordPolicy(ctx context.Context, version int64, hash string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail != nil {
		return l.fail
	}
	l.entries = append(l.entries, hash)
	return nil
}

// MustOpenStore opens the policy store of the home folder dir (a fresh one
// when dir is empty), as another process would.
func MustOpenStore(tb testing.TB, dir string, rec Recorder) *Store {
	tb.Helper()
	if dir == "" {
		dir = tb.TempDir()
	}
	st, err := store.Open(context.Background(), dir, nil)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	s, err := Open(context.Background(), st, &Options{Recorder: rec})
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

func TestStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec := &logRecorder{}
	a := MustOpenStore(t, dir, rec)
	b := MustOpenStore(t, dir, nil) // another process, reading only

	// Nothing saved: the built-in default, version 0.
	cur, err := b.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cur.Version != 0 || cur.Hash() != Default().Hash() {
		t.Errorf("Current() on a new home = version %d %s, want version 0, the built-in default", cur.Version, cur.Hash())
	}

	// Saving the default as it is changes nothing.
	if v, err := a.Save(ctx, Default()); err != nil || v != 0 {
		t.Errorf("Save(Default()) = %d, %v; want 0, nil", v, err)
	}

	p := cur.Clone()
	p.Rules = append(p.Rules, Rule{ID: "no-deletes", Capability: "mcp.gh.delete_*", Decision: Deny})
	v1, err := a.Save(ctx, p)
	if err != nil || v1 != 1 {
		t.Fatalf("Save = %d, %v; want 1, nil", v1, err)
	}
	if got, _ := b.CurrentVersion(ctx); got != 1 {
		t.Errorf("CurrentVersion() in another store = %d, want 1", got)
	}
	got, err := b.Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got.Version != 1 || got.Hash() != p.Hash() || got.Rule("no-deletes") == nil {
		t.Errorf("Current() in another store = version %d %s, want version 1 %s", got.Version, got.Hash(), p.Hash())
	}
	if !reflect.DeepEqual(rec.entries, []string{p.Hash()}) {
		t.Errorf("recorded %q, want [%s]", rec.entries, p.Hash())
	}

	// Saving from a stale version fails and changes nothing.
	stale := cur.Clone() // version 0
	stale.Default = Deny
	if _, err := a.Save(ctx, stale); !errors.Is(err, ErrConflict) {
		t.Errorf("Save from version 0 after version 1 = %v, want ErrConflict", err)
	}

	// A version the log cannot take never takes effect.
	rec.fail = errors.New("keychain unavailable")
	p2 := got.Clone()
	p2.Default = Deny
	if _, err := a.Save(ctx, p2); !errors.Is(err, rec.fail) {
		t.Errorf("Save with a failing recorder = %v, want its error", err)
	}
	if v, _ := b.CurrentVersion(ctx); v != 1 {
		t.Errorf("CurrentVersion() after a failed recording = %d, want 1", v)
	}
	rec.fail = nil
	v3, err := a.Save(ctx, p2)
	if err != nil || v3 != 3 {
		t.Errorf("Save after the log recovered = %d, %v; want 3 (2 was never applied), nil", v3, err)
	}

	// Fresh reads again only when the version changed.
	if f, err := b.Fresh(ctx, got); err != nil || f.Version != 3 || f.Default != Deny {
		t.Errorf("Fresh(version 1) = %+v, %v; want version 3", f, err)
	}
	now, _ := b.Current(ctx)
	if f, err := b.Fresh(ctx, now); err != nil || f != now {
		t.Errorf("Fresh(current) = %p, %v; want the same policy %p", f, err, now)
	}

	hist, err := b.History(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var states []string
	for _, h := range hist {
		s := "not applied"
		if h.Applied {
			s = "applied"
		}
		if h.Current {
			s += ", current"
		}
		states = append(states, s)
	}
	if want := []string{"applied", "not applied", "applied, current"}; !reflect.DeepEqual(states, want) {
		t.Errorf("History() = %q, want %q", states, want)
	}
	if old, err := b.Load(ctx, 1); err != nil || old.Hash() != p.Hash() {
		t.Errorf("Load(1) = %v; want version 1", err)
	}
	if _, err := b.Load(ctx, 9); !errors.Is(err, ErrNotFound) {
		t.Errorf("Load(9) = %v, want ErrNotFound", err)
	}

	// A store without a recorder cannot save.
	if _, err := b.Save(ctx, now); !errors.Is(err, ErrNoRecorder) {
		t.Errorf("Save without a recorder = %v, want ErrNoRecorder", err)
	}
	// Nor can anyone save an invalid policy.
	bad := now.Clone()
	bad.Rules = append(bad.Rules, Rule{ID: "x", Capability: "github", Decision: Deny})
	if _, err := a.Save(ctx, bad); !errors.Is(err, ErrInvalid) {
		t.Errorf("Save(invalid) = %v, want ErrInvalid", err)
	}
}

// Two saves from the same version: one wins, the other is told, and the
// version in force is always one the log has.
func TestStoreConcurrentSaves(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	rec := &logRecorder{}
	stores := []*Store{MustOpenStore(t, dir, rec), MustOpenStore(t, dir, rec)}
	var (
		wg   sync.WaitGroup
		errs = make([]error, 4)
	)
	for i := range errs {
		wg.Go(func() {
			p := Default()
			p.Rules = []Rule{{ID: "r", Capability: "mcp.s.t", Decision: []Decision{Allow, Deny, ApprovalRequired, Allow}[i], Note: string(rune('a' + i))}}
			_, errs[i] = stores[i%2].Save(ctx, p)
		})
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Errorf("Save = %v, want nil or ErrConflict", err)
		}
	}
	if won != 1 {
		t.Errorf("%d saves from version 0 succeeded, want 1", won)
	}
	cur, err := stores[0].Current(ctx)
	if err != nil {
		t.Fatal(err)
	}
	logged := false
	for _, h := range rec.entries {
		logged = logged || h == cur.Hash()
	}
	if !logged {
		t.Errorf("the version in force (%s) is not in the log %q", cur.Hash(), rec.entries)
	}
}
