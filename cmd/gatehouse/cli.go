package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// cli is one invocation: its streams and global settings.
type cli struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	home           string // --home, or "" for store.DefaultDir
	logLevel       slog.Level
	logLevelSet    bool // --log-level or GATEHOUSE_LOG_LEVEL was given
	// terminal marks a command whose stderr a person reads (gatehouse
	// programs run): its log lines below warnings go to the log file
	// only, unless a log level was asked for.
	terminal     bool
	approvalWait time.Duration // proxy --approval-wait
	client       string        // proxy --client
	// confinement is how the proxy started its server, as its receipts
	// record it; nil for a remote server.
	confinement *entry.Confinement
}

// A command is one subcommand of gatehouse.
type command struct {
	name    string   // "server list"
	aliases []string // other last words: "ls" for "server list"
	usage   string   // arguments, after the name
	summary string   // one line
	help    string   // paragraphs after the usage line
	// run runs a command with no flags of its own; flags declares a
	// command's flags and returns its run, which reads them through the
	// typed values it bound ([flagged]). A command has one or the other.
	run    runFunc
	flags  func(fs *flag.FlagSet) runFunc
	hidden bool // left out of the help: for Gatehouse's own use
}

// runFunc runs a command: fs is its parsed-on-demand flag set (see parse),
// args what follows the command's name.
type runFunc func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error

// flagged makes a command's flags from a struct of typed values: declare
// binds the fields of f to flags of fs, and run reads f once they are
// parsed.
func flagged[F any](declare func(fs *flag.FlagSet, f *F), run func(ctx context.Context, c *cli, fs *flag.FlagSet, f *F, args []string) error) func(*flag.FlagSet) runFunc {
	return func(fs *flag.FlagSet) runFunc {
		f := new(F)
		declare(fs, f)
		return func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
			return run(ctx, c, fs, f, args)
		}
	}
}

var commands []*command

func init() {
	commands = []*command{
		serverAddCmd, serverSetCmd, serverReviewCmd, serverQuarantineNewCmd, serverListCmd, serverRemoveCmd, serverLoginCmd, serverLogoutCmd, serverTestCmd, serverTrustCmd, toolsCmd,
		proxyCmd, confineCmd, serveTokenAddCmd, serveTokenListCmd, serveTokenRevokeCmd, serveCmd, exportStreamCmd,
		programsListCmd, programsShowCmd, programsRunCmd, programsResumeCmd, programsTraceCmd, programsReplayCmd, programsDeleteCmd, programsServeCmd,
		benchCmd, benchEchoServerCmd, adversaryServerCmd, evalCmd, demoCmd, versionCmd,
		keysListCmd, keysRotateCmd, keysAdoptCmd, keysExportCmd,
		secretSetCmd, secretRemoveCmd, secretListCmd,
		approvalsCmd, pauseCmd, resumeCmd,
		clientsGovernCmd, clientsUndoCmd, clientsCmd,
		exportCmd, verifyCmd,
		witnessServeCmd, witnessAddLogCmd, witnessLogsCmd, witnessesAddCmd, witnessesListCmd, witnessesRemoveCmd,
		// history show before history: lookup takes the first match.
		historyShowCmd, historyCmd, eraseCmd,
		policyShowCmd, policySetCmd, policyBudgetCmd, policyRemoveCmd, policyImportCmd, policyExportCmd, policyExplainCmd, policySuggestCmd,
	}
}

// usageError is a mistake in the command line: exit status 2, with the
// command's usage line.
type usageError struct {
	msg string
	cmd *command // the command whose line it is; nil before one is known
}

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// hintError is an error with a next step for the user.
type hintError struct {
	err  error
	hint string
}

func (e *hintError) Error() string { return e.err.Error() }
func (e *hintError) Unwrap() error { return e.err }

func withHint(err error, format string, args ...any) error {
	return &hintError{err: err, hint: fmt.Sprintf(format, args...)}
}

// exitError carries an exit status without a message of its own (the
// command already said what went wrong).
type exitError struct{ code int }

