package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// programsHome is a home with server-filesystem over files and
// server-memory keeping its graph in memFile, and rules for them: reads and
// directory listings allowed, writes asked of a person, moves denied.
func programsHome(t *testing.T) (home, files, memFile string) {
	t.Helper()
	nm := npmPeers(t)
	home = shortHome(t)
	os.Chmod(home, 0o700)
	files = t.TempDir()
	memFile = filepath.Join(t.TempDir(), "memory.jsonl")
	if err := os.WriteFile(filepath.Join(files, "notes.txt"), []byte("buy milk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	gatehouse(t, home, append([]string{"server", "add", "fs", "--"}, serverCmd(nm, "server-filesystem", files)...)...)
	gatehouse(t, home, append([]string{"server", "add", "memory", "--env", "MEMORY_FILE_PATH=" + memFile, "--"}, serverCmd(nm, "server-memory")...)...)
	gatehouse(t, home, "policy", "set", "mcp.fs.read_text_file", "ALLOW", "--id", "reads")
	gatehouse(t, home, "policy", "set", "mcp.fs.create_directory", "ALLOW", "--id", "mkdirs")
	gatehouse(t, home, "policy", "set", "mcp.fs.write_file", "APPROVAL_REQUIRED", "--id", "ask-writes")
	gatehouse(t, home, "policy", "set", "mcp.fs.move_file", "DENY", "--id", "no-moves")
	gatehouse(t, home, "policy", "set", "mcp.memory.*", "ALLOW", "--id", "memory")
	return home, files, memFile
}

// terminalApprover runs `gatehouse approvals` with a pipe for a keyboard.
type terminalApprover struct {
	out  *transcript
	keys io.WriteCloser
}

func startApprover(t *testing.T, home string) *terminalApprover {
	t.Helper()
	cmd := exec.Command(gatehouseBin, "--home", home, "approvals")
	keys, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	a := &terminalApprover{out: &transcript{}, keys: keys}
	errs := &transcript{}
	cmd.Stdout, cmd.Stderr = a.out, errs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { keys.Close(); cmd.Process.Kill(); cmd.Wait() })
	errs.expect(t, `listening on `)
	return a
}

func (a *terminalApprover) answer(t *testing.T, s string) {
	t.Helper()
	if _, err := io.WriteString(a.keys, s+"\n"); err != nil {
		t.Fatal(err)
	}
}

// writeProgram writes a program to a file and returns its path.
func writeProgram(t *testing.T, p map[string]any) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "program.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

var traceLine = regexp.MustCompile(`(?m)^trace (tr_\S+) .*\nstatus (\S+?)(?::|$)`)

// runProgram runs `gatehouse programs ARGS` and returns the trace's id,
// status and the whole output.
func runProgram(t *testing.T, home string, args ...string) (trace, status, out string) {
	t.Helper()
	cmd := exec.Command(gatehouseBin, append([]string{"--home", home, "programs"}, args...)...)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	out = string(b)
	m := traceLine.FindStringSubmatch(out)
	if err != nil || m == nil {
		t.Fatalf("gatehouse programs %s: %v, printed no trace:\n%s%s", strings.Join(args, " "), err, out, stderr.String())
	}
	if s := stderr.String(); s != "" {
		t.Logf("gatehouse programs %s: %s", strings.Join(args, " "), s)
	}
	return m[1], m[2], out
}

// stepStatuses is the trace's steps as "name:STATUS", in order.
func stepStatuses(t *testing.T, home, trace string) []string {
	t.Helper()
	out := gatehouse(t, home, "programs", "trace", trace)
	var got []string
	for _, m := range regexp.MustCompile(`(?m)^\s+\d+\s+(\S+)\s+\S+\s+(\S+)\s+receipt=`).FindAllStringSubmatch(out, -1) {
		got = append(got, m[1]+":"+m[2])
	}
	return got
}

func tidyProgram(files string) map[string]any {
	return map[string]any{
		"name": "tidy-notes",
		"steps": []any{
			map[string]any{"name": "read", "kind": "tool", "server": "fs", "tool": "read_text_file",
				"args": map[string]any{"path": filepath.Join(files, "notes.txt")}},
			map[string]any{"name": "milk", "kind": "condition", "if": `steps.read.text contains "milk"`, "then": "save", "else": "end"},
			map[string]any{"name": "save", "kind": "tool", "server": "fs", "tool": "write_file",
				"args": map[string]any{"path": filepath.Join(files, "shopping.txt"), "content": "${steps.read.text}"}},
			map[string]any{"name": "remember", "kind": "tool", "server": "memory", "tool": "create_entities",
				"args": map[string]any{"entities": []any{map[string]any{"name": "shopping", "entityType": "note", "observations": []any{"${steps.read.text}"}}}}},
		},
	}
}

// A program over server-filesystem and server-memory: it reads a file,
// decides with a condition, and writes only after a person approved its
// whole plan in the terminal approver; the receipts name the program, the
// run and the step; a replay matches, and one over a recorded result
// edited in the database is caught at that step.
func TestProgramsEndToEnd(t *testing.T) {
	t.Parallel() // npm peers start slowly: these e2e tests wait on them side by side
	home, files, memFile := programsHome(t)
	approver := startApprover(t, home)

	file := writeProgram(t, tidyProgram(files))
	type result struct{ trace, status, out string }
	done := make(chan result, 1)
	go func() {
		cmd := exec.Command(gatehouseBin, "--home", home, "programs", "run", file)
		out, _ := cmd.CombinedOutput()
		m := traceLine.FindStringSubmatch(string(out))
		if m == nil {
			done <- result{out: string(out)}
			return
		}
		done <- result{m[1], m[2], string(out)}
	}()
	// The approver shows the whole plan, every step with its arguments,
	// before anything is written.
	approver.out.expect(t, `(?s)plan +program tidy-notes \(sha256:[0-9a-f]{64}\), 4 steps, approved as one:\n`+
		`\s+1\. read +tool +fs\.read_text_file \{"path":"[^"]+notes\.txt"\}\n`+
		`\s+2\. milk +condition .*\n`+
		`\s+3\. save +tool +fs\.write_file \{.*shopping\.txt.*\}\n`+
		`\s+4\. remember +tool +memory\.create_entities .*\n`)
	if _, err := os.Stat(filepath.Join(files, "shopping.txt")); err == nil {
		t.Fatal("the write ran before the plan was approved")
	}
	approver.answer(t, "o")
	r := <-done
	if r.status != "SUCCESS" {
		t.Fatalf("run = %q:\n%s", r.status, r.out)
	}
	if b, err := os.ReadFile(filepath.Join(files, "shopping.txt")); err != nil || string(b) != "buy milk\n" {
		t.Errorf("after the run shopping.txt holds %q, %v; want the note", b, err)
	}
	if b, err := os.ReadFile(memFile); err != nil || !strings.Contains(string(b), "buy milk") {
		t.Errorf("the memory graph holds %q, %v; want the note", b, err)
	}
	if got, want := strings.Join(stepStatuses(t, home, r.trace), " "), "read:OK milk:OK save:OK remember:OK"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}

	// Each tool step's receipt names the program, this run and its step;
	// the write's names the plan's approver.
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	gatehouse(t, home, "verify", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	steps := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Kind string
			Body struct {
				Tool, Decision string
				Program        *struct {
					Name, Hash, Trace, Step string
					Seq                     int
				}
				Approver *struct{ Via string }
			}
		}
		json.Unmarshal([]byte(line), &e)
		if e.Kind != "receipt" || e.Body.Program == nil {
			continue
		}
		p := e.Body.Program
		if p.Name != "tidy-notes" || p.Trace != r.trace || !strings.HasPrefix(p.Hash, "sha256:") {
			t.Errorf("receipt of %s names program %+v, want tidy-notes, trace %s", e.Body.Tool, p, r.trace)
		}
		via := ""
		if e.Body.Approver != nil {
			via = e.Body.Approver.Via
		}
		steps[p.Step] = e.Body.Tool + " " + e.Body.Decision + " " + via
	}
	want := map[string]string{"read": "read_text_file ALLOW ", "save": "write_file ALLOW plan", "remember": "create_entities ALLOW "}
	for step, w := range want {
		if steps[step] != w {
			t.Errorf("receipt of step %s = %q, want %q (all: %v)", step, steps[step], w, steps)
		}
	}

	// History finds the run's receipts by its trace id, and a step's by
	// its name, as it finds calls.
	for _, q := range []struct{ text, want string }{{r.trace, "create_entities read_text_file write_file"}, {"remember", "create_entities"}} {
		var page struct{ Hits []struct{ Tool string } }
		if err := json.Unmarshal([]byte(gatehouse(t, home, "history", "--kind", "receipt", "--json", q.text)), &page); err != nil {
			t.Fatal(err)
		}
		var tools []string
		for _, h := range page.Hits {
			tools = append(tools, h.Tool)
		}
		slices.Sort(tools)
		if got := strings.Join(tools, " "); got != q.want {
			t.Errorf("history %s = receipts of %q, want %q", q.text, got, q.want)
		}
	}

	// Replay: the same transitions.
	if out := gatehouse(t, home, "programs", "replay", r.trace); !strings.Contains(out, "every transition the same (SUCCESS)") {
		t.Errorf("replay = %q, want every transition the same", out)
	}
	// The read's recorded result, edited in the database after the run: the
	// replay goes the other way at the condition, or differs at the read.
	db, err := sql.Open("sqlite", filepath.Join(home, store.DatabaseFile))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.ExecContext(context.Background(), `UPDATE program_steps SET output = ? WHERE trace = ? AND step = 'read'`,
		[]byte(`{"is_error":false,"text":"buy bread\n"}`), r.trace)
	if n, _ := res.RowsAffected(); err != nil || n != 1 {
		t.Fatalf("edit the trace: %v (%d rows)", err, n)
	}
	cmd := exec.Command(gatehouseBin, "--home", home, "programs", "replay", r.trace)
	out, err := cmd.Output()
	if err == nil || !regexp.MustCompile(`differs at step 1 \(read\): the state after the step differs`).Match(out) {
		t.Errorf("replay of the edited trace = %q, %v; want it to differ at step 1 (read) and exit 1", out, err)
	}
}

