package httpfront

import (
	"strings"
	"testing"
)

func TestMetricsSetGauge(t *testing.T) {
	m := NewMetrics()
	m.Set("gatehouse_export_lag_entries", 5, "sink", "otlp:http://c:4318")
	m.Set("gatehouse_export_lag_entries", 2, "sink", "syslog:tcp://s:601")
	m.Set("gatehouse_export_lag_entries", 0, "sink", "otlp:http://c:4318")
	var b strings.Builder
	m.WriteTo(&b)
	want := `# HELP gatehouse_export_lag_entries Log entries not yet delivered, by sink.
# TYPE gatehouse_export_lag_entries gauge
gatehouse_export_lag_entries{sink="otlp:http://c:4318"} 0
gatehouse_export_lag_entries{sink="syslog:tcp://s:601"} 2
`
	if got := b.String(); got != want {
		t.Errorf("WriteTo() =\n%s\nwant\n%s", got, want)
	}
	var nilMetrics *Metrics
	nilMetrics.Set("x", 1) // counts nothing, does not panic
}
