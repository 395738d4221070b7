package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// clientsFlags are the flags of gatehouse clients.
type clientsFlags struct {
	json bool
}

var clientsCmd = &command{
	name:    "clients",
	summary: "list the MCP clients on this machine, their servers, and which are governed",
	help: `
Looks for Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Gemini CLI,
Codex CLI, Zed, Cline, Roo Code, Kilo Code, LM Studio, Kiro, Amazon Q
Developer, Junie, OpenCode, GitHub Copilot CLI, Warp, Augment's Auggie CLI,
Qwen Code, Continue and Goose, reads every config file each one reads (user files, Claude
Code's local scopes, project files from here up), and shows each server
entry's state:

  governed                 it runs gatehouse proxy
  not governed             it starts its server directly
  added since governing    drift: a server added after the file was governed
  changed since governing  drift: a governed entry changed (by the client or by hand)
  extension                managed by an extension or plugin of the client; left alone
  unsupported              Gatehouse cannot govern it (the detail says why)
  shadowed                 a project server Claude Code does not run (a local one has its name)
  overridden by managed settings
                           managed configuration makes the client ignore it: not protected
  forbidden by managed settings
                           managed configuration refuses it, as it is or once governed; left alone

Nothing secret is shown: no environment values, no headers.`,
	flags: flagged(func(fs *flag.FlagSet, f *clientsFlags) {
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}, runClients),
}

// clientsChangeFlags are the flags of gatehouse clients govern and undo.
type clientsChangeFlags struct {
	server listFlag
	secret listFlag
	dryRun bool
	force  bool
}

var clientsGovernCmd = &command{
	name:    "clients govern",
	usage:   "[CLIENT] [--server NAME]... [--secret VAR]... [--dry-run] [--force]",
	summary: "rewrite MCP clients' configs so each server runs through gatehouse proxy",
	help: `
Each selected entry's server is registered with Gatehouse (its command
resolved to an absolute path, so that apps started from the desktop find
it), the values of its secret-looking environment variables and headers,
and the arguments or URL that hold a credential (postgresql://app:pw@host/db,
--password X, --api-key=...), move to the OS keychain; the registration
refers to them, and the proxy puts them back only in the server's own
environment and command line when it starts it. The entry is replaced by one
that runs gatehouse proxy. The entry keeps its name; only its bytes change in the file,
every other key, comment and indentation stays. The file is backed up first
(secret values replaced by their keychain references) and replaced
atomically; a file that changes while Gatehouse writes it is left alone.

CLIENT is one of claude-desktop, claude-code, cursor, vscode, windsurf,
gemini-cli, codex, zed; without it, every client. A project's .mcp.json is
not edited: Claude Code gets a same-name entry in the project's local scope
(~/.claude.json), which it uses instead.

--secret VAR keeps VAR's value in the keychain too, though its name does not
look secret (repeatable); --secret arg:N does so for the entry's Nth
argument, which governing names when it might be a secret but cannot tell,
and --secret url for a remote entry's URL. An entry whose file names a
keychain secret itself (vault://...) is not governed: only Gatehouse puts
references in a registration. --dry-run prints the exact diff of each file
(secret values masked) and writes nothing.

Claude Desktop rewrites its config while it runs: quit it first (--force
writes anyway), and start it again to load the change.

Examples:
  gatehouse clients govern --dry-run
  gatehouse clients govern claude-desktop
  gatehouse clients govern claude-code --server github --secret GITHUB_ORG`,
	flags: flagged(func(fs *flag.FlagSet, f *clientsChangeFlags) {
		fs.Var(&f.server, "server", "only the entry called `NAME` (repeatable)")
		fs.Var(&f.secret, "secret", "also keep environment variable or header `VAR` (arg:N: the Nth argument; url: the URL) in the keychain (repeatable)")
		fs.BoolVar(&f.dryRun, "dry-run", false, "print the diff of each file; write nothing")
		fs.BoolVar(&f.force, "force", false, "write Claude Desktop's file even while it runs")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *clientsChangeFlags, args []string) error {
		return runClientsChange(ctx, c, fs, f, args, false)
	}),
}

