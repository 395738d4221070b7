package store

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Settings are the preferences every Gatehouse process of a home folder
// reads: the tray app writes them, each proxy reads them when it starts. A
// setting that is not set has its default; [Store.Settings] never fails on a
// value another version wrote that this one cannot read, it falls back to
// the default and says so in Problems.
type Settings struct {
	// ApprovalWait bounds how long a proxy waits for a person's answer
	// before it tells the agent that approval is pending. Zero means the
	// gate's default.
	ApprovalWait time.Duration
	// LogLevel is the level of the log Gatehouse processes write to
	// [Store.LogPath] and stderr. Nil means their default (info).
	LogLevel *slog.Level
	// QuarantineNewServers says a server registered from now on (by
	// `gatehouse server add` or by governing a client) is quarantined
	// until the user reviews it, unless a capability pack knows it. On
	// unless set off.
	QuarantineNewServers bool
	// ServeEnabled says the tray app serves over HTTP (as gatehouse serve
	// does) while it runs. Off unless set on.
	ServeEnabled bool
	// ServeListen is the HOST:PORT gatehouse serve listens on when no
	// --listen is given. Empty means its default (loopback).
	ServeListen string
	// ServeTLSCert and ServeTLSKey are the PEM files of the certificate
	// chain and its key that gatehouse serve serves HTTPS with when no
	// --tls-cert is given; both empty means plain HTTP.
	ServeTLSCert, ServeTLSKey string
	// ExportOff says the export destinations below are kept but not sent
	// to. Unset means on.
	ExportOff bool
	// ExportOTLP are the OTLP/HTTP endpoints (http(s)://HOST:PORT) that
	// gatehouse serve and export-stream send the evidence to when no
	// --export-otlp or --export-syslog is given.
	ExportOTLP []string
	// ExportSyslog are the syslog receivers (tcp://HOST:PORT or
	// udp://HOST:PORT), likewise.
	ExportSyslog []string
	// ExportOTLPHeaders are sent with every OTLP request, by header name;
	// each value is a reference to a keychain secret (vault://secret/ID),
	// never the value.
	ExportOTLPHeaders map[string]string
	// Problems lists settings whose stored value could not be read, and
	// were taken as unset.
	Problems []string
}

// The setting keys, as stored.
const (
	SettingApprovalWait = "approval.wait" // a Go duration: "45s"
	SettingLogLevel     = "log.level"     // debug, info, warn or error
	// SettingQuarantineNewServers is "on" or "off"; unset means on.
	SettingQuarantineNewServers = "quarantine.new_servers"
	SettingServeEnabled         = "serve.enabled"       // "on" or "off"; unset means off
	SettingServeListen          = "serve.listen"        // HOST:PORT
	SettingServeTLSCert         = "serve.tls_cert"      // a file path
	SettingServeTLSKey          = "serve.tls_key"       // a file path
	SettingExportEnabled        = "export.enabled"      // "on" or "off"; unset means on
	SettingExportOTLP           = "export.otlp"         // a JSON array of URLs
	SettingExportSyslog         = "export.syslog"       // a JSON array of tcp:// or udp:// addresses
	SettingExportOTLPHeaders    = "export.otlp_headers" // a JSON object: header name to vault://secret/ID
)

// Bounds of [Settings.ApprovalWait]. Below the minimum a person cannot read
// the request; above the maximum every MCP client has given up.
const (
	MinApprovalWait = 5 * time.Second
	MaxApprovalWait = 10 * time.Minute
)

// ErrInvalidSetting is wrapped by the errors [Store.SetApprovalWait] and
// [Store.SetLogLevel] return for a value out of bounds.
var ErrInvalidSetting = errors.New("invalid setting")

