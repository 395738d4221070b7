package stream

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// Destinations name where the evidence goes: the home's settings
// export.otlp, export.syslog and export.otlp_headers, or the flags of
// gatehouse serve and export-stream.
type Destinations struct {
	OTLP   []string // OTLP/HTTP endpoints, http(s)://HOST:PORT
	Syslog []string // tcp://HOST:PORT or udp://HOST:PORT
	// OTLPHeaders are sent with every OTLP request, by name (a collector's
	// Authorization). Each value is a reference to a secret of the OS
	// keychain, vault://secret/ID, never the value itself: the value
	// MUST NOT reach a file, a flag or a log.
	OTLPHeaders map[string]string
}

// Empty reports whether d names no destination.
func (d Destinations) Empty() bool { return len(d.OTLP)+len(d.Syslog) == 0 }

// ErrHeaderNotARef is returned for an OTLP header whose value is not a
// reference to a keychain secret.
var ErrHeaderNotARef = errors.New("an OTLP header's value must be a keychain reference, vault://secret/ID")

// CheckHeader checks one OTLP header: a valid field name, and a value that
// is a reference to a keychain secret.
func CheckHeader(name, ref string) error {
	if name == "" || !validHeaderName(name) {
		return fmt.Errorf("OTLP header %q: not a header name", name)
	}
	id, ok := vault.ParseRef(ref)
	if !ok || vault.ValidateSecretID(id) != nil {
		return fmt.Errorf("OTLP header %s: %w (store the value with: gatehouse secret set ID)", name, ErrHeaderNotARef)
	}
	return nil
}

func validHeaderName(s string) bool {
	for _, r := range s {
		if r > 0x7e || r <= ' ' || r == ':' || r == '"' || r == '(' || r == ')' || r == ',' || r == '/' ||
			r == ';' || r == '<' || r == '=' || r == '>' || r == '?' || r == '@' || r == '[' || r == '\\' ||
			r == ']' || r == '{' || r == '}' {
			return false
		}
	}
	return true
}

// A SecretSource returns a keychain secret's value (*vault.Vault is one).
type SecretSource interface {
	Secret(id string) (string, error)
}

// Sinks makes a sink for each destination. The OTLP headers' secrets are
// read from secrets now, once; an unreadable one is an error, and no sink
// is made (the collector would refuse every record).
func (d Destinations) Sinks(ctx context.Context, secrets SecretSource, version string) ([]Sink, error) {
	headers := map[string]string{}
	names := make([]string, 0, len(d.OTLPHeaders))
	for name := range d.OTLPHeaders {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		ref := d.OTLPHeaders[name]
		if err := CheckHeader(name, ref); err != nil {
			return nil, err
		}
		if len(d.OTLP) == 0 {
			continue
		}
		id, _ := vault.ParseRef(ref)
		v, err := secrets.Secret(id)
		if err != nil {
			return nil, fmt.Errorf("OTLP header %s: read %s: %w", name, ref, err)
		}
		headers[name] = v
	}
	var sinks []Sink
	closeAll := func() {
		for _, s := range sinks {
			s.Close()
		}
	}
	for _, u := range d.OTLP {
		s, err := NewOTLP(ctx, u, &OTLPOptions{ServiceVersion: version, Headers: headers})
		if err != nil {
			closeAll()
			return nil, err
		}
		sinks = append(sinks, s)
	}
	for _, a := range d.Syslog {
		s, err := NewSyslog(a, nil)
		if err != nil {
			closeAll()
			return nil, err
		}
		sinks = append(sinks, s)
	}
	return sinks, nil
}

// Start streams the log of m to each sink until ctx ends, each from its
// own cursor; wait returns once every sink has stopped and is closed.
func Start(ctx context.Context, m receipts.Migrator, sinks []Sink, opts *Options) (wait func(), err error) {
	if len(sinks) == 0 {
		return func() {}, nil
	}
	s, err := Open(ctx, m, opts)
	if err != nil {
		for _, sink := range sinks {
			sink.Close()
		}
		return nil, err
	}
	var wg sync.WaitGroup
	for _, sink := range sinks {
		wg.Go(func() {
			defer sink.Close()
			s.Run(ctx, sink)
		})
	}
	return wg.Wait, nil
}
