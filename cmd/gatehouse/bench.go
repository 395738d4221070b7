package main

import (
	"context"
	"flag"
)

var benchCmd = &command{
	name:    "bench",
	summary: "measure the proxy: calls/s and latency, direct and through the gate; start-up time",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		return usagef("bench: not built yet")
	},
}
