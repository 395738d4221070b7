package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/gatehouse-dev/gatehouse/internal/linediff"
)

// Everything in an approval request except the server's name comes from an
// MCP client or server, through an agent that a prompt may steer: the
// helpers below turn it into plain text that shows what it holds. Fyne's
// labels draw text as it is (no markup), so what is left is to make the
// invisible visible.

// plain returns untrusted text as it may be shown: control characters other
// than newline and tab are written as \xNN, and bidirectional controls and
// other invisible format characters (zero-width spaces, tag characters) as
// \uNNNN, so that nothing can hide, reorder or disguise what it shows. This
// is what `gatehouse approvals` prints, plus the format characters a window
// would draw as nothing at all.
func plain(s string) string {
	return escape(s, false)
}

// plainLine is plain for a one-line field (a name): a newline is escaped too.
func plainLine(s string) string {
	return escape(s, true)
}

func escape(s string, oneLine bool) string {
	var b strings.Builder
	for _, r := range s {
		switch {
		case (r == '\n' || r == '\t') && !oneLine:
			b.WriteRune(r)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\x%02x`, r)
		case invisible(r):
			fmt.Fprintf(&b, `\u%04x`, r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// invisible reports whether r is a control or format character: drawn as
// nothing, or changing how the text around it is drawn.
func invisible(r rune) bool {
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) || unicode.Is(unicode.Cf, r) ||
		r == '\u2028' || r == '\u2029'
}

// prettyJSON indents JSON for reading, two spaces a level, and makes it
// plain. JSON cut to the protocol's limit comes as a JSON string holding
// its start: that start is indented alike, and ends with an ellipsis.
func prettyJSON(raw json.RawMessage, truncated bool) string {
	if truncated {
		var start string
		if err := json.Unmarshal(raw, &start); err == nil {
			return plain(indentPartial(start)) + "…"
		}
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return plain(indentPartial(string(raw)))
	}
	return plain(buf.String())
}

// indentPartial indents the start of compact JSON the way [json.Indent]
// indents the whole.
func indentPartial(src string) string {
	var b strings.Builder
	depth := 0
	inString, escaped := false, false
	newline := func() {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat("  ", depth))
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if inString {
			b.WriteByte(c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
			b.WriteByte(c)
		case '{', '[':
			b.WriteByte(c)
			if i+1 < len(src) && (src[i+1] == '}' || src[i+1] == ']') {
				b.WriteByte(src[i+1])
				i++
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth = max(depth-1, 0)
			newline()
			b.WriteByte(c)
		case ',':
			b.WriteByte(c)
			newline()
		case ':':
			b.WriteString(": ")
		case ' ', '\t', '\n', '\r':
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// A diffOp says whether a line of a diff is in both texts, only the old one,
// or only the new one.
type diffOp int

const (
	same diffOp = iota
	removed
	added
	skipped // a run of unchanged lines left out; text says how many
)

// A diffLine is one line of a line diff.
type diffLine struct {
	op   diffOp
	text string
	// from and to bound, in bytes of text, what changed on a removed or
	// added line paired with its counterpart; both zero when the whole line
	// is new or gone.
	from, to int
}

// diffLines returns a line diff of a and b ([linediff.Lines]) with runs
// of more than 2*context unchanged lines shortened to context lines on each
// side of a change. A removed line directly followed by an added one is
// paired with it, and both mark the words that differ.
func diffLines(a, b []string, context int) []diffLine {
	d := linediff.Lines(a, b)
	out := make([]diffLine, len(d))
	for i, l := range d {
		op := same
		switch l.Op {
		case linediff.Removed:
			op = removed
		case linediff.Added:
			op = added
		}
		out[i] = diffLine{op: op, text: l.Text}
	}
	slideDown(out)
	markWords(out)
	return shorten(out, context)
}

// slideDown moves each block of lines only added or only removed, between
// unchanged lines, as far down as the same diff allows: where a block
// repeats the lines around it, the one that reads best is most often the
// last ("note": {...} added after "branch": {...}, not inside it).
func slideDown(d []diffLine) {
	for s := 0; s < len(d); {
		op := d[s].op
		if op != added && op != removed || s > 0 && d[s-1].op != same {
			s++
			continue
		}
		e := s
		for e < len(d) && d[e].op == op {
			e++
		}
		for e < len(d) && d[e].op == same && d[e].text == d[s].text {
			d[s].op, d[e].op = same, op
			s, e = s+1, e+1
		}
		s = e
	}
}

// markWords pairs each run of removed lines with the run of added lines
// right after it, line by line, and marks on each pair the span between
// their common start and common end, cut at word boundaries.
func markWords(d []diffLine) {
	for k := 0; k < len(d); {
		if d[k].op != removed {
			k++
			continue
		}
		r := k
		for k < len(d) && d[k].op == removed {
			k++
		}
		a := k
		for k < len(d) && d[k].op == added {
			k++
		}
		for n := 0; n < a-r && n < k-a; n++ {
			old, new := &d[r+n], &d[a+n]
			old.from, old.to, new.from, new.to = changedSpan(old.text, new.text)
		}
	}
}

// changedSpan returns the spans of a and b that differ, between their
// common prefix and common suffix, widened so as not to cut a word.
func changedSpan(a, b string) (aFrom, aTo, bFrom, bTo int) {
	p := 0
	for p < len(a) && p < len(b) && a[p] == b[p] {
		p++
	}
	s := 0
	for s < len(a)-p && s < len(b)-p && a[len(a)-1-s] == b[len(b)-1-s] {
		s++
	}
	for p > 0 && (midWord(a, p) || midWord(b, p)) {
		p--
	}
	for s > 0 && (midWord(a, len(a)-s) || midWord(b, len(b)-s)) {
		s--
	}
	return p, len(a) - s, p, len(b) - s
}

// midWord reports whether i, a byte offset in x, falls inside a word (or
// inside a character's encoding).
func midWord(x string, i int) bool {
	return i > 0 && i < len(x) && wordByte(x[i-1]) && wordByte(x[i])
}

func wordByte(c byte) bool {
	return c >= 0x80 || c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// shorten replaces each run of unchanged lines longer than 2*context, away
// from the changes, with one skipped line.
func shorten(d []diffLine, context int) []diffLine {
	var out []diffLine
	for k := 0; k < len(d); {
		if d[k].op != same {
			out = append(out, d[k])
			k++
			continue
		}
		end := k
		for end < len(d) && d[end].op == same {
			end++
		}
		keepBefore, keepAfter := context, context
		if k == 0 {
			keepBefore = 0 // nothing changed above
		}
		if end == len(d) {
			keepAfter = 0 // nothing changed below
		}
		if n := end - k; n > keepBefore+keepAfter+1 {
			out = append(out, d[k:k+keepBefore]...)
			out = append(out, diffLine{op: skipped, text: unchangedLines(n - keepBefore - keepAfter)})
			out = append(out, d[end-keepAfter:end]...)
		} else {
			out = append(out, d[k:end]...)
		}
		k = end
	}
	return out
}

func unchangedLines(n int) string {
	if n == 1 {
		return "1 unchanged line"
	}
	return fmt.Sprintf("%d unchanged lines", n)
}

// thousands writes n with commas between groups of three digits.
func thousands(n int) string {
	s := fmt.Sprint(n)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
