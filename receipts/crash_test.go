package receipts

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Processes killed (SIGKILL on Unix) at random moments while they append,
// erase and index, over and over, leave a log that verifies, in which every
// append they reported as done is present, and to which a new append works.
func TestKilledWriters(t *testing.T) {
	rounds := 40
	if testing.Short() {
		rounds = 8
	}
	seed1, seed2 := rand.Uint64(), rand.Uint64()
	t.Logf("random seed %d, %d", seed1, seed2)
	rng := rand.New(rand.NewPCG(seed1, seed2))
	home, key := t.TempDir(), newSeed(t)

	var acked []string // ids the writers reported committed
	for round := range rounds {
		// The first round has one writer, on a new home: the kill may land
		// while it creates the database. Then one to three at once.
		var ws []*looper
		for i := range 1 + rng.IntN(3)*min(round, 1) {
			// Each commits its own, or through the home's writer (or as
			// it), one append at a time or eight.
			role := []string{"looper", "shared-looper", "burst-looper"}[rng.IntN(3)]
			ws = append(ws, startLooper(t, home, key, role, strconv.Itoa(round*10+i)))
		}
		// Each writer is killed on its own schedule: after some appends (or
		// none: then the kill may land while the process opens the database
		// and migrates), and up to 2 ms into the next one, wherever it is.
		// The pause only picks the moment.
		done := make(chan []string)
		for _, w := range ws {
			appends, pause := rng.IntN(30), time.Duration(rng.IntN(2000))*time.Microsecond
			go func() {
				var ids []string
				for range appends {
					id, err := w.out.ReadString('\n')
					if err != nil {
						break // it failed: Wait reports it
					}
					ids = append(ids, strings.TrimSpace(id))
				}
				time.Sleep(pause)
				w.cmd.Process.Kill()
				// Entries committed before the kill whose ids were not read yet.
				for {
					id, err := w.out.ReadString('\n')
					if err != nil {
						break
					}
					ids = append(ids, strings.TrimSpace(id))
				}
				done <- ids
			}()
		}
		for range ws {
			acked = append(acked, <-done...)
		}
		for _, w := range ws {
			if err := w.cmd.Wait(); !killed(err) {
				t.Errorf("round %d: writer ended with %v, want killed", round, err)
			}
		}
	}

	l, _ := openShared(t, home, key)
	n := verifyLog(t, l)
	ctx := context.Background()
	for _, id := range acked {
		if _, err := l.EntryByID(ctx, id); err != nil {
			t.Errorf("entry %s was committed before the kill: %v", id, err)
		}
	}
	r, err := l.AppendReceipt(ctx, sampleReceipt(), []byte(`{"after":"the crashes"}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.Index != n {
		t.Errorf("new entry at %d, want %d", r.Index, n)
	}
	verifyLog(t, l)
	if p := mustSearch(t, l, Query{Text: "crashes"}); len(p.Hits) != 1 || p.Hits[0].ID != r.ID {
		t.Errorf("search for the new entry = %v", ids(p))
	}
	t.Logf("%d rounds, %d entries, %d acknowledged before a kill", rounds, n, len(acked))
}

// killed reports whether err says the process died of a signal.
func killed(err error) bool {
	var ee *exec.ExitError
	return errors.As(err, &ee) && !ee.Exited()
}

// A looper is a writer process that appends until it is killed and prints
// the id of each entry it commits.
type looper struct {
	cmd *exec.Cmd
	out *bufio.Reader
}

func startLooper(tb testing.TB, home string, seed []byte, role, writer string) *looper {
	tb.Helper()
	cmd := startRole(tb, role, home, seed, writer, 0)
	out, err := cmd.StdoutPipe()
	if err != nil {
		tb.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	return &looper{cmd: cmd, out: bufio.NewReader(out)}
}