// Settings reads every setting.
func (st *Store) Settings(ctx context.Context) (Settings, error) {
	s := Settings{QuarantineNewServers: true}
	rows, err := st.db.QueryContext(ctx, `SELECT key, value FROM settings`)
	if err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return s, fmt.Errorf("read settings: %w", err)
		}
		switch k {
		case SettingApprovalWait:
			d, err := parseApprovalWait(v)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: %v", k, v, err))
				continue
			}
			s.ApprovalWait = d
		case SettingLogLevel:
			l, err := parseLogLevel(v)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: %v", k, v, err))
				continue
			}
			s.LogLevel = &l
		case SettingQuarantineNewServers:
			switch v {
			case "on":
				s.QuarantineNewServers = true
			case "off":
				s.QuarantineNewServers = false
			default:
				// Unreadable: the safe side, which is the default.
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: not on or off", k, v))
			}
		case SettingServeEnabled, SettingExportEnabled:
			if v != "on" && v != "off" {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: not on or off", k, v))
				continue
			}
			if k == SettingServeEnabled {
				s.ServeEnabled = v == "on"
			} else {
				s.ExportOff = v == "off"
			}
		case SettingServeTLSCert, SettingServeTLSKey:
			if err := checkPath(v); err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: %v", k, v, err))
				continue
			}
			if k == SettingServeTLSCert {
				s.ServeTLSCert = v
			} else {
				s.ServeTLSKey = v
			}
		case SettingExportOTLPHeaders:
			h, err := parseHeaders(v)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s: %v", k, err))
				continue
			}
			s.ExportOTLPHeaders = h
		case SettingServeListen:
			if err := checkListen(v); err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: %v", k, v, err))
				continue
			}
			s.ServeListen = v
		case SettingExportOTLP, SettingExportSyslog:
			check := checkOTLP
			if k == SettingExportSyslog {
				check = checkSyslog
			}
			list, err := parseList(v, check)
			if err != nil {
				s.Problems = append(s.Problems, fmt.Sprintf("%s = %q: %v", k, v, err))
				continue
			}
			if k == SettingExportOTLP {
				s.ExportOTLP = list
			} else {
				s.ExportSyslog = list
			}
		}
	}
	if err := rows.Err(); err != nil {
		return s, fmt.Errorf("read settings: %w", err)
	}
	if (s.ServeTLSCert == "") != (s.ServeTLSKey == "") {
		// Half a pair serves nothing: neither is taken.
		s.Problems = append(s.Problems, fmt.Sprintf("%s and %s go together; only one is set", SettingServeTLSCert, SettingServeTLSKey))
		s.ServeTLSCert, s.ServeTLSKey = "", ""
	}
	return s, nil
}

// SetApprovalWait sets how long proxies wait for a person's answer; zero
// goes back to the gate's default. A proxy reads it when it starts.
func (st *Store) SetApprovalWait(ctx context.Context, d time.Duration) error {
	if d == 0 {
		return st.unset(ctx, SettingApprovalWait)
	}
	if d < MinApprovalWait || d > MaxApprovalWait {
		return fmt.Errorf("set approval wait: %w: %v is not between %v and %v", ErrInvalidSetting, d, MinApprovalWait, MaxApprovalWait)
	}
	return st.set(ctx, SettingApprovalWait, d.String())
}

// SetLogLevel sets the level of Gatehouse's log; nil goes back to the
// default. Only debug, info, warn and error are accepted.
func (st *Store) SetLogLevel(ctx context.Context, l *slog.Level) error {
	if l == nil {
		return st.unset(ctx, SettingLogLevel)
	}
	switch *l {
	case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
	default:
		return fmt.Errorf("set log level: %w: %v is not debug, info, warn or error", ErrInvalidSetting, *l)
	}
	return st.set(ctx, SettingLogLevel, strings.ToLower(l.String()))
}

// SetQuarantineNewServers sets whether servers registered from now on are
// quarantined until reviewed (those a capability pack knows are not).
// Servers already registered keep their state.
func (st *Store) SetQuarantineNewServers(ctx context.Context, on bool) error {
	if on {
		return st.unset(ctx, SettingQuarantineNewServers)
	}
	return st.set(ctx, SettingQuarantineNewServers, "off")
}

// SetServeListen sets the HOST:PORT gatehouse serve listens on when no
// --listen is given; empty goes back to its default. gatehouse serve
// reads it when it starts.
func (st *Store) SetServeListen(ctx context.Context, addr string) error {
	if addr == "" {
		return st.unset(ctx, SettingServeListen)
	}
	if err := checkListen(addr); err != nil {
		return fmt.Errorf("set serve address: %w: %q: %v", ErrInvalidSetting, addr, err)
	}
	return st.set(ctx, SettingServeListen, addr)
}

