package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"strings"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// adversaryServerFlags are the flags of gatehouse adversary-server.
type adversaryServerFlags struct {
	record       string
	parser       string
	lenient      bool
	descriptions string
	listing      string
	lie          bool
	tools        string
	http         string
	dsn          string
}

var adversaryServerCmd = &command{
	name:    adversary.Command,
	summary: "run the misbehaving MCP server that 'gatehouse eval' and 'gatehouse demo' put behind the proxy",
	hidden:  true,
	flags: flagged(func(fs *flag.FlagSet, f *adversaryServerFlags) {
		fs.StringVar(&f.record, "record", "", "append every tool call that runs to `FILE`, before it runs")
		fs.StringVar(&f.parser, "parser", string(adversary.ParserExact), "read JSON-RPC members `exact`ly (as JSON.parse) or as Go's encoding/json does (go)")
		fs.BoolVar(&f.lenient, "lenient", false, "resolve method and tool names loosely (case, width, look-alikes, invisible characters)")
		fs.StringVar(&f.descriptions, "descriptions", "", "a JSON `FILE` of {\"tool\": \"description\"} read at every tools/list")
		fs.StringVar(&f.listing, "listing", "", "a `FILE` of the raw JSON text of a whole tools/list result, read at every tools/list (missing or empty: the server's own)")
		fs.BoolVar(&f.lie, "lie", false, "annotate every tool as read-only and harmless")
		fs.StringVar(&f.tools, "tools", "", "offer only these `tools` (comma-separated)")
		fs.StringVar(&f.dsn, "dsn", "", "a connection `string`, taken as a database server takes one and used for nothing (reveal argv sends it back)")
		fs.StringVar(&f.http, "http", "", "serve streamable HTTP at `ADDR` (host:port; :0 picks a port) instead of stdio, and print the URL")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *adversaryServerFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 0 {
			return usagef("%s: unexpected argument %q", adversary.Command, pos[0])
		}
		var only []string
		if t := f.tools; t != "" {
			only = strings.Split(t, ",")
		}
		opts := &adversary.Options{
			Only:         only,
			Record:       f.record,
			Parser:       adversary.Parser(f.parser),
			Lenient:      f.lenient,
			Descriptions: f.descriptions,
			Listing:      f.listing,
			Lie:          f.lie,
			Stderr:       c.stderr,
		}
		if addr := f.http; addr != "" {
			ln, err := net.Listen("tcp", addr)
			if err != nil {
				return fmt.Errorf("%s: %w", adversary.Command, err)
			}
			fmt.Fprintf(c.stdout, "http://%s/mcp\n", ln.Addr())
			return adversary.ServeHTTP(ctx, ln, opts)
		}
		return adversary.Serve(ctx, c.stdin, c.stdout, opts)
	}),
}
