package clients

import (
	"bytes"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/linediff"
)

// diffContext is how many unchanged lines a hunk shows around a change.
const diffContext = 3

// unifiedDiff renders the change that edits make to old (giving new) as a
// unified diff, each of masks replaced by asterisks. Only the lines around
// the edits are compared, so a large file with a few small edits diffs
// quickly and exactly.
func unifiedDiff(path string, old, new []byte, edits []edit, masks []string) string {
	if bytes.Equal(old, new) {
		return ""
	}
	starts := lineStarts(old)
	lineOf := func(off int) int { return sort.Search(len(starts), func(i int) bool { return starts[i] > off }) - 1 }
	lineEnd := func(l int) int {
		if l+1 < len(starts) {
			return starts[l+1]
		}
		return len(old)
	}
	type region struct {
		first, last int // old lines, inclusive
		edits       []edit
	}
	edits = slices.Clone(edits)
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	var regions []*region
	for _, e := range edits {
		first := lineOf(e.start)
		last := first
		if e.end > e.start {
			last = lineOf(e.end - 1)
		}
		if n := len(regions); n > 0 && first <= regions[n-1].last+2*diffContext+1 {
			r := regions[n-1]
			r.last = max(r.last, last)
			r.edits = append(r.edits, e)
			continue
		}
		regions = append(regions, &region{first: first, last: last, edits: []edit{e}})
	}
	var b strings.Builder
	fmt.Fprintf(&b, "--- %s\n+++ %s\n", path, path)
	delta := 0
	nOld := len(starts)
	if len(old) > 0 && old[len(old)-1] == '\n' {
		nOld-- // the empty "line" after the final newline
	}
	for _, r := range regions {
		lo, hi := starts[r.first], lineEnd(r.last)
		shifted := make([]edit, len(r.edits))
		for i, e := range r.edits {
			shifted[i] = edit{start: e.start - lo, end: e.end - lo, text: e.text}
		}
		nt, err := applyEdits(old[lo:hi], shifted)
		if err != nil {
			continue
		}
		a, bl := splitLines(old[lo:hi]), splitLines(nt)
		ctxBefore := max(0, r.first-diffContext)
		ctxAfter := min(nOld-1, r.last+diffContext)
		var body []string
		oldCount, newCount := 0, 0
		for l := ctxBefore; l < r.first; l++ {
			body = append(body, " "+string(trimNL(old[starts[l]:lineEnd(l)])))
			oldCount++
			newCount++
		}
		for _, d := range linediff.Lines(a, bl) {
			switch d.Op {
			case linediff.Same:
				body = append(body, " "+d.Text)
				oldCount++
				newCount++
			case linediff.Removed:
				body = append(body, "-"+d.Text)
				oldCount++
			case linediff.Added:
				body = append(body, "+"+d.Text)
				newCount++
			}
		}
		for l := r.last + 1; l <= ctxAfter; l++ {
			body = append(body, " "+string(trimNL(old[starts[l]:lineEnd(l)])))
			oldCount++
			newCount++
		}
		fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", ctxBefore+1, oldCount, ctxBefore+1+delta, newCount)
		for _, line := range body {
			b.WriteString(mask(line, masks) + "\n")
		}
		delta += len(bl) - len(a)
	}
	return b.String()
}

// mask hides in a diff line the values governing moves (masks) and
// anything else that looks like a credential: a value under a secret-looking
// name, a string with a token's shape.
func mask(line string, masks []string) string {
	for _, m := range masks {
		if len(m) >= 4 {
			line = strings.ReplaceAll(line, m, "********")
		}
	}
	line = pairRE.ReplaceAllStringFunc(line, func(pair string) string {
		sub := pairRE.FindStringSubmatch(pair)
		name := strings.Trim(sub[1], `"'`)
		value := sub[2][1 : len(sub[2])-1]
		if looksSecret(name, value, nil) && !reference(value) {
			return pair[:len(pair)-len(sub[2])] + sub[2][:1] + "********" + sub[2][:1]
		}
		return pair
	})
	return stringRE.ReplaceAllStringFunc(line, func(q string) string {
		if argSecret(q[1 : len(q)-1]) {
			if k, _, ok := strings.Cut(q[1:len(q)-1], "="); ok {
				return q[:1] + k + "=********" + q[:1]
			}
			return q[:1] + "********" + q[:1]
		}
		return q
	})
}

// reference reports whether a value names a secret rather than holds it:
// a vault reference, or a variable the client expands.
func reference(v string) bool {
	return strings.HasPrefix(v, "vault://") || strings.Contains(v, "${") || strings.HasPrefix(v, "$")
}

var (
	// "NAME": "value", NAME = "value", NAME = 'value'
	pairRE = regexp.MustCompile(`("(?:[^"\\]|\\.)*"|'[^']*'|[A-Za-z0-9_.-]+)\s*[:=]\s*("(?:[^"\\]|\\.)*"|'[^']*')`)
	// a quoted string
	stringRE = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'[^']*'`)
)

// lineStarts returns the offset of each line's first byte.
func lineStarts(data []byte) []int {
	starts := []int{0}
	for i, c := range data {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	return starts
}

func trimNL(b []byte) []byte {
	return bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
}

func splitLines(b []byte) []string {
	if len(b) == 0 {
		return nil
	}
	parts := strings.SplitAfter(string(b), "\n")
	if parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	for i, p := range parts {
		parts[i] = strings.TrimSuffix(strings.TrimSuffix(p, "\n"), "\r")
	}
	return parts
}
