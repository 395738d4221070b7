package receipts

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// outcomeDelay is how long an append that is not urgent (an outcome) waits
// for company before it is committed on its own. Receipts are urgent: a
// call waits for its receipt; nothing waits for an outcome but the record.
const outcomeDelay = 10 * time.Millisecond

// A committer writes the appends of one process in shared transactions:
// whatever is queued when a transaction starts goes into it, each append
// in its own savepoint, and one commit (one fsync, with synchronous=FULL)
// makes them all durable. A lone proxy thus pays one fsync per call (the
// outcome of a call rides with the receipt of the next) instead of two, and
// concurrent calls share commits.
type committer struct {
	l *Log

	mu      sync.Mutex
	queue   []*job        // guarded by mu
	running bool          // a writer goroutine is draining the queue; guarded by mu
	wake    chan struct{} // an urgent job arrived
}

type job struct {
	d      draft
	urgent bool
	done   chan struct{}
	e      *entry.Entry
	err    error
}

// submit queues d and waits until it is committed (or failed).
func (c *committer) submit(ctx context.Context, d draft, urgent bool) (*entry.Entry, error) {
	j := &job{d: d, urgent: urgent, done: make(chan struct{})}
	c.mu.Lock()
	c.queue = append(c.queue, j)
	if !c.running {
		c.running = true
		go c.run()
	}
	c.mu.Unlock()
	if urgent {
		select {
		case c.wake <- struct{}{}:
		default:
		}
	}
	select {
	case <-j.done:
		return j.e, j.err
	case <-ctx.Done():
		// The job may still be committed; the caller has stopped waiting.
		return nil, ctx.Err()
	}
}

// run drains the queue in batches and exits when it is empty.
func (c *committer) run() {
	for {
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.running = false
			c.mu.Unlock()
			return
		}
		urgent := false
		for _, j := range c.queue {
			urgent = urgent || j.urgent
		}
		c.mu.Unlock()
		if !urgent {
			// Only outcomes: give a receipt a moment to join them.
			t := time.NewTimer(outcomeDelay)
			select {
			case <-c.wake:
			case <-t.C:
			}
			t.Stop()
		}
		c.mu.Lock()
		batch := c.queue
		c.queue = nil
		c.mu.Unlock()
		c.commit(batch)
	}
}

// commit writes batch in one transaction, each job in a savepoint so that
// one failing job (an outcome for an unknown receipt) fails alone.
func (c *committer) commit(batch []*job) {
	ctx := context.Background()
	key, _ := c.l.signer()
	err := c.l.inTx(ctx, func(tx *sql.Tx) error {
		for _, j := range batch {
			if _, err := tx.ExecContext(ctx, `SAVEPOINT append`); err != nil {
				return err
			}
			j.e, j.err = c.l.appendTx(ctx, tx, key, j.d)
			if j.err != nil {
				j.e = nil
				if _, err := tx.ExecContext(ctx, `ROLLBACK TO append`); err != nil {
					return err
				}
			}
			if _, err := tx.ExecContext(ctx, `RELEASE append`); err != nil {
				return err
			}
		}
		return nil
	})
	for _, j := range batch {
		if err != nil && j.err == nil {
			j.e, j.err = nil, fmt.Errorf("commit: %w", err)
		}
		close(j.done)
	}
}
