// Package stream delivers the evidence log's receipts and outcomes, as the
// log grows, to the tools a team already runs: an OpenTelemetry collector
// (logs and spans over OTLP/HTTP, see [NewOTLP]) and a syslog receiver
// (RFC 5424, see [NewSyslog]).
//
// The signed log stays the source of truth. Each exported [Record] carries
// the log's id, the entry's index, id and leaf hash, so that whoever
// receives it can check it against the log (gatehouse export, verify); it
// carries no arguments and no result, which can be personal data or
// secrets, only who called which tool on which server, what the gate
// decided by which rule, and how the call ended.
//
// # At least once
//
// Each sink has a durable cursor in the database: the index of the first
// entry it has not acknowledged. [Streamer.Run] reads from the cursor,
// delivers, and moves the cursor only once the sink said the records were
// taken; a sink that is down is retried with a growing pause, and gets
// everything from its cursor when it comes back, across restarts of
// Gatehouse too. A record may so arrive twice, never not at all (for OTLP,
// whose receiver answers; syslog over TCP has no answer, and a receiver
// that dies loses what was in its socket). Records carry stable ids (the
// spans' ids are derived from the entries'), so duplicates can be told.
package stream

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// A Record is what is exported of one receipt or outcome: nothing secret.
type Record struct {
	Log      string    // the log's id
	Index    int64     // the entry's index in the log
	ID       string    // the entry's id
	LeafHash string    // base64 RFC 6962 leaf hash of the signed entry
	Kind     string    // receipt or outcome
	Time     time.Time // the entry's time
	Receipt  string    // the receipt's id: the entry's own, or the one an outcome closes
	Server   string
	Tool     string
	Client   string
	Session  string // the proxy session that made the call
	Decision string // Allow, Deny, ApprovalRequired
	Rule     string
	Approver string // the approver's scope, when one answered
	// For an outcome:
	Status     string // SUCCEEDED, FAILED, UNKNOWN
	DurationMS float64
	ErrorCode  int64
}

// A Sink takes records. Deliver returns nil only once the records are
// taken: then the cursor moves past them.
type Sink interface {
	Name() string
	Deliver(ctx context.Context, recs []Record) error
	Close() error
}

var migrations = []string{
	`CREATE TABLE stream_cursors (
		sink       TEXT PRIMARY KEY,
		next_index INTEGER NOT NULL,
		updated_at INTEGER NOT NULL
	)`,
}

// Options configure a [Streamer]. Nil options mean the defaults.
type Options struct {
	Logger *slog.Logger
	// Poll is how often the log is checked for new entries; zero means
	// 500 ms.
	Poll time.Duration
	// Batch bounds the records per delivery; zero means 256.
	Batch int
	// MaxBackoff bounds the pause between retries of a sink that fails;
	// zero means 30 s.
	MaxBackoff time.Duration
	// Delivered, when set, is told of each delivery and failure (for
	// metrics): n records, or err.
	Delivered func(sink string, n int, err error, lag int64)
}

// A Streamer reads the log for its sinks.
type Streamer struct {
	db   *sql.DB
	r    *receipts.Reader
	log  *slog.Logger
	opts Options
}

// Open opens the log of m for streaming, creating the cursors' table when
// needed.
func Open(ctx context.Context, m receipts.Migrator, opts *Options) (*Streamer, error) {
	if err := m.Migrate(ctx, "stream", migrations); err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	r, err := receipts.OpenReader(ctx, m)
	if err != nil {
		return nil, fmt.Errorf("open stream: %w", err)
	}
	s := &Streamer{db: m.DB(), r: r}
	if opts != nil {
		s.opts = *opts
	}
	s.log = s.opts.Logger
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.Poll <= 0 {
		s.opts.Poll = 500 * time.Millisecond
	}
	if s.opts.Batch <= 0 {
		s.opts.Batch = 256
	}
	if s.opts.MaxBackoff <= 0 {
		s.opts.MaxBackoff = 30 * time.Second
	}
	return s, nil
}

// Cursor returns the index of the first entry sink has not acknowledged.
func (s *Streamer) Cursor(ctx context.Context, sink string) (int64, error) {
	var n int64
	err := s.db.QueryRowContext(ctx, `SELECT next_index FROM stream_cursors WHERE sink = ?`, sink).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read the cursor of %s: %w", sink, err)
	}
	return n, nil
}

