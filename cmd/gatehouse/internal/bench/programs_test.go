package bench

import (
	"os/exec"
	"strings"
	"testing"
)

// mustGovernedHome returns a home with the echo server registered and its
// echo tool allowed: the home's log signs with a key in the keychain.
func mustGovernedHome(tb testing.TB) string {
	tb.Helper()
	home := mustHome(tb)
	out, err := exec.Command(gatehouse, "--home", home, "policy", "set", "mcp."+ServerName+".echo", "ALLOW").CombinedOutput()
	if err != nil {
		tb.Fatalf("gatehouse policy set: %v\n%s", err, out)
	}
	return home
}

// Programs run and are measured beside the same calls one by one, every
// step with its receipt, and every trace replays the same.
func TestRunPrograms(t *testing.T) {
	cfg := ProgramsConfig{Gatehouse: gatehouse, Home: mustGovernedHome(t), Sizes: []int{3}, Programs: 4, Rounds: 2, Payload: 50}
	r, err := RunPrograms(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Sizes) != 1 || r.Sizes[0].Client.Programs != 4 || r.Sizes[0].Program.Programs != 4 || r.Sizes[0].Program.PerSecond <= 0 {
		t.Errorf("sizes = %+v, want 4 programs of 3 steps each way", r.Sizes)
	}
	// The warm-up's program and the 4 measured, each step with a receipt.
	if rp := r.Replay; rp.Traces != 5 || rp.Steps != 15 || rp.Receipts != 15 || !rp.Matched || rp.StepsPerSec <= 0 {
		t.Errorf("replay = %+v, want 5 traces, 15 steps, each naming its receipt, the same transitions", rp)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"3 steps", "one by one, through the proxy", "one governed program", "replay: 5 traces, 15 steps", "goal: replay >= 1300 steps/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}

// A program of n steps takes each step's message from the step before.
func TestProgramBody(t *testing.T) {
	got := string(ProgramBody(3, "hi"))
	for _, want := range []string{`"name":"bench-3"`, `"message":"hi"`, `"message":"${steps.s1.text}"`, `"message":"${steps.s2.text}"`, `"name":"s3"`} {
		if !strings.Contains(got, want) {
			t.Errorf("ProgramBody(3) = %s, want it to hold %s", got, want)
		}
	}
}
