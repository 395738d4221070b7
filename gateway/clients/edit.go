package clients

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// An edit replaces the bytes [start, end) of a file with text.
type edit struct {
	start, end int
	text       []byte
}

// applyEdits returns data with the edits made. They must not overlap.
func applyEdits(data []byte, edits []edit) ([]byte, error) {
	edits = slices.Clone(edits)
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var out bytes.Buffer
	pos := 0
	for _, e := range edits {
		if e.start < pos || e.end < e.start || e.end > len(data) {
			return nil, fmt.Errorf("overlapping edits at byte %d", e.start)
		}
		out.Write(data[pos:e.start])
		out.Write(e.text)
		pos = e.end
	}
	out.Write(data[pos:])
	return out.Bytes(), nil
}

// spaceBefore returns the offset where the run of whitespace that ends at
// offset begins.
func spaceBefore(data []byte, offset int) int {
	for offset > 0 && strings.IndexByte(" \t\r\n", data[offset-1]) >= 0 {
		offset--
	}
	return offset
}

// insertMembers returns the edit that adds members (rendered by render at
// the indentation it is given) to the object obj, after its last member, in
// the style of its other members. It also returns the object's interior when
// it had no members, to put back when they are taken out again.
func insertMembers(data []byte, obj *jnode, keys []string, render func(st jsonStyle, key string) string) (edit, *string) {
	nl := newline(data)
	unit := fileUnit(data)
	if len(obj.members) > 0 {
		last := obj.members[len(obj.members)-1]
		ws := string(data[spaceBefore(data, last.keyStart):last.keyStart])
		if !strings.Contains(ws, "\n") {
			ws = " " // a one-line object
		}
		st := jsonStyle{nl: nl, indent: lineIndent(data, last.keyStart), unit: unit,
			colon: string(data[last.keyEnd:last.val.start]), multiline: strings.Contains(ws, "\n"), arrays: true}
		if strings.TrimSpace(st.colon) != ":" || strings.Contains(st.colon, "\n") {
			st.colon = ": "
		}
		var b strings.Builder
		for _, k := range keys {
			b.WriteString("," + ws + jsonQuote(k) + st.colon + render(st, k))
		}
		return edit{start: last.val.end, end: last.val.end, text: []byte(b.String())}, nil
	}
	interior := string(data[obj.start+1 : obj.end-1])
	outer := lineIndent(data, obj.start)
	st := jsonStyle{nl: nl, indent: outer + unit, unit: unit, colon: ": ", multiline: true, arrays: true}
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(nl + st.indent + jsonQuote(k) + st.colon + render(st, k))
	}
	b.WriteString(nl + outer)
	return edit{start: obj.start + 1, end: obj.end - 1, text: []byte(b.String())}, &interior
}

// removeMember returns the edit that takes member i out of obj: the exact
// inverse of insertMembers when nothing moved in between. An object left
// empty gets interior between its braces (nil: nothing).
func removeMember(obj *jnode, i int, interior *string) edit {
	ms := obj.members
	switch {
	case len(ms) == 1:
		text := ""
		if interior != nil {
			text = *interior
		}
		return edit{start: obj.start + 1, end: obj.end - 1, text: []byte(text)}
	case i > 0:
		return edit{start: ms[i-1].val.end, end: ms[i].val.end}
	default:
		return edit{start: ms[0].keyStart, end: ms[1].keyStart}
	}
}

// reindent moves the lines of b after the first from indentation from to
// indentation to (an entry put back where the file's layout changed).
func reindent(b []byte, from, to string) []byte {
	if from == to {
		return b
	}
	lines := bytes.Split(b, []byte("\n"))
	for i := 1; i < len(lines); i++ {
		if rest, ok := bytes.CutPrefix(lines[i], []byte(from)); ok {
			lines[i] = append([]byte(to), rest...)
		}
	}
	return bytes.Join(lines, []byte("\n"))
}
