package clients

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// jsonQuote writes s as a JSON string the way JavaScript's JSON.stringify
// does (which wrote most of these files): only quotes, backslashes and
// control characters are escaped.
func jsonQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			b.WriteString(`\"`)
		case c == '\\':
			b.WriteString(`\\`)
		case c == '\n':
			b.WriteString(`\n`)
		case c == '\r':
			b.WriteString(`\r`)
		case c == '\t':
			b.WriteString(`\t`)
		case c == '\b':
			b.WriteString(`\b`)
		case c == '\f':
			b.WriteString(`\f`)
		case c < 0x20:
			fmt.Fprintf(&b, `\u%04x`, c)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// newline returns the file's line ending.
func newline(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i > 0 && data[i-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}

// lineIndent returns the whitespace that starts the line holding offset.
func lineIndent(data []byte, offset int) string {
	start := bytes.LastIndexByte(data[:offset], '\n') + 1
	end := start
	for end < len(data) && (data[end] == ' ' || data[end] == '\t') {
		end++
	}
	return string(data[start:end])
}

// A jsonStyle is how a JSON file lays out an object, copied so that what
// Gatehouse writes looks like what was there.
type jsonStyle struct {
	nl        string // line ending
	indent    string // the indentation of the line the object starts on
	unit      string // one level of indentation
	colon     string // between a key and its value
	multiline bool   // members on lines of their own
	arrays    bool   // arrays on lines of their own (multiline only)
	pad       bool   // single-line: "{ " and " }"
}

// styleOf reads the style of the entry at span, whose key starts at keyAt.
func styleOf(data []byte, n *jnode, keyAt, keyEnd int) jsonStyle {
	st := jsonStyle{nl: newline(data), indent: lineIndent(data, keyAt), colon: ": ", unit: fileUnit(data)}
	if sep := string(data[keyEnd:n.start]); strings.TrimSpace(sep) == ":" && !strings.Contains(sep, "\n") {
		st.colon = sep
	}
	st.multiline = bytes.IndexByte(data[n.start:n.end], '\n') >= 0
	st.arrays = st.multiline
	if n.kind == jsonObject {
		if st.multiline && len(n.members) > 0 {
			if ind := lineIndent(data, n.members[0].keyStart); strings.HasPrefix(ind, st.indent) && len(ind) > len(st.indent) {
				st.unit = ind[len(st.indent):]
			}
		}
		if !st.multiline && n.end-n.start > 2 {
			st.pad = data[n.start+1] == ' '
		}
		found := false
		for _, m := range n.members {
			if m.val.kind == jsonArray && len(m.val.elems) > 0 {
				st.arrays = bytes.IndexByte(data[m.val.start:m.val.end], '\n') >= 0
				found = true
				break
			}
		}
		if !found {
			// The entry has no list: lay one out as the file's first does.
			if inline, ok := firstArray(data); ok {
				st.arrays = st.multiline && !inline
			}
		}
	}
	return st
}

// firstArray reports whether the file's first non-empty list of strings is
// on one line.
func firstArray(data []byte) (inline, found bool) {
	root, err := parseJSON(data, true)
	if err != nil {
		return false, false
	}
	var walk func(n *jnode) (bool, bool)
	walk = func(n *jnode) (bool, bool) {
		if n.kind == jsonArray && len(n.elems) > 0 && !slices.ContainsFunc(n.elems, func(e *jnode) bool { return e.kind != jsonString }) {
			return bytes.IndexByte(data[n.start:n.end], '\n') < 0, true
		}
		for _, m := range n.members {
			if in, ok := walk(m.val); ok {
				return in, ok
			}
		}
		for _, e := range n.elems {
			if in, ok := walk(e); ok {
				return in, ok
			}
		}
		return false, false
	}
	return walk(root)
}

// fileUnit guesses a file's indentation unit from its first indented line.
func fileUnit(data []byte) string {
	for rest := data; len(rest) > 0; {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		i := 0
		for i < len(line) && (line[i] == ' ' || line[i] == '\t') {
			i++
		}
		if i > 0 && i < len(line) && line[i] != '\r' {
			if line[0] == '\t' {
				return "\t"
			}
			return strings.Repeat(" ", min(i, 8))
		}
	}
	return "  "
}

// A jfield is one member of an object Gatehouse writes: a string, a list of
// strings, an object of strings, or bytes copied from the file.
type jfield struct {
	key  string
	str  *string
	list []string
	obj  []kv
	sub  []jfield // a nested object
	raw  []byte
}

func strField(k, v string) jfield { return jfield{key: k, str: &v} }

// object renders members as an object whose first line is at level levels
// below the style's indentation.
func (st jsonStyle) object(fields []jfield, level int) string {
	if len(fields) == 0 {
		return "{}"
	}
	var b strings.Builder
	if !st.multiline {
		b.WriteString("{")
		if st.pad {
			b.WriteString(" ")
		}
		for i, f := range fields {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(jsonQuote(f.key) + st.colon + st.value(f, level+1))
		}
		if st.pad {
			b.WriteString(" ")
		}
		b.WriteString("}")
		return b.String()
	}
	inner := st.indent + strings.Repeat(st.unit, level+1)
	b.WriteString("{")
	for i, f := range fields {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(st.nl + inner + jsonQuote(f.key) + st.colon + st.value(f, level+1))
	}
	b.WriteString(st.nl + st.indent + strings.Repeat(st.unit, level) + "}")
	return b.String()
}

func (st jsonStyle) value(f jfield, level int) string {
	switch {
	case f.raw != nil:
		return string(f.raw)
	case f.str != nil:
		return jsonQuote(*f.str)
	case f.list != nil:
		if len(f.list) == 0 {
			return "[]"
		}
		if !st.multiline || !st.arrays {
			q := make([]string, len(f.list))
			for i, s := range f.list {
				q[i] = jsonQuote(s)
			}
			return "[" + strings.Join(q, ", ") + "]"
		}
		inner := st.indent + strings.Repeat(st.unit, level+1)
		var b strings.Builder
		b.WriteString("[")
		for i, s := range f.list {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(st.nl + inner + jsonQuote(s))
		}
		b.WriteString(st.nl + st.indent + strings.Repeat(st.unit, level) + "]")
		return b.String()
	case f.obj != nil:
		sub := make([]jfield, len(f.obj))
		for i, e := range f.obj {
			sub[i] = strField(e.k, e.v)
		}
		return st.object(sub, level)
	default:
		return st.object(f.sub, level)
	}
}
