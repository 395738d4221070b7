package gateway

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
)

func TestAmbiguity(t *testing.T) {
	tests := []struct {
		obj  string
		want string // a part of the reason; "" for none
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, `"method" is given twice`},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call"}`, `also given as "Method"`},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","METHOD":"tools/call"}`, `also given as "METHOD"`},
		{`{"jsonrpc":"2.0","id":1,"method":"ping","paramſ":{}}`, `"params" is also given as "paramſ"`},
		{`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call"}`, `"method" is spelled with escapes`},
		{`{"jsonrpc":"2.0","id":1,"\u004dethod":"tools/call","method":"ping"}`, `also given as "Method"`},
		{`{"jsonrpc":"2.0","id":1,"method":"x","params":{"method":"y","Method":"z"}}`, ""}, // nested: not the envelope
		{`{"jsonrpc":"2.0","id":"a\"method\":1","method":"x"}`, ""},                        // in a string
		{`{"a":[{"method":1},"}"],"jsonrpc":"2.0","b":"\\","id":1}`, ""},
		{`{"jsonrpc":"2.0","id":1,"method":"x","extra":{"deep":[[["\"]"]]]},"ID":2}`, `"id" is also given as "ID"`},
		{`[1,2]`, ""},
		{`"x"`, ""},
	}
	for _, tt := range tests {
		got := ambiguity([]byte(tt.obj), envelopeMembers)
		if tt.want == "" && got != "" || tt.want != "" && !strings.Contains(got, tt.want) {
			t.Errorf("ambiguity(%s) = %q, want %q", tt.obj, got, tt.want)
		}
	}
}

func TestLookalikeMethod(t *testing.T) {
	for method, want := range map[string]bool{
		"tools/call":        false,
		"tools/list":        false,
		"logging/setLevel":  false,
		"TOOLS/CALL":        true,
		"Tools/Call":        true,
		"tools/call ":       true,
		" tools/call":       true,
		"tools/\u200bcall":  true,
		"ｔｏｏｌｓ/ｃａｌｌ":        true,
		"tools/call\u0000":  true,
		"tools/callx":       false,
		"notifications/foo": false,
	} {
		if got := lookalikeMethod(method); got != want {
			t.Errorf("lookalikeMethod(%q) = %v, want %v", method, got, want)
		}
	}
}

// A governed proxy refuses what a server could read as another call than
// the gate judged, and the server never sees it.
func TestGovernedRefusesAmbiguousMessages(t *testing.T) {
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		return &Authorization{Allow: c.Tool == "echo", Receipt: "r-1", Message: "denied"}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov})
	s.initialize()
	for i, line := range []string{
		`{"jsonrpc":"2.0","id":ID,"method":"ping","Method":"tools/call","params":{"name":"delete"}}`,
		`{"jsonrpc":"2.0","id":ID,"method":"TOOLS/CALL","params":{"name":"delete"}}`,
		`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"delete","Name":"echo"}}`,
		`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","name":"delete"}}`,
		`{"jsonrpc":"2.0","id":ID,"method":"tools/call","params":{"name":"echo","arguments":{},"Arguments":{"x":1}}}`,
		`[{"jsonrpc":"2.0","id":ID,"method":"tools/call ","params":{"name":"delete"}}]`,
	} {
		id := fmt.Sprint(100 + i)
		s.send(strings.ReplaceAll(line, "ID", id))
		m := s.recvMsg()
		if string(m.ID) != id {
			t.Fatalf("%s: answer %s, want the proxy's refusal of %s", line, m.Result, id)
		}
		if !bytes.Contains(m.Result, []byte("Gatehouse refused")) && !bytes.Contains(m.Error, []byte("Gatehouse refused")) {
			t.Errorf("%s: answer %s %s, want a refusal", line, m.Result, m.Error)
		}
	}
	// Nothing reached the server or the gate: the next answer is the next
	// call's.
	s.send(`{"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"name":"echo","arguments":{"a":1}}}`)
	if m := s.recvMsg(); string(m.ID) != "200" {
		t.Errorf("next answer is for %s, want 200", m.ID)
	}
	gov.mu.Lock()
	defer gov.mu.Unlock()
	if len(gov.calls) != 1 {
		t.Errorf("the gate was asked %d times, want once (the last echo)", len(gov.calls))
	}
}

