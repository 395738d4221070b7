package tomltext

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/BurntSushi/toml"
)

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", `""`},
		{"plain", `"plain"`},
		{`a "b" \c`, `"a \"b\" \\c"`},
		{"tab\tnl\ncr\r", `"tab\tnl\ncr\r"`},
		{"\x00\x1f\x7f", `"\u0000\u001F\u007F"`},
		{"é ✓", `"é ✓"`},
		{"bad\xff", "\"bad\uFFFD\""},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Whatever the string, a TOML reader reads back the same string (bytes that
// are not UTF-8 as U+FFFD, one each).
func FuzzQuote(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\\", "\x00", "\u2028", "bad\xff\xfe", `'''`, "\"\"\"", "#x", "a = 1\n[t]"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var v struct{ K string }
		doc := "k = " + Quote(s) + "\n"
		if _, err := toml.Decode(doc, &v); err != nil {
			t.Fatalf("Quote(%q) = %s: not TOML: %v", s, Quote(s), err)
		}
		want := s
		if !utf8.ValidString(s) {
			var b strings.Builder
			for _, r := range s {
				b.WriteRune(r)
			}
			want = b.String()
		}
		if v.K != want {
			t.Fatalf("Quote(%q) reads back as %q", s, v.K)
		}
	})
}
