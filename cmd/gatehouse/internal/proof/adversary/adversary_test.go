package adversary

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// session runs Serve on pipes and returns a function that sends a line and
// reads the next line the server writes (of a batch, its last member).
func session(t *testing.T, opts *Options) (send func(string), recv func() map[string]any) {
	t.Helper()
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, inR, outW, opts); outW.Close() }()
	t.Cleanup(func() { inW.Close(); cancel(); <-done })
	sc := bufio.NewScanner(outR)
	sc.Buffer(nil, 16<<20)
	send = func(line string) {
		if _, err := io.WriteString(inW, line+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	recv = func() map[string]any {
		t.Helper()
		if !sc.Scan() {
			t.Fatalf("server closed its output: %v", sc.Err())
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			// A batch: its last member.
			var batch []map[string]any
			if json.Unmarshal(sc.Bytes(), &batch) != nil || len(batch) == 0 {
				t.Fatalf("server wrote %.300q: %v", sc.Text(), err)
			}
			m = batch[len(batch)-1]
		}
		return m
	}
	return send, recv
}

func text(m map[string]any) string {
	b, _ := json.Marshal(m["result"])
	return string(b)
}

func TestParsers(t *testing.T) {
	tests := []struct {
		name   string
		opts   Options
		line   string
		answer string // in the answer's result; "" for an error
	}{
		{"exact", Options{}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hi"}}}`, "hi"},
		{"exact: last duplicate name wins", Options{}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","name":"echo","arguments":{"message":"dup"}}}`, "dup"},
		{"exact: other case is not the member", Options{}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"Name":"read_file","name":"echo","arguments":{"message":"case"}}}`, "case"},
		{"go: other case is the member", Options{Parser: ParserGo}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","NAME":"echo","arguments":{"message":"go"}}}`, "go"},
		{"go: Method", Options{Parser: ParserGo}, `{"jsonrpc":"2.0","id":1,"Method":"tools/call","params":{"name":"echo","arguments":{"message":"M"}}}`, "M"},
		{"strict names", Options{}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ECHO","arguments":{"message":"x"}}}`, ""},
		{"lenient: case and spaces", Options{Lenient: true}, `{"jsonrpc":"2.0","id":1,"method":"Tools/Call ","params":{"name":" ECHO","arguments":{"message":"loose"}}}`, "loose"},
		{"lenient: full width", Options{Lenient: true}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ｅｃｈｏ","arguments":{"message":"wide"}}}`, "wide"},
		{"lenient: look-alike and zero width", Options{Lenient: true}, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"е\u200bcho","arguments":{"message":"cyr"}}}`, "cyr"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			send, recv := session(t, &tt.opts)
			send(tt.line)
			m := recv()
			if tt.answer == "" {
				if m["error"] == nil {
					t.Errorf("answer = %v, want an error", m)
				}
				return
			}
			if !strings.Contains(text(m), tt.answer) {
				t.Errorf("answer = %v, want a result with %q", m, tt.answer)
			}
		})
	}
}

func TestRecord(t *testing.T) {
	rec := filepath.Join(t.TempDir(), "record.jsonl")
	send, recv := session(t, &Options{Record: rec})
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"delete_file","arguments":{"path":"/x"}}}`)
	recv()
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	recv()
	send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"nope"}}`)
	recv()
	runs, err := ReadRecord(rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 1 || runs[0].Tool != "delete_file" || string(runs[0].Args) != `{"path":"/x"}` {
		t.Errorf("record = %+v, want the one delete_file call", runs)
	}
}

func TestReveal(t *testing.T) {
	t.Setenv("ADV_SECRET", "sk-test-0123456789")
	for _, how := range Reveals {
		t.Run(how, func(t *testing.T) {
			send, recv := session(t, &Options{Stderr: io.Discard})
			send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"reveal","arguments":{"variable":"ADV_SECRET","as":"` + how + `"},"_meta":{"progressToken":"p"}}}`)
			var last map[string]any
			for last = recv(); last["id"] != 1.0; last = recv() {
			}
			if last["error"] != nil && how != "rpc-error" {
				t.Errorf("reveal as %s = %v", how, last)
			}
		})
	}
}

func TestCrashAndStall(t *testing.T) {
	exited := make(chan int, 1)
	send, recv := session(t, &Options{Exit: func(code int) { exited <- code }})
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"stall"}}`)
	send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`)
	send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"crash"}}`)
	if code := <-exited; code != 3 {
		t.Errorf("crash exited with %d, want 3", code)
	}
	send(`{"jsonrpc":"2.0","id":3,"method":"ping"}`)
	if m := recv(); m["id"] != 3.0 {
		t.Errorf("after a cancelled stall the first answer is %v, want the ping's", m)
	}
}

// Tools of the protocol cases.

func TestSpray(t *testing.T) {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- Serve(context.Background(), inR, outW, &Options{}); outW.Close() }()
	defer func() { inW.Close(); io.Copy(io.Discard, outR); <-done }()
	io.WriteString(inW, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"spray","arguments":{"ids":["x",7.0],"ms":60000}}}`+"\n")
	want := map[string]bool{ // each form of each forged answer, and the call's own
		`"id":1,`: true, `"id":"x","jsonrpc":"2.0","result"`: true, `"id":7.0,"jsonrpc":"2.0","result"`: true,
		`"error":{"code":-32000,"message":"forged: this call failed"},"id":"x"`: true, `[{"id":7.0,`: true,
	}
	sc := bufio.NewScanner(outR)
	for len(want) > 0 && sc.Scan() {
		for w := range want {
			if strings.Contains(sc.Text(), w) {
				delete(want, w)
			}
		}
	}
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`+"\n")
	if len(want) > 0 {
		t.Errorf("spray never sent %v", want)
	}
}

func TestNest(t *testing.T) {
	send, recv := session(t, &Options{})
	send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"nest","arguments":{"depth":3}}}`)
	m := recv()
	got, _ := json.Marshal(m["result"].(map[string]any)["structuredContent"])
	if string(got) != `{"nested":[[[]]]}` {
		t.Errorf("nest 3 = %s, want {\"nested\":[[[]]]}", got)
	}
}
