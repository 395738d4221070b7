package gateway

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	fastjson "github.com/segmentio/encoding/json"
)

// A Governor decides on each tools/call and records it. The proxy calls
// Authorize before anything reaches the server, and Complete after a call
// that ran has ended. Gatehouse's governor (package gate) checks policy, asks
// the approver, writes the receipt durably before answering, and writes the
// outcome; the proxy knows nothing of that.
type Governor interface {
	// Authorize decides on c. It returns when the decision is final and
	// recorded. progress, when not nil, tells the client the call is still
	// waiting (for an approver). An error means the gate could not decide:
	// the call does not run (fail closed) and the model is told why.
	Authorize(ctx context.Context, c *Call, progress func(message string)) (*Authorization, error)
	// Complete records what a call that ran did. It is called with a
	// context that outlives the client's cancellation.
	Complete(ctx context.Context, c *Call, a *Authorization, o *Outcome)
}

// A Call is one tools/call, as the governor sees it.
type Call struct {
	Server    string
	Tool      string
	Arguments json.RawMessage // as the client sent them; may hold vault:// references
	// Recorded are the arguments as receipts and approvers see them: with
	// any value of the server's secrets (which an agent may have read and
	// passed on) replaced by a marker. The same as Arguments when they hold
	// none.
	Recorded json.RawMessage
	Client   Client
	Session  string // this proxy session's id
	// IdempotencyKey is the key the client put in the request's _meta
	// ("idempotencyKey", or "dev.gatehouse/idempotencyKey"); empty when none.
	IdempotencyKey string
	// Definition is the tool as the server listed it in this session; nil
	// when it never did (an unknown tool).
	Definition *Tool
}

// Client identifies the MCP client, from initialize (or, in the stateless
// protocol, from each request's _meta).
type Client struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// A Tool is a tool's definition as the server listed it.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Annotations *Annotations    `json:"annotations"`
	Raw         json.RawMessage `json:"-"` // the whole definition as listed
}

// Annotations are the MCP tool annotations: hints from the server, not
// trusted unless the user trusts the server.
type Annotations struct {
	ReadOnlyHint    *bool `json:"readOnlyHint,omitempty"`
	DestructiveHint *bool `json:"destructiveHint,omitempty"`
	IdempotentHint  *bool `json:"idempotentHint,omitempty"`
	OpenWorldHint   *bool `json:"openWorldHint,omitempty"`
}

// A ToolWatcher is a [Governor] that wants to see each page of tools the
// server lists (to pin tools at first sight and notice changed definitions
// before anyone calls them). Pages reach it in the order they came, off the
// relay's path.
type ToolWatcher interface {
	ToolsListed(ctx context.Context, tools []*Tool)
}

// An Authorization is the governor's answer.
type Authorization struct {
	Allow bool
	// Arguments replace the client's when not nil (vault references
	// resolved for the server).
	Arguments json.RawMessage
	// Message is what the model reads when the call does not run: that it
	// was Gatehouse, which rule, and the receipt id.
	Message string
	// Receipt is the id of the receipt that records the decision.
	Receipt string
	// Redact are secret values (by id) put into the arguments: they are
	// kept out of this call's result like the server's own secrets.
	Redact map[string]string
	// Replay, when set (with Allow), is the recorded result of the same
	// call made before with the same idempotency key: the client gets it,
	// and the server is not called again.
	Replay json.RawMessage
}

// An Outcome is what a call that ran did.
type Outcome struct {
	Status    string          // SUCCEEDED, FAILED or UNKNOWN
	Result    json.RawMessage // the result as the client received it (redacted)
	ErrorCode int64           // JSON-RPC error code, when the server answered with one
	Duration  time.Duration
	Findings  []Finding // secrets redacted from the result
}

// Outcome statuses.
const (
	StatusSucceeded = "SUCCEEDED"
	StatusFailed    = "FAILED"
	StatusUnknown   = "UNKNOWN"
)

// governed is the state of one governed call in flight.
type governed struct {
	call   *Call
	auth   *Authorization
	start  time.Time
	cancel context.CancelFunc // stops a pending authorization
	ran    bool               // forwarded to the server
}

