package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/witness"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// witnessHelp is what witnessing proves, for every witness command's help.
const witnessHelp = `
A witness cosigns an evidence log's checkpoints, each only after checking a
consistency proof from the last one it cosigned for that log (the C2SP
tlog-witness protocol). Run by someone else (another user, another
machine), it stops the log's owner from showing two different logs, or a
rewritten one, with cosignatures: a fork is refused (409 or 422) and never
cosigned. It does not see the entries, and proves nothing about what they
say.`

// witnessServeFlags are the flags of gatehouse witness serve.
type witnessServeFlags struct {
	listen string
	name   string
}

var witnessServeCmd = &command{
	name:    "witness serve",
	usage:   "[--listen HOST:PORT] [--name NAME]",
	summary: "run a witness that cosigns the checkpoints of the logs it was told about",
	help: witnessHelp + `

Serves POST /add-checkpoint at --listen until interrupted. The witness
keeps, in this home folder's database, the latest checkpoint it cosigned
for each log, and signs with a key of its own that it keeps in the OS
keychain (created on first use; not the evidence log's key). It cosigns
only for logs given with 'gatehouse witness add-log'.

It prints its verifier key (name+hash+key) on stderr: the log's owner adds
it with 'gatehouse witnesses add NAME URL VKEY', auditors give it to
'gatehouse verify --witness'. --name names a new witness (default: this
machine's host name and /gatehouse-witness); the name is part of the key,
and cannot change afterwards.`,
	flags: flagged(func(fs *flag.FlagSet, f *witnessServeFlags) {
		fs.StringVar(&f.listen, "listen", "127.0.0.1:7380", "the `HOST:PORT` to listen on")
		fs.StringVar(&f.name, "name", "", "the `NAME` of a new witness (its cosignatures' note name)")
	}, runWitnessServe),
}

func runWitnessServe(ctx context.Context, c *cli, fs *flag.FlagSet, f *witnessServeFlags, args []string) error {
	if err := noArgs(fs, args); err != nil {
		return err
	}
	st, w, err := c.openWitness(ctx, f.name)
	if err != nil {
		return err
	}
	defer st.Close()
	log, closeLog := c.logger(st.LogPath(), "witness")
	defer closeLog()
	ln, err := net.Listen("tcp", f.listen)
	if err != nil {
		return fmt.Errorf("witness serve: %w", err)
	}
	srv := &http.Server{Handler: w.Handler(), ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)}
	fmt.Fprintf(c.stderr, "gatehouse witness: serving http://%s/add-checkpoint\n", ln.Addr())
	fmt.Fprintf(c.stderr, "gatehouse witness: key %s\n", w.Key())
	logs, err := w.Logs(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(c.stderr, "gatehouse witness: cosigning for %d %s\n", len(logs), plural(len(logs), "log", "logs"))
	if len(logs) == 0 {
		fmt.Fprintf(c.stderr, "hint: tell it which logs to cosign for: gatehouse witness add-log ORIGIN VKEY (the log's owner reads both from gatehouse witnesses list)\n")
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("witness serve: %w", err)
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	}
}

// openWitness opens the home's witness, with its key from the keychain.
func (c *cli) openWitness(ctx context.Context, name string) (*store.Store, *witness.Witness, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	key, err := vaultFor(st).WitnessKey()
	if err != nil {
		st.Close()
		if errors.Is(err, vault.ErrUnavailable) {
			return nil, nil, withHint(err, "the witness's key lives in the OS keychain; make it reachable and retry")
		}
		return nil, nil, err
	}
	w, err := witness.Open(ctx, st, key, name, nil)
	if errors.Is(err, witness.ErrName) {
		st.Close()
		return nil, nil, withHint(err, "a witness's name is part of its key, which log owners and auditors hold; leave out --name")
	}
	if errors.Is(err, witness.ErrUnnamed) {
		// A new witness: named after the machine.
		host, herr := os.Hostname()
		if herr != nil || host == "" {
			host = "localhost"
		}
		w, err = witness.Open(ctx, st, key, host+"/gatehouse-witness", nil)
	}
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, w, nil
}

