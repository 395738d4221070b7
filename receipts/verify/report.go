package verify

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// The checks of a report, in the order they are reported.
const (
	CheckManifest    = "manifest"              // signed by a key of the log; files, indexes and counts as it says
	CheckCanonical   = "canonical form"        // every entry is canonical JSON of the format, with a well-formed body
	CheckOrder       = "log order"             // one log, ascending indexes, no duplicates, nothing missing
	CheckKeyChain    = "key chain"             // first key self-signed, each rotation signed by a key before it, JWKS, pin
	CheckKeys        = "key resolution"        // every entry's key was announced in the log at or before it
	CheckSignatures  = "signatures"            // every entry's Ed25519 signature
	CheckInclusion   = "inclusion"             // every entry is in the checkpoint's tree
	CheckPrev        = "prior trees"           // every entry's prev is the tree before it, consistent with the checkpoint
	CheckCheckpoint  = "checkpoint"            // the checkpoint's note signature, log and size
	CheckConsistency = "consistency"           // the checkpoint's tree extends an earlier one
	CheckLinkage     = "receipts and outcomes" // every outcome follows the receipt that allowed its call
	CheckPayloads    = "payloads"              // arguments and results match their commitments
	CheckErasures    = "erasures"              // every tombstone is covered by an erasure entry, and the reverse
	// CheckWitnesses is reported only for a bundle with cosignatures, or
	// when the auditor names witnesses.
	CheckWitnesses = "witnesses" // the named witnesses' cosignatures of the checkpoint
)

var checkOrder = []string{
	CheckManifest, CheckCanonical, CheckOrder, CheckKeyChain, CheckKeys, CheckSignatures,
	CheckInclusion, CheckPrev, CheckCheckpoint, CheckConsistency, CheckLinkage, CheckPayloads, CheckErasures,
}

// Status is a check's result.
type Status string

const (
	OK      Status = "ok"
	Failed  Status = "FAIL"
	Skipped Status = "skipped" // nothing to check, or not checkable; not a failure
)

// A Report is the result of verifying a bundle: what the bundle claims, and
// one row per check.
type Report struct {
	Log        string    `json:"log"`                // the log's id, from the checkpoint
	Size       int64     `json:"size"`               // the checkpoint's tree size
	TreeHash   string    `json:"tree_hash"`          // the checkpoint's tree hash
	SignedBy   string    `json:"signed_by"`          // the key that signed the checkpoint
	FirstKey   string    `json:"first_key"`          // the log's first key: the one to pin
	Pinned     bool      `json:"pinned"`             // the first key was checked against a pin
	Entries    int64     `json:"entries"`            // lines of entries.jsonl
	Complete   bool      `json:"complete"`           // the bundle holds the whole log
	ExportedAt string    `json:"exported_at"`        // from the manifest
	Generator  string    `json:"generator"`          // from the manifest
	Filters    string    `json:"filters"`            // from the manifest
	Erasures   []Erasure `json:"erasures"`           // payloads erased, and by which entry
	NotKept    []NotKept `json:"not_kept,omitempty"` // payloads the log did not keep, as their entries signed
	// WitnessesNamed is how many witnesses the auditor named; Witnessed,
	// those of them whose cosignature of the checkpoint verifies.
	WitnessesNamed int         `json:"witnesses_named,omitempty"`
	Witnessed      []Witnessed `json:"witnessed,omitempty"`
	// Assurance says what the checks show of the checkpoint: "signed by
	// the log", then ", key pinned", then ", witnessed by N of the M
	// witnesses named"; "none: verification failed" when a check failed.
	Assurance string   `json:"assurance"`
	Checks    []*Check `json:"checks"`
}

// A Check is one row of the report.
type Check struct {
	Name     string    `json:"name"`
	Status   Status    `json:"status"`
	Detail   string    `json:"detail"` // what was checked, in a few words
	Failures int64     `json:"failures"`
	Problems []Problem `json:"problems,omitempty"` // the first maxProblems failures
	Notes    []string  `json:"notes,omitempty"`    // findings that are not failures
}

// A Problem is one failure, naming the entry when it is about one.
type Problem struct {
	Index int64  `json:"index"`          // the entry's index; -1 when not about one entry
	ID    string `json:"id,omitempty"`   // the entry's id, when known
	File  string `json:"file,omitempty"` // the bundle file, when the problem is in one
	Line  int    `json:"line,omitempty"` // its line, from 1
	Msg   string `json:"msg"`
}

