package approval

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// Message types.
const (
	typeRequest  = "request"  // proxy → approver: Request
	typeDetach   = "detach"   // proxy → approver: ID; the wait ended
	typePending  = "pending"  // approver → proxy: ID, Approver; a person sees it
	typeDecision = "decision" // approver → proxy: Decision
	typeDetached = "detached" // approver → proxy: ID; the request stays open
	typeError    = "error"    // approver → proxy: Error; the connection ends
)

// message is one line of the wire protocol.
type message struct {
	V        int       `json:"v"`
	Type     string    `json:"type"`
	ID       string    `json:"id,omitempty"`
	Approver string    `json:"approver,omitempty"`
	Request  *Request  `json:"request,omitempty"`
	Decision *Decision `json:"decision,omitempty"`
	Error    string    `json:"error,omitempty"`
}

// maxReply bounds the approver's messages, which are small.
const maxReply = 16 << 10

var errLineTooLong = errors.New("message line too long")

// encode returns m as one line.
func encode(m *message) ([]byte, error) {
	m.V = Version
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(m); err != nil { // Encode ends the line
		return nil, err
	}
	return buf.Bytes(), nil
}

// decode parses one line strictly: one JSON value, the version first (so
// that a newer peer gets a clear answer), then the message with no unknown
// fields, then the fields its type requires.
func decode(line []byte) (*message, error) {
	var head struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	if head.V == nil {
		return nil, errors.New("no protocol version")
	}
	if *head.V != Version {
		return nil, fmt.Errorf("protocol version %d, want %d", *head.V, Version)
	}
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	var m message
	if err := dec.Decode(&m); err != nil { // json.Unmarshal above refused trailing data
		return nil, err
	}
	if err := m.check(); err != nil {
		return nil, fmt.Errorf("%s message: %w", m.Type, err)
	}
	return &m, nil
}

// check verifies that m has exactly the fields its type uses.
func (m *message) check() error {
	has := func(fields ...bool) error {
		names := []string{"id", "approver", "request", "decision", "error"}
		set := []bool{m.ID != "", m.Approver != "", m.Request != nil, m.Decision != nil, m.Error != ""}
		for i, name := range names {
			want := false
			if i < len(fields) {
				want = fields[i]
			}
			if set[i] && !want {
				return fmt.Errorf("unexpected field %s", name)
			}
		}
		return nil
	}
	// The order of has's arguments: id, approver, request, decision, error.
	switch m.Type {
	case typeRequest:
		if m.Request == nil {
			return errors.New("no request")
		}
		if err := has(false, false, true); err != nil {
			return err
		}
		return m.Request.validate()
	case typeDecision:
		if m.Decision == nil {
			return errors.New("no decision")
		}
		if err := has(false, false, false, true); err != nil {
			return err
		}
		return m.Decision.validate()
	case typePending:
		if err := has(true, true); err != nil {
			return err
		}
		if err := checkField("approver", m.Approver, false); err != nil {
			return err
		}
		return checkField("id", m.ID, true)
	case typeDetach, typeDetached:
		if err := has(true); err != nil {
			return err
		}
		return checkField("id", m.ID, true)
	case typeError:
		if m.Error == "" {
			return errors.New("no error text")
		}
		return has(false, false, false, false, true)
	case "":
		return errors.New("no message type")
	}
	return fmt.Errorf("unknown message type %q", m.Type)
}

// A lineReader reads newline-ended lines of bounded length. A line cut short
// by a read deadline is kept, and the next call goes on with it.
type lineReader struct {
	r       *bufio.Reader
	max     int // longest line, without its newline
	partial []byte
}

func newLineReader(r io.Reader, max int) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 4096), max: max}
}

func (lr *lineReader) next() ([]byte, error) {
	for {
		chunk, err := lr.r.ReadSlice('\n')
		lr.partial = append(lr.partial, chunk...)
		if len(lr.partial) > lr.max+1 {
			return nil, errLineTooLong
		}
		switch {
		case err == nil:
			line := bytes.TrimSuffix(lr.partial[:len(lr.partial)-1], []byte("\r"))
			lr.partial = nil
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case errors.Is(err, io.EOF) && len(lr.partial) > 0:
			return nil, io.ErrUnexpectedEOF
		default:
			return nil, err
		}
	}
}

// canonical returns raw as canonical JSON: object keys sorted, no
// insignificant space, numbers as written, nothing after the value.
func canonical(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// canonicalArgs is canonical, with absent arguments as an empty object (MCP
// treats the two alike).
func canonicalArgs(raw []byte) ([]byte, error) {
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return []byte("{}"), nil
	}
	return canonical(raw)
}

// clip returns js (valid JSON) when it fits in max bytes, and otherwise a JSON
// string of at most max bytes holding its start, and true.
func clip(js []byte, max int) ([]byte, bool) {
	if len(js) <= max {
		return js, false
	}
	n := max
	for {
		for n > 0 && !utf8.RuneStart(js[n]) {
			n-- // do not split a character
		}
		b := quote(string(js[:n]))
		if len(b) <= max {
			return b, true
		}
		// Escapes made it longer: shrink in proportion, and a little more.
		n = n*max/len(b) - 16
		if n < 0 {
			n = 0
		}
	}
}

// quote returns s as a JSON string, without HTML escaping.
func quote(s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.Encode(s) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// cutText cuts s to at most max bytes at a character boundary, marking the
// cut.
func cutText(s string, max int) string {
	if len(s) <= max {
		return s
	}
	const mark = "…"
	n := max - len(mark)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + mark
}

// shortField makes v fit a short field: control characters become U+FFFD,
// and it is cut to maxField.
func shortField(v string) string {
	v = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return utf8.RuneError
		}
		return r
	}, v)
	return cutText(v, maxField)
}
