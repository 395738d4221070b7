package policy

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

const sample = `# Gatehouse policy
default = "approval_required"   # any case

[defaults]
low = "allow"
critical = "DENY"

[[rule]]
id = "no-github-deletes"
capability = "mcp.github.delete_*"
decision = "DENY"
note = """repositories are
deleted by hand"""

[[rule]]
id = "fs-projects"
capability = "mcp.fs.write_file"
client = "claude-code"
risk = "HIGH"
decision = "ALLOW"

  [[rule.args]]
  arg = "path"
  under = "/home/me/projects/./src/"

  [[rule.args]]
  arg = "/options/mode"
  equals = "overwrite"
  matches = "over.*"
`

func TestParse(t *testing.T) {
	t.Parallel()
	p := MustParse(t, sample)
	want := &Policy{
		Rules: []Rule{
			{ID: "no-github-deletes", Capability: "mcp.github.delete_*", Decision: Deny, Note: "repositories are\ndeleted by hand"},
			{ID: "fs-projects", Capability: "mcp.fs.write_file", Client: "claude-code", Risk: High, Decision: Allow, Args: []ArgConstraint{
				{Arg: "path", Under: "/home/me/projects/src"},
				{Arg: "/options/mode", Equals: "overwrite", Matches: "over.*"},
			}},
		},
		Defaults: map[Risk]Decision{Low: Allow, Critical: Deny},
		Default:  ApprovalRequired,
	}
	if !reflect.DeepEqual(p, want) {
		t.Errorf("Parse(sample) = %+v, want %+v", p, want)
	}
	const canonical = `default = "APPROVAL_REQUIRED"

[defaults]
low = "ALLOW"
critical = "DENY"

[[rule]]
id = "no-github-deletes"
capability = "mcp.github.delete_*"
decision = "DENY"
note = "repositories are\ndeleted by hand"

[[rule]]
id = "fs-projects"
capability = "mcp.fs.write_file"
client = "claude-code"
risk = "high"
decision = "ALLOW"
args = [
  { arg = "path", under = "/home/me/projects/src" },
  { arg = "/options/mode", equals = "overwrite", matches = "over.*" },
]
`
	if got := string(p.Format()); got != canonical {
		t.Errorf("Format() =\n%s\nwant\n%s", got, canonical)
	}
	q := MustParse(t, canonical)
	if !reflect.DeepEqual(p, q) {
		t.Errorf("Parse(Format(p)) = %+v, want %+v", q, p)
	}
	if p.Hash() != q.Hash() || !strings.HasPrefix(p.Hash(), "sha256:") || len(p.Hash()) != len("sha256:")+64 {
		t.Errorf("Hash() = %s and %s, want one sha256:<hex>", p.Hash(), q.Hash())
	}
}

func TestParseEmpty(t *testing.T) {
	t.Parallel()
	p := MustParse(t, "# nothing\n")
	if !reflect.DeepEqual(p, &Policy{Default: ApprovalRequired}) {
		t.Errorf("Parse(empty) = %+v, want only the default APPROVAL_REQUIRED", p)
	}
}

func TestDefaultRoundTrips(t *testing.T) {
	t.Parallel()
	p := Default()
	q := MustParse(t, string(p.Format()))
	if !reflect.DeepEqual(p, q) {
		t.Errorf("Parse(Default().Format()) = %+v, want %+v", q, p)
	}
}

func TestParseErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, text string
		line       int
		msg        string
	}{
		{"toml syntax", "# policy\ndefault = ALLOW\n", 2, "expected value"},
		{"unknown decision", "default = \"MAYBE\"", 1, `unknown decision "MAYBE"`},
		{"default not a string", "\n\ndefault = 3", 3, "default: want a string"},
		{"unknown top-level", "defualt = \"ALLOW\"", 1, `unknown setting "defualt"`},
		{"unknown risk", "[defaults]\nlow = \"ALLOW\"\nsevere = \"DENY\"", 3, `unknown risk "severe"`},
		{"defaults value", "[defaults]\nlow = true", 2, "defaults.low: want a decision string, not a boolean"},
		{"rule without id", "[[rule]]\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"", 1, "rule 1: no id"},
		{"bad id", "[[rule]]\nid = \"a b\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"", 2, `invalid id "a b"`},
		{"reserved id", "[[rule]]\nid = \"default-x\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"", 2, `ids starting with "default"`},
		{"duplicate id", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"\n\n[[rule]]\nid = \"x\"\ncapability = \"mcp.a.c\"\ndecision = \"DENY\"", 7, `rule "x": the id is also used by rule 1`},
		{"no decision", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"", 1, `rule "x": no decision`},
		{"bad decision", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"NOPE\"", 4, `rule "x": unknown decision "NOPE"`},
		{"decision not a string", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = false", 4, `rule "x": decision: want a string, not a boolean`},
		{"no capability", "[[rule]]\nid = \"x\"\ndecision = \"DENY\"", 1, "no capability"},
		{"capability without mcp", "[[rule]]\nid = \"x\"\ncapability = \"github.delete_*\"\ndecision = \"DENY\"", 3, "want mcp.<server>.<tool>"},
		{"capability without tool", "[[rule]]\nid = \"x\"\ncapability = \"mcp.github\"\ndecision = \"DENY\"", 3, "want mcp.<server>.<tool>"},
		{"double star", "[[rule]]\nid = \"x\"\ncapability = \"mcp.github.**\"\ndecision = \"DENY\"", 3, "use a single *"},
		{"bad server", "[[rule]]\nid = \"x\"\ncapability = \"mcp.git hub.x\"\ndecision = \"DENY\"", 3, `server "git hub"`},
		{"risk-only rule", "[[rule]]\nid = \"x\"\nrisk = \"high\"\ndecision = \"DENY\"", 3, "set defaults.high instead"},
		{"unknown rule key", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecison = \"DENY\"", 4, `rule "x": unknown setting "decison"`},
		{"second rule", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"\n\n[[rule]]\nid = \"y\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"\nrisk = \"hot\"", 10, `rule "y": unknown risk "hot"`},
		{"relative under", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nargs = [{ arg = \"path\", under = \"projects\" }]", 5, "is not an absolute path"},
		{"dot-dot under", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nargs = [{ arg = \"path\", under = \"/home/me/../x\" }]", 5, `holds a ".." element`},
		{"no condition", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nargs = [{ arg = \"path\" }]", 5, "no condition"},
		{"bad regexp", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nargs = [{ arg = \"path\", matches = \"(\" }]", 5, "missing closing )"},
		{"bad pointer", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nargs = [{ arg = \"/a~2\", equals = \"y\" }]", 5, "~ must be followed by 0 or 1"},
		{"unknown arg key", "[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\n[[rule.args]]\narg = \"p\"\nbelow = \"/x\"", 7, `unknown setting "below"`},
		{"rule not a table", "rule = 3", 1, "want rules as [[rule]] tables"},
		{"invalid UTF-8", "note = \"\xff\"", 0, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := Parse([]byte(tt.text))
			var perr *ParseError
			if !errors.As(err, &perr) {
				t.Fatalf("Parse(%q) = %v, want a *ParseError", tt.text, err)
			}
			if perr.Line != tt.line || !strings.Contains(err.Error(), tt.msg) {
				t.Errorf("Parse(%q) = %q at line %d, want %q at line %d", tt.text, err, perr.Line, tt.msg, tt.line)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	t.Parallel()
	p := Default()
	p.Rules = append(p.Rules, Rule{ID: "x", Capability: "mcp.a.b", Decision: "ALLOWED"})
	if err := p.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `rule "x": unknown decision "ALLOWED"`) {
		t.Errorf("Validate() = %v, want ErrInvalid for the decision", err)
	}
	if err := Default().Validate(); err != nil {
		t.Errorf("Default().Validate() = %v", err)
	}
}

func TestDiff(t *testing.T) {
	t.Parallel()
	from := MustParse(t, `
[defaults]
low = "ALLOW"
high = "DENY"
[[rule]]
id = "a"
capability = "mcp.fs.write_file"
decision = "APPROVAL_REQUIRED"
[[rule]]
id = "b"
capability = "mcp.gh.*"
decision = "ALLOW"
`)
	to := MustParse(t, `
default = "DENY"
[defaults]
low = "ALLOW"
medium = "APPROVAL_REQUIRED"
[[rule]]
id = "a"
capability = "mcp.fs.write_file"
decision = "ALLOW"
[[rule]]
id = "c"
capability = "mcp.gh.delete_repo"
decision = "DENY"
`)
	got := strings.Join(Diff(from, to), "\n")
	want := strings.Join([]string{
		"~ default: APPROVAL_REQUIRED → DENY",
		"+ default for medium risk: APPROVAL_REQUIRED",
		"- default for high risk: DENY (falls to the default)",
		"- b: mcp.gh.* → ALLOW",
		"~ a: mcp.fs.write_file → ALLOW (was mcp.fs.write_file → APPROVAL_REQUIRED)",
		"+ c: mcp.gh.delete_repo → DENY",
		"= mcp.fs.write_file: APPROVAL_REQUIRED (a) → ALLOW (a)",
		"= mcp.gh.delete_repo: ALLOW (b) → DENY (c)",
	}, "\n")
	if got != want {
		t.Errorf("Diff() =\n%s\nwant\n%s", got, want)
	}
	if d := Diff(from, from); len(d) != 0 {
		t.Errorf("Diff(p, p) = %q, want nothing", d)
	}
}

func TestSecretsBinding(t *testing.T) {
	p, err := Parse([]byte(`
[[rule]]
id = "gh"
capability = "mcp.github.create_issue"
decision = "ALLOW"
secrets = ["gh-token", "gh.APP_KEY"]
`))
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Rule("gh").Secrets; !slices.Equal(got, []string{"gh-token", "gh.APP_KEY"}) {
		t.Errorf("Secrets = %q", got)
	}
	q, err := Parse(p.Format())
	if err != nil || !slices.Equal(q.Rule("gh").Secrets, p.Rule("gh").Secrets) {
		t.Errorf("round trip lost the secrets: %v\n%s", err, p.Format())
	}
	for _, bad := range []string{
		"[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"DENY\"\nsecrets = [\"t\"]\n",
		"[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nsecrets = [\"../t\"]\n",
		"[[rule]]\nid = \"x\"\ncapability = \"mcp.a.b\"\ndecision = \"ALLOW\"\nsecrets = \"t\"\n",
	} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}