// sessionState is what the relay learns about the client and the server's tools,
// for the governor.
type sessionState struct {
	mu     sync.Mutex
	client Client           // guarded by mu
	tools  map[string]*Tool // guarded by mu; from the latest tools/list pages
}

func (s *sessionState) setClient(c Client) {
	s.mu.Lock()
	s.client = c
	s.mu.Unlock()
}

func (s *sessionState) clientInfo() Client {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.client
}

func (s *sessionState) tool(name string) *Tool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools[name]
}

// noteTools records the tools of a tools/list result page, and returns them.
func (s *sessionState) noteTools(result []byte) []*Tool {
	var page struct {
		Result struct {
			Tools []json.RawMessage `json:"tools"`
		} `json:"result"`
	}
	if json.Unmarshal(result, &page) != nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.tools == nil {
		s.tools = map[string]*Tool{}
	}
	var listed []*Tool
	for _, raw := range page.Result.Tools {
		t := &Tool{}
		if json.Unmarshal(raw, t) != nil || t.Name == "" {
			continue
		}
		t.Raw = append(json.RawMessage(nil), raw...)
		s.tools[t.Name] = t
		listed = append(listed, t)
	}
	return listed
}

// callParams are the parts of tools/call params the gate needs.
type callParams struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Meta      struct {
		ProgressToken  json.RawMessage `json:"progressToken"`
		ClientInfo     *Client         `json:"io.modelcontextprotocol/clientInfo"`
		IdempotencyKey string          `json:"idempotencyKey"`
		GatehouseKey   string          `json:"dev.gatehouse/idempotencyKey"`
	} `json:"_meta"`
}

// readCallParams reads a tools/call's params as a server does that reads
// JSON exactly, and refuses params another server could read differently
// (see ambiguity).
func readCallParams(raw []byte) (callParams, error) {
	var env struct {
		Params json.RawMessage `json:"params"`
	}
	var p callParams
	if _, err := fastjson.Parse(raw, &env, fastjson.DontMatchCaseInsensitiveStructFields); err != nil {
		return p, fmt.Errorf("tools/call params: %w", err)
	}
	if why := ambiguity(env.Params, callMembers); why != "" {
		return p, fmt.Errorf("its params could be read differently by the server: %s", why)
	}
	if _, err := fastjson.Parse(env.Params, &p, fastjson.DontMatchCaseInsensitiveStructFields); err != nil || p.Name == "" {
		return p, errors.New("tools/call needs params with a name, a string")
	}
	return p, nil
}