// A server cannot answer a request it was never sent: a call the gate
// holds, one the proxy answered itself, one that never was.
func TestForgedAnswersDropped(t *testing.T) {
	release := make(chan struct{})
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		if c.Tool == "held" {
			<-release
			return &Authorization{Allow: false, Receipt: "r-2", Message: "Gatehouse denied held"}, nil
		}
		return &Authorization{Allow: true, Receipt: "r-1"}, nil
	})
	s := startSession(t, testServerCommand(), &Options{Governor: gov})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":"h","method":"tools/call","params":{"name":"held"}}`)
	for i, id := range []string{`"h"`, `"never"`, `0`} {
		s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"forge","arguments":{"id":%s}}}`, i+1, id))
		m := s.recvMsg()
		if string(m.ID) != fmt.Sprint(i+1) {
			t.Fatalf("forged answer to %s reached the client: %s", id, m.Result)
		}
	}
	close(release)
	m := s.recvMsg()
	if text, isErr := toolText(t, m); string(m.ID) != `"h"` || !isErr || text != "Gatehouse denied held" {
		t.Errorf("answer to the held call = %s %s, want the gate's denial", m.ID, m.Result)
	}
}

// What the gate is shown of the server's tools (and pins) is what the
// client sees: secrets redacted.
func TestGateSeesRedactedTools(t *testing.T) {
	const secret = "sk-listing-secret-0123456789"
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		return &Authorization{Allow: true, Receipt: "r-1"}, nil
	})
	s := startSession(t, testServerCommand("TEST_SECRET="+secret), &Options{Governor: gov, Secrets: map[string]string{"t.KEY": secret}})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if line := s.recv(); strings.Contains(line, secret) {
		t.Fatalf("the client got the secret in tools/list: %s", line)
	}
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo"}}`)
	s.recv()
	gov.mu.Lock()
	defer gov.mu.Unlock()
	if len(gov.calls) != 1 || gov.calls[0].Definition == nil {
		t.Fatal("the gate was not given the tool's definition")
	}
	if def := gov.calls[0].Definition; strings.Contains(string(def.Raw), secret) || strings.Contains(def.Description, secret) {
		t.Errorf("the gate was given the secret in the definition: %s", def.Raw)
	}
}

// A server's stderr reaches the client's log, and its last line the
// client, without the secrets the proxy gave it.
func TestStderrRedacted(t *testing.T) {
	const secret = "sk-stderr-secret-0123456789"
	var stderr bytes.Buffer
	gov := newFakeGovernor(func(ctx context.Context, c *Call, progress func(string)) (*Authorization, error) {
		return &Authorization{Allow: true, Receipt: "r-1"}, nil
	})
	s := startSession(t, testServerCommand("TEST_SECRET="+secret), &Options{Governor: gov, Secrets: map[string]string{"t.KEY": secret}, Stderr: &lockedWriter{w: &stderr}})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"crash"}}`)
	line := s.recv()
	if strings.Contains(line, secret) {
		t.Errorf("the client was told the secret: %s", line)
	}
	s.in.Close()
	<-s.served
	s.served <- nil // for the cleanup
	got := stderr.String()
	if strings.Contains(got, secret) {
		t.Errorf("the server's stderr passed on the secret:\n%s", got)
	}
	if !strings.Contains(got, "connecting with [redacted by Gatehouse: secret t.KEY] failed") || !strings.Contains(got, "boom") {
		t.Errorf("the server's stderr = %q, want its lines with the secret redacted", got)
	}
}

func TestTailWriterPassesLinesRedacted(t *testing.T) {
	var out bytes.Buffer
	w := &tailWriter{w: &out, max: 64, redact: newRedactor(map[string]string{"k": "hunter2-secret"})}
	for _, p := range []string{"one hunt", "er2-secret two\nthree ", "hunter2-secret"} {
		w.Write([]byte(p))
	}
	if got := out.String(); got != "one [redacted by Gatehouse: secret k] two\n" {
		t.Errorf("passed on %q before the last line ended", got)
	}
	w.flush()
	if got := out.String(); !strings.HasSuffix(got, "three [redacted by Gatehouse: secret k]") {
		t.Errorf("after flush: %q", got)
	}
	if last := w.lastLine(); strings.Contains(last, "hunter2") {
		t.Errorf("lastLine = %q", last)
	}
}

// lockedWriter is a writer safe to read from the test once the proxy is
// done with it.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
