package witness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// ContentTypeSize is the type of a 409 answer's body: the witness's latest
// size for the log, in decimal, and LF.
const ContentTypeSize = "text/x.tlog.size"

// Handler serves the witness's add-checkpoint endpoint at
// /add-checkpoint.
func (w *Witness) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /add-checkpoint", func(rw http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(rw, r.Body, maxBody))
		if err != nil {
			http.Error(rw, "the request body is too large or unreadable", http.StatusBadRequest)
			return
		}
		line, err := w.AddCheckpoint(r.Context(), body)
		var e *Error
		switch {
		case err == nil:
			rw.Header().Set("Content-Type", "text/plain; charset=utf-8")
			io.WriteString(rw, line)
		case errors.As(err, &e) && e.Status == http.StatusConflict:
			w.log.Info("conflict", slog.String("msg", e.Msg))
			rw.Header().Set("Content-Type", ContentTypeSize)
			rw.WriteHeader(http.StatusConflict)
			fmt.Fprintf(rw, "%d\n", e.Size)
		case errors.As(err, &e):
			w.log.Info("refused", slog.Int("status", e.Status), slog.String("msg", e.Msg))
			http.Error(rw, e.Msg, e.Status)
		default:
			w.log.Error("add-checkpoint", slog.Any("err", err))
			http.Error(rw, "the witness could not record the checkpoint", http.StatusInternalServerError)
		}
	})
	return mux
}

// A Client submits checkpoints to one witness.
type Client struct {
	// URL is the witness's submission prefix: add-checkpoint is below it.
	URL string
	// Key is the witness's key: only its cosignature is taken from an
	// answer.
	Key entry.WitnessKey
	// HTTP is the client requests go through; nil means one with a 30 s
	// timeout.
	HTTP *http.Client
}

var defaultHTTP = &http.Client{Timeout: 30 * time.Second}

// AddCheckpoint sends one add-checkpoint request and returns the witness's
// cosignature of the checkpoint, verified with c.Key, and the time it
// carries. A refusal is an [*Error].
func (c *Client) AddCheckpoint(ctx context.Context, req AddCheckpoint) (string, time.Time, error) {
	text, ok := noteText(req.Checkpoint)
	if !ok {
		return "", time.Time{}, errors.New("add checkpoint: the checkpoint is not a signed note")
	}
	hc := c.HTTP
	if hc == nil {
		hc = defaultHTTP
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(c.URL, "/")+"/add-checkpoint", bytes.NewReader(req.Format()))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("add checkpoint: %w", err)
	}
	resp, err := hc.Do(hreq)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("add checkpoint: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return "", time.Time{}, fmt.Errorf("add checkpoint: %w", err)
	}
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusConflict:
		e := &Error{Status: resp.StatusCode, Size: -1, Msg: "the witness's latest checkpoint is not the one the proof starts from"}
		s := strings.TrimSuffix(string(body), "\n")
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n >= 0 && strconv.FormatInt(n, 10) == s &&
			strings.HasPrefix(resp.Header.Get("Content-Type"), ContentTypeSize) {
			e.Size = n
		}
		return "", time.Time{}, e
	default:
		msg := strings.TrimSpace(string(body))
		if len(msg) > 300 {
			msg = msg[:300] + "..."
		}
		return "", time.Time{}, &Error{Status: resp.StatusCode, Msg: msg}
	}
	// Signature lines; those of other keys are ignored.
	for l := range strings.Lines(string(body)) {
		sl, err := entry.ParseSignatureLine(strings.TrimSuffix(l, "\n"))
		if err != nil || sl.Name != c.Key.Name || sl.KeyHash != c.Key.KeyHash() {
			continue
		}
		t, err := entry.VerifyCosignature(c.Key, text, sl)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("add checkpoint: the witness answered with a cosignature that does not verify: %w", err)
		}
		return l, t, nil
	}
	return "", time.Time{}, fmt.Errorf("add checkpoint: the witness's answer holds no cosignature by %s", c.Key)
}

// Submit submits the checkpoint (of size entries) with a consistency proof
// from old, the size the witness last cosigned as far as the caller knows
// (0 when it knows nothing). When the witness answers 409 with another
// size, Submit tries once more from that size. prove returns the proof from
// a size to the checkpoint's. It returns the cosignature line and the size
// the witness is at.
func (c *Client) Submit(ctx context.Context, checkpoint []byte, size, old int64, prove func(old int64) (tlog.TreeProof, error)) (line string, at time.Time, witnessSize int64, err error) {
	for try := 0; ; try++ {
		req := AddCheckpoint{Old: old, Checkpoint: checkpoint}
		if old > size {
			return "", time.Time{}, old, fmt.Errorf("the witness has cosigned %d entries, more than this checkpoint's %d", old, size)
		}
		if old > 0 && old < size {
			if req.Proof, err = prove(old); err != nil {
				return "", time.Time{}, old, fmt.Errorf("prove consistency from %d: %w", old, err)
			}
		}
		line, at, err = c.AddCheckpoint(ctx, req)
		var e *Error
		if try == 0 && errors.As(err, &e) && e.Status == http.StatusConflict && e.Size >= 0 && e.Size != old {
			old = e.Size
			continue
		}
		if err != nil {
			if errors.As(err, &e) && e.Status == http.StatusConflict && e.Size >= 0 {
				return "", time.Time{}, e.Size, err
			}
			return "", time.Time{}, old, err
		}
		return line, at, size, nil
	}
}
