package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/confine/enforce"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// confineFlags are the flags of the hidden gatehouse confine.
type confineFlags struct {
	read, write, connect listFlag
	anyNet               bool
	minABI               int
}

var confineCmd = &command{
	name:    confine.Command,
	usage:   "[--read PATH]... [--write PATH]... [--connect PORT]... [--any-net] [--min-abi N] -- PROGRAM [ARGS...]",
	summary: "restrict this process to the paths and ports given, then run PROGRAM in it (the proxy starts confined servers so)",
	hidden:  true,
	flags: flagged(func(fs *flag.FlagSet, f *confineFlags) {
		fs.Var(&f.read, "read", "allow reading and executing `PATH` (repeatable)")
		fs.Var(&f.write, "write", "allow reading, writing and executing `PATH` (repeatable)")
		fs.Var(&f.connect, "connect", "allow TCP connections to `PORT` (repeatable)")
		fs.BoolVar(&f.anyNet, "any-net", false, "leave the network unrestricted")
		fs.IntVar(&f.minABI, "min-abi", confine.NetABI, "refuse to start on a kernel whose Landlock ABI is below `N`")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *confineFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) == 0 {
			return usagef("confine: want a PROGRAM after --")
		}
		plan := confine.Plan{Read: f.read, Write: f.write, AnyNet: f.anyNet, MinABI: f.minABI}
		for _, p := range f.connect {
			n, err := strconv.ParseUint(p, 10, 16)
			if err != nil {
				return usagef("confine: --connect %q is not a TCP port", p)
			}
			plan.Connect = append(plan.Connect, uint16(n))
		}
		err = enforce.Exec(plan, pos, os.Environ())
		// Exec returned: nothing ran. Say so where the proxy's client sees
		// the server's last words.
		fmt.Fprintf(c.stderr, "gatehouse confine: %s was not started: %v\n", pos[0], err)
		return &exitError{126}
	}),
}

// confineServer returns how to start the stdio server srv, whose command is
// cmd: cmd itself when its registration does not ask for confinement, else
// cmd confined (through `gatehouse confine`), with the server's private
// temporary folder, which the caller removes after the server exits. What
// the user must know before the server starts is written to stderr,
// prefixed with who.
//
// A server whose registration asks for confinement MUST NOT start
// unconfined unless the registration also says that is acceptable
// (UnconfinedOK), and then only where confinement is unavailable (never
// past a declared folder that is missing), and saying so on stderr.
func confineServer(srv store.Server, cmd gateway.Command, home, who string, stderr io.Writer) (gateway.Command, *confine.Prepared, *entry.Confinement, error) {
	if !srv.Confine {
		return cmd, nil, &entry.Confinement{Confined: false}, nil
	}
	self, err := os.Executable()
	if err != nil {
		return gateway.Command{}, nil, nil, fmt.Errorf("find the gatehouse program to confine server %s: %w", srv.Name, err)
	}
	prep, err := confine.Prepare(self, cmd, confine.Request{Read: srv.AllowRead, Write: srv.AllowWrite, Net: srv.AllowNet, Home: home})
	if errors.Is(err, confine.ErrUnavailable) && srv.UnconfinedOK {
		fmt.Fprintf(stderr, "%s: server %s starts UNCONFINED: %v (its registration accepts that: --unconfined-ok)\n", who, srv.Name, err)
		return cmd, nil, &entry.Confinement{Confined: false}, nil
	}
	if err != nil {
		return gateway.Command{}, nil, nil, fmt.Errorf("server %s is to be confined, and cannot be: %w", srv.Name, err)
	}
	for _, n := range prep.Notes {
		fmt.Fprintf(stderr, "%s: server %s: %s\n", who, srv.Name, n)
	}
	st := prep.Status
	return prep.Command, prep, &entry.Confinement{Confined: true, Mechanism: st.Mechanism, ABI: st.ABI}, nil
}

// confineHint is the next step after a server could not be confined.
func confineHint(name string, err error) string {
	var perr *confine.PathError
	switch {
	case errors.As(err, &perr):
		return fmt.Sprintf("create the folder, or change what the server is given: gatehouse server set %s --allow-read ... --allow-write ...", name)
	case errors.Is(err, confine.ErrUnavailable):
		return fmt.Sprintf("to run it unconfined on this machine anyway: gatehouse server set %s --unconfined-ok", name)
	}
	return "see: gatehouse server list"
}
