package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	fastjson "github.com/segmentio/encoding/json"
)

// JSON-RPC error codes the proxy answers with itself.
const (
	codeParseError     = -32700
	codeInvalidRequest = -32600
	codeInvalidParams  = -32602
	codeInternalError  = -32603
)

// kind is what a JSON-RPC message is.
type kind int

const (
	kindInvalid kind = iota
	kindRequest
	kindNotification
	kindResponse
)

// present records that a JSON member exists without copying its value.
type present bool

func (p *present) UnmarshalJSON([]byte) error { *p = true; return nil }

// envelope is the part of a JSON-RPC message the relay needs to route it. The
// message itself is relayed as the bytes that arrived, so members the proxy
// does not know (and params and results it does not look at) pass unchanged.
type envelope struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Method  string          `json:"method"`
	Result  present         `json:"result"`
	Error   present         `json:"error"`
}

// message is one parsed JSON-RPC message.
type message struct {
	kind   kind
	id     json.RawMessage // raw id as it arrived; nil for notifications
	method string
	raw    []byte // the whole message as it arrived
}

// errNotJSON and errInvalid distinguish a parse error from a well-formed JSON
// value that is not a JSON-RPC message.
var (
	errNotJSON = errors.New("not JSON")
	errInvalid = errors.New("not a JSON-RPC 2.0 message")
)

// parseFrame parses one frame into its messages: one, or several for a
// JSON-RPC batch (an array, allowed up to protocol 2025-03-26). For an
// invalid message that still carries a usable id, the returned message has
// kindInvalid and that id, so the sender can be answered.
func parseFrame(frame []byte) (msgs []message, batch bool, err error) {
	frame = bytes.TrimSpace(frame)
	if len(frame) > 0 && frame[0] == '[' {
		var elems []json.RawMessage
		if err := json.Unmarshal(frame, &elems); err != nil {
			return nil, true, fmt.Errorf("%w: %v", errNotJSON, err)
		}
		if len(elems) == 0 {
			return nil, true, fmt.Errorf("%w: empty batch", errInvalid)
		}
		msgs = make([]message, 0, len(elems))
		for _, e := range elems {
			m, err := parseMessage(e)
			if err != nil && !errors.Is(err, errInvalid) {
				return nil, true, err
			}
			msgs = append(msgs, m)
		}
		return msgs, true, nil
	}
	m, err := parseMessage(frame)
	if err != nil {
		return []message{m}, false, err
	}
	return []message{m}, false, nil
}

func parseMessage(raw []byte) (message, error) {
	var env envelope
	// segmentio's decoder validates and skips params and results in one pass
	// (encoding/json makes two), which is most of the relay's own cost on
	// large messages. Its error types are encoding/json's. Member names match
	// exactly, as they do for the servers and clients on either side
	// (encoding/json would take "Method" for "method"); a repeated member
	// counts as its last occurrence, as in JavaScript's JSON.parse.
	rest, err := fastjson.Parse(raw, &env, fastjson.DontCopyRawMessage|fastjson.DontMatchCaseInsensitiveStructFields)
	if err == nil && len(bytes.TrimSpace(rest)) > 0 {
		err = fmt.Errorf("%w: data after the message", errNotJSON)
		return message{kind: kindInvalid, raw: raw}, err
	}
	if err != nil {
		var typeErr *json.UnmarshalTypeError
		if errors.As(err, &typeErr) {
			// Valid JSON, wrong shape: {"method": 3}, [1], "x".
			return message{kind: kindInvalid, raw: raw}, fmt.Errorf("%w: %v", errInvalid, err)
		}
		return message{kind: kindInvalid, raw: raw}, fmt.Errorf("%w: %v", errNotJSON, err)
	}
	m := message{raw: raw, method: env.Method}
	if validID(env.ID) {
		m.id = env.ID
	}
	switch {
	case env.JSONRPC != "2.0":
		return m, fmt.Errorf("%w: jsonrpc member is %q, want \"2.0\"", errInvalid, env.JSONRPC)
	case env.ID != nil && !validID(env.ID):
		return m, fmt.Errorf("%w: id must be a string, a number or null", errInvalid)
	case env.Method != "" && bool(env.Result || env.Error):
		return m, fmt.Errorf("%w: a message has either a method or a result", errInvalid)
	case env.Method != "" && env.ID != nil:
		m.kind = kindRequest
	case env.Method != "":
		m.kind = kindNotification
	case bool(env.Result || env.Error) && env.ID != nil:
		m.kind = kindResponse
	default:
		return m, fmt.Errorf("%w: no method, result or error", errInvalid)
	}
	return m, nil
}

// validID reports whether raw, a valid JSON value, is a string, a number or
// null (null is allowed by JSON-RPC only in error responses, which the relay
// passes as they are).
func validID(raw json.RawMessage) bool {
	if len(raw) == 0 {
		return false
	}
	switch raw[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	case 'n':
		return string(raw) == "null"
	}
	return false
}

// headFields finds the top-level "id" and "method" of a message from its first
// bytes, for a message too large to parse whole. It returns what it found
// before the head ran out.
func headFields(head []byte) (id json.RawMessage, method string) {
	dec := json.NewDecoder(bytes.NewReader(head))
	dec.UseNumber()
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, ""
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return id, method
		}
		key, _ := t.(string)
		switch key {
		case "id":
			var raw json.RawMessage
			if dec.Decode(&raw) != nil {
				return id, method
			}
			if validID(raw) {
				id = raw
			}
		case "method":
			var s string
			if dec.Decode(&s) != nil {
				return id, method
			}
			method = s
		default:
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return id, method
			}
		}
	}
	return id, method
}

// errorResponse encodes a JSON-RPC error answer to id (null when unknown).
func errorResponse(id json.RawMessage, code int, msg string) []byte {
	if id == nil {
		id = json.RawMessage("null")
	}
	b, _ := json.Marshal(struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   rpcError        `json:"error"`
	}{"2.0", id, rpcError{code, msg}})
	return b
}

type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// toolErrorResponse encodes a tools/call result with isError set: the form in
// which a refusal or a failure of the gate reaches the model, which can read
// it and adapt (a JSON-RPC error may never reach the model).
func toolErrorResponse(id json.RawMessage, text string) []byte {
	b, _ := json.Marshal(toolErrorMessage{JSONRPC: "2.0", ID: id, Result: toolResult{
		Content: []textContent{{Type: "text", Text: text}},
		IsError: true,
	}})
	return b
}

type toolErrorMessage struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id"`
	Result  toolResult      `json:"result"`
}

type toolResult struct {
	Content []textContent `json:"content"`
	IsError bool          `json:"isError"`
}

type textContent struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// failureResponse answers request method id with text: as an isError tool
// result for tools/call, as a JSON-RPC error for everything else.
func failureResponse(id json.RawMessage, method, text string) []byte {
	if method == "tools/call" {
		return toolErrorResponse(id, text)
	}
	return errorResponse(id, codeInternalError, text)
}
