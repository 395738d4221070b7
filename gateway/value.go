package gateway

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// This file is the one strict reading of JSON: every message the proxy
// relays, in both directions, every tool definition it pins and every set of
// arguments the policy checks is read by [ReadValue] and nothing else.
//
// A governed gateway is only as strong as the agreement between what it
// judged and what the other side reads, and the readers on the other side
// differ: JavaScript's JSON.parse (most MCP servers and clients) takes the
// last of a repeated member and keeps lone surrogates; Go's encoding/json
// matches member names in any case ("Method" is the method, "ſ" folds to
// "s") and turns invalid UTF-8 into U+FFFD; Python's json keeps the last
// member, reads 1e400 as infinity and -0 as 0. So ReadValue accepts only
// what they all read alike, and refuses the rest with an error that says
// why:
//
//   - member names match exactly; an object whose member names repeat, or
//     are equal once case, width (NFKC) and invisible characters are
//     folded away, is refused;
//   - text is UTF-8, with no control characters and no lone surrogate
//     escapes;
//   - numbers are JSON's, within float64's range;
//   - nesting is bounded ([MaxDepth]) and read without recursion, so no
//     input can exhaust the stack;
//   - nothing follows the value but white space.
//
// A [Value] is a view of bytes that were read so: navigating it never fails
// and never reads them another way.

// MaxDepth bounds how deeply arrays and objects may nest in one message.
// MCP messages nest a few levels; JSON schemas a few more.
const MaxDepth = 128

// A ReadError says why bytes are not JSON the gate can read one way.
type ReadError struct {
	Offset int    // of the byte where reading stopped
	Reason string // what is wrong there
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("%s (at byte %d)", e.Reason, e.Offset)
}

// errDepth is the Reason of a ReadError for input nested too deeply.
var errDepth = fmt.Sprintf("nested more than %d levels deep", MaxDepth)

// A Kind is the type of a JSON value.
type Kind uint8

// Kinds of JSON values.
const (
	Invalid Kind = iota // the zero Value
	Null
	Bool
	Number
	String
	Array
	Object
)

// A Value is one JSON value that [ReadValue] accepted: a view of its bytes,
// without leading or trailing white space. The zero Value is Invalid.
type Value struct{ raw []byte }

// ReadValue reads b as one JSON value, strictly (see the rules above). The
// Value refers to b, which must not change while it is in use.
func ReadValue(b []byte) (Value, error) {
	start, end, err := check(b)
	if err != nil {
		return Value{}, err
	}
	return Value{raw: b[start:end]}, nil
}

// Raw returns the value's bytes, exactly as they were read.
func (v Value) Raw() []byte { return v.raw }

// Kind returns the type of the value.
func (v Value) Kind() Kind {
	if len(v.raw) == 0 {
		return Invalid
	}
	switch v.raw[0] {
	case 'n':
		return Null
	case 't', 'f':
		return Bool
	case '"':
		return String
	case '[':
		return Array
	case '{':
		return Object
	}
	return Number
}

// Text returns the string a String value holds, escapes decoded.
func (v Value) Text() (string, bool) {
	if v.Kind() != String {
		return "", false
	}
	return unquote(v.raw), true
}

// Bool returns the value of true or false.
func (v Value) Bool() (b, ok bool) {
	if v.Kind() != Bool {
		return false, false
	}
	return v.raw[0] == 't', true
}

// Int returns an integral Number that float64 holds exactly (as every reader
// on the other side holds it), without fraction or exponent.
func (v Value) Int() (int64, bool) {
	if v.Kind() != Number {
		return 0, false
	}
	n, err := strconv.ParseInt(string(v.raw), 10, 64)
	if err != nil || n > 1<<53 || n < -(1<<53) {
		return 0, false
	}
	return n, true
}

// Get returns the member of an Object called name, exactly.
func (v Value) Get(name string) (Value, bool) {
	raw := v.raw
	for k, span := range v.memberSpans() {
		if keyIs(raw[k[0]:k[1]], name) {
			return Value{raw: raw[span[0]:span[1]]}, true
		}
	}
	return Value{}, false
}

