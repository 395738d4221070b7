package app

import (
	"fyne.io/fyne/v2"
	"fyne.io/fyne/v2/widget"
)

// A term is a word Gatehouse uses that a user may not know, and what it
// means, in a sentence or two. The views use plain words and keep the term
// one click away, in Settings > Words Gatehouse uses; docs/glossary.md says
// the same at more length.
type term struct {
	word, meaning string
}

// glossary is every term, in the order a user meets them.
var glossary = []term{
	{"Ask me", "The policy's third answer, besides Allow and Deny (APPROVAL_REQUIRED in policy files): the call waits until you answer in the approval window."},
	{"Capability", "The name a rule gives a tool: mcp.SERVER.TOOL, where * matches any part. The views write it as “tool TOOL on SERVER”."},
	{"Risk", "How much harm a tool can do, from its name (read_, delete_, run_ …) and the hints its server gives. The defaults by risk decide what no rule decides."},
	{"Pin", "The fingerprint of a tool's definition as you last accepted it. A tool whose definition changed is held until you review the change."},
	{"Quarantine", "A newly added server's state until you review it: each of its calls asks you, whatever the policy says."},
	{"Observe mode", "A rule in observe mode decides nothing: it records what it would have decided, so you can try it before you enforce it."},
	{"Confinement", "On Linux, the server runs with Landlock limits: it reads the system and its own files, writes a private folder, and reaches nothing else you did not allow."},
	{"Receipt", "The signed record Gatehouse writes before a call runs: who asked for which tool, what was decided and by which rule. An outcome, written after, says how the call ended."},
	{"Payload", "A call's arguments and result, stored beside its receipt rather than in it, so that they can be erased without breaking the evidence."},
	{"Salted commitment", "What a receipt holds instead of the payload: a hash of the payload mixed with a random salt. It proves what the payload was, and says nothing of it once the payload and salt are erased."},
	{"Evidence log", "Every receipt and outcome, in order, in a tamper-evident log: changing, removing or reordering an entry afterwards is detected."},
	{"Checkpoint", "A signed statement of the log's size and its tree's root hash at one moment. An export carries one; a later checkpoint proves the log only grew."},
	{"Inclusion proof", "A few hashes that show an entry is in the log a checkpoint describes, without the rest of the log."},
	{"Witness", "Someone else who keeps your checkpoints, so that the log cannot later be rewritten and shown differently to different people."},
	{"Signing key", "The key, kept in your keychain, that signs every entry. Auditors check entries with its public half."},
	{"Proxy", "gatehouse proxy NAME: the small program your agent runs in place of the server. It asks the policy, writes the receipt, then passes the call on."},
}

// glossaryView lists the terms, each opening to its meaning.
func glossaryView() fyne.CanvasObject {
	acc := widget.NewAccordion()
	for _, t := range glossary {
		l := widget.NewLabel(t.meaning)
		l.Wrapping = fyne.TextWrapWord
		acc.Append(widget.NewAccordionItem(t.word, l))
	}
	return acc
}
