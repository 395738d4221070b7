package proof

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// evidence builds an Evidence of receipts (tool, decision, args).
func evidence(receipts ...[3]string) *Evidence {
	ev := &Evidence{payloads: map[string][]byte{}}
	for i, r := range receipts {
		e := Entry{ID: "r-" + string(rune('a'+i)), Kind: "receipt"}
		e.Body.Tool, e.Body.Decision = r[0], r[1]
		ev.Entries = append(ev.Entries, e)
		ev.payloads[e.ID+"/args"] = []byte(r[2])
	}
	return ev
}

func ran(tool, args string) adversary.Run {
	return adversary.Run{Tool: tool, Called: tool, Args: json.RawMessage(args)}
}

func TestReceiptsCover(t *testing.T) {
	tests := []struct {
		name    string
		ev      *Evidence
		runs    []adversary.Run
		slipped string // in the error; "" for none
	}{
		{"each run its receipt", evidence([3]string{"echo", "ALLOW", `{"m":"a"}`}, [3]string{"echo", "ALLOW", `{"m":"b"}`}),
			[]adversary.Run{ran("echo", `{"m":"b"}`), ran("echo", `{"m":"a"}`)}, ""},
		{"a receipt that did not run", evidence([3]string{"echo", "ALLOW", `{"m":"a"}`}), nil, ""},
		{"a run without a receipt", evidence(), []adversary.Run{ran("echo", `{"m":"a"}`)}, "no receipt allowed it"},
		{"a run whose receipt denied", evidence([3]string{"delete", "DENY", `{"p":"x"}`}), []adversary.Run{ran("delete", `{"p":"x"}`)}, "no receipt allowed it"},
		{"two runs, one receipt", evidence([3]string{"echo", "ALLOW", `{"m":"a"}`}),
			[]adversary.Run{ran("echo", `{"m":"a"}`), ran("echo", `{"m":"a"}`)}, "no receipt allowed it"},
		{"arguments the gate changed (a secret resolved)", evidence([3]string{"echo", "ALLOW", `{"m":"vault://secret/x"}`}),
			[]adversary.Run{ran("echo", `{"m":"s3cret"}`)}, ""},
		{"key order does not matter", evidence([3]string{"w", "ALLOW", `{"a":1,"b":2}`}), []adversary.Run{ran("w", `{"b":2,"a":1}`)}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := receiptsCover(tt.ev, tt.runs)
			if tt.slipped == "" && err != nil || tt.slipped != "" && (err == nil || !strings.Contains(err.Error(), tt.slipped)) {
				t.Errorf("receiptsCover = %v, want %q", err, tt.slipped)
			}
		})
	}
}

func TestLeaked(t *testing.T) {
	const v = "sk-eval-abcdefghijklmnop"
	for name, data := range map[string]string{
		"raw":          `{"result":{"text":"` + v + `"}}`,
		"escaped":      `{"result":{"text":"\u0073k-eval-abcdefghijklmnop"}}`,
		"split in one": `{"result":{"content":[{"text":"sk-eval-abcd"},{"text":"efghijklmnop"}]}}`,
		"base64":       `{"result":{"text":"x` + base64.StdEncoding.EncodeToString([]byte("  "+v)) + `"}}`,
		"in stderr":    "debug: token " + v + "\n",
	} {
		if leaked(v, []byte(data)) == "" {
			t.Errorf("%s: leaked found nothing in %s", name, data)
		}
	}
	if f := leaked(v, []byte(`{"result":{"text":"[redacted by Gatehouse: secret s]"}}`)); f != "" {
		t.Errorf("leaked found %s in a redacted message", f)
	}
}

func TestReportTable(t *testing.T) {
	rep := &Report{Results: []Result{
		{Family: PolicyBypass, Name: "a", Status: Held, Duration: time.Second},
		{Family: PolicyBypass, Name: "b, longer", Status: Slipped, Detail: "it ran\nand more", Duration: 2 * time.Second},
		{Family: FaultInjection, Name: "c", Status: Skipped, Detail: "needs Linux"},
	}}
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	want := `family         case       result   time
─────────────  ─────────  ───────  ──────
policy bypass  a          held       1.0s
               b, longer  SLIPPED    2.0s
                   it ran
                   and more
faults         c          skipped    0.0s
                   needs Linux

3 cases: 1 held, 1 slipped, 1 skipped
`
	if b.String() != want {
		t.Errorf("WriteText =\n%s\nwant\n%s", b.String(), want)
	}
	if rep.OK() {
		t.Error("OK() with a slipped case")
	}
}
