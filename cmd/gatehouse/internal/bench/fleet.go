package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Memory is what a proxy process holds in RAM, from /proc/PID/status
// (Linux; zero elsewhere).
type Memory struct {
	// Idle is the proxy's resident set once it has started and answered a
	// few calls (VmRSS).
	Idle int64 `json:"idle_bytes"`
	// Peak is the largest resident set it reached while the calls were
	// measured (VmHWM).
	Peak int64 `json:"peak_bytes"`
}

// Fleet are the figures of [Config.Proxies] proxies making calls at once,
// each with one caller, all writing to the one home's database.
type Fleet struct {
	Proxies   int           `json:"proxies"`
	Calls     int           `json:"calls"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	PerSecond float64       `json:"calls_per_second"` // all proxies together
	P50       time.Duration `json:"p50_ns"`
	P90       time.Duration `json:"p90_ns"`
	P99       time.Duration `json:"p99_ns"`
	Max       time.Duration `json:"max_ns"`
}

// procMemory reads a process's VmRSS and VmHWM in bytes.
func procMemory(pid int) (rss, hwm int64, err error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("read /proc/%d/status: %s: %w", pid, k, err)
		}
		if k == "VmRSS" {
			rss = kb << 10
		} else {
			hwm = kb << 10
		}
	}
	if rss == 0 {
		return 0, 0, errors.New("no VmRSS")
	}
	return rss, hwm, sc.Err()
}

// measureFleet starts cfg.Proxies proxies at once and has each make its
// share of cfg.Calls calls, one at a time.
func (r *Report) measureFleet(ctx context.Context, cfg *Config, proxy mode) error {
	n := cfg.Proxies
	var sessions []*session
	defer func() {
		var stops stopper
		for _, s := range sessions {
			stops.stop("proxy", s)
		}
		stops.wait()
	}()
	for i := range n {
		s, _, err := startSession(ctx, proxy)
		if err != nil {
			return fmt.Errorf("start proxy %d of %d: %w", i+1, n, err)
		}
		sessions = append(sessions, s)
		if _, err := callRound(ctx, s, 10, 1, cfg.Payload, 0); err != nil {
			return fmt.Errorf("proxy %d: warm-up: %w", i+1, err)
		}
	}
	per := max(cfg.Calls/n, 1)
	lats := make([][]time.Duration, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for i, s := range sessions {
		wg.Go(func() { lats[i], errs[i] = callRound(ctx, s, per, 1, cfg.Payload, i*per) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := errors.Join(errs...); err != nil {
		return err
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	r.Fleet = &Fleet{Proxies: n, Calls: len(all), Elapsed: elapsed, PerSecond: float64(len(all)) / elapsed.Seconds(),
		P50: percentile(all, 0.50), P90: percentile(all, 0.90), P99: percentile(all, 0.99), Max: all[len(all)-1]}
	return nil
}

func mb(b int64) string { return fmt.Sprintf("%.1f MB", float64(b)/(1<<20)) }
