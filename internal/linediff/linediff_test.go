package linediff

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestLines(t *testing.T) {
	cases := []struct {
		a, b, want string // lines as letters; want as ops: = - +
	}{
		{"", "", ""},
		{"abc", "abc", "==="},
		{"abc", "", "---"},
		{"", "ab", "++"},
		{"abc", "axc", "=-+="},
		{"abcd", "acd", "=-=="},
		{"ab", "ba", "-=+"},
	}
	for _, c := range cases {
		got := ops(Lines(split(c.a), split(c.b)))
		if got != c.want {
			t.Errorf("Lines(%q, %q) = %q, want %q", c.a, c.b, got, c.want)
		}
	}
}

// Whatever the input, the old lines read back the old text, the new lines
// the new text, and no diff keeps fewer lines in common than the longest
// common subsequence (checked against a brute-force count on short texts).
func TestLinesRebuildsBothTexts(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 2000 {
		a, b := randLines(r), randLines(r)
		d := Lines(a, b)
		var old, new []string
		same := 0
		for _, l := range d {
			if l.Op != Added {
				old = append(old, l.Text)
			}
			if l.Op != Removed {
				new = append(new, l.Text)
			}
			if l.Op == Same {
				same++
			}
		}
		if !slices.Equal(old, a) || !slices.Equal(new, b) {
			t.Fatalf("Lines(%q, %q) = %v: does not rebuild both", a, b, d)
		}
		if want := lcs(a, b); same != want {
			t.Fatalf("Lines(%q, %q) keeps %d lines, the longest common subsequence is %d", a, b, same, want)
		}
	}
}

// Past the table's bound the middle is shown whole, and both texts still
// read back.
func TestLinesPastTheBound(t *testing.T) {
	a := make([]string, 1100)
	b := make([]string, 1100)
	for i := range a {
		a[i], b[i] = "a"+strings.Repeat("x", i%7), "b"+strings.Repeat("y", i%5)
	}
	a[0], b[0] = "head", "head"
	d := Lines(a, b)
	if d[0] != (Line{Same, "head"}) || len(d) != 1+2*1099 {
		t.Fatalf("Lines past the bound: %d lines, first %v", len(d), d[0])
	}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "")
}

func ops(d []Line) string {
	var b strings.Builder
	for _, l := range d {
		b.WriteByte("=-+"[l.Op])
	}
	return b.String()
}

func randLines(r *rand.Rand) []string {
	n := r.IntN(7)
	out := make([]string, n)
	for i := range out {
		out[i] = string(rune('a' + r.IntN(3)))
	}
	return out
}

func lcs(a, b []string) int {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	if a[0] == b[0] {
		return 1 + lcs(a[1:], b[1:])
	}
	return max(lcs(a[1:], b), lcs(a, b[1:]))
}