// SetServeEnabled sets whether the tray app serves over HTTP while it runs.
func (st *Store) SetServeEnabled(ctx context.Context, on bool) error {
	if !on {
		return st.unset(ctx, SettingServeEnabled)
	}
	return st.set(ctx, SettingServeEnabled, "on")
}

// SetServeTLS sets the certificate chain and key files gatehouse serve
// serves HTTPS with; both empty go back to plain HTTP. The two go
// together. The files are read when serving starts, not here.
func (st *Store) SetServeTLS(ctx context.Context, cert, key string) error {
	if (cert == "") != (key == "") {
		return fmt.Errorf("set serve TLS: %w: the certificate and its key go together", ErrInvalidSetting)
	}
	if cert == "" {
		if err := st.unset(ctx, SettingServeTLSCert); err != nil {
			return err
		}
		return st.unset(ctx, SettingServeTLSKey)
	}
	for _, p := range []string{cert, key} {
		if err := checkPath(p); err != nil {
			return fmt.Errorf("set serve TLS: %w: %q: %v", ErrInvalidSetting, p, err)
		}
	}
	tx, err := st.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("set serve TLS: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UTC().Format(time.RFC3339Nano)
	for k, v := range map[string]string{SettingServeTLSCert: cert, SettingServeTLSKey: key} {
		if _, err := tx.ExecContext(ctx, `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
			ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`, k, v, now); err != nil {
			return fmt.Errorf("set serve TLS: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("set serve TLS: %w", err)
	}
	return nil
}

// SetExportEnabled sets whether the evidence goes to the export
// destinations; off keeps them, unsent.
func (st *Store) SetExportEnabled(ctx context.Context, on bool) error {
	if on {
		return st.unset(ctx, SettingExportEnabled)
	}
	return st.set(ctx, SettingExportEnabled, "off")
}

// SetExportOTLPHeaders sets the headers sent with every OTLP request; each
// value MUST be a reference to a keychain secret (vault://secret/ID), so
// that no credential is ever kept in the database. None goes back to no
// header.
func (st *Store) SetExportOTLPHeaders(ctx context.Context, headers map[string]string) error {
	if len(headers) == 0 {
		return st.unset(ctx, SettingExportOTLPHeaders)
	}
	for name, ref := range headers {
		if err := checkHeader(name, ref); err != nil {
			return fmt.Errorf("set OTLP headers: %w: %v", ErrInvalidSetting, err)
		}
	}
	b, err := json.Marshal(headers)
	if err != nil {
		return fmt.Errorf("set OTLP headers: %w", err)
	}
	return st.set(ctx, SettingExportOTLPHeaders, string(b))
}

// SetExportOTLP sets the OTLP/HTTP endpoints (http(s)://HOST:PORT[/PATH])
// gatehouse serve and export-stream send the evidence to when their flags
// name no destination; none goes back to exporting nothing. Each is read
// when the process starts.
func (st *Store) SetExportOTLP(ctx context.Context, urls []string) error {
	return st.setList(ctx, SettingExportOTLP, urls, checkOTLP)
}

// SetExportSyslog sets the syslog receivers (tcp://HOST:PORT or
// udp://HOST:PORT), as [Store.SetExportOTLP] does the collectors.
func (st *Store) SetExportSyslog(ctx context.Context, addrs []string) error {
	return st.setList(ctx, SettingExportSyslog, addrs, checkSyslog)
}

func (st *Store) setList(ctx context.Context, key string, list []string, check func(string) error) error {
	if len(list) == 0 {
		return st.unset(ctx, key)
	}
	for _, v := range list {
		if err := check(v); err != nil {
			return fmt.Errorf("set %s: %w: %q: %v", key, ErrInvalidSetting, v, err)
		}
	}
	b, err := json.Marshal(list)
	if err != nil {
		return fmt.Errorf("set %s: %w", key, err)
	}
	return st.set(ctx, key, string(b))
}

func (st *Store) set(ctx context.Context, key, value string) error {
	_, err := st.db.ExecContext(ctx, `INSERT INTO settings (key, value, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at`,
		key, value, time.Now().UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("save setting %s: %w", key, err)
	}
	return nil
}

func (st *Store) unset(ctx context.Context, key string) error {
	if _, err := st.db.ExecContext(ctx, `DELETE FROM settings WHERE key = ?`, key); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("reset setting %s: %w", key, err)
	}
	return nil
}

func parseApprovalWait(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil {
		return 0, errors.New("not a duration")
	}
	if d < MinApprovalWait || d > MaxApprovalWait {
		return 0, fmt.Errorf("not between %v and %v", MinApprovalWait, MaxApprovalWait)
	}
	return d, nil
}

func checkListen(v string) error {
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		return errors.New("not HOST:PORT")
	}
	if strings.ContainsAny(host, " /") {
		return errors.New("not a host name or address")
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return errors.New("not a port number")
	}
	return nil
}

func checkOTLP(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.User != nil {
		return errors.New("not http(s)://HOST:PORT")
	}
	return nil
}

func checkSyslog(v string) error {
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "udp") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return errors.New("not tcp://HOST:PORT or udp://HOST:PORT")
	}
	return nil
}

