package policy_test

import (
	"fmt"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

func ExamplePolicy_Decide() {
	p, err := policy.Parse([]byte(`
default = "APPROVAL_REQUIRED"

[defaults]
low = "ALLOW"

[[rule]]
id = "github"
capability = "mcp.github.*"
decision = "ALLOW"

[[rule]]
id = "no-github-deletes"
capability = "mcp.github.delete_*"
decision = "DENY"

[[rule]]
id = "feature-branches"
capability = "mcp.git.push"
decision = "ALLOW"
args = [ { arg = "branch", matches = "feature/[a-z0-9-]+" } ]
`))
	if err != nil {
		panic(err)
	}
	for _, c := range []policy.Call{
		{Server: "github", Tool: "create_issue", Known: true},
		{Server: "github", Tool: "delete_repo", Known: true},
		{Server: "fs", Tool: "read_file", Known: true},
		{Server: "fs", Tool: "read_file", Known: false},
		{Server: "git", Tool: "push", Args: []byte(`{"branch":"feature/login"}`), Known: true},
		{Server: "git", Tool: "push", Args: []byte(`{"branch":"main"}`), Known: true},
	} {
		r := p.Decide(c)
		fmt.Printf("%-22s %-17s by %s (%s risk)\n", c.Capability(), r.Decision, r.Rule, r.Risk)
	}
	// Output:
	// mcp.github.create_issue ALLOW             by github (high risk)
	// mcp.github.delete_repo DENY              by no-github-deletes (critical risk)
	// mcp.fs.read_file       ALLOW             by default:low (low risk)
	// mcp.fs.read_file       APPROVAL_REQUIRED by default:low (low risk)
	// mcp.git.push           ALLOW             by feature-branches (high risk)
	// mcp.git.push           APPROVAL_REQUIRED by default (high risk)
}

func ExampleClassify() {
	for _, tool := range []string{"get_issue", "getIssue", "files.read", "get_and_delete_all", "dеlete_repo"} {
		risk, _ := policy.Classify(tool, nil, false)
		fmt.Println(tool, risk)
	}
	readOnly := true
	risk, why := policy.Classify("delete_draft", &policy.Annotations{ReadOnly: &readOnly}, false)
	fmt.Println("delete_draft, read-only hint, untrusted:", risk, "-", why[len(why)-1])
	risk, _ = policy.Classify("delete_draft", &policy.Annotations{ReadOnly: &readOnly}, true)
	fmt.Println("delete_draft, read-only hint, trusted:", risk)
	// Output:
	// get_issue low
	// getIssue low
	// files.read low
	// get_and_delete_all critical
	// dеlete_repo critical
	// delete_draft, read-only hint, untrusted: critical - readOnlyHint true not used: hints from a server you have not trusted only raise risk
	// delete_draft, read-only hint, trusted: low
}

func ExampleParse() {
	_, err := policy.Parse([]byte(`
[[rule]]
id = "x"
capability = "mcp.github.delete_*"
decision = "DENIED"
`))
	fmt.Println(err)
	// Output:
	// line 5: rule "x": unknown decision "DENIED" (want ALLOW, DENY or APPROVAL_REQUIRED)
}
