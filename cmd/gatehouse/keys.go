package main

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"text/tabwriter"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

var keysListCmd = &command{
	name:    "keys list",
	aliases: []string{"ls"},
	summary: "list the evidence log's signing keys",
	help: `
Every key that has signed the log is announced in it, with its public key,
so that what it signed stays verifiable after it is retired. The current
key is the one the OS keychain holds for this home folder.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, l, err := c.openLog(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		keys, err := l.Keys(ctx)
		if err != nil {
			return err
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY ID\tANNOUNCED AT\tSTATE")
		for _, k := range keys {
			state := "retired (public key kept in the log)"
			if k.ID == l.KeyID() {
				state = "current (private key in the keychain)"
			}
			fmt.Fprintf(tw, "%s\tentry %d\t%s\n", k.ID, k.AddedIdx, state)
		}
		return tw.Flush()
	},
}

var keysRotateCmd = &command{
	name:    "keys rotate",
	summary: "replace the signing key with a new one, announced in the log by the old one",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, l, err := c.openLog(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		old := l.KeyID()
		if _, err := vaultFor(st).RotateSigningKey(func(next ed25519.PrivateKey) error {
			return l.Rotate(ctx, next)
		}); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: rotated the signing key: %s -> %s\n", old, l.KeyID())
		fmt.Fprintf(c.stderr, "hint: give auditors the new public key: gatehouse keys export-public\n")
		return nil
	},
}

// keysAdoptFlags are the flags of gatehouse keys adopt.
type keysAdoptFlags struct {
	custodyBreak bool
}

var keysAdoptCmd = &command{
	name:    "keys adopt",
	usage:   "--custody-break",
	summary: "sign the log with the keychain's key when the log's own key is lost",
	help: `
When the keychain no longer holds the key that signs the log (it was deleted,
or the keychain was reset), proxies refuse to sign with another key: adding
one would break the chain of custody that verification checks, so every tool
call is refused until a person decides. If the old key cannot be restored,
this command announces the keychain's key in the log, signed by itself. From
then on the log is signed again; 'gatehouse verify' reports the break at
that entry (what the new key signs is vouched for by nothing before it), and
entries before it still verify with the old public key kept in the log.`,
	flags: flagged(func(fs *flag.FlagSet, f *keysAdoptFlags) {
		fs.BoolVar(&f.custodyBreak, "custody-break", false, "confirm that verification will report a break in custody at this point")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *keysAdoptFlags, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		if !f.custodyBreak {
			return usagef("keys adopt: say --custody-break to confirm that verification will report a break in custody here")
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		key, err := vaultFor(st).SigningKey()
		if err != nil {
			return withHint(err, "the evidence log's signing key lives in the OS keychain; make it reachable and retry")
		}
		if _, err := receipts.Open(ctx, st, key); err == nil {
			fmt.Fprintln(c.stderr, "gatehouse: the keychain's key already signs this log; nothing to adopt")
			return nil
		} else if !errors.Is(err, receipts.ErrForeignKey) {
			return err
		}
		l, err := receipts.Adopt(ctx, st, key)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: the log is signed by %s from now on; verification reports a break in custody where it was adopted\n", l.KeyID())
		fmt.Fprintf(c.stderr, "hint: give auditors the new public key: gatehouse keys export-public\n")
		return nil
	}),
}

// keysExportFlags are the flags of gatehouse keys export-public.
type keysExportFlags struct {
	format string
}

var keysExportCmd = &command{
	name:    "keys export-public",
	summary: "print the public keys that verify the log (JWKS, PEM or raw)",
	flags: flagged(func(fs *flag.FlagSet, f *keysExportFlags) {
		fs.StringVar(&f.format, "format", "jwks", "`format`: jwks or pem (every key, oldest first), or raw (the current key, base64)")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *keysExportFlags, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, l, err := c.openLog(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		keys, err := l.Keys(ctx)
		if err != nil {
			return err
		}
		var current ed25519.PublicKey
		for _, k := range keys {
			if k.ID == l.KeyID() {
				current = k.Public
			}
		}
		switch format := f.format; format {
		case "jwks":
			set := verify.JWKS{Keys: []verify.JWK{}}
			for _, k := range keys {
				set.Keys = append(set.Keys, verify.NewJWK(k.Public))
			}
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(set)
		case "pem":
			// Every key, oldest first, each a PUBLIC KEY block with no
			// headers (OpenSSL reads none), named on the line before it.
			for i, k := range keys {
				der, err := x509.MarshalPKIXPublicKey(k.Public)
				if err != nil {
					return err
				}
				what := fmt.Sprintf("announced at entry %d", k.AddedIdx)
				switch {
				case i == 0 && k.ID == l.KeyID():
					what = "the log's first and current key, " + what
				case i == 0:
					what = "the log's first key, " + what
				case k.ID == l.KeyID():
					what = "the current key, " + what
				}
				fmt.Fprintf(c.stdout, "Gatehouse evidence log %s, key %s: %s\n", l.ID(), k.ID, what)
				if err := pem.Encode(c.stdout, &pem.Block{Type: "PUBLIC KEY", Bytes: der}); err != nil {
					return err
				}
			}
			return nil
		case "raw":
			fmt.Fprintln(c.stdout, base64.StdEncoding.EncodeToString(current))
			return nil
		default:
			return usagef("keys export-public: unknown --format %q (jwks, pem, raw)", format)
		}
	}),
}

// noArgs parses flags and refuses positional arguments.
func noArgs(fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("%s: unexpected argument %q", fs.Name(), pos[0])
	}
	return nil
}
