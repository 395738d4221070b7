package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/demo"
	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// demoFlags are the flags of gatehouse demo.
type demoFlags struct {
	keep bool
}

var demoCmd = &command{
	name:    "demo",
	usage:   "[--keep]",
	summary: "walk through Gatehouse in a minute, in a temporary home (nothing of yours is touched)",
	help: `
Shows, step by step, what Gatehouse does to an MCP session: it registers a
small MCP server with a credential, sets a few rules, connects through the
proxy as an MCP client does, and makes calls that are allowed, denied,
approved by an automatic approver, and held because the server changed a
tool; the server tries to send its credential back; then it shows the
receipts, exports the evidence, verifies it offline, and shows the verifier
catching a tampered copy. It ends with what each step proved, and exits 1
if a step did not behave.

It runs in a temporary home folder (--home is not used) with a keychain
held in memory for the length of the run, so it needs no keychain and no
display, and leaves nothing behind (--keep keeps the home folder).`,
	flags: flagged(func(fs *flag.FlagSet, f *demoFlags) {
		fs.BoolVar(&f.keep, "keep", false, "keep the temporary home folder")
	}, runDemo),
}

func runDemo(ctx context.Context, c *cli, fs *flag.FlagSet, f *demoFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("demo: unexpected argument %q", pos[0])
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("demo: find the gatehouse binary: %w", err)
	}
	// The demo's keys and credential live in memory, for this process
	// alone: the proxy and the approver run in it.
	vault.InMemory()
	err = demo.Run(ctx, demo.Config{
		Gatehouse: func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
			return run(ctx, args, stdin, stdout, stderr)
		},
		Server: []string{exe, adversary.Command},
		Out:    c.stdout,
		Keep:   f.keep,
	})
	if errors.Is(err, demo.ErrMisbehaved) {
		fmt.Fprintln(c.stderr, "gatehouse: demo: a step did not behave (see ✘ above)")
		return &exitError{1}
	}
	return err
}