// An approval that nobody answers within the wait suspends the run; once
// the person answered, resume continues it from that step.
func TestProgramsSuspendAndResume(t *testing.T) {
	t.Parallel()
	home, files, _ := programsHome(t)
	approver := startApprover(t, home)
	file := writeProgram(t, tidyProgram(files))
	trace, status, out := runProgram(t, home, "run", "--approval-wait", "1s", file)
	if status != "SUSPENDED" || !strings.Contains(out, "save") {
		t.Fatalf("run with nobody answering = %s, want SUSPENDED at save:\n%s", status, out)
	}
	if got, want := strings.Join(stepStatuses(t, home, trace), " "), "read:OK milk:OK save:PENDING"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(files, "shopping.txt")); err == nil {
		t.Fatal("the write ran without an answer")
	}
	approver.out.expect(t, `plan +program tidy-notes`)
	approver.answer(t, "o")
	approver.out.expect(t, `approved once`)
	_, status, out = runProgram(t, home, "resume", trace)
	if status != "SUCCESS" {
		t.Fatalf("resume = %s, want SUCCESS:\n%s", status, out)
	}
	if got, want := strings.Join(stepStatuses(t, home, trace), " "), "read:OK milk:OK save:PENDING save:OK remember:OK"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}
	if b, err := os.ReadFile(filepath.Join(files, "shopping.txt")); err != nil || string(b) != "buy milk\n" {
		t.Errorf("after the resume shopping.txt holds %q, %v", b, err)
	}
	if out := gatehouse(t, home, "programs", "replay", trace); !strings.Contains(out, "every transition the same") {
		t.Errorf("replay of the resumed run = %q, want every transition the same", out)
	}
}

