package gateway

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"golang.org/x/text/unicode/norm"
)

// A governed proxy must read each message from the client as the server
// behind it will, or a call it judged could run as another. Servers read
// JSON in different ways: JavaScript's JSON.parse (most MCP servers) matches
// member names exactly and takes the last of a repeated member; Go's
// encoding/json (many Go servers) also matches a name in another case
// ("Method" is the method, "ſ" folds to "s"); some servers fold method and
// tool names loosely. So the proxy refuses, from the client, what these
// readings would not agree on:
//
//   - a JSON-RPC member (jsonrpc, id, method, params, result, error), or a
//     tools/call params member (name, arguments, _meta), given twice, in
//     another case, or spelled with escapes;
//   - a method that is not tools/call but that a server folding case, width,
//     spaces and invisible characters would take for it.
//
// No client sends any of these: they are refused with an error that says
// why, and nothing reaches the server.

// envelopeMembers are the members of a JSON-RPC message.
var envelopeMembers = []string{"jsonrpc", "id", "method", "params", "result", "error"}

// callMembers are the members of tools/call params the gate reads.
var callMembers = []string{"name", "arguments", "_meta"}

// ambiguity returns why the JSON object obj could be read differently by
// another reader: one of names given twice, given in another case, or
// spelled with escapes. It returns "" when obj is not ambiguous (or not an
// object). obj must be valid JSON.
func ambiguity(obj []byte, names []string) string {
	var seen [8]bool // by index in names; names has at most 8 members
	why := ""
	forEachKey(obj, func(raw []byte) bool {
		key := string(raw)
		escaped := bytes.IndexByte(raw, '\\') >= 0
		if escaped {
			var s string
			if json.Unmarshal(append(append([]byte{'"'}, raw...), '"'), &s) != nil {
				return true // not valid: the parser said so already
			}
			key = s
		}
		for i, n := range names {
			switch {
			case key == n && escaped:
				why = fmt.Sprintf("member %q is spelled with escapes", n)
			case key == n && seen[i]:
				why = fmt.Sprintf("member %q is given twice", n)
			case key == n:
				seen[i] = true
				continue
			case strings.EqualFold(key, n):
				why = fmt.Sprintf("member %q is also given as %q", n, key)
			default:
				continue
			}
			return false
		}
		return true
	})
	return why
}

// forEachKey calls f with each member name of the JSON object obj, as it is
// written (without its quotes, escapes not decoded), until f returns false.
// Values are skipped without being decoded. obj must be valid JSON.
func forEachKey(obj []byte, f func(key []byte) bool) {
	i := skipSpace(obj, 0)
	if i >= len(obj) || obj[i] != '{' {
		return
	}
	i++
	for {
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != '"' {
			return
		}
		end := stringEnd(obj, i)
		if end < 0 || !f(obj[i+1:end-1]) {
			return
		}
		i = skipSpace(obj, end)
		if i >= len(obj) || obj[i] != ':' {
			return
		}
		if i = skipValue(obj, skipSpace(obj, i+1)); i < 0 {
			return
		}
		i = skipSpace(obj, i)
		if i >= len(obj) || obj[i] != ',' {
			return
		}
		i++
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just after the string that starts at b[i]
// (a quote), or -1.
func stringEnd(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
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

// skipValue returns the index just after the value that starts at b[i], or
// -1.
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				if i = stringEnd(b, i); i < 0 {
					return -1
				}
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return -1
	}
	for i < len(b) && !strings.ContainsRune(",}] \t\r\n", rune(b[i])) {
		i++
	}
	return i
}

// governedMethods are the methods the gate decides on.
const governedMethod = "tools/call"

// lookalikeMethod reports whether method is not tools/call but would be
// taken for it by a server that folds case, width (NFKC), spaces and
// invisible characters before it compares.
func lookalikeMethod(method string) bool {
	if method == governedMethod {
		return false
	}
	plain := true
	for i := 0; i < len(method) && plain; i++ {
		c := method[i]
		plain = c >= 'a' && c <= 'z' || c == '/' || c == '_' || c == '-' || c == '.'
	}
	if plain {
		return false // folding changes nothing
	}
	return foldName(method) == governedMethod
}

// foldName folds a name as a lenient server might: NFKC (full-width letters
// become ASCII), spaces, controls and invisible format characters dropped,
// lower case.
func foldName(s string) string {
	s = norm.NFKC.String(s)
	var b strings.Builder
	for _, r := range s {
		if unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		b.WriteRune(unicode.ToLower(r))
	}
	return b.String()
}

// ambiguousMessage returns why a message from the client must be refused by
// a governed proxy, or "".
func ambiguousMessage(m message) string {
	if why := ambiguity(m.raw, envelopeMembers); why != "" {
		return why
	}
	if lookalikeMethod(m.method) {
		return fmt.Sprintf("method %q is not tools/call, but a server could take it for tools/call", m.method)
	}
	return ""
}
