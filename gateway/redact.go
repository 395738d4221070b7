package gateway

import (
	"encoding/base64"
	"encoding/hex"
	"maps"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// A Finding is a secret the proxy found in a server's message and replaced
// before the client saw it. It never holds the value.
type Finding struct {
	Secret   string // the secret's id
	Encoding string // raw, base64, url, hex, percent, escaped, split
	Count    int
}

// minEncodedLen is the shortest secret whose encodings are looked for too:
// the encodings of very short values turn up by chance in ordinary text.
// The value itself is always looked for.
const minEncodedLen = 8

// secretSet is what one proxy session keeps out of everything it passes on
// and writes down: the values the server was started with, and every value
// the gate resolved into a call's arguments in this session (a server that
// was given a value can send it back at any time, in any channel).
type secretSet struct {
	mu     sync.Mutex
	values map[string]string // by secret id; guarded by mu
	cur    atomic.Pointer[redactor]
}

func newSecretSet(values map[string]string) *secretSet {
	s := &secretSet{}
	s.add(values)
	return s
}

// add adds values (by secret id) to the set.
func (s *secretSet) add(values map[string]string) {
	if len(values) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := false
	for id, v := range values {
		if old, ok := s.values[id]; !ok || old != v {
			if s.values == nil {
				s.values = map[string]string{}
			}
			if ok {
				id = id + "#" + strconv.Itoa(len(s.values))
			}
			s.values[id] = v
			changed = true
		}
	}
	if changed {
		s.cur.Store(newRedactor(s.values))
	}
}

// redactor returns the set's redactor now; nil when the set is empty.
func (s *secretSet) redactor() *redactor {
	if s == nil {
		return nil
	}
	return s.cur.Load()
}

// redactor finds the values of a server's secrets, and their common
// encodings, in what the server sends, and replaces them with a marker.
type redactor struct {
	patterns []pattern // longest first, so that a longer form wins an overlap
	values   []pattern // the raw values alone, looked for in decoded views
	window   int       // the longest text any form of a value takes
}

type pattern struct {
	secret, encoding, text string
}

// withParts adds, for each value that carries a credential inside it, the
// credential alone: it is what a server would echo.
//   - an HTTP authorization ("Bearer <token>", "Basic <credentials>",
//     "token <token>"): the credential;
//   - a URL or connection string with a password
//     (postgresql://app:pw@host/db): the password, as written and decoded,
//     and query values whose names say credential (?api_key=...);
//   - a flag or setting (--token=X, API_KEY=X): X.
func withParts(secrets map[string]string) map[string]string {
	var out map[string]string
	part := func(id, name, v string) {
		if len(v) < 4 {
			return
		}
		if out == nil {
			out = maps.Clone(secrets)
		}
		out[id+"#"+name] = v
	}
	for _, id := range slices.Sorted(maps.Keys(secrets)) {
		v := secrets[id]
		if scheme, cred, ok := strings.Cut(v, " "); ok && scheme != "" && !strings.ContainsAny(scheme, "\t\r\n") && len(strings.TrimSpace(cred)) >= 8 {
			part(id, "credential", strings.TrimSpace(cred))
			continue
		}
		if strings.Contains(v, "://") {
			if u, err := url.Parse(v); err == nil {
				if pw, ok := u.User.Password(); ok {
					part(id, "password", pw)
					if i := strings.LastIndexByte(u.User.String(), ':'); i >= 0 {
						part(id, "password-as-written", u.User.String()[i+1:])
					}
				}
				for k, vs := range u.Query() {
					if credentialName(k) {
						for i, qv := range vs {
							part(id, "query-"+k+"-"+strconv.Itoa(i), qv)
						}
					}
				}
				continue
			}
		}
		if k, val, ok := strings.Cut(v, "="); ok && k != "" && !strings.ContainsAny(k, " \t") {
			part(id, "value", val)
		}
	}
	if out == nil {
		return secrets
	}
	return out
}

// credentialName reports whether a query parameter's name says it carries
// a credential.
func credentialName(k string) bool {
	k = strings.ToLower(k)
	for _, w := range []string{"token", "key", "secret", "pass", "pwd", "auth", "sig", "cred", "session"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

func newRedactor(secrets map[string]string) *redactor {
	secrets = withParts(secrets)
	r := &redactor{}
	seen := map[string]bool{}
	add := func(id, enc, text string) {
		if text == "" || seen[text] {
			return
		}
		seen[text] = true
		r.patterns = append(r.patterns, pattern{id, enc, text})
		r.window = max(r.window, len(text))
	}
	for _, id := range slices.Sorted(maps.Keys(secrets)) {
		v := secrets[id]
		if len(v) < 4 {
			continue // nothing this short can be told apart from ordinary text
		}
		add(id, "raw", v)
		r.values = append(r.values, pattern{id, "raw", v})
		// A value may also be written a byte at a time: %XX or \u00XX.
		r.window = max(r.window, 6*len(v))
		if len(v) < minEncodedLen {
			continue
		}
		add(id, "url", url.QueryEscape(v))
		add(id, "url", url.PathEscape(v))
		add(id, "hex", hex.EncodeToString([]byte(v)))
		add(id, "hex", strings.ToUpper(hex.EncodeToString([]byte(v))))
		// In base64 the value's characters depend on where it starts in the
		// encoded data: look for the part that is the same for each of the
		// three alignments, in both alphabets.
		for k := range 3 {
			for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.URLEncoding} {
				b := enc.EncodeToString(append(make([]byte, k), v...))
				start := (k*8 + 5) / 6
				end := len(b)
				if (k+len(v))%3 != 0 {
					end -= 4
				}
				if end-start >= minEncodedLen {
					add(id, "base64", b[start:end])
				}
			}
		}
	}
	sort.SliceStable(r.patterns, func(i, j int) bool { return len(r.patterns[i].text) > len(r.patterns[j].text) })
	if len(r.patterns) == 0 {
		return nil
	}
	return r
}

func marker(id string) string { return "[redacted by Gatehouse: secret " + id + "]" }

// findings counts what was replaced, by secret and encoding.
type findings map[[2]string]int

func (f findings) list() []Finding {
	var out []Finding
	for k, n := range f {
		out = append(out, Finding{Secret: k[0], Encoding: k[1], Count: n})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Secret != out[j].Secret {
			return out[i].Secret < out[j].Secret
		}
		return out[i].Encoding < out[j].Encoding
	})
	return out
}

// redactValue returns the message v with every secret found in its strings
// and member names replaced, and what was found; v itself when nothing was.
// It reads the value the one way the relay read it, and rewrites only the
// strings that held a secret (each as a JSON string, member names kept
// apart), so that the rest of the message goes on byte for byte and what
// it returns reads as the strict reading reads it, without reading it
// again.
func (r *redactor) redactValue(v Value) (Value, []Finding) {
	if r == nil {
		return v, nil
	}
	found := findings{}
	var edits []edit
	r.walk(v, 0, found, &edits)
	if len(edits) == 0 {
		return v, nil
	}
	sort.Slice(edits, func(i, j int) bool { return edits[i].start < edits[j].start })
	raw := v.Raw()
	out := make([]byte, 0, len(raw))
	at := 0
	for _, e := range edits {
		out = append(out, raw[at:e.start]...)
		out = append(out, e.text...)
		at = e.end
	}
	return Value{raw: append(out, raw[at:]...)}, found.list()
}

// An edit replaces raw[start:end] of the message with text.
type edit struct {
	start, end int
	text       []byte
}

// walk collects the edits that redact v, which starts at offset off of the
// message. Its recursion is bounded by MaxDepth.
func (r *redactor) walk(v Value, off int, found findings, edits *[]edit) {
	raw := v.Raw()
	switch v.Kind() {
	case String:
		s, _ := v.Text()
		if t := r.replace(s, found); t != s {
			*edits = append(*edits, edit{off, off + len(raw), quote(t)})
		}
	case Object:
		var names map[string]bool
		for k, span := range v.memberSpans() {
			name := unquote(raw[k[0]:k[1]])
			if t := r.replace(name, found); t != name {
				// Two names redacted alike must stay two members.
				if names == nil {
					names = map[string]bool{}
					for n := range v.Members() {
						names[foldName(n)] = true
					}
				}
				for base, n := t, 2; names[foldName(t)]; n++ {
					t = base + " (" + strconv.Itoa(n) + ")"
				}
				names[foldName(t)] = true
				*edits = append(*edits, edit{off + k[0], off + k[1], quote(t)})
			}
			r.walk(Value{raw: raw[span[0]:span[1]]}, off+span[0], found, edits)
		}
	case Array:
		var texts []textItem
		i := skipSpace(raw, 1)
		for e := range v.Elements() {
			at := off + i
			r.walk(e, at, found, edits)
			if t, ok := textOf(e, at); ok {
				texts = append(texts, t)
			}
			i = skipSpace(raw, i+len(e.Raw()))
			if i < len(raw) && raw[i] == ',' {
				i = skipSpace(raw, i+1)
			}
		}
		r.splitTexts(texts, found, edits)
	}
}

// A textItem is the text of a {"type":"text","text":...} item of a content
// array, where a value split across items would be read whole.
type textItem struct {
	text       string
	start, end int // of its string in the message
}

func textOf(e Value, at int) (textItem, bool) {
	if typ, ok := e.Get("type"); !ok || string(typ.Raw()) != `"text"` {
		return textItem{}, false
	}
	raw := e.Raw()
	for k, span := range e.memberSpans() {
		if unquote(raw[k[0]:k[1]]) != "text" {
			continue
		}
		t := Value{raw: raw[span[0]:span[1]]}
		s, ok := t.Text()
		return textItem{s, at + span[0], at + span[1]}, ok
	}
	return textItem{}, false
}

// replace returns s with every secret found replaced: in any of its forms,
// and as the raw value in s read with its percent-escapes or JSON escapes
// decoded (a JSON document carried in a text, a URL).
func (r *redactor) replace(s string, found findings) string {
	for _, p := range r.patterns {
		if n := strings.Count(s, p.text); n > 0 {
			s = strings.ReplaceAll(s, p.text, marker(p.secret))
			found[[2]string{p.secret, p.encoding}] += n
		}
	}
	if strings.ContainsAny(s, `%\`) {
		for _, enc := range []string{"percent", "escaped"} {
			s = r.replaceDecoded(s, enc, found)
		}
	}
	return s
}

// replaceDecoded finds the raw values in s read with one kind of escape
// decoded, and replaces the escaped text that spells each.
func (r *redactor) replaceDecoded(s, enc string, found findings) string {
	for {
		view, from := decodeView(s, enc)
		if view == s {
			return s
		}
		hit := false
		for _, p := range r.values {
			i := strings.Index(view, p.text)
			if i < 0 {
				continue
			}
			a, b := from[i], from[i+len(p.text)]
			s = s[:a] + marker(p.secret) + s[b:]
			found[[2]string{p.secret, enc}]++
			hit = true
			break // offsets changed: decode again
		}
		if !hit {
			return s
		}
	}
}

// decodeView returns s with its %XX escapes (enc "percent") or its JSON
// string escapes (enc "escaped") decoded, and for each byte of the view the
// offset in s it came from (plus one more entry: len(s)).
func decodeView(s, enc string) (string, []int) {
	var view []byte
	from := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		if enc == "percent" && s[i] == '%' && i+2 < len(s)+0 && isHex(s[i+1]) && i+2 < len(s) && isHex(s[i+2]) {
			v, _ := strconv.ParseUint(s[i+1:i+3], 16, 8)
			view = append(view, byte(v))
			from = append(from, i)
			i += 3
			continue
		}
		if enc == "escaped" && s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'u' {
				if r, ok := hex4([]byte(s), i+2); ok {
					n := len(view)
					view = utf8.AppendRune(view, r)
					for range len(view) - n {
						from = append(from, i)
					}
					i += 6
					continue
				}
			}
			if c, ok := shortEscapes[s[i+1]]; ok {
				view = append(view, c)
				from = append(from, i)
				i += 2
				continue
			}
		}
		view = append(view, s[i])
		from = append(from, i)
		i++
	}
	return string(view), append(from, len(s))
}

// shortEscapes are JSON's two-character escapes, by the character after
// the backslash, and what each stands for.
var shortEscapes = map[byte]byte{'"': '"', '\\': '\\', '/': '/', 'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// splitTexts finds a value split across the text items of a content array
// (a tool result that returns it in pieces) and blanks each piece. Items
// that already hold an edit are read as edited.
func (r *redactor) splitTexts(items []textItem, found findings, edits *[]edit) {
	if len(items) < 2 {
		return
	}
	texts := make([]string, len(items))
	edited := make([]int, len(items)) // index+1 of an edit of the item's string
	for i, it := range items {
		texts[i] = it.text
		for j, e := range *edits {
			if e.start == it.start && e.end == it.end {
				var s string
				if v, err := ReadValue(e.text); err == nil {
					s, _ = v.Text()
				}
				texts[i], edited[i] = s, j+1
			}
		}
	}
	changed := false
	for _, p := range r.values {
		for {
			joined := strings.Join(texts, "")
			at := strings.Index(joined, p.text)
			if at < 0 {
				break
			}
			a, b := at, at+len(p.text)
			start, first := 0, true
			for j, s := range texts {
				lo, hi := max(a, start), min(b, start+len(s))
				start += len(s)
				if lo >= hi {
					continue
				}
				rep := ""
				if first {
					rep, first = marker(p.secret), false
				}
				off := start - len(s)
				texts[j] = s[:lo-off] + rep + s[hi-off:]
			}
			found[[2]string{p.secret, "split"}]++
			changed = true
		}
	}
	if !changed {
		return
	}
	for i, it := range items {
		if texts[i] == it.text && edited[i] == 0 {
			continue
		}
		if edited[i] > 0 {
			(*edits)[edited[i]-1].text = quote(texts[i])
			continue
		}
		*edits = append(*edits, edit{it.start, it.end, quote(texts[i])})
	}
}

// redactText returns text that is not JSON (a server's stderr, a log
// attribute) with every secret found replaced.
func (r *redactor) redactText(s string) string {
	if r == nil {
		return s
	}
	return r.replace(s, findings{})
}
