package bench_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"os"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/bench"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The echo server answers any MCP client; here one in the same process,
// over a pair of pipes.
func ExampleServeEcho() {
	ctx := context.Background()
	toServerR, toServerW := io.Pipe()
	toClientR, toClientW := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- bench.ServeEcho(ctx, toServerR, toClientW)
		toClientW.Close()
	}()

	client := mcp.NewClient(&mcp.Implementation{Name: "example", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.IOTransport{Reader: toClientR, Writer: toServerW}, nil)
	if err != nil {
		log.Fatal(err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hello"}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Content[0].(*mcp.TextContent).Text)
	cs.Close() // the server sees its input end and returns
	fmt.Println(<-done)
	// Output:
	// hello
	// <nil>
}

// Run needs a gatehouse binary and a home folder in which the echo server
// is registered; `gatehouse bench` prepares both.
func ExampleRun() {
	home := "/tmp/bench-home" // where bench-echo runs "/usr/local/bin/gatehouse bench-echo-server"
	r, err := bench.Run(context.Background(), bench.Config{
		Gatehouse:   "/usr/local/bin/gatehouse",
		Home:        home,
		Calls:       2000,
		Concurrency: 8,
	})
	if err != nil {
		log.Fatal(err)
	}
	r.WriteText(os.Stdout)
	fmt.Printf("proxy keeps %.0f%% of direct throughput\n", 100*r.Ratio)
}

// A server registered in a home folder is measured the same way: run
// directly as registered, and through `gatehouse proxy NAME --home HOME`.
// Here @modelcontextprotocol/server-everything, whose echo tool answers
// "Echo: MESSAGE".
func ExampleRun_server() {
	r, err := bench.Run(context.Background(), bench.Config{
		Gatehouse: "/usr/local/bin/gatehouse",
		Home:      "/home/me/.config/gatehouse",
		Server:    "everything",
		Direct:    bench.Direct{Argv: []string{"npx", "-y", "@modelcontextprotocol/server-everything"}},
		Tool:      "echo",
		Arg:       "message",
	})
	if err != nil {
		log.Fatal(err)
	}
	r.WriteText(os.Stdout)
}