var witnessAddLogCmd = &command{
	name:    "witness add-log",
	usage:   "ORIGIN VKEY",
	summary: "let the witness cosign for a log",
	help: witnessHelp + `

ORIGIN is the first line of the log's checkpoints (gatehouse/log/ and the
log's id), VKEY the verifier key of the key that signs them: the log's
owner reads both from 'gatehouse witnesses list'. After the log's key is
rotated, add the new key the same way; the old one stays accepted.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 2 {
			return usagef("witness add-log: want ORIGIN and VKEY")
		}
		st, w, err := c.openWitness(ctx, "")
		if err != nil {
			return err
		}
		defer st.Close()
		if err := w.AddLog(ctx, pos[0], pos[1]); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse witness: cosigns for %s, signed by %s\n", pos[0], strings.SplitN(pos[1], "+", 2)[0])
		return nil
	},
}

var witnessLogsCmd = &command{
	name:    "witness logs",
	summary: "list the logs the witness cosigns for, and the latest checkpoint of each",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, w, err := c.openWitness(ctx, "")
		if err != nil {
			return err
		}
		defer st.Close()
		logs, err := w.Logs(ctx)
		if err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "witness: %s\n\n", w.Key())
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "ORIGIN\tCOSIGNED\tAT\tREFUSED FORKS\tKEYS")
		for _, l := range logs {
			at := "-"
			if !l.At.IsZero() {
				at = l.At.Format(time.RFC3339)
			}
			n, err := w.Refusals(ctx, l.Origin)
			if err != nil {
				return err
			}
			fmt.Fprintf(tw, "%s\t%d entries\t%s\t%d\t%s\n", l.Origin, l.Size, at, n, strings.Join(l.Keys, " "))
		}
		return tw.Flush()
	},
}

var witnessesAddCmd = &command{
	name:    "witnesses add",
	usage:   "NAME URL VKEY",
	summary: "submit this log's checkpoints to a witness",
	help: witnessHelp + `

NAME is yours to choose; URL is the witness's submission prefix (its
add-checkpoint is below it); VKEY its verifier key, as 'gatehouse witness
serve' prints it. Proxies that start from now on submit the log's latest
checkpoint to it in the background, at most every 10 seconds, and never
make a call wait for it; exports ask it to cosign their checkpoint. The
witness's operator must first accept this log: give them the origin and
key that 'gatehouse witnesses list' prints.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 3 {
			return usagef("witnesses add: want NAME, URL and VKEY")
		}
		if _, err := entry.ParseWitnessKey(pos[2]); err != nil {
			return withHint(err, "give the key 'gatehouse witness serve' printed: name+hash+key")
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.AddWitness(ctx, store.Witness{Name: pos[0], URL: pos[1], Key: pos[2]}); err != nil {
			if errors.Is(err, store.ErrExists) {
				return withHint(err, "remove it first: gatehouse witnesses remove %s", pos[0])
			}
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse witnesses: added %s (%s)\n", pos[0], pos[1])
		fmt.Fprintf(c.stderr, "hint: its operator accepts this log with the command 'gatehouse witnesses list' prints\n")
		return nil
	},
}

var witnessesListCmd = &command{
	name:    "witnesses list",
	aliases: []string{"ls"},
	summary: "list the witnesses this log submits to, and how each last answered",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if err := noArgs(fs, args); err != nil {
			return err
		}
		st, r, err := c.openReader(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		ws, err := st.Witnesses(ctx)
		if err != nil {
			return err
		}
		if r.ID() != "" {
			keys, err := r.Keys(ctx)
			if err != nil {
				return err
			}
			if len(keys) > 0 {
				vkey, err := entry.LogVerifierKey(keys[len(keys)-1].Public)
				if err != nil {
					return err
				}
				fmt.Fprintf(c.stdout, "this log: %s\nits key:  %s\n", entry.Origin(r.ID()), vkey)
				fmt.Fprintf(c.stdout, "a witness accepts it with: gatehouse witness add-log %s %s\n\n", entry.Origin(r.ID()), vkey)
			}
		}
		if len(ws) == 0 {
			fmt.Fprintln(c.stderr, "gatehouse witnesses: none; add one with: gatehouse witnesses add NAME URL VKEY")
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tURL\tCOSIGNED\tLAST SUCCESS\tLAST FAILURE")
		for _, w := range ws {
			s, err := r.WitnessStatus(ctx, w.Key)
			if err != nil {
				return err
			}
			ok, failed := "never", "-"
			if !s.OK.IsZero() {
				ok = s.OK.Format(time.RFC3339)
			}
			if !s.Failed.IsZero() && s.Failed.After(s.OK) {
				failed = s.Failed.Format(time.RFC3339) + ": " + s.Failure
			}
			fmt.Fprintf(tw, "%s\t%s\t%d entries\t%s\t%s\n", w.Name, w.URL, s.Size, ok, failed)
		}
		return tw.Flush()
	},
}

var witnessesRemoveCmd = &command{
	name:    "witnesses remove",
	aliases: []string{"rm"},
	usage:   "NAME",
	summary: "stop submitting to a witness",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("witnesses remove: want a NAME")
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if err := st.RemoveWitness(ctx, pos[0]); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse witnesses: removed %s; the cosignatures it gave stay in the log\n", pos[0])
		return nil
	},
}

// witnessClients returns a client for each witness configured in st; one
// whose key cannot be read is logged and left out.
func witnessClients(ctx context.Context, st *store.Store, log *slog.Logger) []*witness.Client {
	ws, err := st.Witnesses(ctx)
	if err != nil {
		log.Warn("witnesses", slog.Any("err", err))
		return nil
	}
	var out []*witness.Client
	for _, w := range ws {
		k, err := entry.ParseWitnessKey(w.Key)
		if err != nil {
			log.Warn("witness left out", slog.String("witness", w.Name), slog.Any("err", err))
			continue
		}
		out = append(out, &witness.Client{URL: w.URL, Key: k})
	}
	return out
}

// startWitnessing submits l's checkpoints to the home's witnesses in the
// background until ctx ends, after each commit of an append: never on a
// call's path. No witness configured, nothing started.
func startWitnessing(ctx context.Context, st *store.Store, l *receipts.Log, log *slog.Logger) {
	clients := witnessClients(ctx, st, log)
	if len(clients) == 0 {
		return
	}
	s := witness.NewSubmitter(l, clients, &witness.SubmitterOptions{
		Interval: envDuration("GATEHOUSE_WITNESS_INTERVAL", witness.DefaultInterval),
		Logger:   log.WithGroup("witness"),
	})
	l.OnAppend(s.Notify)
	go s.Run(ctx)
}
