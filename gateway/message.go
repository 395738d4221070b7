package gateway

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
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

// message is one JSON-RPC message, read by the one strict reading.
type message struct {
	kind   kind
	id     json.RawMessage // the id as written; nil when it has none usable
	key    string          // the id as a value, for matching answers; "" when none
	method string
	val    Value // the whole message
	raw    []byte
}

// errNotJSON and errInvalid distinguish bytes that are not JSON the gate can
// read from a JSON value that is not a JSON-RPC message.
var (
	errNotJSON = errors.New("not JSON the gate can read one way")
	errInvalid = errors.New("not a JSON-RPC 2.0 message")
)

// envelopeMembers are the members of a JSON-RPC message.
var envelopeMembers = map[string]bool{"jsonrpc": true, "id": true, "method": true, "params": true, "result": true, "error": true}

// parseFrame reads one frame into its messages: one, or several for a
// JSON-RPC batch (an array, allowed up to protocol 2025-03-26). A batch is
// valid only when every member is: the error then names the first that is
// not, and msgs still holds every member, so that each request with a
// usable id can be answered.
func parseFrame(frame []byte) (msgs []message, batch bool, err error) {
	v, err := ReadValue(frame)
	if err != nil {
		return nil, bytes.HasPrefix(bytes.TrimSpace(frame), []byte("[")), fmt.Errorf("%w: %v", errNotJSON, err)
	}
	if v.Kind() != Array {
		m, err := readMessage(v)
		return []message{m}, false, err
	}
	var first error
	for e := range v.Elements() {
		m, err := readMessage(e)
		if err != nil && first == nil {
			first = fmt.Errorf("batch member %d: %w", len(msgs)+1, err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		return nil, true, fmt.Errorf("%w: empty batch", errInvalid)
	}
	return msgs, true, first
}

// readMessage reads one JSON-RPC message. For an invalid message that
// still carries a usable id, the returned message has kindInvalid and that
// id, so that the sender can be answered.
func readMessage(v Value) (message, error) {
	m := message{kind: kindInvalid, val: v, raw: v.Raw()}
	if v.Kind() != Object {
		return m, fmt.Errorf("%w: a message is a JSON object", errInvalid)
	}
	var (
		version, method  string
		id               Value
		hasID, hasMethod bool
		hasResult, hasEr bool
		odd              string
	)
	raw := v.Raw()
	for k, span := range v.memberSpans() {
		val := Value{raw: raw[span[0]:span[1]]}
		name := raw[k[0]+1 : k[1]-1]
		if bytes.IndexByte(name, '\\') >= 0 {
			name = []byte(unquote(raw[k[0]:k[1]]))
		}
		switch string(name) {
		case "jsonrpc":
			version, _ = val.Text()
		case "id":
			id, hasID = val, true
		case "method":
			s, ok := val.Text()
			if !ok || s == "" {
				odd = "its method is not a name"
			}
			method, hasMethod = s, true
		case "params":
		case "result":
			hasResult = true
		case "error":
			hasEr = true
		default:
			if f := foldName(string(name)); envelopeMembers[f] && odd == "" {
				// Go's encoding/json would take it for the member.
				odd = fmt.Sprintf("member %q is not JSON-RPC's %q", name, f)
			}
		}
	}
	if hasID {
		if raw, key, ok := readID(id); ok {
			m.id, m.key = raw, key
		}
	}
	m.method = method
	switch {
	case version != "2.0":
		return m, fmt.Errorf("%w: its jsonrpc member is not \"2.0\"", errInvalid)
	case odd != "":
		return m, fmt.Errorf("%w: %s", errInvalid, odd)
	case hasID && m.key == "" && !(id.Kind() == Null && hasEr && !hasMethod):
		return m, fmt.Errorf("%w: an id is a string or an integer", errInvalid)
	case hasMethod && (hasResult || hasEr):
		return m, fmt.Errorf("%w: a message has either a method or a result", errInvalid)
	case hasResult && hasEr:
		return m, fmt.Errorf("%w: an answer has either a result or an error", errInvalid)
	case hasMethod && hasID:
		m.kind = kindRequest
	case hasMethod:
		m.kind = kindNotification
	case (hasResult || hasEr) && hasID:
		m.kind = kindResponse
	default:
		return m, fmt.Errorf("%w: no method, result or error", errInvalid)
	}
	return m, nil
}

// readID returns an id as written and as a key that is equal for equal
// values: a string, or an integer every reader holds exactly. Fractions,
// exponents and larger numbers are refused: readers round them apart.
func readID(id Value) (json.RawMessage, string, bool) {
	switch id.Kind() {
	case String:
		s, _ := id.Text()
		return json.RawMessage(id.Raw()), "s" + s, true
	case Number:
		n, ok := id.Int()
		if !ok {
			return nil, "", false
		}
		return json.RawMessage(id.Raw()), "n" + strconv.FormatInt(n, 10), true
	}
	return nil, "", false
}

// headFields finds the top-level "id" and "method" of a message that could
// not be read whole (too large, or refused), only to address the error
// that answers it. It returns what it found before the head ran out, and
// only an id of a form the proxy accepts.
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
		var raw json.RawMessage
		if dec.Decode(&raw) != nil {
			return id, method
		}
		switch key {
		case "id":
			if v, err := ReadValue(raw); err == nil {
				if r, _, ok := readID(v); ok {
					id = r
				}
			}
		case "method":
			var s string
			if json.Unmarshal(raw, &s) == nil {
				method = s
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
	if method == governedMethod {
		return toolErrorResponse(id, text)
	}
	return errorResponse(id, codeInternalError, text)
}

// withMember returns the object obj with the value of its member name
// replaced by val (valid JSON); the member must exist. The rest of obj is
// kept byte for byte, so that what was judged is what goes on.
func withMember(obj Value, name string, val []byte) ([]byte, bool) {
	raw := obj.Raw()
	for k, span := range obj.memberSpans() {
		if unquote(raw[k[0]:k[1]]) != name {
			continue
		}
		out := make([]byte, 0, len(raw)-span[1]+span[0]+len(val))
		out = append(out, raw[:span[0]]...)
		out = append(out, val...)
		return append(out, raw[span[1]:]...), true
	}
	return nil, false
}
