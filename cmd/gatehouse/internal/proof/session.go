package proof

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A Session is an MCP client's end of one proxy process: it writes raw
// JSON-RPC lines to the proxy's stdin, as no SDK would refuse to, and reads
// every line the proxy writes to stdout. A line there that is not a JSON-RPC
// message is kept: a stdio proxy must write nothing else.
type Session struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stderr *syncBuffer

	mu      sync.Mutex
	waiting map[string]chan Message // by id; guarded by mu
	stray   []Message               // answers nobody waited for; guarded by mu
	notes   []Message               // notifications and server requests; guarded by mu
	impure  []string                // stdout lines that are not JSON-RPC; guarded by mu
	seen    [][]byte                // every line, as received; guarded by mu
	nextID  int                     // guarded by mu
	done    chan struct{}           // closed when stdout ends
	waitErr error                   // the process's exit; set before exited closes
	exited  chan struct{}
}

// A Message is one JSON-RPC message the proxy wrote.
type Message struct {
	Raw    []byte
	ID     json.RawMessage
	Method string
	Result json.RawMessage
	Error  *RPCError
}

// RPCError is a JSON-RPC error.
type RPCError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// ToolResult is a tools/call answer as the model reads it.
type ToolResult struct {
	IsError bool
	Text    string // the text contents, joined
	Raw     json.RawMessage
}

// Tool reads m as a tools/call answer. A JSON-RPC error becomes an error
// result with its message, as a client shows it.
func (m Message) Tool() ToolResult {
	if m.Error != nil {
		return ToolResult{IsError: true, Text: m.Error.Message, Raw: m.Raw}
	}
	var r struct {
		IsError bool `json:"isError"`
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	json.Unmarshal(m.Result, &r)
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	return ToolResult{IsError: r.IsError, Text: strings.Join(texts, "\n"), Raw: m.Raw}
}

func startSession(cmd *exec.Cmd) (*Session, error) {
	s := &Session{cmd: cmd, stderr: &syncBuffer{}, waiting: map[string]chan Message{},
		done: make(chan struct{}), exited: make(chan struct{})}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = s.stderr
	// A server that outlives its proxy may hold the stderr pipe open.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", strings.Join(cmd.Args, " "), err)
	}
	s.stdin = stdin
	go s.read(stdout)
	go func() {
		<-s.done
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	return s, nil
}

func (s *Session) read(stdout io.Reader) {
	defer close(s.done)
	sc := bufio.NewScanner(stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		s.mu.Lock()
		s.seen = append(s.seen, line)
		s.mu.Unlock()
		msgs, ok := parseLine(line)
		if !ok {
			s.mu.Lock()
			s.impure = append(s.impure, string(line))
			s.mu.Unlock()
			continue
		}
		for _, m := range msgs {
			s.route(m)
		}
	}
	// Drain, so that the proxy never blocks on a full pipe.
	io.Copy(io.Discard, stdout)
}

func parseLine(line []byte) ([]Message, bool) {
	line = bytes.TrimSpace(line)
	var raws []json.RawMessage
	if len(line) > 0 && line[0] == '[' {
		if json.Unmarshal(line, &raws) != nil || len(raws) == 0 {
			return nil, false
		}
	} else {
		raws = []json.RawMessage{line}
	}
	var msgs []Message
	for _, raw := range raws {
		var env struct {
			JSONRPC string          `json:"jsonrpc"`
			ID      json.RawMessage `json:"id"`
			Method  string          `json:"method"`
			Result  json.RawMessage `json:"result"`
			Error   *RPCError       `json:"error"`
		}
		if json.Unmarshal(raw, &env) != nil || env.JSONRPC != "2.0" {
			return nil, false
		}
		msgs = append(msgs, Message{Raw: raw, ID: env.ID, Method: env.Method, Result: env.Result, Error: env.Error})
	}
	return msgs, true
}

func (s *Session) route(m Message) {
	if m.Method != "" {
		s.mu.Lock()
		s.notes = append(s.notes, m)
		s.mu.Unlock()
		if len(m.ID) > 0 {
			// A request from the server (sampling, roots, elicitation):
			// this client supports none of them.
			s.Send(fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"not supported by this client"}}`, m.ID))
		}
		return
	}
	key := idKey(m.ID)
	s.mu.Lock()
	ch := s.waiting[key]
	delete(s.waiting, key)
	if ch == nil {
		s.stray = append(s.stray, m)
	}
	s.mu.Unlock()
	if ch != nil {
		ch <- m
	}
}

// idKey normalises a JSON id for lookup: 1 and 1.0 are the same number.
func idKey(id json.RawMessage) string {
	var v any
	if json.Unmarshal(id, &v) != nil {
		return string(id)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// Send writes one line to the proxy.
func (s *Session) Send(line string) error {
	_, err := io.WriteString(s.stdin, line+"\n")
	return err
}

// answerTimeout bounds the wait for one answer: longer than any wait the
// gate itself imposes (the database's busy timeout is 10s).
const answerTimeout = 40 * time.Second

// Expect registers interest in the answer to id before the request that
// asks for it is sent; the returned function waits for it.
func (s *Session) Expect(id string) func(ctx context.Context) (Message, error) {
	key := idKey(json.RawMessage(id))
	ch := make(chan Message, 1)
	s.mu.Lock()
	s.waiting[key] = ch
	s.mu.Unlock()
	return func(ctx context.Context) (Message, error) {
		ctx, cancel := context.WithTimeout(ctx, answerTimeout)
		defer cancel()
		select {
		case m := <-ch:
			return m, nil
		case <-s.done:
			select {
			case m := <-ch:
				return m, nil
			default:
			}
			return Message{}, fmt.Errorf("the proxy closed its output before answering request %s; its stderr:\n%s", id, tail(s.stderr.String(), 1500))
		case <-ctx.Done():
			s.mu.Lock()
			delete(s.waiting, key)
			var last []byte
			if n := len(s.seen); n > 0 {
				last = s.seen[n-1]
			}
			s.mu.Unlock()
			return Message{}, fmt.Errorf("no answer to request %s: %w (the last message from the proxy: %.300s)", id, context.Cause(ctx), last)
		}
	}
}

// RoundTrip sends line, a request with id, and waits for its answer.
func (s *Session) RoundTrip(ctx context.Context, id, line string) (Message, error) {
	wait := s.Expect(id)
	if err := s.Send(line); err != nil {
		return Message{}, fmt.Errorf("write to the proxy: %w", err)
	}
	return wait(ctx)
}

// NewID returns a fresh numeric request id.
func (s *Session) NewID() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	return strconv.Itoa(s.nextID)
}

// Request sends a request for method with params and waits for its answer.
func (s *Session) Request(ctx context.Context, method string, params any) (Message, error) {
	id := s.NewID()
	p, err := json.Marshal(params)
	if err != nil {
		return Message{}, err
	}
	return s.RoundTrip(ctx, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":%q,"params":%s}`, id, method, p))
}

