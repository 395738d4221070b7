package witness

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts"
)

// Cosigner returns c as what an export asks to cosign its checkpoint
// ([receipts.ExportOptions.Witnesses]). It submits from size 0 and learns
// the witness's size from its 409.
func (c *Client) Cosigner() receipts.Cosigner { return cosigner{c} }

type cosigner struct{ c *Client }

func (s cosigner) Key() string { return s.c.Key.String() }

func (s cosigner) Cosign(ctx context.Context, checkpoint []byte, size int64, prove func(old int64) (tlog.TreeProof, error)) (string, time.Time, error) {
	line, at, _, err := s.c.Submit(ctx, checkpoint, size, 0, prove)
	return line, at, err
}

// DefaultInterval is the least time between two submissions of a
// [Submitter] to its witnesses.
const DefaultInterval = 10 * time.Second

// SubmitterOptions configure [NewSubmitter]. Nil options mean the defaults.
type SubmitterOptions struct {
	Interval time.Duration // least time between submissions; 0 means DefaultInterval
	Timeout  time.Duration // bound on one submission to one witness; 0 means 30 s
	Logger   *slog.Logger  // nil: discard
}

// A Submitter submits a log's latest checkpoint to its witnesses in the
// background, after appends ([Submitter.Notify]), at most once per
// interval, and keeps what they answer in the log: their cosignatures,
// or why they did not cosign. Nothing waits for it: a witness that is down,
// slow or refusing delays no append and no call, and is reported by
// [receipts.Reader.WitnessStatus].
type Submitter struct {
	log     *receipts.Log
	clients []*Client
	opts    SubmitterOptions
	logger  *slog.Logger
	wake    chan struct{}
}

// NewSubmitter returns a submitter of l's checkpoints to the witnesses
// clients reach. Run runs it; l.OnAppend(s.Notify) wakes it.
func NewSubmitter(l *receipts.Log, clients []*Client, opts *SubmitterOptions) *Submitter {
	s := &Submitter{log: l, clients: clients, wake: make(chan struct{}, 1), logger: slog.New(slog.DiscardHandler)}
	if opts != nil {
		s.opts = *opts
	}
	if s.opts.Interval <= 0 {
		s.opts.Interval = DefaultInterval
	}
	if s.opts.Timeout <= 0 {
		s.opts.Timeout = 30 * time.Second
	}
	if s.opts.Logger != nil {
		s.logger = s.opts.Logger
	}
	s.Notify() // the log may have grown since a witness last cosigned
	return s
}

// Notify says the log has grown. It never blocks.
func (s *Submitter) Notify() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run submits until ctx ends: after each Notify, once the interval since
// the last submission has passed.
func (s *Submitter) Run(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		if wait := time.Until(last.Add(s.opts.Interval)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		last = time.Now()
		s.SubmitNow(ctx)
	}
}

// SubmitNow submits the log's checkpoint as it is now to every witness
// that has not cosigned its size yet (as far as the log knows: another
// process of the home may have submitted it), at once, and waits for
// their answers.
func (s *Submitter) SubmitNow(ctx context.Context) {
	cp, c, err := s.log.Checkpoint(ctx)
	if err != nil {
		for _, cl := range s.clients {
			s.failed(ctx, cl, -1, fmt.Errorf("sign the checkpoint: %w", err))
		}
		return
	}
	if c.Size == 0 {
		return
	}
	prove := func(old int64) (tlog.TreeProof, error) { return s.log.ProveConsistency(ctx, old, c.Size) }
	var wg sync.WaitGroup
	for _, cl := range s.clients {
		wg.Go(func() {
			key := cl.Key.String()
			st, err := s.log.WitnessStatus(ctx, key)
			if err != nil {
				s.logger.Warn("witness status", slog.String("witness", cl.Key.Name), slog.Any("err", err))
			}
			if st.Size == c.Size && !st.OK.IsZero() && st.OK.After(st.Failed) {
				return // cosigned already
			}
			sctx, cancel := context.WithTimeout(ctx, s.opts.Timeout)
			defer cancel()
			line, at, size, err := cl.Submit(sctx, cp, c.Size, st.Size, prove)
			if err != nil {
				s.failed(ctx, cl, size, err)
				return
			}
			if err := s.log.SaveCosignature(ctx, key, c, line, at); err != nil {
				s.logger.Warn("save cosignature", slog.String("witness", cl.Key.Name), slog.Any("err", err))
				return
			}
			s.logger.Debug("cosigned", slog.String("witness", cl.Key.Name), slog.Int64("size", c.Size))
		})
	}
	wg.Wait()
}

func (s *Submitter) failed(ctx context.Context, cl *Client, size int64, err error) {
	if ctx.Err() != nil {
		return // the process is ending: not the witness's failure
	}
	s.logger.Warn("witness did not cosign", slog.String("witness", cl.Key.Name), slog.String("url", cl.URL), slog.Any("err", err))
	if rerr := s.log.WitnessFailed(ctx, cl.Key.String(), size, err); rerr != nil {
		s.logger.Warn("record witness failure", slog.Any("err", rerr))
	}
}
