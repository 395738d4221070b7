package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof"
)

// The demo runs headless, with no keychain session at all, and every step
// behaves.
func TestDemo(t *testing.T) {
	cmd := exec.Command(gatehouseBin, "demo")
	cmd.Env = withoutKeychain(os.Environ())
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("gatehouse demo: %v\n%s\n%s", err, out.String(), stderr.String())
	}
	for _, want := range []string{"in-memory keychain", "✔ the verifier caught it", "What this showed:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the demo's output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "✘") {
		t.Errorf("a step of the demo did not behave:\n%s", out.String())
	}
}

// withoutKeychain is env without what reaches a keychain session.
func withoutKeychain(env []string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, "DBUS_SESSION_BUS_ADDRESS=") {
			out = append(out, kv)
		}
	}
	return out
}

// evalReport runs gatehouse eval with args and returns its report; the test
// fails if the command fails (a case slipped) or the report is short.
func evalReport(t *testing.T, args ...string) *proof.Report {
	t.Helper()
	cmd := exec.Command(gatehouseBin, append([]string{"eval", "--json", "--quiet"}, args...)...)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	err := cmd.Run()
	var rep proof.Report
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil {
		t.Fatalf("gatehouse eval %s: %v (report: %v)\nstderr:\n%s", strings.Join(args, " "), err, jerr, stderr.String())
	}
	for _, r := range rep.Results {
		switch r.Status {
		case proof.Slipped:
			t.Errorf("SLIPPED %s / %s: %s\n    claim: %s", r.Family, r.Name, r.Detail, r.Claim)
		case proof.Skipped:
			t.Logf("skipped %s / %s: %s", r.Family, r.Name, r.Detail)
		}
	}
	if err != nil && rep.OK() {
		t.Errorf("gatehouse eval %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return &rep
}

// The adversarial evaluation: every promise holds. make test runs it, so a
// slip fails the build. Under -short (the -race run, where each case takes
// seconds) it runs a case of each family.
func TestEval(t *testing.T) {
	if testing.Short() {
		rep := evalReport(t, "--run", "/(deny rule, exact name|identical calls racing one approval|echoed as it is|"+
			"database: the newest entries deleted|a forged answer to a held call|a rule's denial)$")
		if len(rep.Results) != 6 {
			t.Errorf("the -short evaluation ran %d cases, want 6", len(rep.Results))
		}
		return
	}
	rep := evalReport(t)
	families := map[proof.Family]int{}
	for _, r := range rep.Results {
		families[r.Family]++
	}
	if len(rep.Results) < 40 {
		t.Errorf("the evaluation has %d cases, want at least 40", len(rep.Results))
	}
	for _, f := range proof.Families {
		if families[f] == 0 {
			t.Errorf("no case in family %q", f)
		}
	}
}

// The fault suite: proxies killed across thousands of calls (hundreds
// under -short), the server crashing, the database locked, the disk full,
// the keychain and the approver disappearing.
func TestEvalFaults(t *testing.T) {
	calls := "3000"
	if testing.Short() {
		calls = "300"
	}
	rep := evalReport(t, "--faults", "--calls", calls)
	if len(rep.Results) < 6 {
		t.Errorf("the fault suite ran %d cases, want 6", len(rep.Results))
	}
	for _, r := range rep.Results {
		if r.Note != "" {
			t.Logf("%s: %s", r.Name, r.Note)
		}
	}
}
