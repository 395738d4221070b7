// Package linediff computes line diffs: what approvers show of a changed
// tool definition, and what a client config's rewrite shows before it is
// written.
package linediff

import "slices"

// An Op says what a [Line] of a diff is.
type Op int

const (
	Same    Op = iota // in both
	Removed           // only in the old text
	Added             // only in the new text
)

// A Line is one line of a line diff.
type Line struct {
	Op   Op
	Text string
}

// maxCells bounds the table of a line diff: beyond it, the differing
// middle is shown whole, removed then added.
const maxCells = 1 << 20

// Lines returns a line diff of a and b, by the longest common subsequence
// of their lines. Lines removed come before lines added where both apply.
func Lines(a, b []string) []Line {
	// The lines both start and end with are not in the table.
	var head, tail []Line
	for len(a) > 0 && len(b) > 0 && a[0] == b[0] {
		head = append(head, Line{Same, a[0]})
		a, b = a[1:], b[1:]
	}
	for len(a) > 0 && len(b) > 0 && a[len(a)-1] == b[len(b)-1] {
		tail = append(tail, Line{Same, a[len(a)-1]})
		a, b = a[:len(a)-1], b[:len(b)-1]
	}
	slices.Reverse(tail)
	out := head
	if len(a)*len(b) > maxCells {
		for _, l := range a {
			out = append(out, Line{Removed, l})
		}
		for _, l := range b {
			out = append(out, Line{Added, l})
		}
		return append(out, tail...)
	}
	// lcs[i][j] is the length of the longest common subsequence of a[i:]
	// and b[j:].
	lcs := make([][]int32, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int32, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out = append(out, Line{Same, a[i]})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out = append(out, Line{Removed, a[i]})
			i++
		default:
			out = append(out, Line{Added, b[j]})
			j++
		}
	}
	return append(out, tail...)
}
