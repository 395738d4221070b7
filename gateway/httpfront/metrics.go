package httpfront

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"
)

// Metrics counts what the front and the gates behind it do, for /metrics
// (the Prometheus text format, version 0.0.4). Its methods are safe for
// concurrent use; a nil *Metrics counts nothing.
type Metrics struct {
	mu        sync.Mutex
	counters  map[string]map[string]float64 // name -> labels -> value; guarded by mu
	hists     map[string]map[string]*histogram
	gauges    map[string]func() float64
	set       map[string]map[string]float64 // gauges with labels: name -> labels -> value; guarded by mu
	helpTexts map[string]string
}

// NewMetrics returns an empty set of metrics.
func NewMetrics() *Metrics {
	m := &Metrics{counters: map[string]map[string]float64{}, hists: map[string]map[string]*histogram{},
		gauges: map[string]func() float64{}, set: map[string]map[string]float64{}, helpTexts: map[string]string{}}
	for name, help := range metricHelp {
		m.helpTexts[name] = help
	}
	return m
}

var metricHelp = map[string]string{
	"gatehouse_calls_total":             "Tool calls decided, by server, client and decision (allowed, refused, error: the gate could not decide).",
	"gatehouse_call_outcomes_total":     "Outcomes of the calls that ran, by server, client and status (SUCCEEDED, FAILED, UNKNOWN).",
	"gatehouse_decision_seconds":        "From a tools/call's arrival to its decision durably recorded (the signed receipt committed), for calls that did not wait for a person.",
	"gatehouse_approval_wait_seconds":   "How long calls waited for a person's answer, by answer.",
	"gatehouse_http_requests_total":     "HTTP requests answered, by endpoint and status code.",
	"gatehouse_sessions_refused_total":  "New sessions refused because the session cap was reached.",
	"gatehouse_sessions":                "MCP sessions open now.",
	"gatehouse_export_records_total":    "Evidence records delivered, by sink.",
	"gatehouse_export_errors_total":     "Failed deliveries of evidence records, by sink (retried).",
	"gatehouse_export_lag_entries":      "Log entries not yet delivered, by sink.",
	"gatehouse_errors_total":            "Errors, by kind.",
	"gatehouse_call_duration_seconds":   "How long calls that ran took at the server.",
	"gatehouse_sessions_opened_total":   "MCP sessions opened.",
	"gatehouse_http_body_refused_total": "Request bodies refused, by reason (too large, too slow, malformed).",
}

// Add adds v to the counter name with the given label pairs.
func (m *Metrics) Add(name string, v float64, labels ...string) {
	if m == nil {
		return
	}
	key := labelKey(labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.counters[name]
	if c == nil {
		c = map[string]float64{}
		m.counters[name] = c
	}
	c[key] += v
}

// Observe records d in the histogram name.
func (m *Metrics) Observe(name string, d time.Duration, labels ...string) {
	if m == nil {
		return
	}
	key := labelKey(labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.hists[name]
	if h == nil {
		h = map[string]*histogram{}
		m.hists[name] = h
	}
	if h[key] == nil {
		h[key] = &histogram{counts: make([]uint64, len(buckets))}
	}
	h[key].observe(d.Seconds())
}

// Gauge reports f's value as the gauge name.
func (m *Metrics) Gauge(name string, f func() float64) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gauges[name] = f
}

// Set sets the gauge name with the given label pairs to v.
func (m *Metrics) Set(name string, v float64, labels ...string) {
	if m == nil {
		return
	}
	key := labelKey(labels)
	m.mu.Lock()
	defer m.mu.Unlock()
	g := m.set[name]
	if g == nil {
		g = map[string]float64{}
		m.set[name] = g
	}
	g[key] = v
}

// buckets are the histograms' upper bounds, in seconds.
var buckets = []float64{0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

type histogram struct {
	counts []uint64 // per bucket, not cumulative
	sum    float64
	n      uint64
}

func (h *histogram) observe(s float64) {
	h.sum += s
	h.n++
	for i, b := range buckets {
		if s <= b {
			h.counts[i]++
			return
		}
	}
}

// labelKey renders label pairs as Prometheus writes them: {a="x",b="y"}.
func labelKey(labels []string) string {
	if len(labels) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteByte('{')
	for i := 0; i+1 < len(labels); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%s=%q", labels[i], labels[i+1])
	}
	b.WriteByte('}')
	return b.String()
}

// WriteTo writes every metric in the Prometheus text format.
func (m *Metrics) WriteTo(w io.Writer) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for _, name := range sortedKeys(m.counters) {
		m.header(&b, name, "counter")
		for _, k := range sortedKeys(m.counters[name]) {
			fmt.Fprintf(&b, "%s%s %g\n", name, k, m.counters[name][k])
		}
	}
	for _, name := range sortedKeys(m.hists) {
		m.header(&b, name, "histogram")
		for _, k := range sortedKeys(m.hists[name]) {
			h := m.hists[name][k]
			var cum uint64
			for i, up := range buckets {
				cum += h.counts[i]
				fmt.Fprintf(&b, "%s_bucket%s %d\n", name, withLabel(k, "le", fmt.Sprint(up)), cum)
			}
			fmt.Fprintf(&b, "%s_bucket%s %d\n", name, withLabel(k, "le", "+Inf"), h.n)
			fmt.Fprintf(&b, "%s_sum%s %g\n%s_count%s %d\n", name, k, h.sum, name, k, h.n)
		}
	}
	for _, name := range sortedKeys(m.gauges) {
		m.header(&b, name, "gauge")
		fmt.Fprintf(&b, "%s %g\n", name, m.gauges[name]())
	}
	for _, name := range sortedKeys(m.set) {
		m.header(&b, name, "gauge")
		for _, k := range sortedKeys(m.set[name]) {
			fmt.Fprintf(&b, "%s%s %g\n", name, k, m.set[name][k])
		}
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}

func (m *Metrics) header(b *strings.Builder, name, kind string) {
	if h := m.helpTexts[name]; h != "" {
		fmt.Fprintf(b, "# HELP %s %s\n", name, h)
	}
	fmt.Fprintf(b, "# TYPE %s %s\n", name, kind)
}

func withLabel(key, name, value string) string {
	l := fmt.Sprintf("%s=%q", name, value)
	if key == "" {
		return "{" + l + "}"
	}
	return key[:len(key)-1] + "," + l + "}"
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
