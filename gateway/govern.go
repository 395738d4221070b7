package gateway

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
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
	// any of the session's secrets (the server's, and every vault value
	// resolved in this session, which an agent may have read and passed
	// on) replaced by a marker. The same as Arguments when they hold none.
	Recorded json.RawMessage
	Client   Client
	Session  string // this proxy session's id
	// IdempotencyKey is the key the client put in the request's _meta
	// ("idempotencyKey", or "dev.gatehouse/idempotencyKey"); empty when none.
	IdempotencyKey string
	// Tag is the opaque string the client put in the request's _meta
	// ("dev.gatehouse/callTag"); empty when none. A client that runs the
	// proxy in its own process (gatehouse programs) finds its call's
	// decision by it. It MUST NOT change how the call is decided: any agent
	// may send one.
	Tag string
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

// sessionState is what the relay learns about the client and the server's
// tools, for the governor.
type sessionState struct {
	mu     sync.Mutex
	client Client           // guarded by mu
	tools  map[string]*Tool // guarded by mu; from the latest tools/list pages
	held   string           // why calls are held: a listing the gate could not read one way; guarded by mu
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

// tool returns the tool called name as last listed, and why calls are held
// ("" when they are not).
func (s *sessionState) tool(name string) (*Tool, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tools[name], s.held
}

// hold holds every governed call until a listing the gate can read comes.
func (s *sessionState) hold(why string) {
	s.mu.Lock()
	s.held = why
	s.mu.Unlock()
}

// noteTools records the tools of a tools/list result page and returns them.
// A page that lists a tool twice, or a definition that is not an object
// with a name, could be read as one tool by the gate and as another by the
// client: the page is not recorded, and calls are held until a page that
// can be read one way comes.
func (s *sessionState) noteTools(result Value) []*Tool {
	list, ok := result.Get("tools")
	why := ""
	var listed []*Tool
	seen := map[string]bool{}
	switch {
	case !ok || list.Kind() != Array:
		why = "its tools/list answer has no list of tools"
	default:
		for def := range list.Elements() {
			t, err := readTool(def)
			switch {
			case err != nil:
				why = err.Error()
			case seen[t.Name]:
				why = fmt.Sprintf("it listed the tool %q twice", t.Name)
			}
			if why != "" {
				break
			}
			seen[t.Name] = true
			listed = append(listed, t)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if why != "" {
		s.held = "the tool definitions in its last listing could not be read one way: " + why
		return nil
	}
	s.held = ""
	if s.tools == nil {
		s.tools = map[string]*Tool{}
	}
	for _, t := range listed {
		s.tools[t.Name] = t
	}
	return listed
}

// readTool reads one tool definition. Raw keeps all of it: the pin covers
// the whole definition as the client reads it.
func readTool(def Value) (*Tool, error) {
	name, ok := def.Get("name")
	s, isText := name.Text()
	if def.Kind() != Object || !ok || !isText || s == "" {
		return nil, errors.New("a tool definition has no name")
	}
	t := &Tool{Name: s, Raw: bytes.Clone(def.Raw())}
	if d, ok := def.Get("description"); ok {
		t.Description, _ = d.Text()
	}
	if a, ok := def.Get("annotations"); ok && a.Kind() == Object {
		hint := func(name string) *bool {
			v, _ := a.Get(name)
			if b, ok := v.Bool(); ok {
				return &b
			}
			return nil
		}
		t.Annotations = &Annotations{ReadOnlyHint: hint("readOnlyHint"), DestructiveHint: hint("destructiveHint"),
			IdempotentHint: hint("idempotentHint"), OpenWorldHint: hint("openWorldHint")}
	}
	return t, nil
}

// callParams are the parts of tools/call params the gate reads.
type callParams struct {
	name           string
	arguments      Value // Invalid when there are none
	progressToken  Value // Invalid when there is none
	client         *Client
	idempotencyKey string
	tag            string
}

// readCallParams reads a tools/call's params, and refuses params that a
// server could read as another call: a member that only a reader folding
// case takes for one of the gate's, arguments that are not an object.
func readCallParams(m message) (callParams, error) {
	var p callParams
	params, ok := m.val.Get("params")
	if !ok || params.Kind() != Object {
		return p, errors.New("tools/call needs params, an object")
	}
	if odd := oddMember(params, callMembers); odd != "" {
		return p, fmt.Errorf("its params member %q is not %q, but a server could take it for that", odd, foldName(odd))
	}
	name, _ := params.Get("name")
	if p.name, ok = name.Text(); !ok || p.name == "" {
		return p, errors.New("tools/call needs params with a name, a string")
	}
	if args, ok := params.Get("arguments"); ok {
		if args.Kind() != Object && args.Kind() != Null {
			return p, errors.New("the arguments of a tools/call are an object")
		}
		if args.Kind() == Object {
			p.arguments = args
		}
	}
	meta, ok := params.Get("_meta")
	if !ok {
		return p, nil
	}
	if meta.Kind() != Object {
		return p, errors.New("the _meta of a tools/call is an object")
	}
	if t, ok := meta.Get("progressToken"); ok {
		if _, _, ok := readID(t); !ok {
			return p, errors.New("a progress token is a string or an integer")
		}
		p.progressToken = t
	}
	if info, ok := meta.Get("io.modelcontextprotocol/clientInfo"); ok {
		c := clientOf(info)
		p.client = &c
	}
	for _, k := range []string{"idempotencyKey", "dev.gatehouse/idempotencyKey"} {
		if v, ok := meta.Get(k); ok && p.idempotencyKey == "" {
			if p.idempotencyKey, ok = v.Text(); !ok {
				return p, fmt.Errorf("_meta.%s is a string", k)
			}
		}
	}
	if v, ok := meta.Get(TagMeta); ok {
		if p.tag, ok = v.Text(); !ok {
			return p, fmt.Errorf("_meta.%s is a string", TagMeta)
		}
	}
	return p, nil
}

// TagMeta is the _meta member that carries a call's [Call.Tag].
const TagMeta = "dev.gatehouse/callTag"

// clientOf reads a clientInfo object.
func clientOf(info Value) Client {
	var c Client
	if n, ok := info.Get("name"); ok {
		c.Name, _ = n.Text()
	}
	if v, ok := info.Get("version"); ok {
		c.Version, _ = v.Text()
	}
	return c
}

// clone copies a message out of the frame buffer it was read from.
func (m message) clone() message {
	raw := bytes.Clone(m.raw)
	m.raw, m.val, m.id = raw, Value{raw: raw}, bytes.Clone(m.id)
	return m
}

// govern is the life of one governed tools/call, from the gate's decision
// to its outcome. It runs on its own goroutine, so that a call waiting for
// an approver holds up nothing else. req was registered when the call
// arrived: until it is sent, no answer from the server can pass for it.
//
// The call MUST NOT reach the server unless the governor allowed it, and
// then only as the gate read it (the arguments the governor gives, spliced
// into the bytes that were read).
func (r *relay) govern(req *request, m message) {
	defer r.wg.Done()
	defer req.cancel()
	refuse := func(text string) { r.reply(req, toolErrorResponse(req.id, text), nil) }

	// 1. Read the call.
	p, err := readCallParams(m)
	if err != nil {
		r.log.Warn("refused a tools/call", slog.String("why", r.text(err.Error())))
		refuse("Gatehouse refused this call, so it did not run: " + err.Error())
		return
	}
	def, held := r.sess.tool(p.name)
	if held != "" {
		refuse(fmt.Sprintf("Gatehouse is holding calls to %s, so this call did not run: %s. It lets calls through again once the server lists its tools in a form it can read.", r.server, held))
		return
	}
	client := r.sess.clientInfo()
	if p.client != nil {
		client = *p.client
	}
	c := &Call{Server: r.server, Tool: p.name, Client: client, Session: r.sessionID,
		IdempotencyKey: p.idempotencyKey, Tag: p.tag, Definition: def}
	if p.arguments.Kind() == Object {
		c.Arguments = json.RawMessage(p.arguments.Raw())
		recorded, _ := r.secrets.redactor().redactValue(p.arguments)
		c.Recorded = json.RawMessage(recorded.Raw())
	}
	req.call = c

	// 2. Decide (and record the decision, durably, before anything runs).
	auth, err := r.gov.Authorize(req.ctx, c, r.progress(p.progressToken))
	switch {
	case req.ctx.Err() != nil:
		// Cancelled by the client (which expects no answer), or the
		// proxy is stopping (and has answered).
		r.take(req)
		return
	case err != nil:
		r.log.Error("the gate could not decide; the call does not run", slog.String("tool", r.text(c.Tool)), slog.Any("err", err))
		refuse("Gatehouse could not decide on this call, so it did not run: " + err.Error())
		return
	case !auth.Allow:
		refuse(auth.Message)
		return
	case auth.Replay != nil:
		r.replay(req, auth)
		return
	}

	// 3. Prepare the call as the gate allowed it.
	frame := m.raw
	if auth.Arguments != nil {
		if frame, err = withArguments(m, auth.Arguments); err != nil {
			refuse("Gatehouse could not prepare this call, so it did not run: " + err.Error())
			return
		}
	}
	// The values resolved for the server are kept out of everything it
	// sends from now on, in this call's answer and in every other channel.
	r.secrets.add(auth.Redact)

	// 4. Send it, unless it was cancelled or answered meanwhile; from now
	// on the server's answer is its answer.
	r.mu.Lock()
	if r.requests[req.key] != req || r.failed != nil {
		r.mu.Unlock()
		return
	}
	req.auth, req.sent, req.start = auth, true, time.Now()
	req.timer = time.AfterFunc(r.timeout, func() { r.timedOut(req) })
	r.mu.Unlock()
	r.toServer(frame)
	// 5. The answer, and the outcome, come in fromServer (or from fail,
	// cancelledLocked or timedOut).
}

// progress returns how the gate tells the client that a call is still
// waiting, when the client asked for progress; nil otherwise.
func (r *relay) progress(token Value) func(string) {
	if token.Kind() == Invalid {
		return nil
	}
	n := 0
	return func(msg string) {
		n++
		r.up.write([]byte(fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":%s,"progress":%d,"message":%s}}`,
			token.Raw(), n, quote(msg))))
	}
}

// timedOut ends a call the server did not answer in time.
func (r *relay) timedOut(req *request) {
	text := fmt.Sprintf("Gatehouse stopped waiting for %s: the server did not answer this call within %s. Whether it took effect is not known; its outcome is recorded as UNKNOWN (receipt %s).",
		r.server, r.timeout, req.auth.Receipt)
	if !r.reply(req, toolErrorResponse(req.id, text), &Outcome{Status: StatusUnknown, Duration: time.Since(req.start)}) {
		return
	}
	r.log.Warn("a call timed out", slog.String("tool", r.text(req.call.Tool)), slog.Duration("after", r.timeout))
	cancel := fmt.Sprintf(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":%s,"reason":%s}}`,
		req.id, quote("Gatehouse: no answer within "+r.timeout.String()))
	r.toServer([]byte(cancel))
}

// replay answers a call with the recorded result of its earlier run, and
// records that as its outcome.
func (r *relay) replay(req *request, auth *Authorization) {
	resp, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Result  json.RawMessage `json:"result"`
	}{"2.0", req.id, auth.Replay})
	req.auth = auth
	o := &Outcome{Status: StatusFailed}
	if v, err := ReadValue(resp); err == nil {
		o = outcomeOf(v, 0)
	}
	o.Result = auth.Replay // as recorded, byte for byte
	r.reply(req, resp, o)
}