func (s *Streamer) advance(ctx context.Context, sink string, next int64) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO stream_cursors (sink, next_index, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (sink) DO UPDATE SET next_index = excluded.next_index, updated_at = excluded.updated_at`,
		sink, next, time.Now().UnixMilli())
	if err != nil {
		return fmt.Errorf("move the cursor of %s: %w", sink, err)
	}
	return nil
}

// Run delivers the log to sink until ctx ends, from the sink's cursor on.
// The cursor MUST NOT move past an entry before sink acknowledged its
// record.
func (s *Streamer) Run(ctx context.Context, sink Sink) error {
	name := sink.Name()
	backoff := time.Duration(0)
	for {
		n, lag, err := s.step(ctx, sink)
		if ctx.Err() != nil {
			return nil
		}
		if s.opts.Delivered != nil {
			s.opts.Delivered(name, n, err, lag)
		}
		wait := s.opts.Poll
		switch {
		case err != nil:
			backoff = min(max(2*backoff, time.Second), s.opts.MaxBackoff)
			wait = backoff
			s.log.Warn("evidence not delivered; retrying", slog.String("sink", name), slog.Any("err", err), slog.Duration("in", wait))
		case n > 0 || lag > 0:
			backoff = 0
			if lag > 0 {
				wait = 0
			}
		default:
			backoff = 0
		}
		if wait > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(wait):
			}
		}
	}
}

// step delivers one batch from the cursor. It returns the records
// delivered and how many entries remain after them.
func (s *Streamer) step(ctx context.Context, sink Sink) (int, int64, error) {
	name := sink.Name()
	from, err := s.Cursor(ctx, name)
	if err != nil {
		return 0, 0, err
	}
	size, err := s.r.Size(ctx)
	if err != nil {
		return 0, 0, err
	}
	if from >= size {
		return 0, 0, nil
	}
	to := min(size, from+int64(s.opts.Batch))
	var recs []Record
	for st, err := range s.r.Entries(ctx, from, to) {
		if err != nil {
			return 0, size - from, err
		}
		rec, ok, err := s.record(ctx, st)
		if err != nil {
			return 0, size - from, fmt.Errorf("entry %d: %w", st.Index, err)
		}
		if ok {
			recs = append(recs, rec)
		}
	}
	if len(recs) > 0 {
		if err := sink.Deliver(ctx, recs); err != nil {
			return 0, size - from, err
		}
	}
	if err := s.advance(ctx, name, to); err != nil {
		return len(recs), size - to, err
	}
	return len(recs), size - to, nil
}

// record makes the record of a receipt or an outcome; other entries have
// none.
func (s *Streamer) record(ctx context.Context, st receipts.Stored) (Record, bool, error) {
	e, err := entry.Parse(st.Data)
	if err != nil {
		return Record{}, false, err
	}
	if e.Kind != entry.KindReceipt && e.Kind != entry.KindOutcome {
		return Record{}, false, nil
	}
	t, _ := time.Parse(time.RFC3339Nano, e.Time)
	rec := Record{Log: e.Log, Index: e.Index, ID: e.ID, LeafHash: entry.FormatTreeHash(entry.LeafHash(st.Data)),
		Kind: string(e.Kind), Time: t}
	receiptID, body := e.ID, e.Body
	if e.Kind == entry.KindOutcome {
		var o entry.Outcome
		if err := json.Unmarshal(e.Body, &o); err != nil {
			return Record{}, false, err
		}
		rec.Status, rec.DurationMS, rec.ErrorCode = o.Status, o.DurationMS, o.ErrorCode
		receiptID = o.Receipt
		rs, err := s.r.EntryByID(ctx, o.Receipt)
		if err != nil {
			return Record{}, false, fmt.Errorf("the receipt of outcome %s: %w", e.ID, err)
		}
		re, err := entry.Parse(rs.Data)
		if err != nil {
			return Record{}, false, err
		}
		body = re.Body
	}
	var r entry.Receipt
	if err := json.Unmarshal(body, &r); err != nil {
		return Record{}, false, err
	}
	rec.Receipt, rec.Server, rec.Tool, rec.Client, rec.Session = receiptID, r.Server, r.Tool, r.Client.Name, r.Session
	rec.Decision, rec.Rule = r.Decision, r.Rule
	if r.Approver != nil {
		rec.Approver = r.Approver.Scope
	}
	return rec, true, nil
}

// Summary is a record in one line, for people.
func (r Record) Summary() string {
	switch r.Kind {
	case string(entry.KindOutcome):
		return fmt.Sprintf("tools/call %s on %s by %s: %s in %.1f ms (receipt %s)", r.Tool, r.Server, r.Client, r.Status, r.DurationMS, r.Receipt)
	default:
		return fmt.Sprintf("tools/call %s on %s by %s: %s by rule %s (receipt %s)", r.Tool, r.Server, r.Client, r.Decision, r.Rule, r.Receipt)
	}
}
