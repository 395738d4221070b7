package clients

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a JSON scanner that records where each value sits in the
// file, so that an edit replaces the bytes of one entry and leaves every
// other byte as it was. With jsonc set it also accepts what VS Code, Zed and
// the other editors' settings files allow: // and /* */ comments, and a
// comma after the last member of an object or array.

// A SyntaxError is a malformed config file: what is wrong and where.
type SyntaxError struct {
	File   string // the file's path, when known
	Line   int    // from 1
	Column int    // from 1, in characters
	Offset int    // in bytes
	Msg    string
}

func (e *SyntaxError) Error() string {
	if e.File != "" {
		return fmt.Sprintf("%s: line %d, column %d: %s", e.File, e.Line, e.Column, e.Msg)
	}
	return fmt.Sprintf("line %d, column %d: %s", e.Line, e.Column, e.Msg)
}

// position returns the 1-based line and column (in characters) of offset.
func position(data []byte, offset int) (line, col int) {
	offset = min(max(offset, 0), len(data))
	before := data[:offset]
	line = bytes.Count(before, []byte("\n")) + 1
	start := bytes.LastIndexByte(before, '\n') + 1
	return line, utf8.RuneCount(before[start:]) + 1
}

type jsonKind uint8

const (
	jsonObject jsonKind = iota + 1
	jsonArray
	jsonString
	jsonNumber
	jsonBool
	jsonNull
)

// A jnode is one JSON value and its byte span [start, end).
type jnode struct {
	kind       jsonKind
	start, end int
	members    []jmember // jsonObject, in file order
	elems      []*jnode  // jsonArray
	str        string    // jsonString: the decoded text
}

// A jmember is one "key": value of an object.
type jmember struct {
	key      string
	keyStart int // offset of the key's opening quote
	keyEnd   int // offset after its closing quote
	val      *jnode
}

// maxJSONDepth bounds nesting, so hostile input cannot exhaust the stack.
const maxJSONDepth = 1000

type jsonScanner struct {
	data  []byte
	pos   int
	jsonc bool
}

// parseJSON parses data, which holds exactly one JSON value (after an
// optional UTF-8 byte order mark). With jsonc, comments and trailing commas
// are allowed.
func parseJSON(data []byte, jsonc bool) (*jnode, error) {
	s := &jsonScanner{data: data, jsonc: jsonc}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		s.pos = 3
	}
	if err := s.space(); err != nil {
		return nil, err
	}
	if s.pos == len(data) {
		return nil, s.errorf(s.pos, "empty file: want a JSON object")
	}
	v, err := s.value(0)
	if err != nil {
		return nil, err
	}
	if err := s.space(); err != nil {
		return nil, err
	}
	if s.pos != len(data) {
		return nil, s.errorf(s.pos, "unexpected %s after the end of the JSON value", s.describe(s.pos))
	}
	return v, nil
}

