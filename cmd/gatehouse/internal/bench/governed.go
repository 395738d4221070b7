package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The goals of a governed proxy (docs/performance.md).
const (
	// GoalGovernedOverFsync bounds what a governed call adds to the relay's
	// p50 beyond one fsync of the disk: the receipt must be durable before
	// the call runs, and nothing else should be on its path.
	GoalGovernedOverFsync = 200 * time.Microsecond
	// GoalFleetCalls and GoalFleetP99 are what eight governed proxies on
	// one home must reach together.
	GoalFleetCalls = 2600
	GoalFleetP99   = 20 * time.Millisecond
)

// fsyncsPerRound is how many fsyncs are timed after each round of calls.
const fsyncsPerRound = 30

// Fsync is the time of one small write and its fsync in the home folder,
// measured between the rounds of calls: the least a durable receipt costs.
type Fsync struct {
	Samples int           `json:"samples"`
	P50     time.Duration `json:"p50_ns"`
	P90     time.Duration `json:"p90_ns"`
}

// Phases are where the governed calls' time went inside the proxy, from
// its log's "decided" lines: deciding (policy, pins, budgets), and writing
// the receipt until it was durable.
type Phases struct {
	Calls      int           `json:"calls"`
	DecideP50  time.Duration `json:"decide_p50_ns"`
	ReceiptP50 time.Duration `json:"receipt_write_p50_ns"`
	ReceiptP90 time.Duration `json:"receipt_write_p90_ns"`
	ReceiptP99 time.Duration `json:"receipt_write_p99_ns"`
}

// fsyncer times small durable writes to a file of the home folder.
type fsyncer struct {
	f   *os.File
	buf []byte
}

func newFsyncer(home string) (*fsyncer, error) {
	f, err := os.CreateTemp(home, "bench-fsync-")
	if err != nil {
		return nil, fmt.Errorf("fsync probe: %w", err)
	}
	return &fsyncer{f: f, buf: make([]byte, 256)}, nil
}

// sample appends n small writes, each followed by fsync, and returns how
// long each took.
func (s *fsyncer) sample(n int) ([]time.Duration, error) {
	out := make([]time.Duration, n)
	for i := range out {
		start := time.Now()
		if _, err := s.f.Write(s.buf); err != nil {
			return nil, fmt.Errorf("fsync probe: %w", err)
		}
		if err := s.f.Sync(); err != nil {
			return nil, fmt.Errorf("fsync probe: %w", err)
		}
		out[i] = time.Since(start)
	}
	return out, nil
}

func (s *fsyncer) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// logPath is the home folder's log file, where each proxy writes a line
// per decision.
func logPath(home string) string { return filepath.Join(home, "logs", "gatehouse.log") }

func logSize(home string) int64 {
	fi, err := os.Stat(logPath(home))
	if err != nil {
		return 0
	}
	return fi.Size()
}

// readPhases reads the "decided" lines written to the home's log after
// offset from: nil when there are none (a log at another level).
func readPhases(home string, from int64) *Phases {
	f, err := os.Open(logPath(home))
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(from, 0); err != nil {
		return nil
	}
	var decide, write []time.Duration
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var l struct {
			Msg          string `json:"msg"`
			Decide       int64  `json:"decide"`
			ReceiptWrite int64  `json:"receipt_write"`
		}
		if !strings.Contains(sc.Text(), `"decided"`) || json.Unmarshal(sc.Bytes(), &l) != nil || l.Msg != "decided" {
			continue
		}
		decide = append(decide, time.Duration(l.Decide))
		write = append(write, time.Duration(l.ReceiptWrite))
	}
	if len(write) == 0 {
		return nil
	}
	slices.Sort(decide)
	slices.Sort(write)
	return &Phases{Calls: len(write), DecideP50: percentile(decide, 0.5),
		ReceiptP50: percentile(write, 0.5), ReceiptP90: percentile(write, 0.9), ReceiptP99: percentile(write, 0.99)}
}

// loadAverage reads the 1, 5 and 15-minute load averages (Linux; zeros
// elsewhere).
func loadAverage() [3]float64 {
	var out [3]float64
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return out
	}
	for i, f := range strings.Fields(string(b)) {
		if i >= 3 {
			break
		}
		out[i], _ = strconv.ParseFloat(f, 64)
	}
	return out
}

// GovernedMet reports whether the governed proxy's p50 is within one fsync
// p50 and [GoalGovernedOverFsync] of the relay's, measured in the same
// run; ok is false when the run did not measure them.
func (r *Report) GovernedMet() (met, ok bool) {
	if r.Relay == nil || r.Fsync == nil {
		return false, false
	}
	return r.Proxy.P50 <= r.Relay.P50+r.Fsync.P50+GoalGovernedOverFsync, true
}

// FleetMet reports whether the proxies at once reached [GoalFleetCalls]
// with a p99 of at most [GoalFleetP99].
func (r *Report) FleetMet() bool {
	return r.Fleet != nil && r.Fleet.PerSecond >= GoalFleetCalls && r.Fleet.P99 <= GoalFleetP99
}
