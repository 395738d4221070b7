package app

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// A standing answer ("Always allow", "Always deny") becomes a rule of the
// policy, which the window writes through the core when the person
// confirms it, whether or not the agent still waits. The person chooses its
// reach first: this agent or every agent, and, for a call on a file, the
// folder, the file, or any arguments.

// An argReach is how far a standing answer reaches over the arguments.
type argReach int

const (
	anyArgs     argReach = iota // any arguments
	inFolder                    // files in the folder of the call's file
	onlyTheFile                 // the call's file only
)

// A reach is what a standing answer covers besides the tool.
type reach struct {
	allAgents bool
	args      argReach
}

// argChoices returns the argument reaches a call offers, the narrowest
// last: a file call with an absolute path offers its folder and its file.
func argChoices(s callStory) []argReach {
	if s.kind == otherCall || !filepath.IsAbs(s.path) || strings.Contains(s.path, "..") {
		return []argReach{anyArgs}
	}
	return []argReach{inFolder, onlyTheFile, anyArgs}
}

// argWords names an argument reach in a choice.
func argWords(s callStory, a argReach) string {
	switch a {
	case inFolder:
		return "files in " + plainLine(filepath.Dir(s.path))
	case onlyTheFile:
		return "only " + plainLine(s.path)
	}
	return "any arguments"
}

// agentChoice names the agent reach in a choice.
func agentChoice(r approval.Request, all bool) string {
	if all || !oneClient(r.Client) {
		return "every agent"
	}
	return "only " + clientName(r.Client)
}

// oneClient reports whether a rule can name this client alone.
func oneClient(c string) bool { return c != "" && !strings.ContainsAny(c, "*") }

// standingWords says what a standing answer with reach rc will do, in a
// sentence: "From now on, Gatehouse allows write_file of filesystem, for
// Claude Desktop, on files in /home/me/projects, without asking you."
func standingWords(r approval.Request, s callStory, allow bool, rc reach) string {
	verb := "allows"
	if !allow {
		verb = "denies"
	}
	who := "for every agent"
	if !rc.allAgents && oneClient(r.Client) {
		who = "for " + clientName(r.Client)
	}
	on := ""
	if rc.args != anyArgs {
		on = ", on " + argWords(s, rc.args)
	}
	return fmt.Sprintf("From now on, Gatehouse %s %s of %s, %s%s, without asking you. The rule is added to your policy, where you can remove it.",
		verb, plainLine(r.Tool), plainLine(r.Server), who, on)
}

// standingRule returns the rule a standing answer with reach rc adds. It
// fails for a tool whose name a rule cannot name exactly (it holds '*').
func standingRule(r approval.Request, s callStory, allow bool, rc reach) (policy.Rule, error) {
	capability := policy.Capability(r.Server, r.Tool)
	if strings.Contains(capability, "*") {
		return policy.Rule{}, fmt.Errorf("the tool %q cannot be named by a rule (it holds '*')", r.Tool)
	}
	rule := policy.Rule{Capability: capability, Decision: policy.Allow}
	if !allow {
		rule.Decision = policy.Deny
	}
	if !rc.allAgents && oneClient(r.Client) {
		rule.Client = r.Client
	}
	switch rc.args {
	case inFolder:
		rule.Args = []policy.ArgConstraint{{Arg: s.pathArg, Under: filepath.ToSlash(filepath.Dir(s.path))}}
	case onlyTheFile:
		rule.Args = []policy.ArgConstraint{{Arg: s.pathArg, Equals: s.path}}
	}
	rule.ID = standingID(rule)
	verb := "Always allow"
	if !allow {
		verb = "Always deny"
	}
	rule.Note = fmt.Sprintf("%s, answered in the approval window", verb)
	return rule, nil
}

// standingID names a standing answer's rule: the same rule for the same
// reach, so that answering again replaces it.
func standingID(r policy.Rule) string {
	prefix := "always-"
	if r.Decision == policy.Deny {
		prefix = "never-"
	}
	name := strings.TrimPrefix(r.Capability, "mcp.")
	if r.Client != "" {
		name += "-" + r.Client
	}
	if len(r.Args) > 0 {
		a := r.Args[0]
		sum := sha256.Sum256([]byte(a.Arg + "\x00" + a.Under + "\x00" + a.Equals))
		name += "-" + hex.EncodeToString(sum[:4])
	}
	name = strings.NewReplacer(".", "-").Replace(name)
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("._:/@+-", c)) || len(name) > 180 {
			sum := sha256.Sum256([]byte(name))
			return prefix + hex.EncodeToString(sum[:8])
		}
	}
	return prefix + name
}