func (e *exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	c := &cli{stdin: stdin, stdout: stdout, stderr: stderr, logLevel: slog.LevelInfo}
	if v := os.Getenv("GATEHOUSE_LOG_LEVEL"); v != "" {
		if err := c.logLevel.UnmarshalText([]byte(v)); err != nil {
			fmt.Fprintf(stderr, "gatehouse: GATEHOUSE_LOG_LEVEL: %v\n", err)
			return 2
		}
		c.logLevelSet = true
	}
	err := c.dispatch(ctx, args)
	var (
		uerr *usageError
		herr *hintError
		xerr *exitError
	)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &xerr):
		return xerr.code
	case errors.As(err, &uerr):
		fmt.Fprintf(stderr, "gatehouse: %s\n", uerr.msg)
		if cmd := uerr.cmd; cmd != nil {
			fmt.Fprintf(stderr, "usage: %s\nhint: gatehouse %s --help says more\n", strings.TrimSpace("gatehouse "+cmd.name+" "+strings.Split(cmd.usage, "\n")[0]), cmd.name)
		} else {
			fmt.Fprintf(stderr, "usage: gatehouse [--home DIR] COMMAND [ARGUMENTS]\nhint: gatehouse help lists the commands\n")
		}
		return 2
	case errors.As(err, &herr):
		fmt.Fprintf(stderr, "gatehouse: %v\nhint: %s\n", err, herr.hint)
		return 1
	default:
		fmt.Fprintf(stderr, "gatehouse: %v\n", err)
		return 1
	}
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	// Global flags may come before the command.
	fs := c.flagSet("gatehouse")
	fs.Usage = func() { c.printHelp(c.stdout) }
	if err := fs.Parse(args); err != nil {
		return err
	}
	args = fs.Args()
	if len(args) == 0 {
		c.printHelp(c.stderr)
		return &exitError{2}
	}
	if args[0] == "help" {
		if len(args) > 1 {
			if cmd, _ := lookup(args[1:]); cmd != nil {
				fs, _ := c.commandFlags(cmd)
				c.printCommandHelp(c.stdout, cmd, fs)
				return nil
			}
		}
		c.printHelp(c.stdout)
		return nil
	}
	cmd, rest := lookup(args)
	if cmd == nil {
		if subs := subcommands(args[0]); len(subs) > 0 && len(args) > 1 && slices.Contains([]string{"-h", "-help", "--help"}, args[1]) {
			c.printGroupHelp(c.stdout, args[0])
			return nil
		}
		if subs := subcommands(args[0]); len(subs) > 0 {
			return usagef("%s: unknown or missing subcommand %q (%s)", args[0], strings.Join(args[1:], " "), strings.Join(subs, ", "))
		}
		return usagef("unknown command %q", args[0])
	}
	cfs, run := c.commandFlags(cmd)
	// The flag package calls Usage for -h and for a bad flag alike: the
	// help goes to stdout for the first only (below), a bad flag is a usage
	// error like any other.
	cfs.Usage = func() {}
	err := run(ctx, c, cfs, rest)
	if errors.Is(err, flag.ErrHelp) {
		c.printCommandHelp(c.stdout, cmd, cfs)
		return nil
	}
	if uerr := (*usageError)(nil); errors.As(err, &uerr) && uerr.cmd == nil {
		uerr.cmd = cmd
	}
	return err
}

// commandFlags returns cmd's flag set, the global flags and its own, and
// the function that runs it.
func (c *cli) commandFlags(cmd *command) (*flag.FlagSet, runFunc) {
	fs := c.flagSet(cmd.name)
	if cmd.flags != nil {
		return fs, cmd.flags(fs)
	}
	return fs, cmd.run
}

// lookup finds the command named by the first one or two words of args,
// the last of them its name's or one of its aliases.
func lookup(args []string) (*command, []string) {
	for _, cmd := range commands {
		words := strings.Fields(cmd.name)
		if len(args) < len(words) || !slices.Equal(args[:len(words)-1], words[:len(words)-1]) {
			continue
		}
		if last := args[len(words)-1]; last == words[len(words)-1] || slices.Contains(cmd.aliases, last) {
			return cmd, args[len(words):]
		}
	}
	return nil, nil
}

// subcommands lists the second words of the commands whose first word is group.
func subcommands(group string) []string {
	var subs []string
	for _, cmd := range commands {
		if first, second, ok := strings.Cut(cmd.name, " "); ok && first == group && !cmd.hidden {
			subs = append(subs, second)
		}
	}
	return subs
}

// flagSet returns a flag set with the global flags.
func (c *cli) flagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&c.home, "home", c.home, "Gatehouse home `folder` (default $GATEHOUSE_HOME, else the user config folder)")
	fs.Var(levelFlag{c}, "log-level", "log `level`: debug, info, warn or error")
	return fs
}

// levelFlag is --log-level, noting that it was given.
type levelFlag struct{ c *cli }

func (f levelFlag) String() string {
	if f.c == nil {
		return "" // the zero value, as the flag package makes to tell defaults
	}
	return f.c.logLevel.String()
}

