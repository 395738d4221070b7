package bench

import (
	"context"
	"errors"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// ServerName is the name under which [Run] expects the echo server to be
// registered in [Config.Home] when [Config.Server] is empty.
const ServerName = "bench-echo"

// ServeCommand is the gatehouse subcommand that runs [ServeEcho] on its
// stdin and stdout: the server measured directly and behind the proxy.
const ServeCommand = "bench-echo-server"

// ServeEcho runs a minimal MCP server on in and out, built with the MCP Go
// SDK as a small real server would be: one tool, "echo", whose input is
// {"message": string} and whose result is that message as text content. It
// returns nil when in ends (the client closed the server's stdin) or ctx is
// done.
func ServeEcho(ctx context.Context, in io.Reader, out io.Writer) error {
	err := newEchoServer().Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(in), Writer: nopWriteCloser{out}})
	if ctx.Err() != nil || errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// newEchoServer is the echo server, for any transport.
func newEchoServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "gatehouse-bench-echo", Version: "1"}, nil)
	mcp.AddTool(s, &mcp.Tool{
		Name:        "echo",
		Description: "Return the message it is given.",
	}, echo)
	return s
}

type echoInput struct {
	Message string `json:"message" jsonschema:"the text to send back"`
}

func echo(ctx context.Context, req *mcp.CallToolRequest, in echoInput) (*mcp.CallToolResult, any, error) {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Message}}}, nil, nil
}

// nopWriteCloser leaves the writer open when the session closes: it is the
// process's stdout, which outlives the session.
type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
