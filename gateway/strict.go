package gateway

import (
	"fmt"
	"strings"
)

// governedMethod is the method the gate decides on.
const governedMethod = "tools/call"

// mcpMethods are the methods of MCP, every revision up to 2026-07-28, that a
// client sends a server: requests and notifications.
var mcpMethods = map[string]bool{
	"initialize": true, "ping": true, "server/discover": true,
	"tools/list": true, "tools/call": true,
	"resources/list": true, "resources/templates/list": true, "resources/read": true,
	"resources/subscribe": true, "resources/unsubscribe": true,
	"prompts/list": true, "prompts/get": true,
	"completion/complete": true, "logging/setLevel": true,
	"tasks/get": true, "tasks/result": true, "tasks/list": true, "tasks/cancel": true,
	"notifications/initialized": true, "notifications/cancelled": true,
	"notifications/progress": true, "notifications/roots/list_changed": true,
	"notifications/tasks/status": true,
}

// methodRefusal returns why a governed proxy refuses a message from the
// client, by its method, or "". A server may read a method more loosely
// than the gate: folding case, width and look-alike letters, dropping
// spaces and invisible characters. So a method that is not exactly one of
// MCP's is relayed only when its name is plain ASCII and nothing of that
// folding takes it for the governed method; and a tools/call must be a
// request, which the gate can answer, not a notification it cannot.
func methodRefusal(m message) string {
	switch {
	case m.kind == kindResponse:
		return "" // the client's answer to the server's request
	case m.method == governedMethod && m.kind == kindNotification:
		return "a tools/call without an id is a call the gate cannot answer: give it an id"
	case mcpMethods[m.method]:
		return ""
	case !plainName(m.method):
		return fmt.Sprintf("method %q is not one of MCP's, and not a plain ASCII name a server reads one way", m.method)
	case skeleton(m.method) == skeleton(governedMethod):
		return fmt.Sprintf("method %q is not tools/call, but a server could take it for tools/call", m.method)
	}
	return ""
}

// plainName reports whether s is made of ASCII letters, digits and the
// punctuation method names use.
func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("/_-.$:", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// skeleton is what is left of a plain name once case, separators and the
// ASCII look-alikes of letters (1 and I for l, 0 for o) are folded away.
func skeleton(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		switch c {
		case '/', '_', '-', '.', '$', ':':
			continue
		case '1', 'i':
			c = 'l'
		case '0':
			c = 'o'
		}
		b.WriteByte(c)
	}
	return b.String()
}

// callMembers are the members of tools/call params the gate reads.
var callMembers = map[string]bool{"name": true, "arguments": true, "_meta": true}

// oddMember returns a member of obj that is not one of known but that a
// reader matching names in any case would take for one, or "".
func oddMember(obj Value, known map[string]bool) string {
	for name := range obj.Members() {
		if !known[name] && known[foldName(name)] {
			return name
		}
	}
	return ""
}
