package verify

import (
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// maxCosignatureLines bounds the lines of the cosignatures file, as note
// bounds a note's signatures.
const maxCosignatureLines = 100

// A Witnessed is a cosignature of the bundle's checkpoint by a witness the
// auditor named, that verifies.
type Witnessed struct {
	Witness string `json:"witness"` // its name
	Key     string `json:"key"`     // its verifier key
	Time    string `json:"time"`    // the time the cosignature carries, RFC 3339
}

// finishWitnesses checks the cosignatures file against the witnesses the
// auditor named (docs/evidence.md, 7.7). The check is reported only when
// there is a file or a witness named: a bundle without witnesses reports
// what it always did.
func (v *verifier) finishWitnesses() {
	named := dedupeWitnesses(v.opts.Witnesses)
	if len(named) == 0 && !v.present[FileCosignatures] {
		return
	}
	c := &Check{Name: CheckWitnesses}
	v.c[CheckWitnesses] = c
	v.report.Checks = append(v.report.Checks, c)
	v.report.WitnessesNamed = len(named)
	data := v.readFile(FileCosignatures, CheckWitnesses)
	if v.cp == nil {
		c.Status, c.Detail = Skipped, "no checkpoint to check the cosignatures against"
		return
	}
	text := v.cp.Text()
	byWitness := map[string]int{} // named witness -> line
	unknown := 0
	if data != nil {
		if len(data) == 0 || data[len(data)-1] != '\n' {
			c.fail(Problem{Index: -1, File: FileCosignatures, Msg: "not lines ending in LF: the file holds one or more signature lines, each ended by LF"})
		}
		lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
		if len(lines) > maxCosignatureLines {
			c.fail(Problem{Index: -1, File: FileCosignatures, Msg: fmt.Sprintf("%d lines; at most %d", len(lines), maxCosignatureLines)})
			lines = lines[:maxCosignatureLines]
		}
		for i, line := range lines {
			n := i + 1
			sl, err := entry.ParseSignatureLine(line)
			if err != nil {
				c.fail(Problem{Index: -1, File: FileCosignatures, Line: n, Msg: err.Error()})
				continue
			}
			k, ok := findWitness(named, sl)
			if !ok {
				unknown++
				c.note("%s:%d: a cosignature by %s (key hash %08x), not a witness named: ignored", FileCosignatures, n, sl.Name, sl.KeyHash)
				continue
			}
			if prior, twice := byWitness[k.String()]; twice {
				c.fail(Problem{Index: -1, File: FileCosignatures, Line: n, Msg: fmt.Sprintf("a second cosignature by %s (the first is line %d)", k.Name, prior)})
				continue
			}
			byWitness[k.String()] = n
			t, err := entry.VerifyCosignature(k, text, sl)
			if err != nil {
				c.fail(Problem{Index: -1, File: FileCosignatures, Line: n, Msg: fmt.Sprintf("the cosignature by %s does not verify over the checkpoint: %v", k.Name, err)})
				continue
			}
			v.report.Witnessed = append(v.report.Witnessed, Witnessed{Witness: k.Name, Key: k.String(), Time: t.Format("2006-01-02T15:04:05Z")})
		}
	}
	got := len(v.report.Witnessed)
	c.Detail = fmt.Sprintf("cosigned by %d of the %d witnesses named", got, len(named))
	if unknown > 0 {
		c.Detail += fmt.Sprintf("; %d %s by witnesses not named, ignored", unknown, plural(unknown, "cosignature", "cosignatures"))
	}
	for _, w := range v.report.Witnessed {
		c.note("%s cosigned the checkpoint at %s", w.Witness, w.Time)
	}
	if req := v.opts.WitnessesRequired; got < req {
		c.failf(-1, "", "witnessed by %d of the %d witnesses named; %d required", got, len(named), req)
	}
	if len(named) == 0 && c.Failures == 0 {
		c.Status = Skipped
		c.Detail = fmt.Sprintf("%d %s in the bundle; no witness named to check them against (--witness)", unknown, plural(unknown, "cosignature", "cosignatures"))
	}
}

func dedupeWitnesses(ks []entry.WitnessKey) []entry.WitnessKey {
	var out []entry.WitnessKey
	seen := map[string]bool{}
	for _, k := range ks {
		if !seen[k.String()] {
			seen[k.String()] = true
			out = append(out, k)
		}
	}
	return out
}

func findWitness(named []entry.WitnessKey, sl entry.SignatureLine) (entry.WitnessKey, bool) {
	for _, k := range named {
		if k.Name == sl.Name && k.KeyHash() == sl.KeyHash {
			return k, true
		}
	}
	return entry.WitnessKey{}, false
}

// assurance says what the report shows of the checkpoint, from the least
// to the most: signed by the log; its first key pinned; witnessed.
func (v *verifier) assurance() string {
	if !v.report.OK() {
		return "none: verification failed"
	}
	a := "signed by the log"
	if v.report.Pinned {
		a += ", key pinned"
	}
	if n := v.report.WitnessesNamed; n > 0 {
		a += fmt.Sprintf(", witnessed by %d of the %d %s named", len(v.report.Witnessed), n, plural(n, "witness", "witnesses"))
	}
	return a
}
