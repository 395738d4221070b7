// Package mcptest is the smallest MCP server over stdio, for tests whose
// binary doubles as a server: it answers each request with the result set
// for its method.
package mcptest

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
)

// Serve reads JSON-RPC messages from in, one per line, until it ends, and
// answers each request on out with results[method], raw JSON; a request
// for another method gets the error -32601. Notifications and lines that
// are not JSON get nothing.
func Serve(in io.Reader, out io.Writer, results map[string]string) {
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		var msg struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(sc.Bytes(), &msg) != nil || msg.ID == nil {
			continue
		}
		if result, ok := results[msg.Method]; ok {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"result":%s}`+"\n", msg.ID, result)
		} else {
			fmt.Fprintf(out, `{"jsonrpc":"2.0","id":%s,"error":{"code":-32601,"message":"no"}}`+"\n", msg.ID)
		}
	}
}
