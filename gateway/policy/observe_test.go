package policy

import (
	"strings"
	"testing"
)

func TestObserveMode(t *testing.T) {
	t.Parallel()
	text := `default = "APPROVAL_REQUIRED"

[defaults]
low = "ALLOW"

[[rule]]
id = "no-reads"
capability = "mcp.fs.read_*"
decision = "DENY"
mode = "observe"

[[rule]]
id = "no-github"
capability = "mcp.gh.*"
decision = "DENY"

[[rule]]
id = "try-delete"
capability = "mcp.gh.delete_repo"
decision = "ALLOW"
mode = "observe"
`
	p, err := Parse([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		call     Call
		decision Decision
		rule     string
		observed *Observation
	}{
		{"an observed deny does not block", Call{Server: "fs", Tool: "read_file", Known: true},
			Allow, "default:low", &Observation{Deny, "no-reads"}},
		{"an observed allow does not weaken a deny", Call{Server: "gh", Tool: "delete_repo", Known: true},
			Deny, "no-github", &Observation{Allow, "try-delete"}},
		{"no observed rule applies", Call{Server: "gh", Tool: "get_me", Known: true},
			Deny, "no-github", nil},
		{"an observed allow of an unknown tool would ask", Call{Server: "fs", Tool: "read_x"},
			ApprovalRequired, "default:low", &Observation{Deny, "no-reads"}},
	} {
		res := p.Decide(tc.call)
		if res.Decision != tc.decision || res.Rule != tc.rule {
			t.Errorf("%s: Decide = %s by %s, want %s by %s", tc.name, res.Decision, res.Rule, tc.decision, tc.rule)
		}
		switch {
		case tc.observed == nil && res.Observed != nil:
			t.Errorf("%s: Observed = %+v, want none", tc.name, *res.Observed)
		case tc.observed != nil && (res.Observed == nil || *res.Observed != *tc.observed):
			t.Errorf("%s: Observed = %+v, want %+v", tc.name, res.Observed, *tc.observed)
		}
		if tc.observed != nil && !strings.Contains(strings.Join(res.Explanation, "\n"), "observe mode") {
			t.Errorf("%s: the explanation does not say observe mode:\n%s", tc.name, strings.Join(res.Explanation, "\n"))
		}
	}

	// The mode is part of the canonical text, so of the hash receipts sign.
	q, err := Parse(p.Format())
	if err != nil {
		t.Fatal(err)
	}
	if q.Hash() != p.Hash() || !strings.Contains(string(p.Format()), `mode = "observe"`) {
		t.Errorf("Format does not keep the mode:\n%s", p.Format())
	}
	enforced := p.Clone()
	enforced.Rules[0].Mode = Enforce
	if enforced.Hash() == p.Hash() {
		t.Error("a rule's mode does not change the policy's hash")
	}
	if res := enforced.Decide(Call{Server: "fs", Tool: "read_file", Known: true}); res.Decision != Deny || res.Observed != nil {
		t.Errorf("enforced: Decide = %s, observed %+v; want DENY, none", res.Decision, res.Observed)
	}
}

func TestObservePolicy(t *testing.T) {
	t.Parallel()
	p, err := Parse([]byte("default = \"APPROVAL_REQUIRED\"\nmode = \"observe\"\n[defaults]\nlow = \"ALLOW\"\nhigh = \"DENY\"\n[[rule]]\nid = \"no-reads\"\ncapability = \"mcp.fs.*\"\ndecision = \"DENY\"\n"))
	if err != nil {
		t.Fatal(err)
	}
	// Every rule observes; the defaults apply.
	res := p.Decide(Call{Server: "fs", Tool: "read_file", Known: true})
	if res.Decision != Allow || res.Observed == nil || res.Observed.Rule != "no-reads" {
		t.Errorf("Decide(read_file) = %s by %s, observed %+v; want ALLOW by default:low, observed no-reads", res.Decision, res.Rule, res.Observed)
	}
	if res := p.Decide(Call{Server: "fs", Tool: "write_file", Known: true}); res.Decision != Deny || res.Rule != "default:high" {
		t.Errorf("Decide(write_file) = %s by %s; want DENY by default:high: observe mode never lifts a default", res.Decision, res.Rule)
	}
	for _, bad := range []string{"mode = \"shadow\"\n", "mode = 1\n", "[[rule]]\nid = \"r\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"\nmode = \"watch\"\n"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}
