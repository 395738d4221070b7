//go:build unix

package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/bench"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// echoProgramHome is a home whose policy allows the built-in echo server's
// tool, and a program of n echo steps, each passing on the text of the one
// before, with a step budget of n.
func echoProgramHome(t *testing.T, n int) (home, file string) {
	t.Helper()
	home = shortHome(t)
	os.Chmod(home, 0o700)
	gatehouse(t, home, "server", "add", "--no-quarantine", bench.ServerName, "--", gatehouseBin, bench.ServeCommand)
	gatehouse(t, home, "policy", "set", "mcp."+bench.ServerName+".echo", "ALLOW")
	var program map[string]any
	if err := json.Unmarshal(bench.ProgramBody(n, "hello"), &program); err != nil {
		t.Fatal(err)
	}
	program["budget"] = map[string]any{"max_steps": n}
	return home, writeProgram(t, program)
}

// Runs killed with kill -9 at random moments keep docs/programs.md's rule
// for a crash: a trace never claims a step whose receipt is not in the
// log, and the record of a step is durable before the call of the step
// after it runs: every step's receipt in the log has the record of the
// step before it in the trace.
func TestProgramKilledMidRun(t *testing.T) {
	t.Parallel()
	// 200 chained echo steps, the most a program may have.
	home, file := echoProgramHome(t, 200)
	ctx := context.Background()
	db, err := sql.Open("sqlite", filepath.Join(home, store.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	steps := func() int {
		var n int
		db.QueryRowContext(ctx, `SELECT count(*) FROM program_steps`).Scan(&n)
		return n
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 1))
	for range 6 {
		before := steps()
		cmd := exec.Command(gatehouseBin, "--home", home, "programs", "run", file)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// After a random number of its steps, well before its end.
		made := 1 + rng.IntN(120)
		for deadline := time.Now().Add(60 * time.Second); steps() < before+made && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Kill()
		cmd.Wait()
	}

	var lost int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM program_steps AS s
		WHERE s.receipt != '' AND NOT EXISTS (SELECT 1 FROM entries AS e WHERE e.id = s.receipt)`).Scan(&lost); err != nil {
		t.Fatal(err)
	}
	if lost != 0 {
		t.Errorf("%d steps of the traces name a receipt that is not in the log", lost)
	}
	rows, err := db.QueryContext(ctx, `SELECT json_extract(CAST(data AS TEXT), '$.body.program.trace'),
			json_extract(CAST(data AS TEXT), '$.body.program.seq'),
			EXISTS (SELECT 1 FROM program_steps AS s WHERE s.trace = json_extract(CAST(e.data AS TEXT), '$.body.program.trace')
				AND s.seq = json_extract(CAST(e.data AS TEXT), '$.body.program.seq') - 1)
		FROM entries AS e WHERE kind = 'receipt' AND instr(data, '"program":{') > 0`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	receipts, traces := 0, map[string]bool{}
	for rows.Next() {
		var trace string
		var seq int
		var before bool
		if err := rows.Scan(&trace, &seq, &before); err != nil {
			t.Fatal(err)
		}
		receipts++
		traces[trace] = true
		if seq > 1 && !before {
			t.Errorf("trace %s: the receipt of step %d is in the log, the record of step %d is not", trace, seq, seq-1)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var running int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM program_traces WHERE status = 'RUNNING'`).Scan(&running); err != nil {
		t.Fatal(err)
	}
	// Each run was killed in its course, after it had made calls.
	if len(traces) != 6 || running != 6 || receipts < 6*2 {
		t.Fatalf("%d runs made %d receipts, %d left RUNNING; want 6 runs killed in their course, each after a few calls", len(traces), receipts, running)
	}
	t.Logf("6 runs killed after %d calls in all", receipts)
}

// gatehouse programs run is read by a person: its stderr holds warnings
// and errors only, not a log line a step, unless a log level is asked for;
// the home's log file has every line either way.
func TestProgramsRunKeepsStderrForPeople(t *testing.T) {
	t.Parallel()
	home, file := echoProgramHome(t, 3)
	for _, tt := range []struct {
		flags []string
		logs  bool
	}{{nil, false}, {[]string{"--log-level", "info"}, true}} {
		cmd := exec.Command(gatehouseBin, append(append([]string{"--home", home, "programs", "run"}, tt.flags...), file)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil || !strings.Contains(string(out), "status SUCCESS") {
			t.Fatalf("programs run %v: %v\n%s%s", tt.flags, err, out, stderr.String())
		}
		if got := strings.Contains(stderr.String(), "msg=decided"); got != tt.logs {
			t.Errorf("programs run %v: stderr has the log's lines: %v, want %v:\n%s", tt.flags, got, tt.logs, stderr.String())
		}
	}
	b, err := os.ReadFile(filepath.Join(home, "logs", "gatehouse.log"))
	if n := strings.Count(string(b), `"msg":"decided"`); err != nil || n < 6 {
		t.Errorf("the log file has %d decisions (%v), want the 6 of both runs", n, err)
	}
}
