package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"regexp"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// verifyFlags are the flags of gatehouse verify.
type verifyFlags struct {
	pinKey            string
	sinceCheckpoint   string
	witnesses         witnessKeys
	witnessesRequired int
	json              bool
}

// witnessKeys is the repeatable --witness flag.
type witnessKeys []entry.WitnessKey

func (w *witnessKeys) String() string { return "" }

func (w *witnessKeys) Set(vkey string) error {
	k, err := entry.ParseWitnessKey(vkey)
	if err != nil {
		return err
	}
	*w = append(*w, k)
	return nil
}

var verifyCmd = &command{
	name:    "verify",
	usage:   "[--pin-key KID|FILE] [--since-checkpoint FILE] [--witness VKEY]... [--witnesses-required N] [--json] PATH",
	summary: "check an evidence bundle offline, and report each check",
	help: `
Checks the bundle at PATH (a folder or .tar.gz that 'gatehouse export'
wrote) with nothing but the bundle: no home folder, no keychain, no
network. Each check is reported on its own line, ok or FAIL, with the
entries it failed on named by index and id: the signed manifest, canonical
form, log order, the key chain, key resolution, signatures, inclusion in
the checkpoint's tree, the tree each entry signed, the checkpoint's
signature, consistency with an earlier checkpoint, receipts and outcomes,
payloads against their commitments, and erasures (reported as such, not as
failures). The exit status is 1 if any check fails.

A bundle vouches for its own keys. To know it is the log you expect, pin
the log's first key (--pin-key, with the key id or a file from 'gatehouse
keys export-public', or keys.jwks.json of an export you trust), and give
the checkpoint of the previous export (--since-checkpoint): a log
truncated, rewritten or signed again with a fresh key fails one of them.

Name the witnesses you trust with --witness (their verifier keys,
name+hash+key, as 'gatehouse witness serve' prints them): each
cosignature of the bundle's checkpoint by one of them must verify, and
cosignatures by others are reported and ignored. With witnesses named, at
least one of them must have cosigned (--witnesses-required says how many;
0 only reports). A cosigned checkpoint is one the witness checked against
every checkpoint of the log it cosigned before: the owner did not show it
a different or rewritten log. The report ends with the assurance reached:
signed by the log; key pinned; witnessed by N of the M witnesses named.

docs/evidence.md specifies the format, for a verifier of your own.`,
	flags: flagged(func(fs *flag.FlagSet, f *verifyFlags) {
		fs.StringVar(&f.pinKey, "pin-key", "", "trust only a log whose first key is `KID` (16 hex digits), or the first key of the public key FILE (JWKS, JWK, PEM or base64)")
		fs.StringVar(&f.sinceCheckpoint, "since-checkpoint", "", "the checkpoint `FILE` of an earlier export, which the log must extend")
		fs.Var(&f.witnesses, "witness", "a witness's verifier key `VKEY` whose cosignature counts (repeatable)")
		fs.IntVar(&f.witnessesRequired, "witnesses-required", -1, "how many of the witnesses named must have cosigned (`N`; default 1 when any is named)")
		fs.BoolVar(&f.json, "json", false, "print the report as JSON")
	}, runVerify),
}

var keyIDPattern = regexp.MustCompile(`^[0-9a-f]{16}$`)

func runVerify(ctx context.Context, c *cli, flags *flag.FlagSet, f *verifyFlags, args []string) error {
	pos, err := parse(flags, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("verify: want exactly one bundle PATH (a folder or .tar.gz from gatehouse export)")
	}
	var opts verify.Options
	if pin := f.pinKey; pin != "" {
		if err := pinKey(&opts, pin); err != nil {
			return err
		}
	}
	if name := f.sinceCheckpoint; name != "" {
		if opts.Since, err = os.ReadFile(name); err != nil {
			return fmt.Errorf("verify: %w", err)
		}
	}
	opts.Witnesses = f.witnesses
	switch n := f.witnessesRequired; {
	case n < 0 && len(f.witnesses) > 0:
		opts.WitnessesRequired = 1
	case n > len(f.witnesses):
		return usagef("verify: --witnesses-required %d, but %d %s named with --witness", n, len(f.witnesses), plural(len(f.witnesses), "witness is", "witnesses are"))
	case n > 0:
		opts.WitnessesRequired = n
	}
	bundle, err := verify.Open(pos[0])
	if err != nil {
		if errors.Is(err, verify.ErrNotBundle) || errors.Is(err, fs.ErrNotExist) {
			return withHint(err, "give the folder or .tar.gz that gatehouse export wrote")
		}
		return err
	}
	report, err := verify.Bundle(ctx, bundle, &opts)
	if err != nil {
		return err
	}
	if f.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(report); err != nil {
			return err
		}
	} else if err := report.WriteText(c.stdout); err != nil {
		return err
	}
	if failed := report.Failed(); len(failed) > 0 {
		fmt.Fprintf(c.stderr, "gatehouse verify: %s: %d of %d checks failed\n", pos[0], len(failed), len(report.Checks))
		return &exitError{1}
	}
	return nil
}

// pinKey sets the pin from a key id or a key file. A value that names an
// existing file is a file, whatever it looks like.
func pinKey(opts *verify.Options, pin string) error {
	data, err := os.ReadFile(pin)
	switch {
	case err == nil:
		keys, err := verify.ParsePublicKeys(data)
		if err != nil {
			return usagef("verify: --pin-key %s: %v", pin, err)
		}
		// A file pins its first key: export-public and keys.jwks.json list
		// a log's keys oldest first, and pinning a later one would let
		// whoever holds it start a log of their own.
		opts.PinKeys = keys[:1]
	case keyIDPattern.MatchString(pin):
		opts.PinKeyID = pin
	case errors.Is(err, fs.ErrNotExist):
		return usagef("verify: --pin-key %q is neither a key id (16 hex digits) nor a file", pin)
	default:
		return fmt.Errorf("verify: --pin-key: %w", err)
	}
	return nil
}
