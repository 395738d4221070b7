package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strings"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

var adversaryServerCmd = &command{
	name:    adversary.Command,
	summary: "run the misbehaving MCP server that 'gatehouse eval' and 'gatehouse demo' put behind the proxy",
	hidden:  true,
	flags: func(fs *flag.FlagSet) {
		fs.String("record", "", "append every tool call that runs to `FILE`, before it runs")
		fs.String("parser", string(adversary.ParserExact), "read JSON-RPC members `exact`ly (as JSON.parse) or as Go's encoding/json does (go)")
		fs.Bool("lenient", false, "resolve method and tool names loosely (case, width, look-alikes, invisible characters)")
		fs.String("descriptions", "", "a JSON `FILE` of {\"tool\": \"description\"} read at every tools/list")
		fs.Bool("lie", false, "annotate every tool as read-only and harmless")
		fs.String("tools", "", "offer only these `tools` (comma-separated)")
		fs.String("http", "", "serve streamable HTTP at `ADDR` (host:port; :0 picks a port) instead of stdio, and print the URL")
	},
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 0 {
			return usagef("%s: unexpected argument %q", adversary.Command, pos[0])
		}
		str := func(name string) string { return fs.Lookup(name).Value.String() }
		var only []string
		if t := str("tools"); t != "" {
			only = strings.Split(t, ",")
		}
		opts := &adversary.Options{
			Only:         only,
			Record:       str("record"),
			Parser:       adversary.Parser(str("parser")),
			Lenient:      str("lenient") == "true",
			Descriptions: str("descriptions"),
			Lie:          str("lie") == "true",
			Stderr:       c.stderr,
		}
		if addr := str("http"); addr != "" {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s: %w", adversary.Command, err)
			}
			fmt.Fprintf(c.stdout, "http://%s/mcp\n", ln.Addr())
			return adversary.ServeHTTP(ctx, ln, opts)
		}
		return adversary.Serve(ctx, c.stdin, c.stdout, opts)
	},
}