// CallTool calls tool name with args and returns the answer as the model
// reads it.
func (s *Session) CallTool(ctx context.Context, name string, args any) (ToolResult, error) {
	m, err := s.Request(ctx, "tools/call", map[string]any{"name": name, "arguments": args})
	if err != nil {
		return ToolResult{}, err
	}
	return m.Tool(), nil
}

// Initialize performs the MCP handshake as client name, and lists the
// server's tools.
func (s *Session) Initialize(ctx context.Context, client string) error {
	m, err := s.Request(ctx, "initialize", map[string]any{
		"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
		"clientInfo": map[string]any{"name": client, "version": "1.0"},
	})
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("initialize: %s", m.Error.Message)
	}
	if err := s.Send(`{"jsonrpc":"2.0","method":"notifications/initialized"}`); err != nil {
		return err
	}
	return s.ListTools(ctx)
}

// ListTools asks for the tools, as a client does before calling them.
func (s *Session) ListTools(ctx context.Context) error {
	m, err := s.Request(ctx, "tools/list", map[string]any{})
	if err != nil {
		return err
	}
	if m.Error != nil {
		return fmt.Errorf("tools/list: %s", m.Error.Message)
	}
	return nil
}

// Stray returns the answers that came for no request this client waited
// for.
func (s *Session) Stray() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.stray...)
}

// Notes returns the notifications and requests the proxy passed on.
func (s *Session) Notes() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.notes...)
}

// Impure returns the stdout lines that were not JSON-RPC messages.
func (s *Session) Impure() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.impure...)
}

// Received returns every line the proxy wrote to stdout.
func (s *Session) Received() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Join(s.seen, []byte("\n"))
}

// Stderr returns what the proxy wrote to stderr (its log, and its
// server's stderr).
func (s *Session) Stderr() string { return s.stderr.String() }

// PID is the proxy's process id.
func (s *Session) PID() int { return s.cmd.Process.Pid }

// Kill kills the proxy with SIGKILL and waits for it.
func (s *Session) Kill() {
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
}

// Close closes the proxy's stdin, as a client that goes away does, and
// waits for it to exit, killing it after 15s. It returns the exit error.
func (s *Session) Close() error {
	s.stdin.Close()
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.Kill()
		return errors.New("the proxy did not exit within 15s of its client going away")
	}
	return s.waitErr
}

// Exited is closed when the proxy process has exited.
func (s *Session) Exited() <-chan struct{} { return s.exited }

// syncBuffer is a bytes.Buffer a process writes while the lab reads it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail returns the last n bytes of s.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
