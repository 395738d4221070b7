package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/vault"
)

var proxyCmd = &command{
	name:    "proxy",
	usage:   "NAME",
	summary: "run server NAME behind the gate, speaking MCP on stdin and stdout",
	help: `
This is what MCP clients launch in place of the server itself: a client
config entry {"command": "/path/to/gatehouse", "args": ["proxy", "NAME"]}
reaches server NAME through Gatehouse. Stdout carries MCP messages only;
the proxy's log goes to stderr and to logs/gatehouse.log in the home folder.

MCP clients pass their servers only a few environment variables (HOME, PATH,
USER, ...): to use a home folder other than the default, put --home DIR in
the entry's args.`,
	flags: func(fs *flag.FlagSet) {
		fs.Int("max-message-bytes", gateway.DefaultMaxMessageBytes, "refuse JSON-RPC messages larger than `n` bytes")
	},
	run: runProxy,
}

func runProxy(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("proxy: want exactly one server NAME")
	}
	name := pos[0]

	// From here on, stdout carries protocol only. Anything else that writes
	// to the process's stdout (a stray print, a library) lands on stderr.
	out, err := c.protocolOut()
	if err != nil {
		return err
	}

	st, err := c.openStore(ctx)
	if err != nil {
		fmt.Fprintf(c.stderr, "gatehouse proxy: %v\n", err)
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf("cannot open the home folder: %w", err))
		return &exitError{1}
	}
	log, closeLog := c.logger(st.LogPath(), "proxy")
	defer closeLog()
	srv, err := lookupServer(ctx, st, name)
	st.Close()
	if err != nil {
		log.Error("unknown server", slog.String("server", name), slog.Any("err", err))
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf(
			"no server named %q; register it with: gatehouse server add %s -- COMMAND [ARGS...]", name, name))
		return &exitError{1}
	}
	// Secrets in the server's environment come from the keychain now, when
	// the server starts, and nowhere else.
	cmd := gatewayCommand(srv)
	env, secrets, err := vaultFor(st).ResolveEnv(cmd.Env)
	if err != nil {
		err = fmt.Errorf("cannot start server %q: %w", name, err)
		log.Error("server not started", slog.Any("err", err))
		hint := "store it with: gatehouse secret set ID"
		if errors.Is(err, vault.ErrUnavailable) {
			hint = "the server's credentials live in the OS keychain, which this proxy cannot reach"
		}
		gateway.Refuse(ctx, c.stdin, out, fmt.Errorf("%w (%s)", err, hint))
		return &exitError{1}
	}
	cmd.Env = env
	max, _ := fs.Lookup("max-message-bytes").Value.(flag.Getter).Get().(int)
	p := gateway.New(name, cmd, &gateway.Options{
		Logger:          log,
		Stderr:          c.stderr,
		MaxMessageBytes: max,
		Secrets:         secrets,
	})
	if err := p.Serve(ctx, c.stdin, out); err != nil {
		if !errors.Is(err, gateway.ErrServerExited) {
			fmt.Fprintf(c.stderr, "gatehouse proxy: %v\n", err)
		}
		return &exitError{1}
	}
	return nil
}

// protocolOut returns the writer for protocol messages. When stdout is the
// process's real stdout, the file descriptor is moved aside and fd 1 is
// pointed at stderr, so that nothing but protocol can ever reach the client.
func (c *cli) protocolOut() (io.Writer, error) {
	if c.stdout != os.Stdout {
		return c.stdout, nil
	}
	f, err := isolateStdout()
	if err != nil {
		return nil, fmt.Errorf("isolate stdout: %w", err)
	}
	c.stdout = f
	return f, nil
}
