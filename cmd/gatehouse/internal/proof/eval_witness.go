package proof

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
	"github.com/gatehouse-dev/gatehouse/receipts/witness"
)

// memLog is a log's tree in memory, signed with a key of its own: what a
// log's owner could build to show a witness two histories.
type memLog struct {
	id     string
	key    ed25519.PrivateKey
	hashes map[int64]tlog.Hash
	size   int64
}

func newMemLog(seed string) *memLog {
	s := sha256.Sum256([]byte("eval log key"))
	return &memLog{id: "evalwitnessaaaaaaaa", key: ed25519.NewKeyFromSeed(s[:]), hashes: map[int64]tlog.Hash{}}
}

func (l *memLog) ReadHashes(idx []int64) ([]tlog.Hash, error) {
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

func (l *memLog) grow(n int, text string) error {
	for range n {
		hs, err := tlog.StoredHashes(l.size, fmt.Appendf(nil, "%s %d", text, l.size), l)
		if err != nil {
			return err
		}
		for i, h := range hs {
			l.hashes[tlog.StoredHashIndex(0, l.size)+int64(i)] = h
		}
		l.size++
	}
	return nil
}

func (l *memLog) checkpoint() ([]byte, error) {
	h, err := tlog.TreeHash(l.size, l)
	if err != nil {
		return nil, err
	}
	return entry.SignCheckpoint(entry.Checkpoint{Log: l.id, Size: l.size, Hash: h}, l.key)
}

func (l *memLog) prove(old int64) (tlog.TreeProof, error) { return tlog.ProveTree(l.size, old, l) }

// witnessLab runs a witness on loopback, in a home of its own, that
// cosigns for the log honest, and has cosigned its checkpoint of 4 entries.
func (t *T) witnessLab(ctx context.Context, honest *memLog) (*witness.Client, error) {
	st, err := store.Open(ctx, filepath.Join(t.dir, "witness"), nil)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() { st.Close() })
	wk := sha256.Sum256([]byte("eval witness key"))
	w, err := witness.Open(ctx, st, ed25519.NewKeyFromSeed(wk[:]), "eval.witness/w1", nil)
	if err != nil {
		return nil, err
	}
	vkey, err := entry.LogVerifierKey(honest.key.Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	if err := w.AddLog(ctx, entry.Origin(honest.id), vkey); err != nil {
		return nil, err
	}
	srv := httptest.NewServer(w.Handler())
	t.Cleanup(srv.Close)
	c := &witness.Client{URL: srv.URL, Key: w.Key()}
	if err := honest.grow(4, "honest"); err != nil {
		return nil, err
	}
	cp, err := honest.checkpoint()
	if err != nil {
		return nil, err
	}
	if _, _, _, err := c.Submit(ctx, cp, honest.size, 0, honest.prove); err != nil {
		return nil, fmt.Errorf("the honest log's checkpoint was not cosigned: %w", err)
	}
	return c, nil
}

// refused submits fork's checkpoint as a client that does everything
// right would, and fails unless the witness refuses it.
func refused(ctx context.Context, t *T, c *witness.Client, fork *memLog) error {
	cp, err := fork.checkpoint()
	if err != nil {
		return err
	}
	_, _, _, err = c.Submit(ctx, cp, fork.size, 0, fork.prove)
	var e *witness.Error
	if err == nil {
		return errors.New("the witness cosigned a checkpoint that forks from the one it cosigned")
	}
	if !errors.As(err, &e) || (e.Status != http.StatusConflict && e.Status != http.StatusUnprocessableEntity) {
		return fmt.Errorf("the witness answered %v, not 409 or 422", err)
	}
	t.Note("refused: %v", e)
	return nil
}

func witnessCases() []Case {
	const fork = "a witness never cosigns a checkpoint inconsistent with one it cosigned, even signed by the log's own key"
	return []Case{
		{
			Family: EvidenceTampering, Name: "witness: another tree at the size it cosigned", Claim: fork,
			Run: func(ctx context.Context, t *T) error {
				c, err := t.witnessLab(ctx, newMemLog("honest"))
				if err != nil {
					return err
				}
				other := newMemLog("other")
				if err := other.grow(4, "rewritten"); err != nil {
					return err
				}
				return refused(ctx, t, c, other)
			},
		},
		{
			Family: EvidenceTampering, Name: "witness: a rewritten log, larger, with its own proof", Claim: fork,
			Run: func(ctx context.Context, t *T) error {
				c, err := t.witnessLab(ctx, newMemLog("honest"))
				if err != nil {
					return err
				}
				other := newMemLog("other")
				if err := other.grow(2, "honest"); err != nil {
					return err
				}
				if err := other.grow(5, "rewritten"); err != nil {
					return err
				}
				return refused(ctx, t, c, other)
			},
		},
		{
			Family: EvidenceTampering, Name: "bundle: no cosignature by the witness named",
			Claim: "a bundle that the witnesses an auditor names did not cosign fails verification",
			Run: func(ctx context.Context, t *T) error {
				l, ev, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				wk := sha256.Sum256([]byte("a witness that never saw this log"))
				k := entry.WitnessKey{Name: "eval.witness/w2", Key: ed25519.NewKeyFromSeed(wk[:]).Public().(ed25519.PublicKey)}
				return expectCaught(ctx, l, ev.Dir, verify.CheckWitnesses, "--witness", k.String())
			},
		},
	}
}
