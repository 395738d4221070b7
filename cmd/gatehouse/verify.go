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

	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// verifyFlags are the flags of gatehouse verify.
type verifyFlags struct {
	pinKey          string
	sinceCheckpoint string
	json            bool
}

var verifyCmd = &command{
	name:    "verify",
	usage:   "[--pin-key KID|FILE] [--since-checkpoint FILE] [--json] PATH",
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

docs/evidence.md specifies the format, for a verifier of your own.`,
	flags: flagged(func(fs *flag.FlagSet, f *verifyFlags) {
		fs.StringVar(&f.pinKey, "pin-key", "", "trust only a log whose first key is `KID` (16 hex digits), or the first key of the public key FILE (JWKS, JWK, PEM or base64)")
		fs.StringVar(&f.sinceCheckpoint, "since-checkpoint", "", "the checkpoint `FILE` of an earlier export, which the log must extend")
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
