package gateway_test

import (
	"context"
	"errors"
	"os"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway"
)

// A proxy that cannot run its server still answers: each request gets the
// reason, tools/call as a result the model can read.
func ExampleRefuse() {
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file"}}
`)
	gateway.Refuse(context.Background(), in, os.Stdout, errors.New(`no server named "files"`))
	// Output:
	// {"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"Gatehouse: no server named \"files\""}}
	// {"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"Gatehouse: no server named \"files\""}],"isError":true}}
}
