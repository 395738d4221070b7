package receipts

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// MinPrefix is how long the word being typed must be before it matches as a
// prefix. A shorter one is left out of the query until it grows: a prefix of
// one or two letters matches most of the log, tells nothing, and costs the
// most to look up.
const MinPrefix = 3

// TypedQuery returns the query text for words a person is still typing, as
// a search-as-you-type box sends them. The word being typed (the text does
// not end with a space, a quote or other punctuation) gets a star, so that
// it matches every word that starts so, once it is MinPrefix letters or
// digits long; before that it is left out. The word is the last run of
// letters and digits: in "alice@exa" it is "exa", and the query is
// "alice@exa*", which finds alice@example.com before the address is
// finished.
func TypedQuery(text string) string {
	if text == "" || strings.HasSuffix(text, "*") {
		return text
	}
	// Inside an open phrase, the words are matched as typed.
	if strings.Count(text, `"`)%2 == 1 {
		return text
	}
	start := len(text)
	for start > 0 {
		r, n := utf8.DecodeLastRuneInString(text[:start])
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) && !unicode.Is(unicode.Mn, r) {
			break
		}
		start -= n
	}
	if start == len(text) {
		return text // ends with a space or punctuation: the word is finished
	}
	if utf8.RuneCountInString(text[start:]) < MinPrefix {
		return text[:start]
	}
	return text + "*"
}
