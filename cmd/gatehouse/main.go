// Command gatehouse is Gatehouse's command line and its stdio MCP proxy.
//
// MCP clients launch `gatehouse proxy NAME` in place of the server NAME; the
// other commands register servers and inspect the gate. Run `gatehouse help`
// for the list.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
