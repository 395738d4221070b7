package app

import (
	"fmt"
	"strings"

	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/container"
	"fyne.io/fyne/v2/layout"
	"fyne.io/fyne/v2/theme"
	"fyne.io/fyne/v2/widget"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// A plan approval asks a person to approve a governed program as a whole
// (approval.Request.Plan): the window shows every step in order, each tool
// step as it shows a single call (what it will do in words, a file's
// content or an edit's diff, other arguments as a tree), conditions as
// their expression, questions to the model and a person's checkpoints as
// what they ask; and it says that the answer holds for this exact program
// only.

// Step kinds of a plan, as the programs runner names them.
const (
	planTool       = "tool"
	planCondition  = "condition"
	planLLM        = "llm"
	planCheckpoint = "approval"
)

// planStepRequest is a plan's tool step as a request of its own, to be
// read and shown as a single call is.
func planStepRequest(r approval.Request, s approval.PlanStep) approval.Request {
	return approval.Request{Server: s.Server, Tool: s.Tool, Client: r.Client, Args: s.Args}
}

// planStories reads each tool step of a plan, as readCall reads a call.
func planStories(r approval.Request) []callStory {
	stories := make([]callStory, len(r.Plan.Steps))
	for i, s := range r.Plan.Steps {
		if s.Kind == planTool {
			stories[i] = readCall(planStepRequest(r, s), statFile)
		}
	}
	return stories
}

// planWarnings are the warnings of a plan's steps, each naming its step.
func planWarnings(r approval.Request, stories []callStory) []string {
	var out []string
	for i, st := range stories {
		for _, w := range st.warnings {
			out = append(out, fmt.Sprintf("Step %d (%s): %s", i+1, plainLine(r.Plan.Steps[i].Name), w))
		}
	}
	return out
}

// planBody shows what a plan approval asks: the program's steps in order,
// why Gatehouse asks, and what the answer is bound to.
func planBody(r approval.Request, stories []callStory) fyne.CanvasObject {
	pad := theme.Padding()
	p := r.Plan
	var sections []fyne.CanvasObject

	steps := []fyne.CanvasObject{heading(fmt.Sprintf("What will happen: %s, in this order", plural(len(p.Steps), "step", "steps")))}
	if warns := planWarnings(r, stories); len(warns) > 0 {
		warn := textBlock(strings.Join(warns, "\n"), widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}})
		steps = append(steps, newPanel(theme.ColorNameWarning, 0x2A, container.NewBorder(nil, nil,
			container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.WarningIcon()))), nil, warn)))
	}
	for i, s := range p.Steps {
		steps = append(steps, planStep(r, i, s, stories[i]))
	}
	if hasReferences(p) {
		steps = append(steps, note("${steps.NAME.…} stands for what an earlier step gave, filled in when the step runs."))
	}
	sections = append(sections, container.NewVBox(steps...))

	bound := textBlock(fmt.Sprintf("Approving lets each step run as shown, each still a governed call with its own receipt. "+
		"This answer is bound to this exact program (%s): a different program, or this one with any step changed, asks again.",
		shortHash(plainLine(p.Hash))), widget.RichTextStyle{})
	sections = append(sections, newPanel(theme.ColorNamePrimary, 0x22, container.NewBorder(nil, nil,
		container.NewVBox(widget.NewIcon(theme.NewPrimaryThemedResource(theme.InfoIcon()))), nil, bound)))
	if d := plain(strings.TrimSpace(r.Description)); d != "" {
		sections = append(sections, textBlock(d, secondaryBlock))
	}

	return container.New(layout.NewCustomPaddedLayout(pad, pad*2, pad*3, pad*3), container.NewVBox(sections...))
}

// planStep shows step i of a plan: its number, name and kind, and what it
// does.
func planStep(r approval.Request, i int, s approval.PlanStep, story callStory) fyne.CanvasObject {
	kind, body := "", []fyne.CanvasObject{}
	codeStyle := widget.RichTextStyle{TextStyle: fyne.TextStyle{Monospace: true}}
	switch s.Kind {
	case planTool:
		kind = fmt.Sprintf("tool %s on %s", plainLine(s.Tool), plainLine(s.Server))
		sub := planStepRequest(r, s)
		if story.kind != otherCall {
			body = append(body, textBlock(story.what(sub), widget.RichTextStyle{}))
		}
		switch {
		case story.kind != otherCall:
			body = append(body, callDetail(sub, story))
		case len(s.Args) > 0 && string(s.Args) != "{}":
			body = append(body, newPanel(theme.ColorNameInputBackground, 0, textBlock(argTree(s.Args), codeStyle)))
		default:
			body = append(body, note("no arguments"))
		}
	case planCondition:
		kind = "condition"
		body = append(body, newPanel(theme.ColorNameInputBackground, 0, textBlock(plain(s.Detail), codeStyle)))
	case planLLM:
		kind = "a question to the model"
		body = append(body, textBlock(plain(s.Detail), widget.RichTextStyle{}))
	case planCheckpoint:
		kind = "a person's checkpoint"
		body = append(body, newPanel(theme.ColorNameWarning, 0x1A, container.NewBorder(nil, nil,
			container.NewVBox(widget.NewIcon(theme.NewWarningThemedResource(theme.AccountIcon()))), nil,
			textBlock("The run stops here until a person lets it go on: "+plain(strings.TrimPrefix(s.Detail, "a person's checkpoint: ")), widget.RichTextStyle{}))))
	default:
		kind = plainLine(s.Kind)
		body = append(body, textBlock(plain(s.Detail), widget.RichTextStyle{}))
	}
	title := widget.NewRichText(
		&widget.TextSegment{Text: fmt.Sprintf("%d. %s", i+1, plainLine(s.Name)), Style: widget.RichTextStyle{TextStyle: fyne.TextStyle{Bold: true}, Inline: true}},
		&widget.TextSegment{Text: "  " + kind, Style: secondary})
	title.Wrapping = fyne.TextWrapWord
	return container.NewVBox(widget.NewSeparator(), title,
		container.New(layout.NewCustomPaddedLayout(0, 0, theme.Padding()*4, 0), container.NewVBox(body...)))
}

// hasReferences reports whether a plan's steps take what earlier steps
// gave.
func hasReferences(p *approval.Plan) bool {
	for _, s := range p.Steps {
		if strings.Contains(string(s.Args), "${steps.") {
			return true
		}
	}
	return false
}
