package policy

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestBudgets(t *testing.T) {
	p := MustParse(t, `
[[rule]]
id = "gh"
capability = "mcp.github.*"
decision = "ALLOW"

[[budget]]
id = "github-writes"
capability = "mcp.github.create_*"
per = "server"
calls = 20
window = "1h"
note = "a burst of pull requests is a runaway agent"

[[budget]]
id = "session-cap"
capability = "mcp.*.*"
per = "session"
calls = 500
`)
	if len(p.Budgets) != 2 {
		t.Fatalf("budgets = %+v", p.Budgets)
	}
	b := p.Budget("github-writes")
	if b == nil || b.Per != PerServer || b.Calls != 20 || b.Window != time.Hour || b.Note == "" {
		t.Fatalf("github-writes = %+v", b)
	}
	if got := b.Describe(); got != "20 calls to mcp.github.create_* in any hour, across all sessions" {
		t.Errorf("Describe = %q", got)
	}
	if got := p.Budget("session-cap").Describe(); got != "500 calls to mcp.*.* per session" {
		t.Errorf("Describe = %q", got)
	}
	// Names match regardless of case: a budget is not slipped by spelling.
	for _, tool := range []string{"create_issue", "CREATE_PULL_REQUEST", "Create_Branch"} {
		if got := p.BudgetsFor("github", tool); len(got) != 2 {
			t.Errorf("BudgetsFor(github, %s) = %d budgets, want 2", tool, len(got))
		}
	}
	if got := p.BudgetsFor("github", "get_issue"); len(got) != 1 || got[0].ID != "session-cap" {
		t.Errorf("BudgetsFor(github, get_issue) = %+v, want the session cap only", got)
	}
	// The text round-trips, and budgets are part of the hash.
	q, err := Parse(p.Format())
	if err != nil {
		t.Fatalf("Parse(Format()): %v\n%s", err, p.Format())
	}
	if q.Hash() != p.Hash() || len(q.Budgets) != 2 || q.Budgets[0] != p.Budgets[0] {
		t.Errorf("round trip changed the budgets:\n%s", q.Format())
	}
	r := p.Clone()
	r.Budgets[0].Calls = 30
	if r.Hash() == p.Hash() || p.Budgets[0].Calls != 20 {
		t.Error("a changed budget keeps the hash, or Clone shares budgets")
	}
	if d := Diff(p, r); len(d) != 1 || !strings.HasPrefix(d[0], "~ budget github-writes: 30 calls") {
		t.Errorf("Diff = %q", d)
	}
}

func TestBudgetErrors(t *testing.T) {
	tests := []struct{ text, want string }{
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"server\"\ncalls = 5\n", "line 1: budget \"a\": a budget per server needs a window"},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"client\"\ncalls = 5\n", "line 4: budget \"a\": per \"client\""},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\ncalls = \"many\"\n", "line 5: budget \"a\": calls: want a whole number"},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\n", "calls is missing"},
		{"[[budget]]\nid = \"a\"\ncapability = \"github\"\nper = \"session\"\ncalls = 1\n", "line 3: budget \"a\": capability \"github\""},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\ncalls = 1\nwindow = \"soon\"\n", "line 6: budget \"a\": window \"soon\""},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\ncalls = 1\nwindow = \"100ms\"\n", "between 1s and 31d"},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\ncalls = 1\n\n[[budget]]\nid = \"a\"\ncapability = \"mcp.y.*\"\nper = \"session\"\ncalls = 1\n", "line 8: budget \"a\": the id is also used by budget 1"},
		{"[[budget]]\nid = \"a\"\ncapability = \"mcp.x.*\"\nper = \"session\"\ncalls = 1\nlimit = 3\n", "line 6: budget \"a\": unknown setting \"limit\""},
	}
	for _, tt := range tests {
		_, err := Parse([]byte(tt.text))
		var perr *ParseError
		if !errors.As(err, &perr) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want %q", tt.text, err, tt.want)
		}
	}
	for _, w := range []string{"1s", "1m30s", "10m", "1h", "1h30m", "1d", "7d", "31d"} {
		d, err := parseWindow(w)
		if err != nil || formatWindowText(d) != w {
			t.Errorf("window %s reads as %v (%v) and writes as %s", w, d, err, formatWindowText(d))
		}
	}
}
