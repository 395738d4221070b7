package stream

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"
)

// SyslogSDID is the SD-ID of the structured data each syslog message
// carries. 32473 is the private enterprise number RFC 5424 uses in its own
// examples (RFC 5612 reserves it for documentation); a receiver's parser
// matches the whole SD-ID.
const SyslogSDID = "gatehouse@32473"

// SyslogOptions configure a syslog sink. Nil options mean the defaults.
type SyslogOptions struct {
	// Hostname is the HOSTNAME field; empty means this machine's name.
	Hostname string
	// Facility is the syslog facility; zero means 13 (log audit).
	Facility int
	// Timeout bounds a connection and each write; zero means 10 s.
	Timeout time.Duration
}

// A syslogSink writes RFC 5424 messages over TCP (framed by octet counting,
// RFC 6587 3.4.1) or UDP (one message per datagram, RFC 5426).
type syslogSink struct {
	network, addr string
	host          string
	facility      int
	timeout       time.Duration
	conn          net.Conn // nil until dialled, and after an error
}

// NewSyslog returns a sink that sends each record as one RFC 5424 message
// to target, tcp://HOST:PORT or udp://HOST:PORT.
func NewSyslog(target string, opts *SyslogOptions) (Sink, error) {
	u, err := url.Parse(target)
	if err != nil || (u.Scheme != "tcp" && u.Scheme != "udp") || u.Host == "" || u.Path != "" {
		return nil, fmt.Errorf("syslog target %q: want tcp://HOST:PORT or udp://HOST:PORT", target)
	}
	if opts == nil {
		opts = &SyslogOptions{}
	}
	s := &syslogSink{network: u.Scheme, addr: u.Host, host: opts.Hostname, facility: opts.Facility, timeout: opts.Timeout}
	if s.host == "" {
		s.host, _ = os.Hostname()
	}
	if s.facility == 0 {
		s.facility = 13
	}
	if s.timeout <= 0 {
		s.timeout = 10 * time.Second
	}
	return s, nil
}

func (s *syslogSink) Name() string { return "syslog:" + s.network + "://" + s.addr }

func (s *syslogSink) Deliver(ctx context.Context, recs []Record) error {
	if s.conn == nil {
		d := net.Dialer{Timeout: s.timeout}
		c, err := d.DialContext(ctx, s.network, s.addr)
		if err != nil {
			return fmt.Errorf("syslog: %w", err)
		}
		s.conn = c
	}
	s.conn.SetWriteDeadline(time.Now().Add(s.timeout))
	var buf []byte
	for _, r := range recs {
		msg := FormatSyslog(r, s.facility, s.host)
		if s.network == "udp" {
			if _, err := s.conn.Write(msg); err != nil {
				s.Close()
				return fmt.Errorf("syslog: %w", err)
			}
			continue
		}
		buf = strconv.AppendInt(buf, int64(len(msg)), 10)
		buf = append(buf, ' ')
		buf = append(buf, msg...)
	}
	if len(buf) > 0 {
		if _, err := s.conn.Write(buf); err != nil {
			s.Close()
			return fmt.Errorf("syslog: %w", err)
		}
	}
	return nil
}

func (s *syslogSink) Close() error {
	if s.conn == nil {
		return nil
	}
	err := s.conn.Close()
	s.conn = nil
	return err
}

// FormatSyslog returns r as one RFC 5424 message: the header, the record's
// fields as structured data under [SyslogSDID], and its summary as the
// message.
func FormatSyslog(r Record, facility int, host string) []byte {
	severity := 6 // informational
	switch {
	case r.Kind == "receipt" && r.Decision != "Allow":
		severity = 5 // notice: a call that did not run
	case r.Kind == "outcome" && r.Status != "SUCCEEDED":
		severity = 4 // warning
	}
	var b strings.Builder
	fmt.Fprintf(&b, "<%d>1 %s %s gatehouse %d %s [%s", facility*8+severity,
		r.Time.UTC().Format("2006-01-02T15:04:05.000000Z"), headerField(host, 255), os.Getpid(), r.Kind, SyslogSDID)
	param := func(name, value string) {
		if value == "" {
			return
		}
		b.WriteString(" " + name + `="`)
		for _, c := range value {
			if c == '"' || c == '\\' || c == ']' {
				b.WriteByte('\\')
			}
			b.WriteRune(c)
		}
		b.WriteByte('"')
	}
	param("log", r.Log)
	param("index", strconv.FormatInt(r.Index, 10))
	param("entry", r.ID)
	param("leaf_hash", r.LeafHash)
	param("receipt", r.Receipt)
	param("server", r.Server)
	param("tool", r.Tool)
	param("client", r.Client)
	param("session", r.Session)
	param("decision", r.Decision)
	param("rule", r.Rule)
	param("approver", r.Approver)
	if r.Kind == "outcome" {
		param("status", r.Status)
		param("duration_ms", strconv.FormatFloat(r.DurationMS, 'f', -1, 64))
		if r.ErrorCode != 0 {
			param("error_code", strconv.FormatInt(r.ErrorCode, 10))
		}
	}
	b.WriteString("] \ufeff")
	b.WriteString(strings.Map(func(r rune) rune {
		if r < 0x20 {
			return ' '
		}
		return r
	}, r.Summary()))
	return []byte(b.String())
}

// headerField makes s fit a header field: printable US-ASCII, no space,
// at most n characters, "-" when empty.
func headerField(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r <= 32 || r >= 127 {
			return -1
		}
		return r
	}, s)
	if len(s) > n {
		s = s[:n]
	}
	if s == "" {
		return "-"
	}
	return s
}
