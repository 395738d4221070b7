package receipts

import (
	"context"
	"fmt"
	"time"
)

// CallsAllowed returns the times, oldest first, of the calls to server that
// receipts allowed at or after since and whose tool match accepts: what a
// budget counts, across every proxy writing to the log.
func (l *Reader) CallsAllowed(ctx context.Context, server string, since time.Time, match func(tool string) bool) ([]time.Time, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	rows, err := l.db.QueryContext(ctx, `SELECT tool, time_ns FROM entries INDEXED BY entries_allowed
		WHERE kind = 'receipt' AND decision = 'ALLOW' AND server = ? AND time_ns >= ? ORDER BY time_ns`,
		server, since.UnixNano())
	if err != nil {
		return nil, fmt.Errorf("count calls allowed to %s: %w", server, err)
	}
	defer rows.Close()
	var out []time.Time
	for rows.Next() {
		var tool string
		var ns int64
		if err := rows.Scan(&tool, &ns); err != nil {
			return nil, fmt.Errorf("count calls allowed to %s: %w", server, err)
		}
		if match(tool) {
			out = append(out, time.Unix(0, ns))
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count calls allowed to %s: %w", server, err)
	}
	return out, nil
}