func (s *jsonScanner) errorf(offset int, format string, args ...any) error {
	line, col := position(s.data, offset)
	return &SyntaxError{Line: line, Column: col, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

// describe names the character at offset for an error message.
func (s *jsonScanner) describe(offset int) string {
	if offset >= len(s.data) {
		return "end of file"
	}
	r, _ := utf8.DecodeRune(s.data[offset:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte 0x%02x", s.data[offset])
	}
	return strconv.QuoteRune(r)
}

// space skips whitespace and, in JSONC, comments.
func (s *jsonScanner) space() error {
	for s.pos < len(s.data) {
		switch c := s.data[s.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			s.pos++
		case c == '/' && s.jsonc && s.pos+1 < len(s.data) && s.data[s.pos+1] == '/':
			i := bytes.IndexByte(s.data[s.pos:], '\n')
			if i < 0 {
				s.pos = len(s.data)
			} else {
				s.pos += i + 1
			}
		case c == '/' && s.jsonc && s.pos+1 < len(s.data) && s.data[s.pos+1] == '*':
			i := bytes.Index(s.data[s.pos+2:], []byte("*/"))
			if i < 0 {
				return s.errorf(s.pos, "comment not closed: want */")
			}
			s.pos += 2 + i + 2
		default:
			return nil
		}
	}
	return nil
}

func (s *jsonScanner) value(depth int) (*jnode, error) {
	if depth > maxJSONDepth {
		return nil, s.errorf(s.pos, "nested more than %d deep", maxJSONDepth)
	}
	if s.pos >= len(s.data) {
		return nil, s.errorf(s.pos, "unexpected end of file: want a value")
	}
	start := s.pos
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.object(depth)
	case c == '[':
		return s.array(depth)
	case c == '"':
		str, err := s.str()
		if err != nil {
			return nil, err
		}
		return &jnode{kind: jsonString, start: start, end: s.pos, str: str}, nil
	case c == '-' || (c >= '0' && c <= '9'):
		if err := s.number(); err != nil {
			return nil, err
		}
		return &jnode{kind: jsonNumber, start: start, end: s.pos}, nil
	case c == 't':
		return s.literal("true", jsonBool)
	case c == 'f':
		return s.literal("false", jsonBool)
	case c == 'n':
		return s.literal("null", jsonNull)
	default:
		return nil, s.errorf(s.pos, "unexpected %s: want a value", s.describe(s.pos))
	}
}

func (s *jsonScanner) literal(word string, kind jsonKind) (*jnode, error) {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(word)) {
		return nil, s.errorf(s.pos, "unexpected %s: want a value", s.describe(s.pos))
	}
	n := &jnode{kind: kind, start: s.pos, end: s.pos + len(word)}
	s.pos += len(word)
	return n, nil
}

func (s *jsonScanner) object(depth int) (*jnode, error) {
	n := &jnode{kind: jsonObject, start: s.pos}
	s.pos++ // {
	for {
		if err := s.space(); err != nil {
			return nil, err
		}
		if s.pos >= len(s.data) {
			return nil, s.errorf(s.pos, "unexpected end of file: object not closed, want }")
		}
		if s.data[s.pos] == '}' {
			if len(n.members) > 0 && !s.jsonc && s.data[s.lastNonSpace()] == ',' {
				return nil, s.errorf(s.lastNonSpace(), "comma after the last member")
			}
			s.pos++
			n.end = s.pos
			return n, nil
		}
		if s.data[s.pos] != '"' {
			return nil, s.errorf(s.pos, "unexpected %s: want a member name in double quotes", s.describe(s.pos))
		}
		m := jmember{keyStart: s.pos}
		key, err := s.str()
		if err != nil {
			return nil, err
		}
		m.key, m.keyEnd = key, s.pos
		if err := s.space(); err != nil {
			return nil, err
		}
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return nil, s.errorf(s.pos, "unexpected %s: want : after member name", s.describe(s.pos))
		}
		s.pos++
		if err := s.space(); err != nil {
			return nil, err
		}
		if m.val, err = s.value(depth + 1); err != nil {
			return nil, err
		}
		n.members = append(n.members, m)
		if err := s.space(); err != nil {
			return nil, err
		}
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == '}' {
			continue
		}
		return nil, s.errorf(s.pos, "unexpected %s: want , or } after object member", s.describe(s.pos))
	}
}

// lastNonSpace is the offset of the last byte before pos that is not
// whitespace (comments are not looked through: only strict JSON asks).
func (s *jsonScanner) lastNonSpace() int {
	i := s.pos - 1
	for i > 0 && (s.data[i] == ' ' || s.data[i] == '\t' || s.data[i] == '\n' || s.data[i] == '\r') {
		i--
	}
	return i
}

func (s *jsonScanner) array(depth int) (*jnode, error) {
	n := &jnode{kind: jsonArray, start: s.pos}
	s.pos++ // [
	for {
		if err := s.space(); err != nil {
			return nil, err
		}
		if s.pos >= len(s.data) {
			return nil, s.errorf(s.pos, "unexpected end of file: array not closed, want ]")
		}
		if s.data[s.pos] == ']' {
			if len(n.elems) > 0 && !s.jsonc && s.data[s.lastNonSpace()] == ',' {
				return nil, s.errorf(s.lastNonSpace(), "comma after the last element")
			}
			s.pos++
			n.end = s.pos
			return n, nil
		}
		v, err := s.value(depth + 1)
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, v)
		if err := s.space(); err != nil {
			return nil, err
		}
		if s.pos < len(s.data) && s.data[s.pos] == ',' {
			s.pos++
			continue
		}
		if s.pos < len(s.data) && s.data[s.pos] == ']' {
			continue
		}
		return nil, s.errorf(s.pos, "unexpected %s: want , or ] after array element", s.describe(s.pos))
	}
}

