//lint:file-ignore SA1019 llm steps ask the client's model through sampling, deprecated in MCP 2026-07-28 but served by clients

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// programsClient starts `gatehouse programs` as an MCP client named name
// would, over stdio, speaking protocol version (empty: the SDK's latest), and
// returns its session and the server's stderr.
func programsClient(t *testing.T, home, name, version string, opts *mcp.ClientOptions) (*mcp.ClientSession, *syncBuffer) {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: name, Version: "1"}, opts)
	cmd := exec.Command(gatehouseBin, "--home", home, "programs")
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.CommandTransport{Command: cmd}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connect to gatehouse programs: %v\n%s", err, stderr)
	}
	t.Cleanup(func() { cs.Close() })
	return cs, stderr
}

// callJSON calls a tool and returns its structured content, or the text of
// its error.
func callJSON(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any, out any) (errText string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", tool, err)
	}
	if res.IsError {
		return contentText(res)
	}
	b, err := json.Marshal(res.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, out); err != nil {
		t.Fatalf("%s answered %s: %v", tool, b, err)
	}
	return ""
}

type runResult struct {
	Trace     string `json:"trace"`
	Status    string `json:"status"`
	StepCount int    `json:"step_count"`
	Error     string `json:"error"`
}

// samplingVersion is the newest protocol version in which a server may ask
// the client's model while it serves a request: from 2026-07-28, sampling
// there is only through multi round-trip requests (SEP-2322), which the
// programs server does not make.
const samplingVersion = "2025-11-25"

// sortingProgram reads a note, asks the client's model whether it is a
// shopping note, and keeps it in memory when it is.
func sortingProgram(name, note, entity string) map[string]any {
	return map[string]any{
		"name": name,
		"steps": []any{
			map[string]any{"name": "read", "kind": "tool", "server": "fs", "tool": "read_text_file", "args": map[string]any{"path": note}},
			map[string]any{"name": "ask", "kind": "llm", "prompt": "Is this a shopping note? ${steps.read.text}", "allowed_outputs": []any{"yes", "no"}},
			map[string]any{"name": "shopping", "kind": "condition", "if": `steps.ask.text == "yes"`, "then": "remember", "else": "end"},
			map[string]any{"name": "remember", "kind": "tool", "server": "memory", "tool": "create_entities",
				"args": map[string]any{"entities": []any{map[string]any{"name": entity, "entityType": "note", "observations": []any{"${steps.read.text}"}}}}},
		},
	}
}

