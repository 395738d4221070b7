package main

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
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
		st.SetServeTLS(ctx, "/etc/gh/cert.pem", "/etc/gh/key.pem"),
		st.SetExportOTLP(ctx, []string{"http://127.0.0.1:4318"}),
		st.SetExportOTLPHeaders(ctx, map[string]string{"Authorization": "vault://secret/otel"}),
		st.SetExportSyslog(ctx, []string{"tcp://127.0.0.1:6514"})); err != nil {
		t.Fatal(err)
	}
	auth := map[string]string{"Authorization": "vault://secret/otel"}
	tests := []struct {
		name         string
		args         []string
		listen, cert string
		otlp, syslog []string
		headers      map[string]string
	}{
		{"settings", nil, "127.0.0.1:8300", "/etc/gh/cert.pem", []string{"http://127.0.0.1:4318"}, []string{"tcp://127.0.0.1:6514"}, auth},
		{"--listen wins", []string{"--listen", "127.0.0.1:9000"}, "127.0.0.1:9000", "/etc/gh/cert.pem", []string{"http://127.0.0.1:4318"}, []string{"tcp://127.0.0.1:6514"}, auth},
		{"--tls-cert wins", []string{"--tls-cert", "/c.pem", "--tls-key", "/k.pem"}, "127.0.0.1:8300", "/c.pem", []string{"http://127.0.0.1:4318"}, []string{"tcp://127.0.0.1:6514"}, auth},
		{"an export flag replaces them all", []string{"--export-syslog", "udp://127.0.0.1:514"}, "127.0.0.1:8300", "/etc/gh/cert.pem", nil, []string{"udp://127.0.0.1:514"}, nil},
		{"a header flag", []string{"--export-otlp", "http://c:4318", "--export-otlp-header", "X-Key=vault://secret/k"}, "127.0.0.1:8300", "/etc/gh/cert.pem", []string{"http://c:4318"}, nil, map[string]string{"X-Key": "vault://secret/k"}},
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
			cfg, err := serveConfig(ctx, st, fs, &f)
			if err != nil {
				t.Fatal(err)
			}
			e := cfg.Exports
			if cfg.Listen != tt.listen || cfg.TLSCert != tt.cert || !slices.Equal(e.OTLP, tt.otlp) || !slices.Equal(e.Syslog, tt.syslog) || !maps.Equal(e.OTLPHeaders, tt.headers) {
				t.Errorf("listen %q, cert %q, exports %+v; want %q, %q, OTLP %q, syslog %q, headers %v", cfg.Listen, cfg.TLSCert, e, tt.listen, tt.cert, tt.otlp, tt.syslog, tt.headers)
			}
		})
	}
	// A header given in clear is refused, and not repeated.
	c := &cli{}
	fs := c.flagSet("serve")
	var f serveFlags
	declareServeFlags(fs, &f)
	fs.Parse([]string{"--export-otlp", "http://c:4318", "--export-otlp-header", "Authorization=Bearer s3cr3t"})
	if _, err := serveConfig(ctx, st, fs, &f); err == nil || strings.Contains(err.Error(), "s3cr3t") {
		t.Errorf("a header in clear: error %v; want a refusal that does not repeat the value", err)
	}
	// Export turned off keeps the destinations, and sends to none.
	if err := st.SetExportEnabled(ctx, false); err != nil {
		t.Fatal(err)
	}
	fs = c.flagSet("serve")
	f = serveFlags{}
	declareServeFlags(fs, &f)
	fs.Parse(nil)
	if cfg, _ := serveConfig(ctx, st, fs, &f); !cfg.Exports.Empty() {
		t.Errorf("with export off: exports %+v; want none", cfg.Exports)
	}
	// A home with no settings keeps the default address and exports nothing.
	empty, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer empty.Close()
	fs = c.flagSet("serve")
	f = serveFlags{}
	declareServeFlags(fs, &f)
	fs.Parse(nil)
	cfg, err := serveConfig(ctx, empty, fs, &f)
	if err != nil || cfg.Listen != httpfront.DefaultListen || cfg.TLS() || !cfg.Exports.Empty() {
		t.Errorf("with no settings: %+v, %v; want %s, no TLS and no exports", cfg, err, httpfront.DefaultListen)
	}
}
