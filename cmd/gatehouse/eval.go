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
	flags: func(fs *flag.FlagSet) {
		fs.Bool("faults", false, "run the fault injection instead of the attacks")
		fs.String("run", "", "run only the cases whose \"family/case\" matches `REGEXP`")
		fs.Int("calls", 3000, "with --faults: `n` calls across which proxies are killed")
		fs.Uint64("seed", 0, "with --faults: seed the random kills with `n` (0: a new seed; the report names it)")
		fs.Bool("json", false, "print the report as JSON")
		fs.Bool("quiet", false, "do not print each case as it ends (on stderr)")
		fs.Bool("keep", false, "keep the temporary homes for inspection")
	},
	run: runEval,
}

func runEval(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usagef("eval: unexpected argument %q", pos[0])
	}
	get := func(name string) any { return fs.Lookup(name).Value.(flag.Getter).Get() }
	cfg := proof.Config{Keep: get("keep").(bool), Calls: get("calls").(int), Seed: get("seed").(uint64)}
	if cfg.Calls < 1 {
		return usagef("eval: --calls must be at least 1")
	}
	if re := get("run").(string); re != "" {
		if cfg.Match, err = regexp.Compile(re); err != nil {
			return usagef("eval: --run: %v", err)
		}
	}
	if cfg.Gatehouse, err = os.Executable(); err != nil {
		return fmt.Errorf("eval: find the gatehouse binary: %w", err)
	}
	if !get("quiet").(bool) {
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
	if get("faults").(bool) {
		run, what = proof.Faults, "faults"
	}
	fmt.Fprintf(c.stderr, "gatehouse eval: %s against real proxies, each in a temporary home, with %s\n", what, kc.Describe)
	rep, err := run(ctx, cfg)
	if err != nil {
		return fmt.Errorf("eval: %w", err)
	}
	if len(rep.Results) == 0 {
		return usagef("eval: --run %q matches no case", get("run"))
	}
	if get("json").(bool) {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(rep); err != nil {
			return err
		}
	} else {
		if !get("quiet").(bool) {
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
