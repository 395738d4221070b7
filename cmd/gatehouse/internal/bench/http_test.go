package bench

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// Calls over HTTP are measured direct and through gatehouse serve, and
// each call through serve is governed: the home's log holds its receipt,
// made for the token's client.
func TestRunHTTP(t *testing.T) {
	home := mustGovernedHome(t)
	r, err := RunHTTP(t.Context(), HTTPConfig{Gatehouse: gatehouse, Home: home, Calls: 20, Rounds: 2, Payload: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.Direct.Calls != 20 || r.Serve.Calls != 20 || r.Direct.PerSecond <= 0 || r.Serve.PerSecond <= 0 || len(r.RoundRatios) != 2 {
		t.Errorf("direct %+v, serve %+v, round ratios %v: want 20 calls each way in 2 rounds", r.Direct, r.Serve, r.RoundRatios)
	}
	out, err := exec.Command(gatehouse, "--home", home, "history", "--server", ServerName, "--kind", "receipt", "--limit", "500", "--json").Output()
	if err != nil {
		t.Fatalf("gatehouse history: %v", err)
	}
	var found struct {
		Hits []struct {
			Client   string `json:"client"`
			Decision string `json:"decision"`
		} `json:"hits"`
	}
	if err := json.Unmarshal(out, &found); err != nil {
		t.Fatalf("gatehouse history --json: %v", err)
	}
	var receipts int
	for _, e := range found.Hits {
		if e.Client == "bench" && e.Decision == "ALLOW" {
			receipts++
		}
	}
	// The 50 calls of the warm-up and the 20 measured.
	if receipts != 70 {
		t.Errorf("%d receipts allowing the bench client's calls, want 70:\n%.2000s", receipts, out)
	}
	var b strings.Builder
	if err := r.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"direct", "serve", "calls/s", "of direct calls/s"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, b.String())
		}
	}
}