// A step the policy denies stops the run there: its error carries the
// gate's disclosure and receipt, and no later step runs.
func TestProgramsDeniedStepStops(t *testing.T) {
	t.Parallel()
	home, files, _ := programsHome(t)
	later := filepath.Join(files, "later")
	file := writeProgram(t, map[string]any{
		"name": "move-then-mkdir",
		"steps": []any{
			map[string]any{"name": "read", "kind": "tool", "server": "fs", "tool": "read_text_file",
				"args": map[string]any{"path": filepath.Join(files, "notes.txt")}},
			map[string]any{"name": "has", "kind": "condition", "if": `len(steps.read.text) > 0`, "then": "move", "else": "end"},
			map[string]any{"name": "move", "kind": "tool", "server": "fs", "tool": "move_file",
				"args": map[string]any{"source": filepath.Join(files, "notes.txt"), "destination": filepath.Join(files, "moved.txt")}},
			map[string]any{"name": "mkdir", "kind": "tool", "server": "fs", "tool": "create_directory",
				"args": map[string]any{"path": later}},
		},
	})
	trace, status, out := runProgram(t, home, "run", file)
	if status != "FAILED" || !regexp.MustCompile(`step move \(3\): Gatehouse denied this call: .*move_file.* \(rule no-moves\)\. It did not run\. Receipt r-\S+\.`).MatchString(out) {
		t.Errorf("run = %s, want FAILED at step 3 with the gate's disclosure:\n%s", status, out)
	}
	if got, want := strings.Join(stepStatuses(t, home, trace), " "), "read:OK has:OK move:DENIED"; got != want {
		t.Errorf("steps = %s, want %s", got, want)
	}
	if _, err := os.Stat(later); err == nil {
		t.Error("step 4 ran after step 3 was denied: the folder exists")
	}
	if _, err := os.Stat(filepath.Join(files, "notes.txt")); err != nil {
		t.Errorf("the denied move ran: %v", err)
	}
}
