// Package shellwords reads and writes command lines as a POSIX shell does:
// what Gatehouse shows of a server's command can be pasted into a shell, and
// what a user types as one is split into the words the shell would give.
package shellwords

import (
	"errors"
	"path/filepath"
	"strings"
	"unicode/utf8"
)

// Quote returns s as one shell word: as it is when the shell would neither
// split nor expand it, else in single quotes.
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	safe := strings.IndexFunc(s, func(r rune) bool {
		return !(r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("@%+=:,./_-", r)))
	}) < 0
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Join returns words as one command line, each quoted as it needs.
func Join(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = Quote(w)
	}
	return strings.Join(q, " ")
}

// Split splits a command line into words the way a POSIX shell does,
// expanding nothing but a leading ~ or ~/ of an unquoted word, into home
// when home is not empty: words are separated by
// blanks; 'single quotes' keep everything; "double quotes" keep everything
// but \" \\ \$ and \`; a backslash outside quotes keeps the next character.
// It is the inverse of [Join].
func Split(s, home string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord, quoted := false, false
	end := func() {
		if inWord {
			word := w.String()
			if !quoted {
				word = ExpandTilde(word, home)
			}
			words = append(words, word)
		}
		w.Reset()
		inWord, quoted = false, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			end()
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("a single quote is not closed")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord, quoted = true, true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("a double quote is not closed")
			}
			inWord, quoted = true, true
		case c == '\\':
			if i+1 < len(s) {
				i++
				w.WriteByte(s[i])
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	end()
	return words, nil
}

// ExpandTilde replaces a leading ~ or ~/ with home, as a shell would have
// before the program ever saw the word.
func ExpandTilde(s, home string) string {
	if home == "" || s != "~" && !strings.HasPrefix(s, "~/") {
		return s
	}
	return filepath.Join(home, s[1:])
}
