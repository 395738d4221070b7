package main

import (
	"context"
	"log/slog"
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
