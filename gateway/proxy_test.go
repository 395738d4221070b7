package gateway

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// session is a test MCP client talking to a Proxy through pipes.
type session struct {
	t      *testing.T
	in     *io.PipeWriter // the client's writes, the proxy's stdin
	lines  chan string    // the proxy's stdout, line by line
	served chan error     // Serve's result
}

func startSession(t *testing.T, cmd Command, opts *Options) *session {
	t.Helper()
	return startProxySession(t, func(opts *Options) *Proxy { return New("t", cmd, opts) }, opts)
}

// startProxySession is startSession for a proxy that newProxy makes.
func startProxySession(t *testing.T, newProxy func(*Options) *Proxy, opts *Options) *session {
	t.Helper()
	if opts == nil {
		opts = &Options{}
	}
	s := &session{t: t, lines: make(chan string, 100), served: make(chan error, 1)}
	if opts.Stderr == nil {
		opts.Stderr = io.Discard
	}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	s.in = inW
	p := newProxy(opts)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { s.served <- p.Serve(ctx, inR, outW); outW.Close() }()
	go func() {
		sc := bufio.NewScanner(outR)
		sc.Buffer(nil, 64<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		close(s.lines)
	}()
	t.Cleanup(func() {
		inW.Close()
		cancel()
		select {
		case <-s.served:
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop within 10s of its client closing")
		}
	})
	return s
}

// on returns the session reporting failures to t (a subtest).
func (s *session) on(t *testing.T) *session {
	c := *s
	c.t = t
	return &c
}

func (s *session) send(line string) {
	s.t.Helper()
	if _, err := io.WriteString(s.in, line+"\n"); err != nil {
		s.t.Fatalf("write to proxy: %v", err)
	}
}

// recv returns the next line the proxy wrote, failing after a deadline.
func (s *session) recv() string {
	s.t.Helper()
	select {
	case l, ok := <-s.lines:
		if !ok {
			s.t.Fatal("proxy closed stdout")
		}
		return l
	case <-time.After(10 * time.Second):
		s.t.Fatal("no message from the proxy within 10s")
	}
	return ""
}

// recvMsg returns the next message, checking that it is one JSON object.
func (s *session) recvMsg() rpcMsg {
	s.t.Helper()
	l := s.recv()
	var m rpcMsg
	if err := json.Unmarshal([]byte(l), &m); err != nil || m.JSONRPC != "2.0" {
		s.t.Fatalf("proxy wrote %q: not a JSON-RPC message", l)
	}
	return m
}

func (s *session) initialize() {
	s.t.Helper()
	s.send(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	s.recvMsg()
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
}

// toolText returns the text and isError of a tools/call result.
func toolText(t *testing.T, m rpcMsg) (string, bool) {
	t.Helper()
	var r struct {
		Content []struct{ Text string }
		IsError bool
	}
	if err := json.Unmarshal(m.Result, &r); err != nil || len(r.Content) == 0 {
		t.Fatalf("not a tool result: %s (error %s)", m.Result, m.Error)
	}
	return r.Content[0].Text, r.IsError
}

func TestRelayIsTransparent(t *testing.T) {
	s := startSession(t, testServerCommand(), nil)
	// The server's answer is relayed byte for byte, vendor members included.
	s.send(`{"jsonrpc":"2.0","id":"init-1","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}`)
	want := `{"jsonrpc":"2.0","id":"init-1","x-vendor":{"kept":true},"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"scripted","version":"1"},"x-result-vendor":[1,2,3]}}`
	if got := s.recv(); got != want {
		t.Errorf("initialize answer =\n%s\nwant\n%s", got, want)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`)
	if got := s.recv(); !strings.Contains(got, `"execution":{"taskSupport":"optional"}`) {
		t.Errorf("tools/list lost a field the SDK does not model: %s", got)
	}
	// The client's request reaches the server unchanged, _meta and unknown
	// members included.
	params := `{"name":"echo","arguments":{"s":"ünïcödé \u2028","n":1e300},"_meta":{"progressToken":"p1","claudecode/toolUseId":"toolu_1"},"x-client":true}`
	s.send(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":` + params + `}`)
	got, isErr := toolText(t, s.recvMsg())
	if isErr || got != params {
		t.Errorf("server received params\n%s\nwant\n%s", got, params)
	}
}

func TestRelayNotificationsAndServerRequests(t *testing.T) {
	s := startSession(t, testServerCommand(), nil)
	s.initialize()

	t.Run("progress", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"progress","_meta":{"progressToken":"tok-7"}}}`)
		for i := 1; i <= 2; i++ {
			m := s.recvMsg()
			if m.Method != "notifications/progress" || !strings.Contains(string(m.Params), `"progressToken":"tok-7"`) {
				t.Fatalf("message %d = %s %s, want progress for tok-7", i, m.Method, m.Params)
			}
		}
		if text, _ := toolText(t, s.recvMsg()); text != "done" {
			t.Errorf("result = %q, want done", text)
		}
	})
	t.Run("cancellation", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"slow"}}`)
		s.send(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":11,"reason":"user"}}`)
		m := s.recvMsg()
		if m.Method != "notifications/message" || !strings.Contains(string(m.Params), "cancelled 11") {
			t.Errorf("got %s %s, want the server to log that it saw the cancellation of 11", m.Method, m.Params)
		}
	})
	t.Run("sampling request from the server", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"sample"}}`)
		req := s.recvMsg()
		if req.Method != "sampling/createMessage" || string(req.ID) != `"s-1"` {
			t.Fatalf("got %s id %s, want sampling/createMessage id s-1", req.Method, req.ID)
		}
		s.send(`{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"sampled"},"model":"m"}}`)
		if text, _ := toolText(t, s.recvMsg()); !strings.Contains(text, `"sampled"`) {
			t.Errorf("tool result %q does not carry the client's sampling answer", text)
		}
	})
	t.Run("unknown method", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}`)
		if m := s.recvMsg(); string(m.ID) != `"d"` || !strings.Contains(string(m.Error), "-32601") {
			t.Errorf("server/discover answer = %s %s, want the server's own method-not-found", m.ID, m.Error)
		}
	})
	t.Run("batch", func(t *testing.T) {
		s := s.on(t)
		s.send(`[{"jsonrpc":"2.0","id":20,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/roots/list_changed"}]`)
		if got, want := s.recv(), `[{"jsonrpc":"2.0","id":20,"result":{}}]`; got != want {
			t.Errorf("batch answer = %s, want %s", got, want)
		}
	})
}