func (p Problem) String() string {
	var where []string
	if p.Index >= 0 {
		s := fmt.Sprintf("entry %d", p.Index)
		if p.ID != "" {
			s += " (" + p.ID + ")"
		}
		where = append(where, s)
	}
	if p.File != "" {
		s := p.File
		if p.Line > 0 {
			s += fmt.Sprintf(":%d", p.Line)
		}
		where = append(where, s)
	}
	if len(where) == 0 {
		return p.Msg
	}
	return strings.Join(where, ", ") + ": " + p.Msg
}

// An Erasure is one erased payload.
type Erasure struct {
	Entry       string `json:"entry"` // id of the entry whose payload was erased
	Index       int64  `json:"index"`
	Part        string `json:"part"`
	ErasedBy    string `json:"erased_by"` // id of the erasure entry
	ErasedIndex int64  `json:"erased_index"`
	Time        string `json:"time"` // of the erasure entry
	Reason      string `json:"reason"`
}

// A NotKept is a payload the log did not keep, as its entry's signed body
// says (args_not_kept, result_not_kept): only its salt is in the bundle.
type NotKept struct {
	Entry string `json:"entry"` // id of the entry that commits to it
	Index int64  `json:"index"`
	Part  string `json:"part"`
	Size  int64  `json:"size"` // its length in bytes
	Cap   int64  `json:"cap"`  // the most the log kept of one payload then
}

// maxProblems bounds the problems a check keeps; Failures counts them all.
const maxProblems = 200

// OK reports whether no check failed.
func (r *Report) OK() bool {
	for _, c := range r.Checks {
		if c.Status == Failed {
			return false
		}
	}
	return true
}

// Failed returns the checks that failed.
func (r *Report) Failed() []*Check {
	var out []*Check
	for _, c := range r.Checks {
		if c.Status == Failed {
			out = append(out, c)
		}
	}
	return out
}

// Check returns the check with the given name (one of the Check constants).
func (r *Report) Check(name string) *Check {
	for _, c := range r.Checks {
		if c.Name == name {
			return c
		}
	}
	return nil
}

// WriteText writes the report as a table, each failure on a line of its
// own under its check.
func (r *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "log:        %s\n", orDash(r.Log))
	fmt.Fprintf(&b, "checkpoint: %d entries, tree hash %s, signed by key %s\n", r.Size, orDash(r.TreeHash), orDash(r.SignedBy))
	scope := "partial: the entries the filters chose, and those they need to verify"
	if r.Complete {
		scope = "complete: every entry of the log"
	}
	fmt.Fprintf(&b, "bundle:     %d entries (%s)\n", r.Entries, scope)
	if r.ExportedAt != "" {
		fmt.Fprintf(&b, "exported:   %s by %s, filters: %s\n", r.ExportedAt, orDash(r.Generator), r.Filters)
	}
	pin := "not pinned: the log vouches for it alone; pin it with --pin-key"
	if r.Pinned {
		pin = "pinned"
	}
	fmt.Fprintf(&b, "first key:  %s (%s)\n\n", orDash(r.FirstKey), pin)
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}

	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tRESULT\tDETAIL")
	for _, c := range r.Checks {
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	b.Reset()
	for _, c := range r.Checks {
		if len(c.Problems) == 0 && len(c.Notes) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n%s (%s):\n", c.Name, c.Status)
		for _, p := range c.Problems {
			fmt.Fprintf(&b, "  FAIL %s\n", p)
		}
		if more := c.Failures - int64(len(c.Problems)); more > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", more)
		}
		for _, n := range c.Notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	fmt.Fprintf(&b, "\nassurance: %s\n", r.Assurance)
	failed := r.Failed()
	if len(failed) == 0 {
		fmt.Fprintf(&b, "\nresult: ok (%d checks)\n", len(r.Checks))
	} else {
		names := make([]string, len(failed))
		for i, c := range failed {
			names[i] = c.Name
		}
		fmt.Fprintf(&b, "\nresult: FAIL (%d of %d checks failed: %s)\n", len(failed), len(r.Checks), strings.Join(names, ", "))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// check helpers, used while verifying.

func (c *Check) fail(p Problem) {
	c.Failures++
	if len(c.Problems) < maxProblems {
		c.Problems = append(c.Problems, p)
	}
}

func (c *Check) failf(index int64, id, format string, args ...any) {
	c.fail(Problem{Index: index, ID: id, Msg: fmt.Sprintf(format, args...)})
}

func (c *Check) note(format string, args ...any) {
	c.Notes = append(c.Notes, fmt.Sprintf(format, args...))
}