// keyIs reports whether the quoted name q is name, decoding it only when it
// holds escapes.
func keyIs(q []byte, name string) bool {
	inner := q[1 : len(q)-1]
	if bytes.IndexByte(inner, '\\') < 0 {
		return string(inner) == name
	}
	return unquote(q) == name
}

// Path returns the value at a path of member names, or false.
func (v Value) Path(names ...string) (Value, bool) {
	for _, n := range names {
		var ok bool
		if v, ok = v.Get(n); !ok {
			return Value{}, false
		}
	}
	return v, true
}

// Members yields an Object's member names (decoded) and values, in order.
func (v Value) Members() iter.Seq2[string, Value] {
	return func(yield func(string, Value) bool) {
		if v.Kind() != Object {
			return
		}
		b := v.raw
		i := skipSpace(b, 1)
		for i < len(b) && b[i] == '"' {
			kend := skipString(b, i)
			key := unquote(b[i:kend])
			i = skipSpace(b, kend)
			i = skipSpace(b, i+1) // the colon
			end := skipValue(b, i)
			if !yield(key, Value{raw: b[i:end]}) {
				return
			}
			i = skipSpace(b, end)
			if b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// memberSpans yields each member of an Object with the spans of its name
// (with quotes) and of its value in v.Raw(), for rewriting it in place.
func (v Value) memberSpans() iter.Seq2[[2]int, [2]int] {
	return func(yield func([2]int, [2]int) bool) {
		if v.Kind() != Object {
			return
		}
		b := v.raw
		i := skipSpace(b, 1)
		for i < len(b) && b[i] == '"' {
			kend := skipString(b, i)
			key := [2]int{i, kend}
			i = skipSpace(b, kend)
			i = skipSpace(b, i+1)
			end := skipValue(b, i)
			if !yield(key, [2]int{i, end}) {
				return
			}
			i = skipSpace(b, end)
			if b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// Elements yields an Array's elements, in order.
func (v Value) Elements() iter.Seq[Value] {
	return func(yield func(Value) bool) {
		if v.Kind() != Array {
			return
		}
		b := v.raw
		i := skipSpace(b, 1)
		for i < len(b) && b[i] != ']' {
			end := skipValue(b, i)
			if !yield(Value{raw: b[i:end]}) {
				return
			}
			i = skipSpace(b, end)
			if b[i] != ',' {
				return
			}
			i = skipSpace(b, i+1)
		}
	}
}

// Interface returns the value as Go values: map[string]any, []any, string,
// json.Number, bool or nil. It walks without recursion deeper than the
// value's own nesting, which ReadValue bounded.
func (v Value) Interface() any {
	switch v.Kind() {
	case Null:
		return nil
	case Bool:
		b, _ := v.Bool()
		return b
	case Number:
		return json.Number(v.raw)
	case String:
		s, _ := v.Text()
		return s
	case Array:
		a := []any{}
		for e := range v.Elements() {
			a = append(a, e.Interface())
		}
		return a
	case Object:
		m := map[string]any{}
		for k, e := range v.Members() {
			m[k] = e.Interface()
		}
		return m
	}
	return nil
}

// check reads b strictly and returns the span of its one value. It keeps
// its own stack of open arrays and objects, so that depth costs memory it
// bounds, not the goroutine's stack.
func check(b []byte) (start, end int, err error) {
	type level struct {
		object bool
		first  int                 // of its member names in names
		set    map[string]struct{} // its folded names, once there are many
	}
	fail := func(i int, format string, args ...any) (int, int, error) {
		return 0, 0, &ReadError{Offset: i, Reason: fmt.Sprintf(format, args...)}
	}
	var (
		buf   [8]level
		stack = buf[:0]
		names []memberName // of every open object, innermost last
	)
	i := skipSpace(b, 0)
	start = i
	for {
		// A value starts at b[i].
		if i >= len(b) {
			return fail(i, "the JSON ends too early")
		}
		switch c := b[i]; {
		case c == '{' || c == '[':
			if len(stack) == MaxDepth {
				return fail(i, "%s", errDepth)
			}
			stack = append(stack, level{object: c == '{', first: len(names)})
			i = skipSpace(b, i+1)
			if i < len(b) && (c == '{' && b[i] == '}' || c == '[' && b[i] == ']') {
				stack = stack[:len(stack)-1]
				i++
				break
			}
			if c == '{' {
				var err error
				top := &stack[len(stack)-1]
				if i, err = readName(b, i, &names, top.first, &top.set); err != nil {
					return 0, 0, err
				}
			}
			continue
		case c == '"':
			j, err := checkString(b, i)
			if err != nil {
				return 0, 0, err
			}
			i = j
		case c == '-' || c >= '0' && c <= '9':
			j, err := checkNumber(b, i)
			if err != nil {
				return 0, 0, err
			}
			i = j
		case c == 't' && hasPrefixAt(b, i, "true"):
			i += 4
		case c == 'f' && hasPrefixAt(b, i, "false"):
			i += 5
		case c == 'n' && hasPrefixAt(b, i, "null"):
			i += 4
		default:
			return fail(i, "%s is not the start of a JSON value", describeByte(b, i))
		}
		// A value ended at b[i]: close what it ends, then find the next.
		for {
			i = skipSpace(b, i)
			if len(stack) == 0 {
				if i != len(b) {
					return fail(i, "%s follows the JSON value", describeByte(b, i))
				}
				return start, skipSpaceBack(b), nil
			}
			top := &stack[len(stack)-1]
			if i >= len(b) {
				return fail(i, "the JSON ends too early")
			}
			if b[i] == ',' {
				i = skipSpace(b, i+1)
				if top.object {
					var err error
					if i, err = readName(b, i, &names, top.first, &top.set); err != nil {
						return 0, 0, err
					}
				}
				break
			}
			if top.object && b[i] == '}' || !top.object && b[i] == ']' {
				names = names[:top.first]
				stack = stack[:len(stack)-1]
				i++
				continue
			}
			what := "array"
			if top.object {
				what = "object"
			}
			return fail(i, "%s where a comma or the end of the %s belongs", describeByte(b, i), what)
		}
	}
}

// A memberName is a member name as written (without quotes) and, unless it
// is plain ASCII without escapes, folded.
type memberName struct {
	raw    []byte
	folded string // "" for a plain name: compare raw, ignoring ASCII case
}

func (n memberName) fold() string {
	if n.folded != "" || n.raw == nil {
		return n.folded
	}
	return strings.ToLower(string(n.raw))
}

func (n memberName) same(m memberName) bool {
	if n.folded == "" && m.folded == "" {
		return len(n.raw) == len(m.raw) && bytes.EqualFold(n.raw, m.raw)
	}
	return n.fold() == m.fold()
}

// readName reads a member name and its colon at b[i], and refuses one that
// another name of the same object (names[first:]) already has, once folded.
// It returns where the member's value starts.
func readName(b []byte, i int, names *[]memberName, first int, set *map[string]struct{}) (int, error) {
	if i >= len(b) || b[i] != '"' {
		return 0, &ReadError{Offset: i, Reason: fmt.Sprintf("%s where a member name belongs", describeByte(b, i))}
	}
	end, err := checkString(b, i)
	if err != nil {
		return 0, err
	}
	n := memberName{raw: b[i+1 : end-1]}
	if !plainASCII(n.raw) {
		n.folded = foldName(unquote(b[i:end]))
		if n.folded == "" {
			n.folded = "\x00" // an empty name folds to nothing; keep it apart from plain names
		}
	}
	dup := false
	if *set != nil {
		_, dup = (*set)[n.fold()]
	} else {
		for _, m := range (*names)[first:] {
			if m.same(n) {
				dup = true
				break
			}
		}
	}
	if dup {
		return 0, &ReadError{Offset: i, Reason: fmt.Sprintf("member %q is given twice (names are compared as every reader would, folding case and width)", unquote(b[i:end]))}
	}
	*names = append(*names, n)
	if *set != nil {
		(*set)[n.fold()] = struct{}{}
	} else if len(*names)-first > 16 {
		*set = make(map[string]struct{}, 2*(len(*names)-first))
		for _, m := range (*names)[first:] {
			(*set)[m.fold()] = struct{}{}
		}
	}
	j := skipSpace(b, end)
	if j >= len(b) || b[j] != ':' {
		return 0, &ReadError{Offset: j, Reason: fmt.Sprintf("%s where a colon belongs", describeByte(b, j))}
	}
	return skipSpace(b, j+1), nil
}

// plainASCII reports whether a name as written is ASCII without escapes.
func plainASCII(raw []byte) bool {
	for _, c := range raw {
		if c >= utf8.RuneSelf || c == '\\' {
			return false
		}
	}
	return true
}

// foldName folds a name as the loosest reader on the other side might before
// comparing it: NFKC (full-width letters become ASCII), invisible format
// characters dropped, and each letter put in one case (so "ſ", "S" and "s"
// are one; so are "K" and the Kelvin sign).
func foldName(s string) string {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		return strings.ToLower(s)
	}
	s = norm.NFKC.String(s)
	var f strings.Builder
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			continue
		}
		f.WriteRune(foldRune(r))
	}
	return f.String()
}

// foldRune returns the lower case of r's upper case, which is the same
// for every case variant of a letter ("ſ" and "s", "ς" and "σ").
func foldRune(r rune) rune { return unicode.ToLower(unicode.ToUpper(r)) }

// checkString checks the string that starts at b[i] (a quote) and returns
// the index just after it. It looks for the quote and the escapes with
// bytes.IndexByte, and checks the runs between them whole, which keeps it
// near memory speed on the long texts tool results carry.
func checkString(b []byte, i int) (int, error) {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return 0, &ReadError{Offset: i, Reason: "a string is not closed"}
		}
		run := b[j : j+k]
		e := bytes.IndexByte(run, '\\')
		if e < 0 {
			if err := checkRun(b, j, j+k); err != nil {
				return 0, err
			}
			return j + k + 1, nil
		}
		if err := checkRun(b, j, j+e); err != nil {
			return 0, err
		}
		n, err := checkEscape(b, j+e)
		if err != nil {
			return 0, err
		}
		j += e + n
	}
}

// checkRun checks b[from:to], a part of a string without quotes or
// escapes: UTF-8, and no control characters.
func checkRun(b []byte, from, to int) error {
	run := b[from:to]
	if utf8.Valid(run) && !hasControl(run) {
		return nil
	}
	for j := from; j < to; {
		if c := b[j]; c < 0x20 {
			return &ReadError{Offset: j, Reason: fmt.Sprintf("a string holds the control character %#02x unescaped", c)}
		}
		r, size := utf8.DecodeRune(b[j:to])
		if r == utf8.RuneError && size == 1 {
			return &ReadError{Offset: j, Reason: "a string is not valid UTF-8"}
		}
		j += size
	}
	return nil
}

// hasControl reports whether b holds a byte below 0x20, eight bytes at a
// time. (The test may also flag a byte above a real one, never one alone.)
func hasControl(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	j := 0
	for ; j+8 <= len(b); j += 8 {
		x := binary.LittleEndian.Uint64(b[j:])
		if (x-0x20*ones)&^x&highs != 0 {
			return true
		}
	}
	for ; j < len(b); j++ {
		if b[j] < 0x20 {
			return true
		}
	}
	return false
}

// checkEscape checks the escape at b[j] (a backslash) and returns its
// length. A \u escape of half a surrogate pair must be followed by the
// other half: readers differ on a lone one.
func checkEscape(b []byte, j int) (int, error) {
	if j+1 >= len(b) {
		return 0, &ReadError{Offset: j, Reason: "a string is not closed"}
	}
	switch b[j+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return 2, nil
	case 'u':
		r, ok := hex4(b, j+2)
		if !ok {
			return 0, &ReadError{Offset: j, Reason: `a \u escape needs four hex digits`}
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			if lo, ok := hex4(b, j+8); ok && j+7 < len(b) && b[j+6] == '\\' && b[j+7] == 'u' && lo >= 0xdc00 && lo <= 0xdfff {
				return 12, nil
			}
			return 0, &ReadError{Offset: j, Reason: `a \u escape holds half a surrogate pair`}
		case utf16.IsSurrogate(r):
			return 0, &ReadError{Offset: j, Reason: `a \u escape holds half a surrogate pair`}
		}
		return 6, nil
	}
	return 0, &ReadError{Offset: j, Reason: fmt.Sprintf(`%q is not a JSON escape`, "\\"+string(b[j+1]))}
}

func hex4(b []byte, i int) (rune, bool) {
	if i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// checkNumber checks the number that starts at b[i] and returns the index
// just after it. A number beyond float64's range is refused: one reader
// takes it for infinity, another for an error.
func checkNumber(b []byte, i int) (int, error) {
	j := i
	if b[j] == '-' {
		j++
	}
	digits := func() int {
		k := j
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			j++
		}
		return j - k
	}
	switch {
	case j < len(b) && b[j] == '0':
		j++
	case digits() == 0:
		return 0, &ReadError{Offset: i, Reason: "a number has no digits"}
	}
	long := j-i > 15
	if j < len(b) && b[j] == '.' {
		j++
		if digits() == 0 {
			return 0, &ReadError{Offset: i, Reason: "a number has no digits after its point"}
		}
	}
	if j < len(b) && (b[j] == 'e' || b[j] == 'E') {
		j++
		if j < len(b) && (b[j] == '+' || b[j] == '-') {
			j++
		}
		if digits() == 0 {
			return 0, &ReadError{Offset: i, Reason: "a number has no digits in its exponent"}
		}
		long = true
	}
	if long {
		if _, err := strconv.ParseFloat(string(b[i:j]), 64); errors.Is(err, strconv.ErrRange) {
			return 0, &ReadError{Offset: i, Reason: fmt.Sprintf("the number %.40s is beyond the range of the readers on the other side", b[i:j])}
		}
	}
	return j, nil
}

func hasPrefixAt(b []byte, i int, s string) bool {
	return len(b)-i >= len(s) && string(b[i:i+len(s)]) == s
}

func describeByte(b []byte, i int) string {
	if i >= len(b) {
		return "the end"
	}
	return fmt.Sprintf("%q", b[i])
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func skipSpaceBack(b []byte) int {
	j := len(b)
	for j > 0 && (b[j-1] == ' ' || b[j-1] == '\t' || b[j-1] == '\n' || b[j-1] == '\r') {
		j--
	}
	return j
}

// The skips below assume JSON that check accepted.

// skipString returns the index just after the string that starts at b[i].
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return len(b)
		}
		q := j + k
		backslashes := 0
		for p := q - 1; p > i && b[p] == '\\'; p-- {
			backslashes++
		}
		if backslashes%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the index just after the value that starts at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				i = skipString(b, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(b)
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// unquote decodes a string that check accepted, quotes included.
func unquote(q []byte) string {
	s := q[1 : len(q)-1]
	k := 0
	for k < len(s) && s[k] != '\\' {
		k++
	}
	if k == len(s) {
		return string(s)
	}
	out := make([]byte, 0, len(s))
	out = append(out, s[:k]...)
	for i := k; i < len(s); {
		if s[i] != '\\' {
			out = append(out, s[i])
			i++
			continue
		}
		switch c := s[i+1]; c {
		case 'u':
			r, _ := hex4(s, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				lo, _ := hex4(s, i+2)
				r = utf16.DecodeRune(r, lo)
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default:
			out = append(out, shortEscapes[c])
		}
		i += 2
	}
	return string(out)
}

// quote encodes s as a JSON string.
func quote(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}