var clientsUndoCmd = &command{
	name:    "clients undo",
	usage:   "[CLIENT] [--server NAME]... [--dry-run] [--force]",
	summary: "put governed entries back exactly as they were",
	help: `
Each governed entry goes back as it was before governing, secret values read
back from the keychain; where nothing else in the file changed since, the
file is byte for byte what it was. The servers governing registered, and
their secrets, are removed once no governed entry runs through them.

An entry changed since it was governed is left alone: --force puts the
original back over the change (and writes Claude Desktop's file while it
runs).`,
	flags: flagged(func(fs *flag.FlagSet, f *clientsChangeFlags) {
		fs.Var(&f.server, "server", "only the entry called `NAME` (repeatable)")
		fs.BoolVar(&f.dryRun, "dry-run", false, "print the diff of each file; write nothing")
		fs.BoolVar(&f.force, "force", false, "undo entries changed since governing, and write while Claude Desktop runs")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *clientsChangeFlags, args []string) error {
		return runClientsChange(ctx, c, fs, f, args, true)
	}),
}

// openClients opens the store and a clients.Manager over it.
func (c *cli) openClients(ctx context.Context) (*store.Store, *clients.Manager, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	exe, err := gatehouseExecutable()
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	// Clients start the proxy with few environment variables: a home other
	// than the default goes in the entry's arguments.
	var home string
	if def, err := store.SystemDir(); err != nil || def != st.Dir() {
		home = st.Dir()
	}
	m, err := clients.New(ctx, st, &clients.Options{Keychain: vaultFor(st), Executable: exe, Home: home})
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, m, nil
}