func checkPath(v string) error {
	if v == "" || strings.ContainsRune(v, 0) {
		return errors.New("not a file path")
	}
	return nil
}

// secretRefPrefix is vault.RefPrefix, which store does not import (vault
// is a leaf above it).
const secretRefPrefix = "vault://secret/"

func checkHeader(name, ref string) error {
	if name == "" || strings.ContainsAny(name, " \t:\r\n") {
		return fmt.Errorf("%q is not a header name", name)
	}
	if id, ok := strings.CutPrefix(ref, secretRefPrefix); !ok || id == "" || strings.ContainsAny(id, "/ ") {
		return fmt.Errorf("header %s: the value must be a keychain reference, vault://secret/ID, not the value itself", name)
	}
	return nil
}

// parseHeaders reads the OTLP headers setting: a JSON object of header
// names to keychain references. A value that is not a reference is not
// shown in the problem: it may be a credential.
func parseHeaders(v string) (map[string]string, error) {
	dec := json.NewDecoder(strings.NewReader(v))
	var h map[string]string
	if err := dec.Decode(&h); err != nil || dec.More() || h == nil {
		return nil, errors.New("not a JSON object of header names to vault://secret/ID")
	}
	for name, ref := range h {
		if err := checkHeader(name, ref); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// parseList reads a list setting: a JSON array of strings, each of which
// check accepts, and nothing else.
func parseList(v string, check func(string) error) ([]string, error) {
	dec := json.NewDecoder(strings.NewReader(v))
	var list []string
	if err := dec.Decode(&list); err != nil || dec.More() || list == nil {
		return nil, errors.New("not a JSON array of strings")
	}
	for _, e := range list {
		if err := check(e); err != nil {
			return nil, fmt.Errorf("%q: %v", e, err)
		}
	}
	return list, nil
}

func parseLogLevel(v string) (slog.Level, error) {
	var l slog.Level
	switch strings.ToLower(v) {
	case "debug":
		l = slog.LevelDebug
	case "info":
		l = slog.LevelInfo
	case "warn":
		l = slog.LevelWarn
	case "error":
		l = slog.LevelError
	default:
		return l, errors.New("not debug, info, warn or error")
	}
	return l, nil
}

// keychainService is the keychain service name of the home in the user's
// config folder; it matches vault.DefaultService, which store does not
// import (vault is a leaf).
const keychainService = "gatehouse"

// KeychainService returns the keychain service name under which this home
// folder's secrets and signing key live: "gatehouse" for the home in the
// user's config folder ([SystemDir]); for any other home (a profile, a test,
// one named by $GATEHOUSE_HOME), "gatehouse-" and 12 hex digits of its
// path's SHA-256, so that homes never share keys.
func (s *Store) KeychainService() string {
	if def, err := SystemDir(); err == nil && def == s.dir {
		return keychainService
	}
	sum := sha256.Sum256([]byte(s.dir))
	return keychainService + "-" + hex.EncodeToString(sum[:6])
}