func TestRelayRefusesBadInput(t *testing.T) {
	s := startSession(t, testServerCommand(), &Options{MaxMessageBytes: 4096})
	s.initialize()
	tests := []struct {
		name     string
		line     string
		wantID   string
		wantCode string
		wantText string
	}{
		{"not JSON", `{"jsonrpc":"2.0",`, "null", "-32700", "not JSON"},
		{"garbage bytes", "\x00\xff\xfe garbage", "null", "-32700", "not JSON"},
		{"no method or result", `{"jsonrpc":"2.0","id":7}`, "7", "-32600", "no method"},
		{"wrong version", `{"jsonrpc":"1.0","id":8,"method":"ping"}`, "8", "-32600", "jsonrpc"},
		{"member names are case-sensitive", `{"jsonrpc":"2.0","id":10,"Method":"ping"}`, "10", "-32600", `member \"Method\" is not JSON-RPC's \"method\"`},
		{"a member twice", `{"jsonrpc":"2.0","id":12,"method":"ping","method":"ping"}`, "12", "-32700", "given twice"},
		{"a member twice, folded", `{"jsonrpc":"2.0","id":13,"method":"ping","params":{},"paramſ":{}}`, "13", "-32700", "given twice"},
		{"data after the message", `{"jsonrpc":"2.0","id":11,"method":"ping"} {}`, "11", "-32700", "follows the JSON value"},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}`, "null", "-32600", "an id is a string or an integer"},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, "null", "-32600", "an id is a string or an integer"},
		{"method of wrong type", `{"jsonrpc":"2.0","id":9,"method":3}`, "9", "-32600", "method is not a name"},
		{"a number beyond float64", `{"jsonrpc":"2.0","id":14,"method":"ping","params":{"n":1e400}}`, "14", "-32700", "beyond the range"},
		{"invalid UTF-8", "{\"jsonrpc\":\"2.0\",\"id\":15,\"method\":\"ping\",\"params\":{\"s\":\"\xff\"}}", "15", "-32700", "not valid UTF-8"},
		{"a lone surrogate", `{"jsonrpc":"2.0","id":16,"method":"ping","params":{"s":"\ud800"}}`, "16", "-32700", "half a surrogate pair"},
		{"nested too deep", `{"jsonrpc":"2.0","id":17,"method":"ping","params":{"a":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}}`, "17", "-32700", "nested more than"},
		{"empty batch", `[]`, "null", "-32600", "empty batch"},
		{"oversized request", `{"jsonrpc":"2.0","id":30,"method":"resources/read","params":{"uri":"` + strings.Repeat("a", 8000) + `"}}`,
			"30", "-32603", "4096-byte limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := s.on(t)
			s.send(tt.line)
			m := s.recvMsg()
			if string(m.ID) != tt.wantID || !strings.Contains(string(m.Error), tt.wantCode) || !strings.Contains(string(m.Error), tt.wantText) {
				t.Errorf("answer = id %s error %s, want id %s, code %s, text %q", m.ID, m.Error, tt.wantID, tt.wantCode, tt.wantText)
			}
		})
	}
	t.Run("oversized tool call", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":31,"method":"tools/call","params":{"name":"echo","arguments":{"s":"` + strings.Repeat("b", 10000) + `"}}}`)
		text, isErr := toolText(t, s.recvMsg())
		if !isErr || !strings.Contains(text, "Gatehouse refused") || !strings.Contains(text, "4096-byte limit") {
			t.Errorf("result = %q (isError %v), want a refusal naming the limit", text, isErr)
		}
	})
	t.Run("oversized answer", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"big","arguments":{"n":10000}}}`)
		text, isErr := toolText(t, s.recvMsg())
		if !isErr || !strings.Contains(text, "server's answer") {
			t.Errorf("result = %q (isError %v), want an error about the server's answer size", text, isErr)
		}
	})
	t.Run("server noise on stdout", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"noise"}}`)
		if text, _ := toolText(t, s.recvMsg()); text != "after noise" {
			t.Errorf("result = %q, want the answer after the dropped noise", text)
		}
	})
	// After all of that the session still works.
	s.send(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"echo"}}`)
	if _, isErr := toolText(t, s.recvMsg()); isErr {
		t.Error("echo after bad input failed")
	}
}

func TestServerCrashMidCall(t *testing.T) {
	s := startSession(t, testServerCommand(), nil)
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"crash"}}`)
	text, isErr := toolText(t, s.recvMsg())
	if !isErr || !strings.Contains(text, "Gatehouse") || !strings.Contains(text, "exit status 3") || !strings.Contains(text, "boom: crashing on purpose") {
		t.Errorf("crash result = %q (isError %v), want an isError result naming Gatehouse, the status and the server's last words", text, isErr)
	}
	// Later requests fail at once, with the same reason.
	s.send(`{"jsonrpc":"2.0","id":6,"method":"tools/list"}`)
	if m := s.recvMsg(); string(m.ID) != "6" || !strings.Contains(string(m.Error), "exit status 3") {
		t.Errorf("tools/list after the crash = %s %s, want an error", m.ID, m.Error)
	}
	s.in.Close()
	select {
	case err := <-s.served:
		s.served <- err // for the cleanup
		if !errors.Is(err, ErrServerExited) {
			t.Errorf("Serve = %v, want ErrServerExited", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the client closed")
	}
}

func TestStartFailure(t *testing.T) {
	s := startSession(t, Command{Path: "/nonexistent/mcp-server"}, nil)
	s.send(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}`)
	m := s.recvMsg()
	if !strings.Contains(string(m.Error), "cannot start server") || !strings.Contains(string(m.Error), "was not found") {
		t.Errorf("initialize answer = %s, want why the server did not start", m.Error)
	}
	s.send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"x"}}`)
	if text, isErr := toolText(t, s.recvMsg()); !isErr || !strings.Contains(text, "/nonexistent/mcp-server") {
		t.Errorf("tools/call answer = %q, want isError naming the command", text)
	}
}