// withArguments returns a tools/call request with params.arguments
// replaced, and everything else as it was read.
func withArguments(m message, args json.RawMessage) ([]byte, error) {
	if _, err := ReadValue(args); err != nil {
		return nil, fmt.Errorf("the arguments it prepared: %w", err)
	}
	params, _ := m.val.Get("params")
	var p []byte
	if _, ok := params.Get("arguments"); ok {
		p, _ = withMember(params, "arguments", args)
	} else {
		raw := params.Raw()
		sep := ","
		if len(bytes.TrimSpace(raw[1:len(raw)-1])) == 0 {
			sep = ""
		}
		p = append(append(append([]byte(`{"arguments":`), args...), sep...), raw[1:]...)
	}
	out, ok := withMember(m.val, "params", p)
	if !ok {
		return nil, errors.New("the call has no params")
	}
	return out, nil
}

// outcomeOf reads how a call ended from the answer the client got.
func outcomeOf(v Value, d time.Duration) *Outcome {
	o := &Outcome{Status: StatusSucceeded, Duration: d}
	if e, ok := v.Get("error"); ok {
		o.Status = StatusFailed
		if c, ok := e.Get("code"); ok {
			o.ErrorCode, _ = c.Int()
		}
		return o
	}
	res, ok := v.Get("result")
	if !ok {
		return o
	}
	o.Result = json.RawMessage(res.Raw())
	if isErr, ok := res.Get("isError"); ok {
		if b, _ := isErr.Bool(); b {
			o.Status = StatusFailed
		}
	}
	return o
}

// complete records the outcome of a governed call, off the relay's path:
// only the receipt has to be durable before a call.
func (r *relay) complete(req *request, o *Outcome) {
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		r.gov.Complete(context.Background(), req.call, req.auth, o)
	}()
}

// newSessionID returns a random id for one proxy session.
func newSessionID() string {
	b := make([]byte, 9)
	rand.Read(b)
	return "s-" + base64.RawURLEncoding.EncodeToString(b)
}
