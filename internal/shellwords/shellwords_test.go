package shellwords

import (
	"slices"
	"testing"
	"unicode/utf8"
)

func TestQuote(t *testing.T) {
	cases := []struct{ in, want string }{
		{"", "''"},
		{"npx", "npx"},
		{"/usr/bin/node", "/usr/bin/node"},
		{"--port=8080", "--port=8080"},
		{"a b", "'a b'"},
		{"it's", `'it'\''s'`},
		{"a;b", "'a;b'"},
		{"$HOME", "'$HOME'"},
		{"~/x", "'~/x'"},
		{"*.txt", "'*.txt'"},
		{"é", "'é'"},
	}
	for _, c := range cases {
		if got := Quote(c.in); got != c.want {
			t.Errorf("Quote(%q) = %s, want %s", c.in, got, c.want)
		}
	}
}

func TestSplit(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  npx  -y   pkg ", []string{"npx", "-y", "pkg"}},
		{`a 'b c' "d \"e\" \$f \x" g\ h`, []string{"a", "b c", `d "e" $f \x`, "g h"}},
		{"''", []string{""}},
		{"~/bin/x '~/y' ~", []string{"/home/u/bin/x", "~/y", "/home/u"}},
		{"a~/b", []string{"a~/b"}},
	}
	for _, c := range cases {
		got, err := Split(c.in, "/home/u")
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("Split(%q) = %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{"'open", `"open`, `a "b\"`} {
		if got, err := Split(bad, ""); err == nil {
			t.Errorf("Split(%q) = %q, want an error", bad, got)
		}
	}
}

// What Join writes, Split reads back word for word.
func FuzzJoinSplit(f *testing.F) {
	f.Add("npx", "-y", "@scope/pkg")
	f.Add("a b", "it's", "")
	f.Add("~/x", `"q"`, "\\")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		words := []string{a, b, c}
		for _, w := range words {
			if !utf8.ValidString(w) {
				return
			}
		}
		got, err := Split(Join(words), "/home/u")
		if err != nil || !slices.Equal(got, words) {
			t.Fatalf("Split(Join(%q)) = %q, %v", words, got, err)
		}
	})
}