// The programs server over MCP, driven by the SDK's client: a run whose
// llm step the client's model answers (sampling), the model's view of its
// trace, the saved programs; and a client without sampling told clearly
// that the llm step cannot run.
func TestProgramsServerOverMCP(t *testing.T) {
	t.Parallel()
	home, files, memFile := programsHome(t)
	var mu sync.Mutex
	var prompts []string
	cs, stderr := programsClient(t, home, "agent", samplingVersion, &mcp.ClientOptions{
		CreateMessageHandler: func(_ context.Context, req *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			text := req.Params.Messages[0].Content.(*mcp.TextContent).Text
			mu.Lock()
			prompts = append(prompts, text)
			mu.Unlock()
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: " yes\n"}}, nil
		},
	})
	tools, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	slices.Sort(names)
	if got := strings.Join(names, " "); got != "delete_program get_program get_trace list_programs resume_program run_program" {
		t.Errorf("tools = %s", got)
	}

	note := filepath.Join(files, "notes.txt")
	var run runResult
	if e := callJSON(t, cs, "run_program", map[string]any{"program": sortingProgram("sort-notes", note, "milk")}, &run); e != "" || run.Status != "SUCCESS" || run.StepCount != 4 {
		t.Fatalf("run_program = %+v (%s), want SUCCESS in 4 steps\n%s", run, e, stderr)
	}
	if len(prompts) != 1 || prompts[0] != "Is this a shopping note? buy milk\n" {
		t.Errorf("the client's model was asked %q, want one prompt with the note", prompts)
	}
	if b, err := os.ReadFile(memFile); err != nil || !strings.Contains(string(b), `"name":"milk"`) {
		t.Errorf("memory after the run = %q, %v; want the entity", b, err)
	}

	// get_trace: the model's projection of the run, and nothing else.
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_trace", Arguments: map[string]any{"trace": run.Trace}})
	if err != nil || res.IsError {
		t.Fatalf("get_trace = %v, %v", contentText(res), err)
	}
	raw, _ := json.Marshal(res.StructuredContent)
	var view struct {
		Trace, Program, Status string
		StepCount              int `json:"step_count"`
		Steps                  []map[string]any
	}
	json.Unmarshal(raw, &view)
	var steps []string
	for _, s := range view.Steps {
		steps = append(steps, fmt.Sprintf("%v:%v:%v", s["step"], s["kind"], s["status"]))
	}
	if view.Trace != run.Trace || view.Program != "sort-notes" || view.Status != "SUCCESS" || view.StepCount != 4 ||
		strings.Join(steps, " ") != "read:tool:OK ask:llm:OK shopping:condition:OK remember:tool:OK" {
		t.Errorf("get_trace = %s", raw)
	}
	if out, _ := json.Marshal(view.Steps[1]["output"]); string(out) != `{"text":"yes"}` {
		t.Errorf("the llm step's output = %s, want the trimmed answer", out)
	}
	for _, s := range view.Steps {
		for k := range s {
			if !slices.Contains([]string{"seq", "step", "kind", "status", "output", "message"}, k) {
				t.Errorf("get_trace shows the model a step's %q: %s", k, raw)
			}
		}
	}
	// No hashes, receipts, policy, signatures, nor anything of other calls.
	for _, secret := range []string{"sha256:", "receipt", "policy", "signature", "rule", `"reads"`, "input", "hash", "approver"} {
		if strings.Contains(strings.ToLower(string(raw)), secret) || strings.Contains(strings.ToLower(contentText(res)), secret) {
			t.Errorf("get_trace shows the model %q: %s", secret, raw)
		}
	}
	if id := regexp.MustCompile(`r-[a-z0-9]{19}`).FindString(string(raw) + contentText(res)); id != "" {
		t.Errorf("get_trace shows the model receipt %s: %s", id, raw)
	}

	// The saved programs: listed, read back, deleted (the trace stays).
	var two runResult
	callJSON(t, cs, "run_program", map[string]any{"program": sortingProgram("sort-more", note, "eggs")}, &two)
	if again, _ := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "get_trace", Arguments: map[string]any{"trace": run.Trace}}); strings.Contains(contentText(again), "eggs") || strings.Contains(contentText(again), "sort-more") {
		t.Errorf("get_trace of the first run shows the second: %s", contentText(again))
	}
	var list struct{ Programs []string }
	if e := callJSON(t, cs, "list_programs", map[string]any{}, &list); e != "" || strings.Join(list.Programs, " ") != "sort-more sort-notes" {
		t.Errorf("list_programs = %v (%s), want both", list.Programs, e)
	}
	var got struct {
		Name    string
		Program map[string]any
	}
	if e := callJSON(t, cs, "get_program", map[string]any{"name": "sort-notes"}, &got); e != "" || got.Name != "sort-notes" || len(got.Program["steps"].([]any)) != 4 {
		t.Errorf("get_program = %+v (%s)", got, e)
	}
	var del struct{ Deleted string }
	if e := callJSON(t, cs, "delete_program", map[string]any{"name": "sort-notes"}, &del); e != "" || del.Deleted != "sort-notes" {
		t.Errorf("delete_program = %+v (%s)", del, e)
	}
	callJSON(t, cs, "list_programs", map[string]any{}, &list)
	if strings.Join(list.Programs, " ") != "sort-more" {
		t.Errorf("list_programs after the delete = %v", list.Programs)
	}
	if e := callJSON(t, cs, "get_program", map[string]any{"name": "sort-notes"}, &got); e == "" {
		t.Error("get_program of a deleted program answered without an error")
	}
	if e := callJSON(t, cs, "get_trace", map[string]any{"trace": run.Trace}, &view); e != "" {
		t.Errorf("the trace of a deleted program: %s, want it kept", e)
	}

	// A client that declared no sampling: the llm step fails, saying why,
	// and nothing after it runs.
	plain, _ := programsClient(t, home, "plain-agent", samplingVersion, nil)
	var noSampling runResult
	if e := callJSON(t, plain, "run_program", map[string]any{"program": sortingProgram("sort-plain", note, "bread")}, &noSampling); e != "" ||
		noSampling.Status != "FAILED" || noSampling.StepCount != 2 ||
		!strings.Contains(noSampling.Error, "step ask (2): the client that ran the program did not declare MCP sampling") {
		t.Errorf("run_program without sampling = %+v (%s), want FAILED at the llm step, saying the client has no sampling", noSampling, e)
	}
	// A client on protocol 2026-07-28 that declares sampling: the step
	// fails, naming the protocol's rule, rather than hanging or guessing.
	latest, _ := programsClient(t, home, "latest-agent", "", &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			t.Error("a client on 2026-07-28 was sent sampling/createMessage during a request")
			return nil, fmt.Errorf("unexpected")
		},
	})
	var onLatest runResult
	if e := callJSON(t, latest, "run_program", map[string]any{"program": sortingProgram("sort-latest", note, "bread")}, &onLatest); e != "" ||
		onLatest.Status != "FAILED" || !strings.Contains(onLatest.Error, "step ask (2): ask the client's model:") || !strings.Contains(onLatest.Error, "2026-07-28") {
		t.Errorf("run_program from a 2026-07-28 client = %+v (%s), want FAILED at the llm step, naming the protocol", onLatest, e)
	}
	if b, _ := os.ReadFile(memFile); strings.Contains(string(b), "bread") {
		t.Error("a step after the failed llm step ran")
	}
	if strings.Contains(stderr.String(), "DATA RACE") {
		t.Errorf("gatehouse programs raced:\n%s", stderr)
	}
}

