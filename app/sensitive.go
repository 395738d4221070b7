package app

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strings"
)

// A changed tool whose text newly mentions where secrets live, or asks for
// them, is the shape of a tool-poisoning attack: a server that, once
// accepted, rewrites a description to tell the model to read
// ~/.ssh/id_ed25519 and pass it along. The window calls such a change out
// in words, next to the diff.

// sensitivePatterns name what a tool's text should rarely mention, each
// with the words the window uses for it.
var sensitivePatterns = []struct {
	name string
	re   *regexp.Regexp
}{
	{"SSH keys (.ssh)", regexp.MustCompile(`(?i)\.ssh\b|\bid_(rsa|ed25519|ecdsa|dsa)\b|authorized_keys`)},
	{"cloud credentials (~/.aws, gcloud, .azure, .kube)", regexp.MustCompile(`(?i)\.aws/|aws[_ ]?(secret|access)|\bcredentials\b|\.config/gcloud|\.azure\b|\.kube/config`)},
	{"tokens, passwords or API keys", regexp.MustCompile(`(?i)\b(api[_ -]?keys?|access[_ -]?tokens?|tokens?|passwords?|passwd|secrets?|private[_ -]?keys?)\b`)},
	{"environment files (.env, .netrc, .npmrc, .pgpass)", regexp.MustCompile(`(?i)(^|[\s/'"(])\.env\b|\.netrc\b|\.npmrc\b|\.pgpass\b|\.git-credentials\b`)},
	{"system secrets (/etc/shadow, keychains)", regexp.MustCompile(`(?i)/etc/(shadow|passwd)\b|\bkeychain\b|\bkeyring\b`)},
}

// newlySensitive returns the names of what the new definition's text
// mentions and the old one's did not, in the order of sensitivePatterns.
// Definitions that are not JSON are read as text.
func newlySensitive(old, new json.RawMessage) []string {
	before, after := definitionText(old), definitionText(new)
	var found []string
	for _, p := range sensitivePatterns {
		if p.re.MatchString(after) && !p.re.MatchString(before) {
			found = append(found, p.name)
		}
	}
	return found
}

// definitionText returns every string of a definition (names, titles,
// descriptions, schemas' descriptions and defaults), one a line: where a
// tool's instructions to a model hide.
func definitionText(def json.RawMessage) string {
	var v any
	if err := json.Unmarshal(def, &v); err != nil {
		return string(def)
	}
	var b strings.Builder
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			b.WriteString(x)
			b.WriteByte('\n')
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(x)) {
				b.WriteString(k)
				b.WriteByte('\n')
				walk(x[k])
			}
		}
	}
	walk(v)
	return b.String()
}

// sensitiveList joins names for a sentence: "a, b and c".
func sensitiveList(names []string) string {
	switch len(names) {
	case 0:
		return ""
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}
