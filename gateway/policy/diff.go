package policy

import (
	"fmt"
	"slices"
	"strings"
)

// Diff describes, one line each, how decisions change from policy from to
// policy to: the defaults, the rules (added "+", removed "-", changed "~"),
// and then the decision on each tool a rule of either names exactly, for a
// listed tool called without arguments, where it changes ("="). No lines
// means no change.
func Diff(from, to *Policy) []string {
	var out []string
	if a, b := canonDecision(from.Default), canonDecision(to.Default); a != b {
		out = append(out, fmt.Sprintf("~ default: %s → %s", a, b))
	}
	for _, r := range Risks {
		a, inA := from.Defaults[r]
		b, inB := to.Defaults[r]
		switch {
		case inA && !inB:
			out = append(out, fmt.Sprintf("- default for %s risk: %s (falls to the default)", r, a))
		case !inA && inB:
			out = append(out, fmt.Sprintf("+ default for %s risk: %s", r, b))
		case inA && a != b:
			out = append(out, fmt.Sprintf("~ default for %s risk: %s → %s", r, a, b))
		}
	}
	for _, r := range from.Rules {
		if to.Rule(r.ID) == nil {
			out = append(out, fmt.Sprintf("- %s: %s", r.ID, r.summary()))
		}
	}
	for _, r := range to.Rules {
		old := from.Rule(r.ID)
		switch {
		case old == nil:
			out = append(out, fmt.Sprintf("+ %s: %s", r.ID, r.summary()))
		case old.summary() != r.summary():
			out = append(out, fmt.Sprintf("~ %s: %s (was %s)", r.ID, r.summary(), old.summary()))
		case old.Note != r.Note:
			out = append(out, fmt.Sprintf("~ %s: note %q (was %q)", r.ID, r.Note, old.Note))
		}
	}
	for _, b := range from.Budgets {
		if to.Budget(b.ID) == nil {
			out = append(out, fmt.Sprintf("- budget %s: %s", b.ID, b.Describe()))
		}
	}
	for _, b := range to.Budgets {
		switch old := from.Budget(b.ID); {
		case old == nil:
			out = append(out, fmt.Sprintf("+ budget %s: %s", b.ID, b.Describe()))
		case old.Describe() != b.Describe():
			out = append(out, fmt.Sprintf("~ budget %s: %s (was %s)", b.ID, b.Describe(), old.Describe()))
		}
	}
	type probe struct{ server, tool, client string }
	var probes []probe
	for _, r := range slices.Concat(from.Rules, to.Rules) {
		server, tool, ok := SplitCapability(r.Capability)
		if !ok || strings.Contains(server, "*") || strings.Contains(tool, "*") {
			continue
		}
		pr := probe{server: server, tool: tool}
		if !strings.Contains(r.Client, "*") {
			pr.client = r.Client
		}
		if !slices.Contains(probes, pr) {
			probes = append(probes, pr)
		}
	}
	for _, pr := range probes {
		c := Call{Server: pr.server, Tool: pr.tool, Client: pr.client, Known: true}
		a, b := from.Decide(c), to.Decide(c)
		if a.Decision == b.Decision {
			continue
		}
		who := ""
		if pr.client != "" {
			who = " from " + pr.client
		}
		out = append(out, fmt.Sprintf("= %s%s: %s (%s) → %s (%s)", c.Capability(), who, a.Decision, a.Rule, b.Decision, b.Rule))
	}
	return out
}
