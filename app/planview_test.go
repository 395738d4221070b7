package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// tidyNotes is a plan approval as the programs server asks it: a program
// whose third step writes a file asks a person, who approves the program
// as a whole.
var tidyNotes = func() approval.Request {
	plan := &approval.Plan{Program: "tidy-notes", Hash: "sha256:3f7c9a0d5e1b24c68f0a9d3e7b5c1f2a4d6e8b0c9a7f5e3d1c2b4a6f8e0d9c7b", Steps: []approval.PlanStep{
		{Name: "read", Kind: "tool", Server: "fs", Tool: "read_text_file", Args: json.RawMessage(`{"path":"/home/me/notes/today.md"}`)},
		{Name: "long", Kind: "condition", Detail: "if len(steps.read.text) > 1000 then save else end"},
		{Name: "check", Kind: "approval", Detail: "a person's checkpoint: Save today's notes to the archive?"},
		{Name: "save", Kind: "tool", Server: "fs", Tool: "write_file", Args: json.RawMessage(`{"content":"${steps.read.text}","path":"/home/me/notes/archive/today.md"}`)},
		{Name: "remember", Kind: "tool", Server: "memory", Tool: "create_entities",
			Args: json.RawMessage(`{"entities":[{"entityType":"note","name":"today","observations":["archived"]}]}`)},
	}}
	shown, _ := json.Marshal(map[string]any{"program": plan.Program, "hash": plan.Hash, "steps": plan.Steps})
	return approval.Request{Server: "programs", Tool: "tidy-notes", Client: "claude-code", Risk: "high", Rule: "program:plan",
		Args: shown, Session: "tr_K7QX2M4PZB3N5RT6VW8Y", Plan: plan,
		Description: "Approve program tidy-notes as a whole: its 5 steps, in order, as shown. Step save asks for approval (fs.write_file, rule ask-writes)."}
}()

func TestApprovalPlan(t *testing.T) {
	for _, tt := range []struct {
		name  string
		tap   string
		scope approval.Scope
	}{
		{"allow once", "Allow once", approval.ScopeOnce},
		// A plan's standing answer writes no rule: nothing to choose.
		{"always allow", "Always allow", approval.ScopeAlways},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newApprover(t, nil)
			got := h.ask(context.Background(), tidyNotes)
			screen := h.approvalScreen()
			assertShows(t, screen,
				"Claude Code", " asks to run the program", "tidy-notes", "5 steps, approved as a whole · bound to this exact program",
				"What will happen: 5 steps, in this order",
				"Step save asks for approval (fs.write_file, rule ask-writes).",
				"bound to this exact program (sha256:3f7c9a0d5…)", "any step changed, asks again.",
				"1. read", "tool read_text_file on fs", "path: /home/me/notes/today.md",
				"2. long", "condition", "if len(steps.read.text) > 1000 then save else end",
				"3. check", "a person's checkpoint", "The run stops here until a person lets it go on: Save today's notes to the archive?",
				"4. save", "tool write_file on fs", "Create /home/me/notes/archive/today.md with 1 line.", "Content to write", "${steps.read.text}",
				"5. remember", "tool create_entities on memory", "name: today",
				"stands for what an earlier step gave",
				"“Minutes” and “Always” approve this same program")
			assertHides(t, screen, labelAlwaysAllow, labelAlwaysDeny)
			assertHides(t, screen, "Gatehouse asks because your rule", "Tool description")
			// In order.
			last := -1
			for _, s := range []string{"1. read", "2. long", "3. check", "4. save", "5. remember"} {
				i := strings.Index(screen, s)
				if i < last {
					t.Errorf("%q is shown before the step before it:\n%s", s, screen)
				}
				last = i
			}

			h.arm()
			h.tap(tt.tap)
			a := answerOf(t, got)
			if a.err != nil || a.d.Scope != tt.scope {
				t.Fatalf("Ask = %s, %v; want %s", a.d.Scope, a.err, tt.scope)
			}
			h.settle()
		})
	}
}

// A call after a plan shows as a call again.
func TestApprovalPlanThenCall(t *testing.T) {
	h := newApprover(t, nil)
	got := h.ask(context.Background(), tidyNotes)
	h.arm()
	h.tap("Deny")
	answerOf(t, got)
	h.settle()
	got = h.ask(context.Background(), deleteBranch)
	screen := h.approvalScreen()
	assertShows(t, screen, " asks to run the tool", "delete_branch", "on the server github", "Tool description", labelAlwaysAllow)
	assertHides(t, screen, "asks to run the program", "bound to this exact program")
	h.arm()
	h.tap("Deny")
	answerOf(t, got)
}

// A plan with a step to be careful with makes Deny the primary answer, and
// says which step.
func TestApprovalPlanCareful(t *testing.T) {
	h := newApprover(t, nil)
	req := tidyNotes
	plan := *req.Plan
	plan.Steps = append([]approval.PlanStep{{Name: "keys", Kind: "tool", Server: "fs", Tool: "write_file",
		Args: json.RawMessage(`{"content":"ssh-ed25519 AAAA","path":"/home/me/.env"}`)}}, plan.Steps...)
	req.Plan = &plan
	got := h.ask(context.Background(), req)
	screen := h.approvalScreen()
	assertShows(t, screen, "Step 1 (keys): .env is where secrets are usually kept.", "Return: Deny")
	h.arm()
	h.tap("Deny")
	if a := answerOf(t, got); a.err != nil || a.d.Scope != approval.ScopeDeny {
		t.Fatalf("Ask = %s, %v; want deny", a.d.Scope, a.err)
	}
}