func (f levelFlag) Set(s string) error {
	if err := f.c.logLevel.UnmarshalText([]byte(s)); err != nil {
		return err
	}
	f.c.logLevelSet = true
	return nil
}

// parse parses flags that may come before, between and after positional
// arguments, and returns the positional ones. After stopAfter positionals
// (when > 0), everything else is returned as it is: a server's command line
// keeps its own flags.
func parse(fs *flag.FlagSet, args []string, stopAfter int) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err // dispatch prints the command's help
			}
			return nil, usagef("%s: %v", fs.Name(), err)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return pos, nil
		}
		// A "--" ends the flags: flag.Parse consumed it, so rest is shorter
		// than what the parser was handed by one more than the flags it took.
		if dashdash(args, rest) {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		if stopAfter > 0 && len(pos) == stopAfter {
			return append(pos, rest[1:]...), nil
		}
		args = rest[1:]
	}
}

// dashdash reports whether flag parsing of args stopped at a "--".
func dashdash(args, rest []string) bool {
	i := len(args) - len(rest) - 1
	return i >= 0 && args[i] == "--"
}

func (c *cli) openStore(ctx context.Context) (*store.Store, error) {
	log := slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: c.logLevel}))
	st, err := store.Open(ctx, c.home, &store.Options{Logger: log})
	var merr *store.ModeError
	if errors.As(err, &merr) {
		return nil, err // it names the chmod that fixes it
	}
	if err != nil {
		return nil, withHint(err, "check that the home folder is writable, or choose another with --home or %s", store.EnvHome)
	}
	return st, nil
}

func (c *cli) printHelp(w io.Writer) {
	fmt.Fprint(w, `gatehouse: a governed gate in front of your AI agents' MCP servers.

Usage:
  gatehouse [--home DIR] COMMAND [ARGUMENTS]

Commands:
`)
	for _, cmd := range commands {
		if cmd.hidden {
			continue
		}
		summary := cmd.summary
		if len(cmd.aliases) > 0 {
			group, _, _ := strings.Cut(cmd.name, " ")
			summary += " (also: " + group + " " + strings.Join(cmd.aliases, ", ") + ")"
		}
		fmt.Fprintf(w, "  %-18s %s\n", cmd.name, summary)
	}
	fmt.Fprint(w, `
Global flags (before or after the command):
  --home DIR         Gatehouse home folder (default $GATEHOUSE_HOME, else the user config folder)
  --log-level LEVEL  debug, info, warn or error (default info; or $GATEHOUSE_LOG_LEVEL)

Run 'gatehouse COMMAND --help' for details of one command.
`)
}

// groupHelp is what a group of commands is about, for 'gatehouse GROUP
// --help'; a group without one lists its commands alone.
var groupHelp = map[string]string{
	"witness":   witnessHelp + "\n\nThese commands run a witness for other people's logs.",
	"witnesses": witnessHelp + "\n\nThese commands choose the witnesses of this home's log.",
}

// printGroupHelp prints the commands whose first word is group.
func (c *cli) printGroupHelp(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: gatehouse %s COMMAND [ARGUMENTS]\n", group)
	if h := groupHelp[group]; h != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(h))
	}
	fmt.Fprintln(w, "\nCommands:")
	for _, cmd := range commands {
		if first, _, _ := strings.Cut(cmd.name, " "); first == group && !cmd.hidden {
			fmt.Fprintf(w, "  %-18s %s\n", cmd.name, cmd.summary)
		}
	}
	fmt.Fprintf(w, "\nRun 'gatehouse %s COMMAND --help' for details of one command.\n", group)
}

func (c *cli) printCommandHelp(w io.Writer, cmd *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: gatehouse %s %s\n\n%s\n", cmd.name, cmd.usage, cmd.summary)
	if cmd.help != "" {
		fmt.Fprintf(w, "\n%s\n", strings.TrimSpace(cmd.help))
	}
	fmt.Fprintln(w, "\nFlags:")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}

var versionCmd = &command{
	name:    "version",
	summary: "print the version",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		if _, err := parse(fs, args, 0); err != nil {
			return err
		}
		fmt.Fprintf(c.stdout, "gatehouse %s\n", buildVersion())
		return nil
	},
}

// buildVersion is the version set at link time, else the module version or
// VCS revision recorded by the go command.
func buildVersion() string {
	if version != "dev" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version
	}
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			return "dev-" + s.Value[:12]
		}
	}
	return version
}
