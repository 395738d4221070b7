package mcptest

import (
	"bytes"
	"strings"
	"testing"
)

func TestServe(t *testing.T) {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize"}
not json
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":"b","method":"tools/call"}
`)
	var out bytes.Buffer
	Serve(in, &out, map[string]string{"initialize": `{"ok":true}`})
	want := `{"jsonrpc":"2.0","id":1,"result":{"ok":true}}
{"jsonrpc":"2.0","id":"b","error":{"code":-32601,"message":"no"}}
`
	if out.String() != want {
		t.Errorf("Serve wrote\n%s\nwant\n%s", out.String(), want)
	}
}
