package gateway

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestMethodRefusal(t *testing.T) {
	for _, tt := range []struct {
		method  string
		kind    kind
		refused bool
	}{
		{"tools/call", kindRequest, false},
		{"tools/list", kindRequest, false},
		{"logging/setLevel", kindRequest, false},
		{"notifications/initialized", kindNotification, false},
		{"vendor/extension", kindRequest, false},                // not MCP's, but plain and not tools/call
		{"tools/call", kindNotification, true},                  // a call without an id
		{"TOOLS/CALL", kindRequest, true},                       // case
		{"Tools/Call", kindRequest, true},                       //
		{"tools_call", kindRequest, true},                       // separators
		{"tools.call", kindRequest, true},                       //
		{"toolsCall", kindRequest, true},                        //
		{"too1s/caII", kindRequest, true},                       // ASCII look-alikes
		{"tools/call ", kindRequest, true},                      // a space
		{" tools/call", kindRequest, true},                      //
		{"tools/\u200bcall", kindRequest, true},                 // invisible
		{"ｔｏｏｌｓ/ｃａｌｌ", kindRequest, true},                       // full width
		{"t\u043eols/call", kindRequest, true},                  // Cyrillic o
		{"tools/\u0441all", kindRequest, true},                  // Cyrillic s
		{"to\u03bfls/call", kindRequest, true},                  // Greek omicron
		{"tools/call\u0000", kindRequest, true},                 // a NUL
		{"notifications/\u00e9t\u00e9", kindNotification, true}, // not ASCII
	} {
		var method string
		json.Unmarshal([]byte(`"`+tt.method+`"`), &method)
		why := methodRefusal(message{kind: tt.kind, method: method})
		if (why != "") != tt.refused {
			t.Errorf("methodRefusal(%q, %v) = %q, want refused %v", method, tt.kind, why, tt.refused)
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
	w := &tailWriter{w: &out, max: 64, secrets: newSecretSet(map[string]string{"k": "hunter2-secret"})}
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

// A secret's forms the proxy promises to catch never reach the client,
// whatever surrounds them in a result.
func FuzzRedact(f *testing.F) {
	f.Add("sk-live-0123456789", "token: ", " end", uint8(0))
	f.Add("pässwört-ünïcode", "", "", uint8(1))
	f.Add("ab\"cd\\ef/gh&ij", "x", "y", uint8(2))
	f.Add("short-secret", "short-sec", "ret", uint8(3))
	f.Fuzz(func(t *testing.T, secret, before, after string, form uint8) {
		if len(secret) < minEncodedLen || !utf8.ValidString(secret) || !utf8.ValidString(before) || !utf8.ValidString(after) {
			return
		}
		encoded := []string{secret, hex.EncodeToString([]byte(secret)), url.QueryEscape(secret), strings.ToUpper(hex.EncodeToString([]byte(secret)))}
		text := before + encoded[int(form)%len(encoded)] + after
		msg, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "result": map[string]any{
			"content": []any{map[string]any{"type": "text", "text": text}}}})
		v, err := ReadValue(msg)
		if err != nil {
			t.Fatal(err)
		}
		redacted, findings := newRedactor(map[string]string{"s": secret}).redactValue(v)
		out := redacted.Raw()
		if _, err := ReadValue(out); err != nil {
			t.Fatalf("the redacted message is not one the strict reading reads: %v\n%s", err, out)
		}
		var decoded any
		if err := json.Unmarshal(out, &decoded); err != nil {
			t.Fatalf("redacted message is not JSON: %v", err)
		}
		plain, _ := json.Marshal(decoded)
		var s strings.Builder
		collect(decoded, &s)
		if strings.Contains(s.String(), secret) {
			t.Fatalf("the secret survived redaction of %q: %s", text, plain)
		}
		if len(findings) == 0 {
			t.Fatalf("nothing found in %q", text)
		}
	})
}

func collect(v any, b *strings.Builder) {
	switch x := v.(type) {
	case string:
		b.WriteString(x)
		b.WriteByte(0)
	case []any:
		for _, e := range x {
			collect(e, b)
		}
	case map[string]any:
		for _, e := range x {
			collect(e, b)
		}
	}
}

// What a governed proxy lets through, servers read as the gate did: for a
// message the proxy does not refuse as ambiguous, its method, and a
// tools/call's tool name, are the same to the proxy, to a reader like
// JSON.parse (exact names, the last of a repeated member) and to Go's
// encoding/json (names in any case).
func FuzzReadsAgree(f *testing.F) {
	for _, s := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"x"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","Name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"\u006dethod":"tools/call","params":{"\u006eame":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"PARAMS":{"name":"b"}}`,
		`{"jsonrpc":"2.0","id":1,"method":"TOOLS/CALL","params":{"name":"a"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, batch, err := parseFrame(raw)
		if err != nil || batch || len(msgs) != 1 || msgs[0].kind != kindRequest {
			return
		}
		m := msgs[0]
		if methodRefusal(m) != "" {
			return
		}
		var exact map[string]json.RawMessage
		var loose struct {
			Method string          `json:"method"`
			Params json.RawMessage `json:"params"`
		}
		if json.Unmarshal(m.raw, &exact) != nil || json.Unmarshal(m.raw, &loose) != nil {
			return // the server could not read it at all
		}
		var exactMethod string
		json.Unmarshal(exact["method"], &exactMethod)
		if exactMethod != m.method || loose.Method != m.method {
			t.Fatalf("%s: the proxy reads method %q, JSON.parse %q, encoding/json %q", raw, m.method, exactMethod, loose.Method)
		}
		if m.method != governedMethod {
			return
		}
		p, err := readCallParams(m)
		if err != nil {
			return // refused
		}
		var exactParams map[string]json.RawMessage
		var looseParams struct {
			Name string `json:"name"`
		}
		json.Unmarshal(exact["params"], &exactParams)
		json.Unmarshal(loose.Params, &looseParams)
		var exactName string
		json.Unmarshal(exactParams["name"], &exactName)
		if exactName != p.name || looseParams.Name != p.name {
			t.Fatalf("%s: the gate reads tool %q, JSON.parse %q, encoding/json %q", raw, p.name, exactName, looseParams.Name)
		}
	})
}