// Runs side by side in one programs server, over the same servers and
// client: each tool step's receipt names its own run and step, and the
// server process has no data race (under go test -race, the binary is
// race-checked too).
func TestProgramsConcurrentRuns(t *testing.T) {
	t.Parallel()
	home, files, _ := programsHome(t)
	cs, stderr := programsClient(t, home, "agent", samplingVersion, &mcp.ClientOptions{
		CreateMessageHandler: func(context.Context, *mcp.CreateMessageRequest) (*mcp.CreateMessageResult, error) {
			return &mcp.CreateMessageResult{Model: "test", Role: "assistant", Content: &mcp.TextContent{Text: "yes"}}, nil
		},
	})
	const runs = 8
	traces := make([]string, runs)
	var wg sync.WaitGroup
	for i := range runs {
		note := filepath.Join(files, fmt.Sprintf("note-%d.txt", i))
		if err := os.WriteFile(note, fmt.Appendf(nil, "note %d\n", i), 0o600); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			var r runResult
			if e := callJSON(t, cs, "run_program", map[string]any{"program": sortingProgram(fmt.Sprintf("sort-%d", i), note, fmt.Sprintf("n%d", i))}, &r); e != "" || r.Status != "SUCCESS" {
				t.Errorf("run %d = %+v (%s)", i, r, e)
			}
			traces[i] = r.Trace
		})
	}
	wg.Wait()
	if t.Failed() {
		t.Fatalf("server log:\n%s", stderr)
	}
	cs.Close() // waits for the server to exit: a race report is written by then

	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, "entries.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct {
			Kind string
			Body struct {
				Tool    string
				Program *struct{ Name, Trace, Step string }
			}
		}
		json.Unmarshal([]byte(line), &e)
		if e.Kind == "receipt" && e.Body.Program != nil {
			p := e.Body.Program
			seen[p.Trace] = append(seen[p.Trace], p.Name+"/"+p.Step+"="+e.Body.Tool)
		}
	}
	for i, tr := range traces {
		got := seen[tr]
		slices.Sort(got)
		want := fmt.Sprintf("sort-%d/read=read_text_file sort-%d/remember=create_entities", i, i)
		if strings.Join(got, " ") != want {
			t.Errorf("receipts of run %d (%s) = %v, want %s", i, tr, got, want)
		}
	}
	if regexp.MustCompile(`DATA RACE`).MatchString(stderr.String()) {
		t.Errorf("gatehouse programs raced:\n%s", stderr)
	}
}
