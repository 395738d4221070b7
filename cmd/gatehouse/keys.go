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
	"github.com/gatehouse-dev/gatehouse/receipts"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
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
		fs.StringVar(&f.format, "format", "jwks", "`format`: jwks (every key), pem or raw (the current key, base64)")
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
			type jwk struct {
				Kty string `json:"kty"`
				Crv string `json:"crv"`
				X   string `json:"x"`
				Kid string `json:"kid"`
				Use string `json:"use"`
				Alg string `json:"alg"`
			}
			set := struct {
				Keys []jwk `json:"keys"`
			}{Keys: []jwk{}}
			for _, k := range keys {
				set.Keys = append(set.Keys, jwk{"OKP", "Ed25519", base64.RawURLEncoding.EncodeToString(k.Public), k.ID, "sig", "EdDSA"})
			}
			enc := json.NewEncoder(c.stdout)
			enc.SetIndent("", "  ")
			return enc.Encode(set)
		case "pem":
			der, err := x509.MarshalPKIXPublicKey(current)
			if err != nil {
				return err
			}
			return pem.Encode(c.stdout, &pem.Block{Type: "PUBLIC KEY", Headers: map[string]string{
				"Key-Id": entry.KeyID(current), "Exported": time.Now().UTC().Format(time.RFC3339),
			}, Bytes: der})
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
