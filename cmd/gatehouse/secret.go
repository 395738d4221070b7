package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"golang.org/x/term"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

var secretSetCmd = &command{
	name:    "secret set",
	usage:   "ID",
	summary: "store a secret in the OS keychain (value from a hidden prompt or stdin)",
	help: `
The value is read from a prompt that does not echo it, or, when stdin is not
a terminal, from stdin (one trailing newline is dropped). It goes to the OS
keychain and nowhere else. Refer to it as vault://secret/ID, for example in a
server's environment: gatehouse server add NAME --env TOKEN=vault://secret/ID -- ...`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("secret set: want exactly one ID")
		}
		if err := vault.ValidateSecretID(pos[0]); err != nil {
			return usagef("secret set: %v", err)
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		values, err := c.readSecrets([]string{"value of " + pos[0]})
		if err != nil {
			return err
		}
		if err := storeSecret(ctx, st, pos[0], values[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: stored secret %s in the keychain\n", pos[0])
		return nil
	},
}

// secretRemoveFlags are the flags of gatehouse secret remove.
type secretRemoveFlags struct {
	force bool
}

var secretRemoveCmd = &command{
	name:    "secret remove",
	aliases: []string{"rm"},
	usage:   "ID",
	summary: "delete a secret from the OS keychain",
	flags: flagged(func(fs *flag.FlagSet, f *secretRemoveFlags) {
		fs.BoolVar(&f.force, "force", false, "delete it even if servers refer to it")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *secretRemoveFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("secret remove: want exactly one ID")
		}
		id := pos[0]
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		users, err := secretUsers(ctx, st)
		if err != nil {
			return err
		}
		if u := users[id]; len(u) > 0 && !f.force {
			return withHint(fmt.Errorf("secret %s is used by %s", id, strings.Join(u, ", ")),
				"those servers would no longer start; delete it anyway with: gatehouse secret remove --force %s", id)
		}
		err = vaultFor(st).DeleteSecret(id)
		if err != nil && !errors.Is(err, vault.ErrNotFound) {
			return err
		}
		if ferr := st.ForgetSecret(ctx, id); ferr != nil {
			return ferr
		}
		if err != nil {
			return withHint(err, "see the stored secrets with: gatehouse secret list")
		}
		fmt.Fprintf(c.stderr, "gatehouse: deleted secret %s\n", id)
		return nil
	}),
}

var secretListCmd = &command{
	name:    "secret list",
	aliases: []string{"ls"},
	summary: "list the secrets kept for this home folder (ids, never values)",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		ids, err := st.SecretIDs(ctx)
		if err != nil {
			return err
		}
		users, err := secretUsers(ctx, st)
		if err != nil {
			return err
		}
		if len(ids) == 0 {
			fmt.Fprintf(c.stderr, "gatehouse: no secrets\nhint: store one with: gatehouse secret set ID\n")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tUPDATED\tUSED BY")
		for _, s := range ids {
			used := strings.Join(users[s.ID], ", ")
			if used == "" {
				used = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\n", s.ID, s.UpdatedAt.Local().Format("2006-01-02 15:04"), used)
		}
		return tw.Flush()
	},
}

// secretUsers maps each secret id to the "server (VAR)" entries that refer
// to it.
func secretUsers(ctx context.Context, st *store.Store) (map[string][]string, error) {
	servers, err := st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	users := map[string][]string{}
	for _, s := range servers {
		refs := secretRefs(s)
		for _, k := range slices.Sorted(maps.Keys(refs)) {
			users[refs[k]] = append(users[refs[k]], fmt.Sprintf("%s (%s)", s.Name, k))
		}
	}
	return users, nil
}

// storeSecret puts value in the keychain as id and notes the id.
func storeSecret(ctx context.Context, st *store.Store, id, value string) error {
	if err := vaultFor(st).SetSecret(id, value); err != nil {
		if errors.Is(err, vault.ErrUnavailable) {
			return withHint(err, "nothing was stored; make the keychain reachable and retry")
		}
		return err
	}
	return st.NoteSecret(ctx, id)
}

// readSecrets reads one value per prompt: from a prompt that does not echo
// when stdin is a terminal, else one line each from stdin.
func (c *cli) readSecrets(prompts []string) ([]string, error) {
	if f, ok := c.stdin.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		values := make([]string, len(prompts))
		for i, p := range prompts {
			fmt.Fprintf(c.stderr, "%s: ", p)
			b, err := term.ReadPassword(int(f.Fd()))
			fmt.Fprintln(c.stderr)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", p, err)
			}
			values[i] = string(b)
		}
		return values, nil
	}
	r := bufio.NewReader(io.LimitReader(c.stdin, int64(len(prompts))*(vault.MaxSecretBytes+2)))
	values := make([]string, len(prompts))
	for i, p := range prompts {
		line, err := r.ReadString('\n')
		if err != nil && (err != io.EOF || line == "") {
			return nil, fmt.Errorf("read %s from stdin: %w", p, errOrEOF(err))
		}
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		if len(prompts) == 1 && err == nil {
			// A single value may span lines (a PEM key): take the rest too.
			rest, _ := io.ReadAll(r)
			line = strings.TrimSuffix(strings.TrimSuffix(line+"\n"+string(rest), "\n"), "\r")
		}
		if line == "" {
			return nil, fmt.Errorf("read %s: empty value", p)
		}
		values[i] = line
	}
	return values, nil
}

func errOrEOF(err error) error {
	if err == io.EOF {
		return errors.New("no more input")
	}
	return err
}
