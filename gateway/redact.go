package gateway

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"maps"
	"net/url"
	"sort"
	"strings"

	fastjson "github.com/segmentio/encoding/json"
)

// A Finding is a secret the proxy found in a server's message and replaced
// before the client saw it. It never holds the value.
type Finding struct {
	Secret   string // the secret's id
	Encoding string // raw, base64, url, hex, split
	Count    int
}

// minEncodedLen is the shortest secret whose encodings are looked for too:
// the encodings of very short values turn up by chance in ordinary text.
// The value itself is always looked for.
const minEncodedLen = 8

// redactor finds the values of a server's secrets, and their common
// encodings, in what the server sends, and replaces them with a marker.
type redactor struct {
	patterns []pattern // longest first, so that a longer form wins an overlap
}

type pattern struct {
	secret, encoding, text string
}

// withCredentials adds, for each value that is an HTTP authorization
// ("Bearer <token>", "Basic <credentials>", "token <token>"), the credential
// alone: it is what a server would echo.
func withCredentials(secrets map[string]string) map[string]string {
	var out map[string]string
	for id, v := range secrets {
		scheme, cred, ok := strings.Cut(v, " ")
		if !ok || scheme == "" || strings.ContainsAny(scheme, "\t\r\n") || len(strings.TrimSpace(cred)) < 8 {
			continue
		}
		if out == nil {
			out = maps.Clone(secrets)
		}
		out[id+"#credential"] = strings.TrimSpace(cred)
	}
	if out == nil {
		return secrets
	}
	return out
}

func newRedactor(secrets map[string]string) *redactor {
	secrets = withCredentials(secrets)
	r := &redactor{}
	seen := map[string]bool{}
	add := func(id, enc, text string) {
		if text == "" || seen[text] {
			return
		}
		seen[text] = true
		r.patterns = append(r.patterns, pattern{id, enc, text})
	}
	for id, v := range secrets {
		if len(v) < 4 {
			continue // nothing this short can be told apart from ordinary text
		}
		add(id, "raw", v)
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
	sort.Slice(r.patterns, func(i, j int) bool { return len(r.patterns[i].text) > len(r.patterns[j].text) })
	return r
}

func marker(id string) string { return "[redacted by Gatehouse: secret " + id + "]" }

// redact returns msg with every secret found replaced, and what was found.
// msg is returned unchanged (the same slice) when nothing was found. The
// message is decoded, not scanned as bytes, so that JSON escapes (\u0041)
// cannot hide a value.
func (r *redactor) redact(msg []byte) ([]byte, []Finding) {
	if r == nil || len(r.patterns) == 0 {
		return msg, nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(msg))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return msg, nil // not JSON: the relay drops it anyway
	}
	counts := map[[2]string]int{}
	v = r.walk(v, counts)
	if len(counts) == 0 {
		return msg, nil
	}
	out, err := fastjson.Marshal(v)
	if err != nil {
		return msg, nil
	}
	var findings []Finding
	for k, n := range counts {
		findings = append(findings, Finding{Secret: k[0], Encoding: k[1], Count: n})
	}
	sort.Slice(findings, func(i, j int) bool {
		if findings[i].Secret != findings[j].Secret {
			return findings[i].Secret < findings[j].Secret
		}
		return findings[i].Encoding < findings[j].Encoding
	})
	return out, findings
}

// redactText returns text that is not JSON (a server's stderr) with every
// secret found replaced.
func (r *redactor) redactText(s string) string {
	return r.replace(s, map[[2]string]int{})
}

func (r *redactor) walk(v any, counts map[[2]string]int) any {
	switch x := v.(type) {
	case string:
		return r.replace(x, counts)
	case []any:
		for i := range x {
			x[i] = r.walk(x[i], counts)
		}
		r.splitTexts(x, counts)
		return x
	case map[string]any:
		for k, e := range x {
			x[k] = r.walk(e, counts)
		}
		return x
	}
	return v
}

func (r *redactor) replace(s string, counts map[[2]string]int) string {
	for _, p := range r.patterns {
		if n := strings.Count(s, p.text); n > 0 {
			s = strings.ReplaceAll(s, p.text, marker(p.secret))
			counts[[2]string{p.secret, p.encoding}] += n
		}
	}
	return s
}

// splitTexts finds a value split across the text items of a content array
// (a tool result that returns it in pieces) and blanks each piece.
func (r *redactor) splitTexts(items []any, counts map[[2]string]int) {
	var texts []map[string]any
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok || m["type"] != "text" {
			continue
		}
		if _, ok := m["text"].(string); ok {
			texts = append(texts, m)
		}
	}
	if len(texts) < 2 {
		return
	}
	var joined strings.Builder
	starts := make([]int, len(texts))
	for i, m := range texts {
		starts[i] = joined.Len()
		joined.WriteString(m["text"].(string))
	}
	all := joined.String()
	for _, p := range r.patterns {
		for off := 0; ; {
			i := strings.Index(all[off:], p.text)
			if i < 0 {
				break
			}
			a, b := off+i, off+i+len(p.text)
			off = b
			first := true
			for j, m := range texts {
				s := m["text"].(string)
				lo, hi := max(a, starts[j]), min(b, starts[j]+len(s))
				if lo >= hi {
					continue
				}
				rep := ""
				if first {
					rep = marker(p.secret)
					first = false
				}
				m["text"] = s[:lo-starts[j]] + rep + s[hi-starts[j]:]
			}
			counts[[2]string{p.secret, "split"}]++
			// Offsets changed: rebuild and rescan this pattern.
			joined.Reset()
			for j, m := range texts {
				starts[j] = joined.Len()
				joined.WriteString(m["text"].(string))
			}
			all, off = joined.String(), 0
		}
	}
}
