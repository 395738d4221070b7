package receipts

import (
	"context"
	"fmt"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A Bucket counts the calls of one stretch of time by decision: the receipts
// the gate wrote then.
type Bucket struct {
	Start   time.Time
	Allowed int64 // receipts with decision ALLOW
	Denied  int64 // DENY
	Pending int64 // APPROVAL_REQUIRED: held for a person who had not answered
	Failed  int64 // of the allowed, those whose outcome is FAILED
}

// Calls returns the number of calls in b.
func (b Bucket) Calls() int64 { return b.Allowed + b.Denied + b.Pending }

// MaxBuckets bounds the buckets of one [Log.Activity] query.
const MaxBuckets = 10_000

// Activity counts the calls made from from to to (exclusive), in buckets of
// step starting at from, by decision: what a chart of calls over time shows.
// server, when not empty, counts only calls to that server. Every bucket is
// returned, empty ones included.
func (l *Reader) Activity(ctx context.Context, from, to time.Time, step time.Duration, server string) ([]Bucket, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	if step <= 0 || !to.After(from) {
		return nil, fmt.Errorf("activity: %w: want from before to and a positive step", ErrQuery)
	}
	n := (to.Sub(from) + step - 1) / step
	if n > MaxBuckets {
		return nil, fmt.Errorf("activity: %w: %d buckets, at most %d", ErrQuery, n, MaxBuckets)
	}
	out := make([]Bucket, n)
	for i := range out {
		out[i].Start = from.Add(time.Duration(i) * step)
	}
	// The time index bounds the scan; the rest is read row by row, which
	// at a million calls a day is a few hundred milliseconds.
	stmt := `SELECT (time_ns - ?1) / ?2, decision, status = 'FAILED', count(*) FROM entries
		WHERE time_ns >= ?3 AND time_ns < ?4 AND +kind = 'receipt'`
	args := []any{from.UnixNano(), int64(step), from.UnixNano(), to.UnixNano()}
	if server != "" {
		stmt += ` AND +server = ?5`
		args = append(args, server)
	}
	stmt += ` GROUP BY 1, 2, 3`
	rows, err := l.db.QueryContext(ctx, stmt, args...)
	if err != nil {
		return nil, fmt.Errorf("activity: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var (
			i        int64
			decision string
			failed   bool
			count    int64
		)
		if err := rows.Scan(&i, &decision, &failed, &count); err != nil {
			return nil, fmt.Errorf("activity: %w", err)
		}
		if i < 0 || i >= int64(len(out)) {
			continue
		}
		b := &out[i]
		switch decision {
		case entry.Allow:
			b.Allowed += count
			if failed {
				b.Failed += count
			}
		case entry.Deny:
			b.Denied += count
		case entry.ApprovalRequired:
			b.Pending += count
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("activity: %w", err)
	}
	return out, nil
}

// First returns the time of the log's first entry, or the zero time for an
// empty log.
func (l *Reader) First(ctx context.Context) (time.Time, error) {
	if err := l.sync(ctx); err != nil {
		return time.Time{}, err
	}
	var ns int64
	err := l.db.QueryRowContext(ctx, `SELECT coalesce(min(time_ns), 0) FROM entries`).Scan(&ns)
	if err != nil || ns == 0 {
		return time.Time{}, err
	}
	return time.Unix(0, ns), nil
}
