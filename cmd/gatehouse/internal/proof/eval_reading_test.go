package proof

import (
	"context"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// runsOfLine serves one line with the adversary, as opts say, and returns
// the calls it ran.
func runsOfLine(t *testing.T, line string, opts adversary.Options) []adversary.Run {
	t.Helper()
	opts.Record = filepath.Join(t.TempDir(), "record.jsonl")
	opts.Stderr = io.Discard
	if err := adversary.Serve(context.Background(), strings.NewReader(line+"\n"), io.Discard, &opts); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	runs, err := adversary.ReadRecord(opts.Record)
	if err != nil {
		t.Fatal(err)
	}
	return runs
}

// ranMarker reports whether one of runs holds marker in its arguments.
func ranMarker(runs []adversary.Run, marker string) bool {
	return slices.ContainsFunc(runs, func(r adversary.Run) bool { return strings.Contains(string(r.Args), marker) })
}

// The method probes are only worth refusing if a lenient server runs them:
// a case that sent names no server folds could not slip.
func TestMethodProbesFoolALenientServer(t *testing.T) {
	for _, m := range slices.Concat(lookalikeMethods, foldedMethods) {
		t.Run(m.name, func(t *testing.T) {
			runs := runsOfLine(t, mark(m.line, "probe", `"1"`), adversary.Options{Lenient: true})
			if len(runs) != 1 || runs[0].Tool != "delete_file" || !ranMarker(runs, "probe") {
				t.Errorf("a lenient server ran %+v, want delete_file", runs)
			}
		})
	}
}

func TestAmbiguousCallsFoolTheirParsers(t *testing.T) {
	for _, c := range ambiguousCalls {
		for _, p := range []adversary.Parser{adversary.ParserExact, adversary.ParserGo} {
			t.Run(c.name+"/"+string(p), func(t *testing.T) {
				want := slices.Contains(strings.Fields(c.fools), string(p))
				runs := runsOfLine(t, mark(c.line, "probe", `"1"`), adversary.Options{Parser: p})
				if got := ranMarker(runs, "probe"); got != want {
					t.Errorf("the %s server ran the other reading = %v, want %v (runs %+v)", p, got, want, runs)
				}
			})
		}
	}
}

// Each invalid batch member that carries a call is one a server runs.
func TestInvalidMembersRunOnALenientServer(t *testing.T) {
	for _, bad := range invalidMembers {
		if !strings.Contains(bad.member, "delete_file") || strings.HasPrefix(bad.member, "[") {
			continue // not a call, or a batch in the batch (which no one reads)
		}
		t.Run(bad.name, func(t *testing.T) {
			line := "[" + mark(bad.member, "probe", "") + `,{"jsonrpc":"2.0","id":"p","method":"ping"}]`
			if runs := runsOfLine(t, line, adversary.Options{Lenient: true}); !ranMarker(runs, "probe") {
				t.Errorf("the server ran %+v, want the invalid member's delete_file", runs)
			}
		})
	}
}

func TestIdlessCallRunsOnALenientServer(t *testing.T) {
	line := `{"jsonrpc":"2.0","method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/eval/probe"}}}`
	tests := []struct {
		name string
		opts adversary.Options
		want bool
	}{
		{"strict", adversary.Options{}, false},
		{"lenient", adversary.Options{Lenient: true}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ranMarker(runsOfLine(t, line, tt.opts), "probe"); got != tt.want {
				t.Errorf("ran the id-less call = %v, want %v", got, tt.want)
			}
		})
	}
}