// gatehouseExecutable is the path governed entries run: this program, by
// the name PATH finds it under when that is this program (a package
// manager's link stays valid across upgrades; the versioned folder it
// points into does not).
func gatehouseExecutable() (string, error) {
	exe, err := os.Executable()
	if err != nil {
		return "", fmt.Errorf("find the gatehouse program: %w", err)
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	if p, err := exec.LookPath("gatehouse"); err == nil {
		if abs, err := filepath.Abs(p); err == nil {
			a, errA := os.Stat(abs)
			b, errB := os.Stat(exe)
			if errA == nil && errB == nil && os.SameFile(a, b) {
				return abs, nil
			}
		}
	}
	return exe, nil
}

func runClients(ctx context.Context, c *cli, fs *flag.FlagSet, f *clientsFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("clients: unexpected argument %q (did you mean: gatehouse clients govern %s?)", pos[0], pos[0])
	}
	st, m, err := c.openClients(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	cs, err := m.Scan(ctx)
	if err != nil {
		return err
	}
	if f.json {
		return printClientsJSON(c.stdout, cs)
	}
	home, _ := os.UserHomeDir()
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLIENT\tFILE\tSERVER\tSTATE\tDETAIL")
	var missing []string
	var ungoverned, drift, broken, managed int
	var notes []string // managed configuration in force: it decides whether a client runs its entries at all
	for _, cl := range cs {
		if !cl.Installed {
			missing = append(missing, string(cl.ID))
			continue
		}
		for _, n := range cl.Managed {
			notes = append(notes, fmt.Sprintf("gatehouse: %s: managed configuration: %s", cl.ID, n))
		}
		shown := false
		for _, f := range cl.Files {
			file := shortPath(f.Path, home)
			switch f.Scope {
			case clients.ScopeLocal:
				file += " (local: " + shortPath(f.Project, home) + ")"
			case clients.ScopeProject:
				file += " (project)"
			}
			switch {
			case f.Err != nil:
				fmt.Fprintf(tw, "%s\t%s\t-\tunreadable\t%v\n", cl.ID, file, oneLine(f.Err.Error()))
				broken++
				shown = true
				continue
			case !f.Exists:
				continue
			}
			for _, e := range f.Entries {
				state := string(e.State)
				if e.State == clients.Governed && e.Server != "" {
					state += " (" + e.Server + ")"
				}
				detail := e.Detail
				if detail == "" && e.State != clients.Governed {
					detail = e.Target
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", cl.ID, file, e.Name, state, oneLine(detail))
				shown = true
				switch {
				case e.State == clients.NotGoverned:
					ungoverned++
				case e.Drift():
					drift++
				case e.State == clients.Overridden || e.State == clients.Forbidden:
					managed++
				}
			}
		}
		if !shown {
			fmt.Fprintf(tw, "%s\t%s\t-\tno servers\t\n", cl.ID, shortPath(cl.Files[0].Path, home))
		}
		if cl.Running && cl.ID == clients.ClaudeDesktop {
			defer fmt.Fprintf(c.stderr, "gatehouse: Claude Desktop is running: quit it before governing or undoing its file\n")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range notes {
		fmt.Fprintln(c.stderr, n)
	}
	if len(missing) > 0 {
		fmt.Fprintf(c.stderr, "gatehouse: not found on this machine: %s\n", strings.Join(missing, ", "))
	}
	switch {
	case broken > 0:
		fmt.Fprintf(c.stderr, "hint: fix the unreadable files (the line and column are given); Gatehouse does not touch them\n")
	case ungoverned > 0 || drift > 0:
		fmt.Fprintf(c.stderr, "hint: see what governing would change with: gatehouse clients govern --dry-run\n")
	case managed > 0:
		fmt.Fprintf(c.stderr, "hint: %d entries are overridden or forbidden by managed configuration: they are not protected; ask who manages this machine\n", managed)
	}
	return nil
}

func shortPath(p, home string) string {
	if home != "" && (p == home || strings.HasPrefix(p, home+string(filepath.Separator))) {
		return "~" + p[len(home):]
	}
	return p
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func printClientsJSON(w io.Writer, cs []clients.Client) error {
	type entry struct {
		Name      string `json:"name"`
		State     string `json:"state"`
		Drift     bool   `json:"drift,omitempty"`
		Detail    string `json:"detail,omitempty"`
		Server    string `json:"server,omitempty"`
		Transport string `json:"transport,omitempty"`
		Target    string `json:"target,omitempty"`
		Via       string `json:"via,omitempty"`
	}
	type file struct {
		Path    string  `json:"path"`
		Scope   string  `json:"scope"`
		Project string  `json:"project,omitempty"`
		Exists  bool    `json:"exists"`
		Error   string  `json:"error,omitempty"`
		Entries []entry `json:"entries"`
	}
	type client struct {
		ID        string   `json:"id"`
		Name      string   `json:"name"`
		Installed bool     `json:"installed"`
		Running   bool     `json:"running,omitempty"`
		Managed   []string `json:"managed,omitempty"` // managed configuration in force, or not readable here
		Files     []file   `json:"files"`
	}
	out := []client{}
	for _, c := range cs {
		cj := client{ID: string(c.ID), Name: c.Name, Installed: c.Installed, Running: c.Running, Managed: c.Managed, Files: []file{}}
		for _, f := range c.Files {
			fj := file{Path: f.Path, Scope: string(f.Scope), Project: f.Project, Exists: f.Exists, Entries: []entry{}}
			if f.Err != nil {
				fj.Error = f.Err.Error()
			}
			for _, e := range f.Entries {
				fj.Entries = append(fj.Entries, entry{e.Name, string(e.State), e.Drift(), e.Detail, e.Server, e.Transport, e.Target, e.Via})
			}
			cj.Files = append(cj.Files, fj)
		}
		out = append(out, cj)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

func runClientsChange(ctx context.Context, c *cli, fs *flag.FlagSet, f *clientsChangeFlags, args []string, undo bool) error {
	verb := "govern"
	if undo {
		verb = "undo"
	}
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return usagef("clients %s: want at most one CLIENT, got %s", verb, strings.Join(pos, " "))
	}
	sel := clients.Selection{
		Servers: f.server,
		Force:   f.force,
	}
	if !undo {
		sel.Secrets = f.secret
	}
	if len(pos) == 1 {
		id, err := clients.ParseID(pos[0])
		if err != nil {
			return usagef("clients %s: %v", verb, err)
		}
		sel.Clients = []clients.ID{id}
	}
	dry := f.dryRun
	st, m, err := c.openClients(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if exe, err := gatehouseExecutable(); err == nil && !undo && strings.HasPrefix(exe, filepath.Clean(os.TempDir())+string(filepath.Separator)) {
		fmt.Fprintf(c.stderr, "gatehouse: warning: governed entries will run %s, which is in a temporary folder (go run?); they stop working when it goes\n", exe)
	}
	plan := func() (*clients.Plan, error) {
		if undo {
			return m.PlanUndo(ctx, sel)
		}
		return m.PlanGovern(ctx, sel)
	}
	// A client may write its file between Gatehouse's reading and writing
	// it (Claude Code writes ~/.claude.json often): then nothing was
	// written to it, and planning again on what is there now is safe.
	var results []*clients.Result
	index := map[string]int{}
	var applyErr error
	for attempt := 1; ; attempt++ {
		pl, err := plan()
		if err != nil {
			return clientsError(err)
		}
		if dry {
			for _, f := range pl.Files {
				fmt.Fprint(c.stdout, f.Diff)
			}
			printResults(c, pl.Results, verb, true)
			if len(pl.Files) == 0 {
				fmt.Fprintf(c.stderr, "gatehouse: nothing to %s\n", verb)
			} else {
				files := "1 file would change"
				if len(pl.Files) > 1 {
					files = fmt.Sprintf("%d files would change", len(pl.Files))
				}
				fmt.Fprintf(c.stderr, "gatehouse: dry run: %s; nothing written\n", files)
			}
			return nil
		}
		applyErr = m.Apply(ctx, pl)
		for _, r := range pl.Results {
			key := fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%s", r.Client, r.File, r.Scope, r.Project, r.Name)
			if i, ok := index[key]; ok {
				if !results[i].Done {
					results[i] = r
				}
				continue
			}
			index[key] = len(results)
			results = append(results, r)
		}
		if applyErr == nil || !errors.Is(applyErr, clients.ErrChanged) || attempt == 3 {
			break
		}
	}
	failed := printResults(c, results, verb, false)
	if applyErr != nil || failed {
		if errors.Is(applyErr, clients.ErrRunning) {
			fmt.Fprintf(c.stderr, "hint: quit Claude Desktop (from its menu), then run: gatehouse clients %s claude-desktop\n", verb)
		}
		if errors.Is(applyErr, vault.ErrUnavailable) {
			fmt.Fprintf(c.stderr, "hint: the keychain is unreachable: unlock it and run this again; nothing was moved\n")
		}
		return &exitError{1}
	}
	return nil
}

// printResults says what became of each entry; it reports whether any
// failed.
func printResults(c *cli, results []*clients.Result, verb string, dry bool) bool {
	home, _ := os.UserHomeDir()
	failed, done, desktop := false, 0, false
	for _, r := range results {
		where := fmt.Sprintf("%s %s", r.Client, r.Name)
		if r.Name == "" {
			where = string(r.Client)
		}
		file := shortPath(r.File, home)
		switch {
		case r.Err != nil && r.Name == "":
			fmt.Fprintf(c.stderr, "gatehouse: %s: %v\n", where, r.Err)
			failed = true
		case r.Err != nil && r.Skipped == "":
			fmt.Fprintf(c.stderr, "gatehouse: %s (%s): not %s: %v\n", where, file, pastTense(verb), r.Err)
			failed = true
		case r.Skipped != "":
			if r.Skipped == "already governed" && verb == "govern" {
				continue
			}
			fmt.Fprintf(c.stderr, "gatehouse: %s (%s): left as it is: %s\n", where, file, r.Skipped)
			if r.Err != nil {
				failed = true
			}
		case dry:
			fmt.Fprintf(c.stderr, "gatehouse: %s (%s): would be %s", where, file, pastTense(verb))
			if verb == "govern" {
				fmt.Fprintf(c.stderr, " through server %s", r.Server)
			}
			fmt.Fprintln(c.stderr)
			for _, n := range r.Notes {
				fmt.Fprintf(c.stderr, "  %s\n", n)
			}
		case r.Done:
			done++
			if verb == "govern" {
				fmt.Fprintf(c.stderr, "gatehouse: %s (%s): governed through server %s\n", where, file, r.Server)
			} else {
				fmt.Fprintf(c.stderr, "gatehouse: %s (%s): put back\n", where, file)
			}
			for _, n := range r.Notes {
				fmt.Fprintf(c.stderr, "  %s\n", n)
			}
			if r.Client == clients.ClaudeDesktop {
				desktop = true
			}
		}
	}
	if dry {
		return failed
	}
	if done == 0 && !failed {
		fmt.Fprintf(c.stderr, "gatehouse: nothing to %s\n", verb)
	}
	switch {
	case desktop && verb == "govern":
		fmt.Fprintf(c.stderr, "hint: start Claude Desktop to load the change; 'gatehouse clients' then tells whether it kept it\n")
	case desktop:
		fmt.Fprintf(c.stderr, "hint: start Claude Desktop to load the change\n")
	}
	if done > 0 && verb == "govern" {
		fmt.Fprintf(c.stderr, "hint: restart the clients (or reload their MCP servers); undo with: gatehouse clients undo\n")
	}
	return failed
}

func pastTense(verb string) string {
	if verb == "undo" {
		return "put back"
	}
	return "governed"
}

// clientsError adds the next step to the errors a plan can end in.
func clientsError(err error) error {
	switch {
	case errors.Is(err, clients.ErrNotInstalled):
		return withHint(err, "see the clients found here with: gatehouse clients")
	case errors.Is(err, vault.ErrUnavailable):
		return withHint(err, "the keychain is unreachable: unlock it and run this again; nothing was written")
	case errors.Is(err, clients.ErrNoEntry):
		return withHint(err, "see the entries with: gatehouse clients")
	}
	return err
}
