package clients

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// This file finds where the tables and keys of a TOML file sit, by line and
// byte, so that governing Codex's config.toml rewrites one
// [mcp_servers.NAME] table and leaves every other byte alone. It does not
// check everything TOML forbids (the file is decoded by a full TOML parser
// first); it only has to find the structure of a valid file, and never to
// panic or loop on an invalid one.

// A tomlDoc is a TOML file's tables in file order. tables[0] is the root
// table: the keys before the first header.
type tomlDoc struct {
	tables []*tomlTable
}

// A tomlTable is a [header] or [[header]] and the key/value lines under it.
type tomlTable struct {
	path      []string // nil for the root table
	array     bool     // [[header]]
	start     int      // offset of the start of the header's line
	headerEnd int      // offset after the header's line (its newline included)
	end       int      // offset after the line of its last key/value, or headerEnd
	kvs       []tomlKV
}

// A tomlKV is one key = value. In a table, start and end cover its whole
// lines (indentation, trailing comment and newline included); inside an
// inline table, the key's first byte to the value's last.
type tomlKV struct {
	key        []string // dotted key, each part unquoted
	start, end int
	val        *tomlValue
}

type tomlKind uint8

const (
	tomlString tomlKind = iota + 1
	tomlArray
	tomlInline // { inline table }
	tomlOther  // numbers, booleans, dates
)

// A tomlValue is a value and its span [start, end).
type tomlValue struct {
	kind       tomlKind
	start, end int
	str        string // tomlString: the decoded text
	literal    bool   // tomlString: in single quotes
	multiline  bool   // tomlString: in triple quotes
	kvs        []tomlKV
	elems      []*tomlValue
}

type tomlScanner struct {
	data []byte
	pos  int
}

const maxTOMLDepth = 1000

func scanTOML(data []byte) (*tomlDoc, error) {
	s := &tomlScanner{data: data}
	if bytes.HasPrefix(data, []byte("\xef\xbb\xbf")) {
		s.pos = 3
	}
	cur := &tomlTable{start: 0, headerEnd: s.pos, end: s.pos}
	doc := &tomlDoc{tables: []*tomlTable{cur}}
	for {
		// Blank lines and comment lines.
		lineStart := s.pos
		s.blanks()
		if s.pos >= len(s.data) {
			return doc, nil
		}
		switch c := s.data[s.pos]; {
		case c == '\n':
			s.pos++
			continue
		case c == '\r' && s.pos+1 < len(s.data) && s.data[s.pos+1] == '\n':
			s.pos += 2
			continue
		case c == '#':
			if err := s.endOfLine(); err != nil {
				return nil, err
			}
			continue
		case c == '[':
			t := &tomlTable{start: lineStart}
			s.pos++
			if s.pos < len(s.data) && s.data[s.pos] == '[' {
				t.array = true
				s.pos++
			}
			s.blanks()
			path, err := s.key()
			if err != nil {
				return nil, err
			}
			t.path = path
			s.blanks()
			closing := "]"
			if t.array {
				closing = "]]"
			}
			if !bytes.HasPrefix(s.data[s.pos:], []byte(closing)) {
				return nil, s.errorf(s.pos, "unexpected %s: want %s to close the table header", s.describe(), closing)
			}
			s.pos += len(closing)
			if err := s.endOfLine(); err != nil {
				return nil, err
			}
			t.headerEnd, t.end = s.pos, s.pos
			doc.tables = append(doc.tables, t)
			cur = t
		default:
			kv, err := s.keyValue(0)
			if err != nil {
				return nil, err
			}
			if err := s.endOfLine(); err != nil {
				return nil, err
			}
			kv.start, kv.end = lineStart, s.pos
			cur.kvs = append(cur.kvs, kv)
			cur.end = s.pos
		}
	}
}

func (s *tomlScanner) errorf(offset int, format string, args ...any) error {
	line, col := position(s.data, offset)
	return &SyntaxError{Line: line, Column: col, Offset: offset, Msg: fmt.Sprintf(format, args...)}
}

func (s *tomlScanner) describe() string {
	if s.pos >= len(s.data) {
		return "end of file"
	}
	if s.data[s.pos] == '\n' {
		return "end of line"
	}
	r, _ := utf8.DecodeRune(s.data[s.pos:])
	if r == utf8.RuneError {
		return fmt.Sprintf("byte 0x%02x", s.data[s.pos])
	}
	return strconv.QuoteRune(r)
}

// blanks skips spaces and tabs.
func (s *tomlScanner) blanks() {
	for s.pos < len(s.data) && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t') {
		s.pos++
	}
}

