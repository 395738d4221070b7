// Package tomltext writes TOML text by hand, where a file is edited in place
// rather than encoded whole: a client's config.toml keeps its comments and
// order, and the policy file its canonical form.
package tomltext

import (
	"fmt"
	"strings"
)

// Quote returns s as a TOML basic string: quotes, backslashes and the
// control characters TOML forbids in one are escaped; bytes that are not
// UTF-8 become U+FFFD, one each, since a TOML file is UTF-8. Everything else
// is written as it is: the policy's canonical text, which is hashed, is
// made with it.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
