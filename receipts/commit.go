package receipts

import (
	"context"
	"crypto/ed25519"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// outcomeDelay is how long an append that is not urgent (an outcome) may
// wait before it is committed. Receipts are urgent: a call waits for its
// receipt; nothing waits for an outcome but the record.
const outcomeDelay = 10 * time.Millisecond

// A committer writes the appends of one process in shared transactions,
// each append in its own savepoint, one commit (one fsync, with
// synchronous=FULL) making a batch durable. Receipts go at once, together
// with whatever receipts and overdue outcomes are queued: concurrent calls
// share commits. An outcome waits up to outcomeDelay and then goes, with
// the receipts of that moment or with the outcomes queued since: so the
// work of writing an outcome stays off the path of the calls that follow
// it, and a busy proxy still pays about one commit per call.
type committer struct {
	l *Log

	mu      sync.Mutex
	queue   []*job        // guarded by mu
	running bool          // a writer goroutine is draining the queue; guarded by mu
	wake    chan struct{} // an urgent job arrived
	shared  *shared       // the home's shared commits (writer.go), when on; guarded by mu
	storing bool          // a job that stores the journal in the database is queued; guarded by mu

	// Receipts this process commits itself go to the journal from the
	// goroutines of their calls (journalNow): the first to come leads,
	// writing what is queued in turns until nothing is.
	jmu      sync.Mutex
	jqueue   []*job // guarded by jmu
	jleading bool   // guarded by jmu
}

type job struct {
	d      draft
	urgent bool
	remote bool      // another process's draft, which this one commits as the home's writer
	due    time.Time // an outcome's latest commit time
	done   chan struct{}
	e      *entry.Entry
	data   []byte // the signed entry, when committed here
	err    error
	// store: no draft; the job's transaction stores the journal's records
	// in the database (journal.go).
	store bool
}

// fail ends j with err.
func (j *job) fail(err error) {
	j.e, j.err = nil, err
	close(j.done)
}

// enqueue queues d and returns its job, done once it is committed (or
// failed).
func (c *committer) enqueue(d draft, urgent, remote bool) *job {
	j := &job{d: d, urgent: urgent, remote: remote, done: make(chan struct{}), due: time.Now().Add(outcomeDelay)}
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
	return j
}

// push queues a job again: one the home's writer gave back unread.
func (c *committer) push(j *job) {
	c.mu.Lock()
	c.queue = append(c.queue, j)
	if !c.running {
		c.running = true
		go c.run()
	}
	c.mu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// submit queues d and waits until it is committed (or failed).
func (c *committer) submit(ctx context.Context, d draft, urgent bool) (*entry.Entry, error) {
	var j *job
	if urgent && c.journals(d) && c.local() {
		j = c.journalNow(ctx, d)
	} else {
		j = c.enqueue(d, urgent, false)
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
		// The batch: every receipt, and every outcome that is due; or, when
		// there are no receipts, the outcomes once the first is due.
		now := time.Now()
		var batch, rest []*job
		urgent := false
		first := c.queue[0].due
		for _, j := range c.queue {
			urgent = urgent || j.urgent
			first = minTime(first, j.due)
		}
		for _, j := range c.queue {
			if j.urgent || !now.Before(j.due) || (!urgent && !now.Before(first)) {
				batch = append(batch, j)
			} else {
				rest = append(rest, j)
			}
		}
		if len(batch) == 0 {
			c.mu.Unlock()
			t := time.NewTimer(first.Sub(now))
			select {
			case <-c.wake:
			case <-t.C:
			}
			t.Stop()
			continue
		}
		c.queue = rest
		c.mu.Unlock()
		c.commit(batch)
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// commit writes batch in one transaction, each job in a savepoint so that
// one failing job (an outcome for an unknown receipt) fails alone.
//
// When the home's commits are shared and another process is the writer,
// batch goes to it instead (writer.go), and its jobs are done when it
// answers; all but the receipts with a write of their caller's
// (AppendReceiptWith), which only this process can run.
func (c *committer) commit(batch []*job) {
	c.mu.Lock()
	s := c.shared
	c.mu.Unlock()
	if s != nil {
		var travel, here []*job
		for _, j := range batch {
			if travels(j.d.kind) && j.d.with == nil {
				travel = append(travel, j)
			} else {
				here = append(here, j)
			}
		}
		if len(travel) > 0 && s.forward(travel) {
			batch = here
		}
		if len(batch) == 0 {
			return
		}
	}
	ctx := context.Background()
	if c.l.journal != nil && c.l.writes != nil {
		// Receipts go to the journal: durable in one write and fdatasync,
		// stored in the database with the outcomes a little later.
		var receipts, rest []*job
		for _, j := range batch {
			if j.urgent && c.journals(j.d) {
				receipts = append(receipts, j)
			} else {
				rest = append(rest, j)
			}
			if j.store {
				c.mu.Lock()
				c.storing = false
				c.mu.Unlock()
			}
		}
		if len(receipts) > 0 {
			c.journaled(ctx, receipts)
		}
		if batch = rest; len(batch) == 0 {
			return
		}
	}
	key, _ := c.l.signer()
	// First without savepoints: a job fails only when its outcome names a
	// receipt the log does not have. Then the transaction is rolled back
	// and the batch goes again, each job in a savepoint so that the one
	// failing fails alone.
	err := c.l.inTx(ctx, func(tx *sql.Tx) error {
		for _, j := range batch {
			if j.store {
				continue // inTx stores the journal
			}
			if j.e, j.data, j.err = c.l.appendTxData(ctx, tx, key, j.d); j.err != nil {
				return errOneFailed
			}
		}
		return nil
	})
	if errors.Is(err, errOneFailed) && len(batch) > 1 {
		for _, j := range batch {
			j.e, j.data, j.err = nil, nil, nil
		}
		err = c.inSavepoints(ctx, key, batch)
	} else if errors.Is(err, errOneFailed) {
		err = nil // the job's own error says why
	}
	if err == nil {
		c.l.index.kick()
		if c.l.appended != nil {
			c.l.appended()
		}
	}
	for _, j := range batch {
		if err != nil && j.err == nil {
			j.e, j.data, j.err = nil, nil, fmt.Errorf("commit: %w", err)
		}
		if j.err != nil {
			j.e, j.data = nil, nil
		}
		close(j.done)
	}
}

// errOneFailed rolls back a batch's transaction when one of its jobs failed.
var errOneFailed = errors.New("an append of the batch failed")

// inSavepoints commits batch in one transaction, each job in a savepoint.
func (c *committer) inSavepoints(ctx context.Context, key ed25519.PrivateKey, batch []*job) error {
	return c.l.inTx(ctx, func(tx *sql.Tx) error {
		for _, j := range batch {
			if j.store {
				continue
			}
			if _, err := c.l.stmts.exec(ctx, tx, `SAVEPOINT append`); err != nil {
				return err
			}
			j.e, j.data, j.err = c.l.appendTxData(ctx, tx, key, j.d)
			if j.err != nil {
				j.e = nil
				if _, err := c.l.stmts.exec(ctx, tx, `ROLLBACK TO append`); err != nil {
					return err
				}
			}
			if _, err := c.l.stmts.exec(ctx, tx, `RELEASE append`); err != nil {
				return err
			}
		}
		return nil
	})
}

// journals reports whether d, urgent, goes to the journal.
func (c *committer) journals(d draft) bool {
	return c.l.journal != nil && c.l.writes != nil && d.kind == entry.KindReceipt && d.with == nil
}

// local reports whether this process commits its own receipts: it does
// not share commits, or it is the home's writer.
func (c *committer) local() bool {
	c.mu.Lock()
	s := c.shared
	c.mu.Unlock()
	if s == nil {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lock != nil
}

// journalNow appends d to the journal in this goroutine, or in the one
// that leads the writes now, together with the receipts that came
// meanwhile: no handoff to the committer's goroutine on a call's path,
// and one fdatasync for the receipts of concurrent calls.
func (c *committer) journalNow(ctx context.Context, d draft) *job {
	j := &job{d: d, urgent: true, done: make(chan struct{})}
	c.jmu.Lock()
	c.jqueue = append(c.jqueue, j)
	if c.jleading {
		c.jmu.Unlock()
		return j
	}
	c.jleading = true
	c.jmu.Unlock()
	c.lead(context.WithoutCancel(ctx), true)
	return j
}

// lead writes the queued receipts to the journal, a batch at a time. A
// call's goroutine leads one batch, its own, and leaves what came
// meanwhile to a goroutine of its own, so that no call waits for others'.
func (c *committer) lead(ctx context.Context, once bool) {
	c.jmu.Lock()
	for {
		batch := c.jqueue
		c.jqueue = nil
		if len(batch) == 0 {
			c.jleading = false
			c.jmu.Unlock()
			return
		}
		c.jmu.Unlock()
		c.journaled(ctx, batch)
		c.jmu.Lock()
		if once && len(c.jqueue) > 0 {
			c.jmu.Unlock()
			go c.lead(ctx, false)
			return
		}
	}
}

// journaled appends the receipts of batch to the journal (journal.go), and
// queues the job that stores them in the database outcomeDelay later (with
// the outcomes of their calls, as a rule).
func (c *committer) journaled(ctx context.Context, batch []*job) {
	l := c.l
	err := l.appendJournal(ctx, batch)
	for _, j := range batch {
		if err != nil && j.err == nil {
			j.err = err
		}
		if j.err != nil {
			j.e, j.data = nil, nil
		}
		close(j.done)
	}
	if err != nil {
		return
	}
	c.mu.Lock()
	queue := !c.storing
	c.storing = true
	c.mu.Unlock()
	if queue {
		c.push(&job{store: true, done: make(chan struct{}), due: time.Now().Add(outcomeDelay)})
	}
}
