package adversary_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// A lenient server takes a full-width, upper-case name for its tool, and
// records the call before it answers.
func ExampleServe() {
	record := filepath.Join(os.TempDir(), "adversary-example.jsonl")
	defer os.Remove(record)
	in := strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"ＥＣＨＯ","arguments":{"message":"hi"}}}` + "\n")
	var out bytes.Buffer
	adversary.Serve(context.Background(), in, &out, &adversary.Options{Lenient: true, Record: record})
	fmt.Print(out.String())
	runs, _ := adversary.ReadRecord(record)
	fmt.Printf("ran %s, called %q, with %s\n", runs[0].Tool, runs[0].Called, runs[0].Args)
	// Output:
	// {"id":1,"jsonrpc":"2.0","result":{"content":[{"text":"hi","type":"text"}]}}
	// ran echo, called "ＥＣＨＯ", with {"message":"hi"}
}
