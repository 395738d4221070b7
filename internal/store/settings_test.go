package store

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestSettings(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)

	s, err := st.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovalWait != 0 || s.LogLevel != nil || len(s.Problems) > 0 {
		t.Errorf("Settings() of a new home = %+v, want every setting unset", s)
	}

	debug := slog.LevelDebug
	if err := st.SetApprovalWait(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLogLevel(ctx, &debug); err != nil {
		t.Fatal(err)
	}
	// Another process sees them.
	other, err := Open(ctx, st.Dir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s, err = other.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovalWait != 30*time.Second || s.LogLevel == nil || *s.LogLevel != slog.LevelDebug {
		t.Errorf("Settings() = wait %v, level %v; want 30s and debug", s.ApprovalWait, s.LogLevel)
	}

	// Zero and nil go back to the defaults.
	if err := st.SetApprovalWait(ctx, 0); err != nil {
		t.Fatal(err)
	}
	if err := st.SetLogLevel(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if s, _ = st.Settings(ctx); s.ApprovalWait != 0 || s.LogLevel != nil {
		t.Errorf("after reset, Settings() = %+v, want every setting unset", s)
	}
}

func TestSettingsRefuseValuesOutOfBounds(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	if err := st.SetApprovalWait(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	for _, d := range []time.Duration{time.Second, MaxApprovalWait + time.Second, -time.Minute} {
		if err := st.SetApprovalWait(ctx, d); !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("SetApprovalWait(%v) = %v, want ErrInvalidSetting", d, err)
		}
	}
	odd := slog.Level(3)
	if err := st.SetLogLevel(ctx, &odd); !errors.Is(err, ErrInvalidSetting) {
		t.Errorf("SetLogLevel(%v) = %v, want ErrInvalidSetting", odd, err)
	}
	// The refused values changed nothing.
	if s, _ := st.Settings(ctx); s.ApprovalWait != 30*time.Second {
		t.Errorf("ApprovalWait = %v after refused changes, want 30s", s.ApprovalWait)
	}
}

func TestSettingsUnreadableValueFallsBackToDefault(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	for k, v := range map[string]string{SettingApprovalWait: "forever", SettingLogLevel: "loud"} {
		if err := st.set(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	s, err := st.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ApprovalWait != 0 || s.LogLevel != nil {
		t.Errorf("Settings() = %+v, want unreadable values taken as unset", s)
	}
	if len(s.Problems) != 2 {
		t.Errorf("Problems = %q, want one for each unreadable value", s.Problems)
	}
}

func TestKeychainService(t *testing.T) {
	ctx := context.Background()
	cfg := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", cfg)
	t.Setenv("HOME", cfg) // macOS
	t.Setenv("AppData", cfg)
	sys, err := SystemDir()
	if err != nil {
		t.Fatal(err)
	}
	services := map[string]string{}
	for _, dir := range []string{sys, filepath.Join(cfg, "a"), filepath.Join(cfg, "b")} {
		st, err := Open(ctx, dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		services[dir] = st.KeychainService()
		st.Close()
	}
	if got := services[sys]; got != "gatehouse" {
		t.Errorf("KeychainService() of the system home = %q, want gatehouse", got)
	}
	if a, b := services[filepath.Join(cfg, "a")], services[filepath.Join(cfg, "b")]; a == b || a == "gatehouse" || b == "gatehouse" {
		t.Errorf("KeychainService() of two other homes = %q and %q, want two services of their own", a, b)
	}
}

func TestIsLocked(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st, err := Open(ctx, dir, &Options{BusyTimeout: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	// Another process's long write transaction.
	other, err := Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.DB().BeginTx(ctx, nil) // IMMEDIATE: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	err = st.SetApprovalWait(ctx, time.Minute)
	if !IsLocked(err) {
		t.Errorf("a write while another holds the lock = %v; IsLocked = false, want true", err)
	}
	if IsLocked(errors.New("database is locked")) {
		t.Error("IsLocked of a plain error that says so = true, want false (errors are not compared by text)")
	}
	tx.Rollback()
	if err := st.SetApprovalWait(ctx, time.Minute); err != nil || IsLocked(err) {
		t.Errorf("a write once the lock is released = %v, want nil", err)
	}
}

func TestServeAndExportSettings(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	if err := st.SetServeListen(ctx, "0.0.0.0:8443"); err != nil {
		t.Fatal(err)
	}
	otlp := []string{"http://127.0.0.1:4318", "https://collector.example:4318"}
	if err := st.SetExportOTLP(ctx, otlp); err != nil {
		t.Fatal(err)
	}
	if err := st.SetExportSyslog(ctx, []string{"tcp://127.0.0.1:6514"}); err != nil {
		t.Fatal(err)
	}
	s, err := st.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.ServeListen != "0.0.0.0:8443" || !slices.Equal(s.ExportOTLP, otlp) || !slices.Equal(s.ExportSyslog, []string{"tcp://127.0.0.1:6514"}) {
		t.Errorf("Settings() = %+v, want the address and destinations set", s)
	}

	tests := []struct {
		name string
		set  func() error
	}{
		{"listen without a port", func() error { return st.SetServeListen(ctx, "127.0.0.1") }},
		{"listen on port 70000", func() error { return st.SetServeListen(ctx, "127.0.0.1:70000") }},
		{"OTLP over gRPC's scheme", func() error { return st.SetExportOTLP(ctx, []string{"grpc://c:4317"}) }},
		{"OTLP with a user in the URL", func() error { return st.SetExportOTLP(ctx, []string{"http://u:p@c:4318"}) }},
		{"syslog without a scheme", func() error { return st.SetExportSyslog(ctx, []string{"127.0.0.1:514"}) }},
		{"syslog over http", func() error { return st.SetExportSyslog(ctx, []string{"http://c:514"}) }},
	}
	for _, tt := range tests {
		if err := tt.set(); !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("%s: error = %v, want ErrInvalidSetting", tt.name, err)
		}
	}
	if s2, _ := st.Settings(ctx); s2.ServeListen != s.ServeListen || !slices.Equal(s2.ExportOTLP, s.ExportOTLP) {
		t.Errorf("after refused changes, Settings() = %+v, want %+v", s2, s)
	}

	// Empty goes back to the defaults.
	if err := errors.Join(st.SetServeListen(ctx, ""), st.SetExportOTLP(ctx, nil), st.SetExportSyslog(ctx, nil)); err != nil {
		t.Fatal(err)
	}
	if s, _ = st.Settings(ctx); s.ServeListen != "" || s.ExportOTLP != nil || s.ExportSyslog != nil {
		t.Errorf("after reset, Settings() = %+v, want them unset", s)
	}

	// Values another version wrote that this one cannot read are unset.
	for k, v := range map[string]string{SettingServeListen: "everywhere", SettingExportOTLP: `"http://c:4318"`,
		SettingExportSyslog: `["tcp://a:1"] ["tcp://b:2"]`} {
		if err := st.set(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if s, _ = st.Settings(ctx); s.ServeListen != "" || s.ExportOTLP != nil || s.ExportSyslog != nil || len(s.Problems) != 3 {
		t.Errorf("Settings() = %+v, want unreadable values unset, each a problem", s)
	}
}

// The settings the app's serve and evidence sections write: serve on, TLS
// files, export off, and OTLP headers that refer to the keychain and never
// hold a credential.
func TestServeTLSAndOTLPHeaderSettings(t *testing.T) {
	ctx := context.Background()
	st := MustOpen(t)
	if s, _ := st.Settings(ctx); s.ServeEnabled || s.ExportOff || s.ServeTLSCert != "" || s.ExportOTLPHeaders != nil {
		t.Fatalf("defaults = %+v, want serve off, export on, no TLS, no headers", s)
	}
	headers := map[string]string{"Authorization": "vault://secret/otel-auth"}
	if err := errors.Join(st.SetServeEnabled(ctx, true), st.SetServeTLS(ctx, "/etc/gh/cert.pem", "/etc/gh/key.pem"),
		st.SetExportEnabled(ctx, false), st.SetExportOTLPHeaders(ctx, headers)); err != nil {
		t.Fatal(err)
	}
	s, err := st.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !s.ServeEnabled || s.ServeTLSCert != "/etc/gh/cert.pem" || s.ServeTLSKey != "/etc/gh/key.pem" || !s.ExportOff ||
		s.ExportOTLPHeaders["Authorization"] != "vault://secret/otel-auth" || len(s.Problems) != 0 {
		t.Errorf("Settings() = %+v, want them as set", s)
	}
	for name, set := range map[string]func() error{
		"a certificate without its key": func() error { return st.SetServeTLS(ctx, "/c.pem", "") },
		"a header's value in clear":     func() error { return st.SetExportOTLPHeaders(ctx, map[string]string{"Authorization": "Bearer s3cr3t"}) },
		"a header name with a colon": func() error {
			return st.SetExportOTLPHeaders(ctx, map[string]string{"Authorization:": "vault://secret/x"})
		},
	} {
		if err := set(); !errors.Is(err, ErrInvalidSetting) {
			t.Errorf("%s: error = %v, want ErrInvalidSetting", name, err)
		} else if strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%s: the error %q repeats the credential", name, err)
		}
	}
	// Another version's credential in clear is not taken, and not repeated.
	if err := st.set(ctx, SettingExportOTLPHeaders, `{"Authorization":"Bearer s3cr3t"}`); err != nil {
		t.Fatal(err)
	}
	if s, _ = st.Settings(ctx); s.ExportOTLPHeaders != nil || len(s.Problems) != 1 || strings.Contains(s.Problems[0], "s3cr3t") {
		t.Errorf("Settings() = %+v, want the header unset, one problem that does not repeat the value", s)
	}
	if err := errors.Join(st.SetServeEnabled(ctx, false), st.SetServeTLS(ctx, "", ""), st.SetExportEnabled(ctx, true)); err != nil {
		t.Fatal(err)
	}
	if s, _ = st.Settings(ctx); s.ServeEnabled || s.ServeTLSCert != "" || s.ServeTLSKey != "" || s.ExportOff {
		t.Errorf("after reset, Settings() = %+v, want the defaults", s)
	}
}