// str scans a string starting at its opening quote and returns its text.
func (s *jsonScanner) str() (string, error) {
	start := s.pos
	s.pos++ // "
	var b []byte
	plain := s.pos // start of the run not yet copied to b
	for {
		if s.pos >= len(s.data) {
			return "", s.errorf(start, "string not closed: want \"")
		}
		c := s.data[s.pos]
		switch {
		case c == '"':
			var out string
			if b == nil {
				out = string(s.data[plain:s.pos])
			} else {
				out = string(append(b, s.data[plain:s.pos]...))
			}
			s.pos++
			return out, nil
		case c < 0x20:
			return "", s.errorf(s.pos, "control character %s in string: write it as an escape", strconv.QuoteRune(rune(c)))
		case c == '\\':
			b = append(b, s.data[plain:s.pos]...)
			if s.pos+1 >= len(s.data) {
				return "", s.errorf(start, "string not closed: want \"")
			}
			e := s.data[s.pos+1]
			s.pos += 2
			switch e {
			case '"', '\\', '/':
				b = append(b, e)
			case 'b':
				b = append(b, '\b')
			case 'f':
				b = append(b, '\f')
			case 'n':
				b = append(b, '\n')
			case 'r':
				b = append(b, '\r')
			case 't':
				b = append(b, '\t')
			case 'u':
				r, ok := s.hex4()
				if !ok {
					return "", s.errorf(s.pos-2, "invalid \\u escape: want four hex digits")
				}
				if utf16.IsSurrogate(r) {
					// A pair makes one character; a lone half is kept as
					// the replacement character, as JavaScript's strings
					// would carry it through.
					save := s.pos
					if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
						s.pos += 2
						if r2, ok := s.hex4(); ok && utf16.DecodeRune(r, r2) != utf8.RuneError {
							r = utf16.DecodeRune(r, r2)
						} else {
							s.pos = save
							r = utf8.RuneError
						}
					} else {
						r = utf8.RuneError
					}
				}
				b = utf8.AppendRune(b, r)
			default:
				return "", s.errorf(s.pos-2, "invalid escape %s in string", strconv.Quote(string([]byte{'\\', e})))
			}
			plain = s.pos
		default:
			s.pos++
		}
	}
}

func (s *jsonScanner) hex4() (rune, bool) {
	if s.pos+4 > len(s.data) {
		return 0, false
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 16)
	if err != nil {
		return 0, false
	}
	s.pos += 4
	return rune(v), true
}

func (s *jsonScanner) number() error {
	start := s.pos
	if s.data[s.pos] == '-' {
		s.pos++
	}
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return s.errorf(start, "invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return s.errorf(start, "invalid number: want digits after the decimal point")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return s.errorf(start, "invalid number: want digits in the exponent")
		}
	}
	return nil
}

// member returns the member called key, or nil. A key given more than once
// is an error: clients disagree on which one counts, so Gatehouse edits
// neither.
func (n *jnode) member(data []byte, key string) (*jmember, error) {
	var found *jmember
	for i := range n.members {
		if n.members[i].key != key {
			continue
		}
		if found != nil {
			line, col := position(data, n.members[i].keyStart)
			return nil, &SyntaxError{Line: line, Column: col, Offset: n.members[i].keyStart,
				Msg: fmt.Sprintf("%q is given twice in the same object", key)}
		}
		found = &n.members[i]
	}
	return found, nil
}

// plain returns the value as Go data (map[string]any, []any, string, bool,
// nil, and numbers as their text), for comparing two values for meaning
// rather than bytes.
func (n *jnode) plain(data []byte) any {
	switch n.kind {
	case jsonObject:
		m := make(map[string]any, len(n.members))
		for _, mb := range n.members {
			m[mb.key] = mb.val.plain(data)
		}
		return m
	case jsonArray:
		a := make([]any, len(n.elems))
		for i, e := range n.elems {
			a[i] = e.plain(data)
		}
		return a
	case jsonString:
		return n.str
	case jsonNumber:
		f, err := strconv.ParseFloat(string(data[n.start:n.end]), 64)
		if err != nil {
			return string(data[n.start:n.end])
		}
		return f
	case jsonBool:
		return data[n.start] == 't'
	}
	return nil
}
