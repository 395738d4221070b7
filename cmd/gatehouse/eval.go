package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"regexp"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof"
)

// evalFlags are the flags of gatehouse eval.
type evalFlags struct {
	faults bool
	run    string
	calls  int
	json   bool
	quiet  bool
	keep   bool
	seed   uint64
}

var evalCmd = &command{
	name:    "eval",
	usage:   "[--faults [--calls N] [--seed N]] [--run REGEXP] [--json] [--quiet] [--keep]",
	summary: "attack Gatehouse and report, case by case, whether each promise held",
	help: `
Runs the adversarial evaluation: real attacks, in five families, against
real 'gatehouse proxy' processes and real evidence logs, each in a
temporary home folder of its own (--home is not used):

  policy bypass       names and arguments that read as one call and run as
                      another; approvals raced, replayed or spoofed
  secret leakage      a server's credential sent back raw, encoded, split,
                      in errors, notifications and logs
  evidence tampering  the log edited, cut, reordered, extended, re-signed,
                      in an export and in the database
  protocol abuse      malformed, oversized and flooding messages; a server
                      that forges answers, lies about its tools, stalls or
                      crashes
  honest disclosure   every refusal says it is Gatehouse's, and why

The server behind the proxies is Gatehouse's own misbehaving test server,
which records every call it runs: no call may run without its receipt.

--faults runs the fault injection instead: proxies killed with SIGKILL at
random points across --calls calls, the server crashing mid-call, the
database locked, the disk full, the keychain disappearing. After each the
log must verify, every call that ran must have its receipt, and the next
call must work or fail saying why.

The proxies need a keychain for their signing keys. On Linux the evaluation
starts a private one (needs dbus-daemon and gnome-keyring-daemon; Debian:
apt install dbus-daemon gnome-keyring), which the fault suite also kills;
elsewhere it uses yours, under throw-away names it removes afterwards.

It prints a table of families, cases and results. The exit status is 0
when every case held, 1 when any slipped, 2 when it could not run.
docs/security.md says which case covers which claim.`,
	flags: flagged(func(fs *flag.FlagSet, f *evalFlags) {
		fs.BoolVar(&f.faults, "faults", false, "run the fault injection instead of the attacks")
		fs.StringVar(&f.run, "run", "", "run only the cases whose \"family/case\" matches `REGEXP`")
		fs.IntVar(&f.calls, "calls", 3000, "with --faults: `n` calls across which proxies are killed")
		fs.Uint64Var(&f.seed, "seed", 0, "with --faults: seed the random kills with `n` (0: a new seed; the report names it)")
		fs.BoolVar(&f.json, "json", false, "print the report as JSON")
		fs.BoolVar(&f.quiet, "quiet", false, "do not print each case as it ends (on stderr)")
		fs.BoolVar(&f.keep, "keep", false, "keep the temporary homes for inspection")
	}, runEval),
}

func runEval(ctx context.Context, c *cli, fs *flag.FlagSet, f *evalFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("eval: unexpected argument %q", pos[0])
	}
	cfg := proof.Config{Keep: f.keep, Calls: f.calls, Seed: f.seed}
	if cfg.Calls < 1 {
		return usagef("eval: --calls must be at least 1")
	}
	if re := f.run; re != "" {
		if cfg.Match, err = regexp.Compile(re); err != nil {
			return usagef("eval: --run: %v", err)
		}
	}
	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("eval: find the gatehouse binary: %w", err)
	}
	if !f.quiet {
		cfg.Progress = c.stderr
	}
	kc, err := proof.OpenKeychain(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "gatehouse: eval: %v\n", err)
		if errors.Is(err, proof.ErrNoKeychain) {
			fmt.Fprintln(c.stderr, "hint: the proxies keep their signing keys in a keychain; on Linux install dbus-daemon and gnome-keyring (Debian: sudo apt-get install dbus-daemon gnome-keyring) and the evaluation starts a private one")
		}
		return &exitError{2}
	}
	defer kc.Close()
	cfg.Keychain = kc

	run, what := proof.Eval, "attacks"
	if f.faults {
		run, what = proof.Faults, "faults"
	}
	fmt.Fprintf(c.stderr, "gatehouse eval: %s against real proxies, each in a temporary home, with %s\n", what, kc.Describe)
	rep, err := run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if len(rep.Results) == 0 {
		return usagef("eval: --run %q matches no case", f.run)
	}
	if f.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		if !f.quiet {
			fmt.Fprintln(c.stderr)
		}
		if err := rep.WriteText(c.stdout); err != nil {
			return err
		}
	}
	if !rep.OK() {
		fmt.Fprintf(c.stderr, "gatehouse eval: %d of %d cases slipped\n", rep.Count(proof.Slipped), len(rep.Results))
		return &exitError{1}
	}
	return nil
}
