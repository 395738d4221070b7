package main

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// TestProxyTakesTheHomesSettings: what the tray app's Settings set applies
// to proxies, unless their flags or $GATEHOUSE_LOG_LEVEL say otherwise.
func TestProxyTakesTheHomesSettings(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	debug := slog.LevelDebug
	if err := st.SetApprovalWait(ctx, 20*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLogLevel(ctx, &debug); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		args  []string
		env   string
		wait  time.Duration
		level slog.Level
	}{
		{"settings", nil, "", 20 * time.Second, slog.LevelDebug},
		{"flags win", []string{"--approval-wait", "5s", "--log-level", "warn"}, "", 5 * time.Second, slog.LevelWarn},
		{"environment wins for the level", nil, "error", 20 * time.Second, slog.LevelError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("GATEHOUSE_LOG_LEVEL", tt.env)
			c := &cli{logLevel: slog.LevelInfo}
			if tt.env != "" {
				c.logLevel.UnmarshalText([]byte(tt.env))
			}
			fs := c.flagSet("proxy")
			var f proxyFlags
			declareProxyFlags(fs, &f)
			if err := fs.Parse(append(tt.args, "notes")); err != nil {
				t.Fatal(err)
			}
			c.approvalWait = f.approvalWait
			c.applySettings(ctx, st, fs)
			if c.approvalWait != tt.wait || c.logLevel != tt.level {
				t.Errorf("approval wait %v, level %v; want %v, %v", c.approvalWait, c.logLevel, tt.wait, tt.level)
			}
		})
	}
	// A home with no settings keeps the defaults.
	empty, _ := store.Open(ctx, t.TempDir(), nil)
	defer empty.Close()
	c := &cli{logLevel: slog.LevelInfo, approvalWait: gate.DefaultApprovalWait}
	fs := c.flagSet("proxy")
	declareProxyFlags(fs, &proxyFlags{})
	c.applySettings(ctx, empty, fs)
	if c.approvalWait != gate.DefaultApprovalWait || c.logLevel != slog.LevelInfo {
		t.Errorf("with no settings: %v, %v; want the defaults", c.approvalWait, c.logLevel)
	}
}

// TestServeTakesTheHomesSettings: gatehouse serve with no flags listens
// where the home's settings say and exports to their destinations; a flag
// given wins over its setting, and one export flag replaces both export
// settings.
func TestServeTakesTheHomesSettings(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := errors.Join(st.SetServeListen(ctx, "127.0.0.1:8300"),
		st.SetExportOTLP(ctx, []string{"http://127.0.0.1:4318"}),
		st.SetExportSyslog(ctx, []string{"tcp://127.0.0.1:6514"})); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		args         []string
		listen       string
		otlp, syslog []string
	}{
		{"settings", nil, "127.0.0.1:8300", []string{"http://127.0.0.1:4318"}, []string{"tcp://127.0.0.1:6514"}},
		{"--listen wins", []string{"--listen", "127.0.0.1:9000"}, "127.0.0.1:9000", []string{"http://127.0.0.1:4318"}, []string{"tcp://127.0.0.1:6514"}},
		{"an export flag replaces both", []string{"--export-syslog", "udp://127.0.0.1:514"}, "127.0.0.1:8300", nil, []string{"udp://127.0.0.1:514"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &cli{}
			fs := c.flagSet("serve")
			var f serveFlags
			declareServeFlags(fs, &f)
			if err := fs.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			applyServeSettings(ctx, st, fs, &f)
			if f.listen != tt.listen || !slices.Equal(f.exports.otlp, tt.otlp) || !slices.Equal(f.exports.syslog, tt.syslog) {
				t.Errorf("listen %q, OTLP %q, syslog %q; want %q, %q, %q", f.listen, f.exports.otlp, f.exports.syslog, tt.listen, tt.otlp, tt.syslog)
			}
		})
	}
	// A home with no settings keeps the default address and exports nothing.
	empty, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	c := &cli{}
	fs := c.flagSet("serve")
	var f serveFlags
	declareServeFlags(fs, &f)
	fs.Parse(nil)
	applyServeSettings(ctx, empty, fs, &f)
	if f.listen != defaultServeAddr || len(f.exports.otlp)+len(f.exports.syslog) != 0 {
		t.Errorf("with no settings: listen %q, exports %+v; want %s and none", f.listen, f.exports, defaultServeAddr)
	}
}