func TestStopsServerThatIgnoresEOF(t *testing.T) {
	s := startSession(t, testServerCommand("TEST_SERVER_IGNORE_EOF=1"), &Options{StopGrace: 100 * time.Millisecond})
	s.initialize()
	s.send(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"pid"}}`)
	text, _ := toolText(t, s.recvMsg())
	pid, err := strconv.Atoi(text)
	if err != nil {
		t.Fatalf("pid tool answered %q", text)
	}
	s.in.Close()
	select {
	case err := <-s.served:
		s.served <- err
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not stop a server that ignores EOF and SIGTERM within 5s")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("server process %d still exists after the proxy stopped (kill 0: %v)", pid, err)
	}
}

func TestRedactsSecrets(t *testing.T) {
	const secret = "ghp_S3cr3tT0kenValue42"
	s := startSession(t, testServerCommand("TEST_SECRET="+secret), &Options{Secrets: map[string]string{"gh.TOKEN": secret}})
	s.initialize()
	for i, enc := range []string{"raw", "base64", "hex", "url", "escaped", "split"} {
		t.Run(enc, func(t *testing.T) {
			s := s.on(t)
			s.send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"secret","arguments":{"enc":%q}}}`, 100+i, enc))
			line := s.recv()
			assertNoSecret(t, line, secret)
			if !strings.Contains(line, "[redacted by Gatehouse: secret gh.TOKEN]") {
				t.Errorf("answer %s carries no redaction marker", line)
			}
		})
	}
	t.Run("notification", func(t *testing.T) {
		s := s.on(t)
		s.send(`{"jsonrpc":"2.0","id":200,"method":"tools/call","params":{"name":"secret","arguments":{"enc":"log"}}}`)
		assertNoSecret(t, s.recv(), secret)
		assertNoSecret(t, s.recv(), secret)
	})
}

// assertNoSecret fails if line holds secret in any common encoding.
func assertNoSecret(t *testing.T, line, secret string) {
	t.Helper()
	var decoded any
	json.Unmarshal([]byte(line), &decoded)
	plain, _ := json.Marshal(decoded)
	for _, form := range []string{secret, hex.EncodeToString([]byte(secret)), url.QueryEscape(secret), secret[3:15]} {
		if strings.Contains(line, form) || strings.Contains(string(plain), form) {
			t.Errorf("the client received the secret (%q) in %s", form, line)
		}
	}
}