// govern handles a tools/call from the client: it asks the governor, and
// forwards the call (with the arguments the governor gives) only when it
// may run. It runs on its own goroutine, so that a call waiting for an
// approver holds up nothing else.
func (r *relay) govern(ctx context.Context, m message) {
	defer r.wg.Done()
	id := json.RawMessage(append([]byte(nil), m.id...))
	p, err := readCallParams(m.raw)
	if err != nil {
		r.log.Warn("refused a tools/call", slog.Any("err", err))
		r.answer(id, m.method, toolErrorResponse(id, "Gatehouse refused this call, so it did not run: "+err.Error()))
		return
	}
	client := r.sess.clientInfo()
	if p.Meta.ClientInfo != nil {
		client = *p.Meta.ClientInfo
	}
	c := &Call{Server: r.server, Tool: p.Name, Arguments: p.Arguments, Client: client, Session: r.sessionID, Definition: r.sess.tool(p.Name)}
	c.Recorded = c.Arguments
	c.IdempotencyKey = cmp.Or(p.Meta.IdempotencyKey, p.Meta.GatehouseKey)
	if r.redact != nil && len(c.Arguments) > 0 {
		c.Recorded, _ = r.redact.redact(c.Arguments)
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	g := &governed{call: c, cancel: cancel}
	r.mu.Lock()
	r.governed[string(id)] = g
	r.mu.Unlock()

	var progress func(string)
	if len(p.Meta.ProgressToken) > 0 {
		token := p.Meta.ProgressToken
		n := 0
		progress = func(msg string) {
			n++
			b, _ := json.Marshal(msg)
			r.up.write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"message":%s}}`, token, n, b)))
		}
	}
	auth, err := r.gov.Authorize(ctx, c, progress)
	if ctx.Err() != nil {
		// The client cancelled the call while it waited: it expects no answer.
		r.forget(id)
		return
	}
	if err != nil {
		r.log.Error("the gate could not decide; the call does not run", slog.String("tool", c.Tool), slog.Any("err", err))
		r.answer(id, m.method, toolErrorResponse(id, "Gatehouse could not decide on this call, so it did not run: "+err.Error()))
		return
	}
	if !auth.Allow {
		r.answer(id, m.method, toolErrorResponse(id, auth.Message))
		return
	}
	if auth.Replay != nil {
		r.replay(id, g, auth)
		return
	}
	frame := m.raw
	if auth.Arguments != nil {
		if frame, err = withArguments(m.raw, auth.Arguments); err != nil {
			r.answer(id, m.method, toolErrorResponse(id, "Gatehouse could not prepare this call, so it did not run: "+err.Error()))
			return
		}
	}
	r.mu.Lock()
	g.auth, g.start, g.ran = auth, time.Now(), true
	failed := r.failed
	r.mu.Unlock()
	if failed != nil {
		// The server is gone; fail() has answered the client and will
		// not see this call as run.
		r.forget(id)
		return
	}
	if err := r.down.write(frame); err != nil {
		r.log.Warn("writing to server", slog.Any("err", err))
	}
}

// replay answers a call with the recorded result of its earlier run, and
// records that as its outcome.
func (r *relay) replay(id json.RawMessage, g *governed, auth *Authorization) {
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", id, auth.Replay})
	r.mu.Lock()
	g.auth, g.start = auth, time.Now()
	r.mu.Unlock()
	if !r.forget(id) {
		return
	}
	r.up.write(resp)
	o := &Outcome{Status: StatusSucceeded, Result: auth.Replay}
	var res struct {
		IsError bool `json:"isError"`
	}
	if json.Unmarshal(auth.Replay, &res) == nil && res.IsError {
		o.Status = StatusFailed
	}
	r.complete(g, o)
}

// withArguments returns a tools/call request with params.arguments replaced.
func withArguments(raw []byte, args json.RawMessage) ([]byte, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, err
	}
	var params map[string]json.RawMessage
	if err := json.Unmarshal(msg["params"], &params); err != nil {
		return nil, err
	}
	params["arguments"] = args
	b, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	msg["params"] = b
	return json.Marshal(msg)
}

// answer sends the proxy's own answer to a request the server never saw.
func (r *relay) answer(id json.RawMessage, method string, resp []byte) {
	if r.forget(id) {
		r.up.write(resp)
	}
}

// forget drops a request from the books; it reports whether it was still
// pending (not already answered because the server went away).
func (r *relay) forget(id json.RawMessage) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.pending[string(id)]
	delete(r.pending, string(id))
	delete(r.governed, string(id))
	return ok
}

// completed records the outcome of a governed call the server answered.
// It runs after the answer went to the client: only the receipt has to be
// durable before a call; the outcome is not on its critical path.
func (r *relay) completed(g *governed, resp []byte, findings []Finding) {
	o := &Outcome{Status: StatusSucceeded, Duration: time.Since(g.start), Findings: findings}
	var m struct {
		Result json.RawMessage `json:"result"`
		Error  *struct {
			Code int64 `json:"code"`
		} `json:"error"`
	}
	if json.Unmarshal(resp, &m) == nil {
		o.Result = m.Result
		var res struct {
			IsError bool `json:"isError"`
		}
		switch {
		case m.Error != nil:
			o.Status, o.ErrorCode = StatusFailed, m.Error.Code
		case json.Unmarshal(m.Result, &res) == nil && res.IsError:
			o.Status = StatusFailed
		}
	}
	r.complete(g, o)
}

func (r *relay) complete(g *governed, o *Outcome) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.gov.Complete(context.Background(), g.call, g.auth, o)
	}()
}

// newSessionID returns a random id for one proxy session.
func newSessionID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return "s-" + base64.RawURLEncoding.EncodeToString(b)
}