// endOfLine accepts blanks, an optional comment and the end of the line,
// and moves past the newline.
func (s *tomlScanner) endOfLine() error {
	s.blanks()
	if s.pos < len(s.data) && s.data[s.pos] == '#' {
		i := bytes.IndexByte(s.data[s.pos:], '\n')
		if i < 0 {
			s.pos = len(s.data)
			return nil
		}
		s.pos += i + 1
		return nil
	}
	if s.pos >= len(s.data) {
		return nil
	}
	if s.data[s.pos] == '\n' {
		s.pos++
		return nil
	}
	if s.data[s.pos] == '\r' && s.pos+1 < len(s.data) && s.data[s.pos+1] == '\n' {
		s.pos += 2
		return nil
	}
	return s.errorf(s.pos, "unexpected %s: want the end of the line", s.describe())
}

// space skips whitespace, newlines and comments: what may separate the
// elements of an array.
func (s *tomlScanner) space() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		case '#':
			i := bytes.IndexByte(s.data[s.pos:], '\n')
			if i < 0 {
				s.pos = len(s.data)
			} else {
				s.pos += i + 1
			}
		default:
			return
		}
	}
}

func isBareKeyByte(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// key scans a dotted key.
func (s *tomlScanner) key() ([]string, error) {
	var parts []string
	for {
		s.blanks()
		if s.pos >= len(s.data) {
			return nil, s.errorf(s.pos, "unexpected end of file: want a key")
		}
		switch c := s.data[s.pos]; {
		case c == '"' || c == '\'':
			if bytes.HasPrefix(s.data[s.pos:], []byte{c, c, c}) {
				return nil, s.errorf(s.pos, "a key cannot be a multi-line string")
			}
			v, err := s.quoted(c, false)
			if err != nil {
				return nil, err
			}
			parts = append(parts, v.str)
		case isBareKeyByte(c):
			start := s.pos
			for s.pos < len(s.data) && isBareKeyByte(s.data[s.pos]) {
				s.pos++
			}
			parts = append(parts, string(s.data[start:s.pos]))
		default:
			return nil, s.errorf(s.pos, "unexpected %s: want a key", s.describe())
		}
		s.blanks()
		if s.pos < len(s.data) && s.data[s.pos] == '.' {
			s.pos++
			continue
		}
		return parts, nil
	}
}

func (s *tomlScanner) keyValue(depth int) (tomlKV, error) {
	start := s.pos
	key, err := s.key()
	if err != nil {
		return tomlKV{}, err
	}
	if s.pos >= len(s.data) || s.data[s.pos] != '=' {
		return tomlKV{}, s.errorf(s.pos, "unexpected %s: want = after the key", s.describe())
	}
	s.pos++
	s.blanks()
	v, err := s.value(depth)
	if err != nil {
		return tomlKV{}, err
	}
	return tomlKV{key: key, start: start, end: v.end, val: v}, nil
}

func (s *tomlScanner) value(depth int) (*tomlValue, error) {
	if depth > maxTOMLDepth {
		return nil, s.errorf(s.pos, "nested more than %d deep", maxTOMLDepth)
	}
	if s.pos >= len(s.data) {
		return nil, s.errorf(s.pos, "unexpected end of file: want a value")
	}
	start := s.pos
	switch c := s.data[s.pos]; c {
	case '"', '\'':
		multi := bytes.HasPrefix(s.data[s.pos:], []byte{c, c, c})
		return s.quoted(c, multi)
	case '[':
		v := &tomlValue{kind: tomlArray, start: start}
		s.pos++
		for {
			s.space()
			if s.pos >= len(s.data) {
				return nil, s.errorf(start, "array not closed: want ]")
			}
			if s.data[s.pos] == ']' {
				s.pos++
				v.end = s.pos
				return v, nil
			}
			e, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			v.elems = append(v.elems, e)
			s.space()
			if s.pos < len(s.data) && s.data[s.pos] == ',' {
				s.pos++
				continue
			}
			if s.pos < len(s.data) && s.data[s.pos] == ']' {
				continue
			}
			return nil, s.errorf(s.pos, "unexpected %s: want , or ] in the array", s.describe())
		}
	case '{':
		v := &tomlValue{kind: tomlInline, start: start}
		s.pos++
		for {
			s.space()
			if s.pos >= len(s.data) {
				return nil, s.errorf(start, "inline table not closed: want }")
			}
			if s.data[s.pos] == '}' {
				s.pos++
				v.end = s.pos
				return v, nil
			}
			kv, err := s.keyValue(depth + 1)
			if err != nil {
				return nil, err
			}
			v.kvs = append(v.kvs, kv)
			s.space()
			if s.pos < len(s.data) && s.data[s.pos] == ',' {
				s.pos++
				continue
			}
			if s.pos < len(s.data) && s.data[s.pos] == '}' {
				continue
			}
			return nil, s.errorf(s.pos, "unexpected %s: want , or } in the inline table", s.describe())
		}
	default:
		// A number, boolean or date: up to what ends a value. A date may
		// hold one space between its day and its time.
		for s.pos < len(s.data) {
			c := s.data[s.pos]
			if c == ',' || c == ']' || c == '}' || c == '#' || c == '\n' || c == '\r' || c == '\t' || c == '[' || c == '{' || c == '"' || c == '\'' || c == '=' {
				break
			}
			if c == ' ' && !(s.pos+1 < len(s.data) && s.data[s.pos+1] >= '0' && s.data[s.pos+1] <= '9' && s.pos > start && s.data[s.pos-1] >= '0' && s.data[s.pos-1] <= '9') {
				break
			}
			s.pos++
		}
		if s.pos == start {
			return nil, s.errorf(s.pos, "unexpected %s: want a value", s.describe())
		}
		return &tomlValue{kind: tomlOther, start: start, end: s.pos}, nil
	}
}

// quoted scans a string in quote q ('"' basic, '\” literal), multi-line when
// multi, starting at its opening quote.
func (s *tomlScanner) quoted(q byte, multi bool) (*tomlValue, error) {
	start := s.pos
	v := &tomlValue{kind: tomlString, start: start, literal: q == '\'', multiline: multi}
	open := 1
	if multi {
		open = 3
	}
	s.pos += open
	if multi {
		// A newline right after the opening quotes is not part of the text.
		if bytes.HasPrefix(s.data[s.pos:], []byte("\r\n")) {
			s.pos += 2
		} else if s.pos < len(s.data) && s.data[s.pos] == '\n' {
			s.pos++
		}
	}
	var b strings.Builder
	for {
		if s.pos >= len(s.data) {
			return nil, s.errorf(start, "string not closed: want %s", strings.Repeat(string(q), open))
		}
		c := s.data[s.pos]
		switch {
		case c == q && !multi:
			s.pos++
			v.end, v.str = s.pos, b.String()
			return v, nil
		case c == q && bytes.HasPrefix(s.data[s.pos:], []byte{q, q, q}):
			// Up to two more quotes just before the closing three are text.
			n := 3
			for n < 5 && s.pos+n < len(s.data) && s.data[s.pos+n] == q {
				n++
			}
			b.Write(s.data[s.pos : s.pos+n-3])
			s.pos += n
			v.end, v.str = s.pos, b.String()
			return v, nil
		case c == '\n' && !multi:
			return nil, s.errorf(s.pos, "newline in a single-line string")
		case c == '\\' && q == '"':
			if err := s.escape(&b, multi); err != nil {
				return nil, err
			}
		case c == '\r' && multi && s.pos+1 < len(s.data) && s.data[s.pos+1] == '\n':
			b.WriteString("\r\n")
			s.pos += 2
		case c < 0x20 && c != '\t' && !(c == '\n' && multi) || c == 0x7f:
			return nil, s.errorf(s.pos, "control character %s in a string", strconv.QuoteRune(rune(c)))
		default:
			b.WriteByte(c)
			s.pos++
		}
	}
}

// escape decodes the escape at s.pos in a basic string.
func (s *tomlScanner) escape(b *strings.Builder, multi bool) error {
	at := s.pos
	if s.pos+1 >= len(s.data) {
		return s.errorf(at, "string not closed")
	}
	e := s.data[s.pos+1]
	s.pos += 2
	switch e {
	case 'b':
		b.WriteByte('\b')
	case 't':
		b.WriteByte('\t')
	case 'n':
		b.WriteByte('\n')
	case 'f':
		b.WriteByte('\f')
	case 'r':
		b.WriteByte('\r')
	case 'e':
		b.WriteByte(0x1b)
	case '"':
		b.WriteByte('"')
	case '\\':
		b.WriteByte('\\')
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if s.pos+n > len(s.data) {
			return s.errorf(at, "invalid \\%c escape: want %d hex digits", e, n)
		}
		r, err := strconv.ParseUint(string(s.data[s.pos:s.pos+n]), 16, 32)
		if err != nil || !utf8.ValidRune(rune(r)) {
			return s.errorf(at, "invalid \\%c escape", e)
		}
		s.pos += n
		b.WriteRune(rune(r))
	case ' ', '\t', '\r', '\n':
		// In a multi-line string, a backslash at the end of a line
		// removes the newline and the whitespace after it.
		if !multi {
			return s.errorf(at, "invalid escape in a string")
		}
		s.pos--
		for s.pos < len(s.data) && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t') {
			s.pos++
		}
		if !(s.pos < len(s.data) && (s.data[s.pos] == '\n' || s.data[s.pos] == '\r')) {
			return s.errorf(at, "invalid escape in a string: a backslash must end the line")
		}
		for s.pos < len(s.data) && (s.data[s.pos] == ' ' || s.data[s.pos] == '\t' || s.data[s.pos] == '\n' || s.data[s.pos] == '\r') {
			s.pos++
		}
	default:
		return s.errorf(at, "invalid escape \\%c in a string", e)
	}
	return nil
}
