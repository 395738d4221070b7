package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway"
	"github.com/gatehouse-dev/gatehouse/gateway/confine"
	"github.com/gatehouse-dev/gatehouse/gateway/downstream"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/shellwords"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// envFlag collects repeated --env KEY=VALUE flags.
type envFlag map[string]string

func (e envFlag) String() string { return "" }

func (e envFlag) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	e[k] = val
	return nil
}

// serverAddFlags are the flags of gatehouse server add.
type serverAddFlags struct {
	env          envFlag
	url          string
	header       envFlag
	secretHeader listFlag
	secretEnv    listFlag
	cwd          string
	confinement  confinementFlags
	oauth        bool
	sse          bool
	clientID     string
	scopes       listFlag
}

// confinementFlags are the flags that say how a stdio server is confined,
// on server add and server set.
type confinementFlags struct {
	confine, unconfinedOK     bool
	read, write, net          listFlag
	quarantine                bool
	noQuarantine              bool // server add only
	noConfine, noUnconfinedOK bool // server set only
	clear                     bool // server set only
}

func declareConfinementFlags(fs *flag.FlagSet, f *confinementFlags) {
	fs.BoolVar(&f.confine, "confine", false, "start the server confined to what it needs (Linux: Landlock); implied by --allow-read, --allow-write and --allow-net")
	fs.Var(&f.read, "allow-read", "let the confined server read `PATH` (a folder or file; repeatable)")
	fs.Var(&f.write, "allow-write", "let the confined server read and write `PATH` (a folder or file; repeatable)")
	fs.Var(&f.net, "allow-net", "let the confined server connect to TCP `PORT`, or * for any (repeatable)")
	fs.BoolVar(&f.unconfinedOK, "unconfined-ok", false, "start the server unconfined, saying so, where confinement is not available (no Landlock)")
	fs.BoolVar(&f.quarantine, "quarantine", false, "hold every call to the server for a person's approval until it is reviewed (gatehouse server review NAME)")
}

// apply sets srv's confinement as the flags say; absolute paths are kept,
// relative ones made absolute.
func (f *confinementFlags) apply(srv *store.Server) error {
	if f.clear {
		srv.AllowRead, srv.AllowWrite, srv.AllowNet = nil, nil, nil
	}
	for _, l := range []struct {
		dst *[]string
		v   []string
	}{{&srv.AllowRead, f.read}, {&srv.AllowWrite, f.write}} {
		for _, p := range l.v {
			abs, err := filepath.Abs(p)
			if err != nil {
				return err
			}
			if !slices.Contains(*l.dst, abs) {
				*l.dst = append(*l.dst, abs)
			}
		}
	}
	for _, n := range f.net {
		if _, _, err := confine.ParsePort(n); err != nil {
			return usagef("--allow-net: %v", err)
		}
		if !slices.Contains(srv.AllowNet, n) {
			srv.AllowNet = append(srv.AllowNet, n)
		}
	}
	if f.confine || len(f.read) > 0 || len(f.write) > 0 || len(f.net) > 0 {
		srv.Confine = true
	}
	if f.noConfine {
		srv.Confine = false
	}
	if f.unconfinedOK {
		srv.UnconfinedOK = true
	}
	if f.noUnconfinedOK {
		srv.UnconfinedOK = false
	}
	if f.quarantine {
		srv.Quarantined = true
	}
	return nil
}

var serverAddCmd = &command{
	name:    "server add",
	usage:   "NAME [--env KEY=VALUE]... [--secret-env KEY]... [--cwd DIR] [--] COMMAND [ARGS...]\n       gatehouse server add NAME --url URL [--header NAME=VALUE]... [--secret-header NAME]...",
	summary: "register an MCP server (a command on stdio, or a URL)",
	help: `
NAME is how the server is known to Gatehouse and in capability names
(mcp.NAME.TOOL): letters, digits, '-' and '_'. Everything after the command
is passed to it unchanged, flags included; put -- before the command when
it starts with a dash.

--secret-env KEY asks for the value of KEY (a prompt that does not echo, or
one line per key from stdin) and keeps it in the OS keychain as the secret
NAME.KEY; the server's entry holds only vault://secret/NAME.KEY, resolved
when the proxy starts the server.

With --url, the server is remote, reached over MCP's streamable HTTP
transport; clients still launch 'gatehouse proxy NAME' on stdio.
--secret-header asks for a header's value (such as Authorization: "Bearer
..."), keeps it in the keychain as NAME.HEADER, and sends it with every
request; the proxy keeps it, and the token in it, out of what the server
sends back.

Examples:
  gatehouse server add files -- npx -y @modelcontextprotocol/server-filesystem ~/projects
  gatehouse server add github --secret-env GITHUB_PERSONAL_ACCESS_TOKEN -- npx -y @modelcontextprotocol/server-github
  gatehouse server add linear --url https://mcp.linear.app/mcp --secret-header Authorization
  gatehouse server add legacy --url https://mcp.example.com/sse --sse --oauth`,
	flags: flagged(func(fs *flag.FlagSet, f *serverAddFlags) {
		f.env = envFlag{}
		fs.Var(f.env, "env", "set `KEY=VALUE` in the server's environment (repeatable)")
		fs.StringVar(&f.url, "url", "", "the remote server's MCP `URL` (streamable HTTP)")
		fs.BoolVar(&f.sse, "sse", false, "the --url is an event stream of the older HTTP+SSE transport (protocol 2024-11-05)")
		f.header = envFlag{}
		fs.Var(f.header, "header", "send header `NAME=VALUE` with every request to a remote server (repeatable)")
		fs.Var(&f.secretHeader, "secret-header", "ask for the value of header `NAME` and keep it in the keychain (repeatable)")
		fs.Var(&f.secretEnv, "secret-env", "ask for the value of environment variable `KEY` and keep it in the keychain (repeatable)")
		fs.StringVar(&f.cwd, "cwd", "", "working `folder` of the server")
		fs.BoolVar(&f.oauth, "oauth", false, "sign in to the remote server with OAuth (then: gatehouse server login NAME)")
		fs.StringVar(&f.clientID, "oauth-client-id", "", "the OAuth client `id` registered for Gatehouse, where the authorization server offers no dynamic registration")
		fs.Var(&f.scopes, "oauth-scope", "ask for OAuth `scope` (repeatable; default: those the server names)")
		declareConfinementFlags(fs, &f.confinement)
		fs.BoolVar(&f.confinement.noQuarantine, "no-quarantine", false, "do not quarantine the server, whatever the home's setting (quarantine.new_servers)")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *serverAddFlags, args []string) error {
		pos, err := parse(fs, args, 2)
		if err != nil {
			return err
		}
		if f.confinement.quarantine && f.confinement.noQuarantine {
			return usagef("server add: --quarantine and --no-quarantine together")
		}
		remote := f.url
		if remote != "" {
			return c.addRemoteServer(ctx, f, pos)
		}
		if len(pos) < 2 {
			return usagef("server add: want NAME and a COMMAND, as in: gatehouse server add NAME -- COMMAND [ARGS...]")
		}
		if len(f.header) > 0 || len(f.secretHeader) > 0 {
			return usagef("server add: --header and --secret-header are for a remote server (--url)")
		}
		cwd := f.cwd
		if cwd != "" {
			if cwd, err = filepath.Abs(cwd); err != nil {
				return err
			}
		}
		srv := store.Server{
			Name:      pos[0],
			Transport: store.TransportStdio,
			Command:   pos[1],
			Args:      pos[2:],
			Env:       f.env,
			Cwd:       cwd,
		}
		if err := f.confinement.apply(&srv); err != nil {
			return err
		}
		secretEnv := f.secretEnv
		for _, k := range secretEnv {
			if _, dup := srv.Env[k]; dup {
				return usagef("server add: %s is given both with --env and --secret-env", k)
			}
			if err := vault.ValidateSecretID(srv.Name + "." + k); err != nil {
				return usagef("server add: --secret-env %q: not a usable variable name", k)
			}
			srv.Env[k] = vault.Ref(srv.Name + "." + k)
		}
		return c.addServer(ctx, srv, secretEnv, f.confinement.noQuarantine)
	}),
}

// addRemoteServer registers a server reached at --url.
func (c *cli) addRemoteServer(ctx context.Context, f *serverAddFlags, pos []string) error {
	if len(pos) != 1 {
		return usagef("server add: a remote server (--url) takes NAME and no COMMAND")
	}
	if len(f.env) > 0 || len(f.secretEnv) > 0 || f.cwd != "" {
		return usagef("server add: --env, --secret-env and --cwd are for a server Gatehouse starts, not one at a URL")
	}
	if cf := f.confinement; cf.confine || cf.unconfinedOK || len(cf.read)+len(cf.write)+len(cf.net) > 0 {
		return usagef("server add: a remote server (--url) is not started by Gatehouse, so it cannot be confined")
	}
	srv := store.Server{Name: pos[0], Transport: store.TransportHTTP, URL: f.url,
		Headers: map[string]string(f.header)}
	if f.sse {
		srv.Transport = store.TransportSSE
	}
	if f.oauth || f.clientID != "" || len(f.scopes) > 0 {
		srv.Auth, srv.OAuthClientID, srv.OAuthScopes = store.AuthOAuth, f.clientID, f.scopes
	}
	secretHeaders := f.secretHeader
	for _, k := range secretHeaders {
		if _, dup := srv.Headers[k]; dup {
			return usagef("server add: header %s is given both with --header and --secret-header", k)
		}
		if err := vault.ValidateSecretID(srv.Name + "." + k); err != nil {
			return usagef("server add: --secret-header %q: not a usable header name", k)
		}
		srv.Headers[k] = vault.Ref(srv.Name + "." + k)
	}
	if f.confinement.quarantine {
		srv.Quarantined = true
	}
	return c.addServer(ctx, srv, secretHeaders, f.confinement.noQuarantine)
}

// addServer registers srv, first asking for the values of its secrets
// (named by the variables or headers that refer to them) and putting them
// in the keychain. Unless noQuarantine, a server no capability pack knows
// is quarantined when the home's setting says so (it does by default).
func (c *cli) addServer(ctx context.Context, srv store.Server, secretKeys []string, noQuarantine bool) error {
	if err := srv.Validate(); err != nil {
		return usagef("server add: %v", err)
	}
	pack := matchPack(&srv)
	applyPackConfinement(&srv)
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.Server(ctx, srv.Name); err == nil {
		return withHint(fmt.Errorf("add server %s: %w", srv.Name, store.ErrExists),
			"choose another name, or remove the old one first: gatehouse server remove %s", srv.Name)
	}
	settings, err := st.Settings(ctx)
	if err != nil {
		return err
	}
	if !noQuarantine && settings.QuarantineNewServers && pack == nil {
		srv.Quarantined = true
	}
	if len(secretKeys) > 0 {
		prompts := make([]string, len(secretKeys))
		for i, k := range secretKeys {
			prompts[i] = fmt.Sprintf("%s for %s", k, srv.Name)
		}
		values, err := c.readSecrets(prompts)
		if err != nil {
			return err
		}
		for i, k := range secretKeys {
			if err := storeSecret(ctx, st, srv.Name+"."+k, values[i]); err != nil {
				return err
			}
		}
	}
	if err := st.AddServer(ctx, srv); err != nil {
		if errors.Is(err, store.ErrExists) {
			return withHint(err, "choose another name, or remove the old one first: gatehouse server remove %s", srv.Name)
		}
		return err
	}
	fmt.Fprintf(c.stderr, "gatehouse: added server %s%s\n", srv.Name, confinedNote(srv))
	if srv.Quarantined {
		fmt.Fprintf(c.stderr, "gatehouse: %s is in quarantine: each of its calls asks a person until you review it\nhint: look at its tools (gatehouse tools %s), set your rules, then: gatehouse server review %s\n", srv.Name, srv.Name, srv.Name)
	}
	if pack != nil {
		fmt.Fprintf(c.stderr, "gatehouse: %s matches capability pack %s (%s): its tools are classified by the pack\n", srv.Name, pack.Ref(), pack.Name)
		if len(pack.Rules) > 0 {
			fmt.Fprintf(c.stderr, "hint: see the rules it suggests with: gatehouse policy suggest %s\n", srv.Name)
		}
		if !srv.Confine && srv.Transport == store.TransportStdio {
			fmt.Fprintf(c.stderr, "hint: confine it as the pack suggests (%s) with: gatehouse server set %s --confine\n", pack.Confine.Note, srv.Name)
		}
	}
	if srv.Auth == store.AuthOAuth {
		fmt.Fprintf(c.stderr, "hint: sign in to it with: gatehouse server login %s\n", srv.Name)
		return nil
	}
	fmt.Fprintf(c.stderr, "hint: check it with: gatehouse server test %s\n", srv.Name)
	return nil
}

// matchPack records in srv the capability pack its command or URL runs, if
// any, and returns it.
func matchPack(srv *store.Server) *policy.Pack {
	p := policy.MatchPack(srv.Command, srv.Args, srv.URL)
	srv.Pack = ""
	if p != nil {
		srv.Pack = p.Ref()
	}
	return p
}

// applyPackConfinement adds to a confined srv what its pack says it needs:
// the TCP ports it connects to, and the files named by the environment
// variables it writes.
func applyPackConfinement(srv *store.Server) {
	p := policy.PackByRef(srv.Pack)
	if p == nil || !srv.Confine || srv.Transport != store.TransportStdio {
		return
	}
	for _, n := range p.Confine.Net {
		if !slices.Contains(srv.AllowNet, n) {
			srv.AllowNet = append(srv.AllowNet, n)
		}
	}
	for _, k := range p.Confine.WriteEnv {
		v := srv.Env[k]
		if !filepath.IsAbs(v) {
			continue
		}
		// A file the server has yet to make (a memory server's first
		// run) is made in its folder: Landlock grants making a file on
		// the folder, and a declared path must exist.
		if _, err := os.Stat(v); errors.Is(err, fs.ErrNotExist) {
			v = filepath.Dir(v)
		}
		if !slices.Contains(srv.AllowWrite, v) {
			srv.AllowWrite = append(srv.AllowWrite, v)
		}
	}
}

// secretRefs returns the references to secrets in srv's environment and
// headers, by the variable or header that holds each.
func secretRefs(srv store.Server) map[string]string {
	refs := map[string]string{}
	for _, m := range []map[string]string{srv.Env, srv.Headers} {
		for k, v := range m {
			if id, ok := vault.ParseRef(v); ok {
				refs[k] = id
			}
		}
	}
	return refs
}

// listFlag collects a repeated flag's values in order.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

// serverListFlags are the flags of gatehouse server list.
type serverListFlags struct {
	json bool
}

var serverListCmd = &command{
	name:    "server list",
	aliases: []string{"ls"},
	summary: "list registered servers",
	flags: flagged(func(fs *flag.FlagSet, f *serverListFlags) {
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *serverListFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) > 0 {
			return usagef("server list: unexpected argument %q", pos[0])
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		servers, err := st.Servers(ctx)
		if err != nil {
			return err
		}
		if f.json {
			return printServersJSON(c.stdout, servers)
		}
		if len(servers) == 0 {
			fmt.Fprintf(c.stderr, "gatehouse: no servers in %s\nhint: add one with: gatehouse server add NAME -- COMMAND [ARGS...]\n", st.Dir())
			return nil
		}
		tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
		abi, _ := confine.ABI()
		fmt.Fprintln(tw, "NAME\tTRANSPORT\tPACK\tCONFINED\tCOMMAND OR URL")
		for _, s := range servers {
			pack := s.Pack
			if pack == "" {
				pack = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", s.Name, s.Transport, pack, confinedColumn(s, abi), commandLine(s))
		}
		return tw.Flush()
	}),
}

// commandLine renders a server's command for people, quoting arguments that
// need it. Environment values are not shown: they may hold secrets.
func commandLine(s store.Server) string {
	if s.Remote() {
		return s.URL
	}
	parts := []string{shellwords.Quote(s.Command)}
	for _, a := range s.Args {
		parts = append(parts, shellwords.Quote(a))
	}
	return strings.Join(parts, " ")
}

func printServersJSON(w io.Writer, servers []store.Server) error {
	type entry struct {
		Name       string   `json:"name"`
		Transport  string   `json:"transport"`
		Command    string   `json:"command,omitempty"`
		Args       []string `json:"args,omitempty"`
		EnvKeys    []string `json:"envKeys,omitempty"`
		Cwd        string   `json:"cwd,omitempty"`
		URL        string   `json:"url,omitempty"`
		HeaderKeys []string `json:"headerKeys,omitempty"`
		Trusted    bool     `json:"trusted"`
		// Confined says whether the proxy starts it confined here: "yes",
		// "no", "unconfined" (to be confined, but this machine cannot, and
		// the registration accepts that) or "refused" (to be confined,
		// this machine cannot: it does not start).
		Confined     string    `json:"confined"`
		AllowRead    []string  `json:"allowRead,omitempty"`
		AllowWrite   []string  `json:"allowWrite,omitempty"`
		AllowNet     []string  `json:"allowNet,omitempty"`
		UnconfinedOK bool      `json:"unconfinedOK,omitempty"`
		Quarantined  bool      `json:"quarantined,omitempty"`
		Pack         string    `json:"pack,omitempty"` // the capability pack it matched: "filesystem@1"
		CreatedAt    time.Time `json:"createdAt"`
	}
	abi, _ := confine.ABI()
	out := make([]entry, 0, len(servers))
	for _, s := range servers {
		// Names of variables and headers only: values may be secrets.
		out = append(out, entry{Name: s.Name, Transport: s.Transport, Command: s.Command, Args: s.Args,
			EnvKeys: slices.Sorted(maps.Keys(s.Env)), Cwd: s.Cwd, URL: s.URL,
			HeaderKeys: slices.Sorted(maps.Keys(s.Headers)), Trusted: s.Trusted,
			Confined: confinedState(s, abi), AllowRead: s.AllowRead, AllowWrite: s.AllowWrite, AllowNet: s.AllowNet,
			UnconfinedOK: s.UnconfinedOK, Quarantined: s.Quarantined, Pack: s.Pack, CreatedAt: s.CreatedAt})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

var serverRemoveCmd = &command{
	name:    "server remove",
	aliases: []string{"rm"},
	usage:   "NAME",
	summary: "unregister a server",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) != 1 {
			return usagef("server remove: want exactly one NAME")
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		srv, err := st.Server(ctx, pos[0])
		if err == nil {
			err = st.RemoveServer(ctx, pos[0])
		}
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return withHint(err, "see the registered servers with: gatehouse server list")
			}
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: removed server %s\n", pos[0])
		if srv.Auth == store.AuthOAuth {
			c.signOut(ctx, st, srv)
		}
		// The secrets it was given with --secret-env go with it, unless
		// another server refers to them too.
		users, err := secretUsers(ctx, st)
		if err != nil {
			return err
		}
		for _, id := range secretRefs(srv) {
			if !strings.HasPrefix(id, srv.Name+".") || len(users[id]) > 0 {
				continue
			}
			if err := vaultFor(st).DeleteSecret(id); err != nil && !errors.Is(err, vault.ErrNotFound) {
				fmt.Fprintf(c.stderr, "gatehouse: secret %s stays in the keychain: %v\nhint: delete it later with: gatehouse secret remove %s\n", id, err, id)
				continue
			}
			st.ForgetSecret(ctx, id)
			fmt.Fprintf(c.stderr, "gatehouse: deleted its secret %s\n", id)
		}
		return nil
	},
}

// serverTestFlags are the flags of gatehouse server test.
type serverTestFlags struct {
	timeout time.Duration
	tools   bool
}

var serverTestCmd = &command{
	name:    "server test",
	usage:   "NAME",
	summary: "start a server, list its tools and print a health line",
	flags: flagged(func(fs *flag.FlagSet, f *serverTestFlags) {
		fs.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after `duration`")
		fs.BoolVar(&f.tools, "tools", false, "also list the tools")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *serverTestFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "server test", pos)
		if err != nil {
			return err
		}
		st.Close()
		timeout := f.timeout
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		var h *gateway.Health
		hint := "check the command: gatehouse server list; run it by hand to see what it prints"
		if srv.Remote() {
			remote, _, rerr := downstream.Remote(srv, vaultFor(st))
			if rerr != nil {
				return withHint(rerr, "store the secret with: gatehouse secret set ID")
			}
			hint = "check the URL and the credentials: gatehouse server list; gatehouse secret list"
			if srv.Auth == store.AuthOAuth {
				remote.Tokens = downstream.SignIn(srv, vaultFor(st), st.Dir(), nil)
				hint = "sign in again: gatehouse server login " + srv.Name
			}
			h, err = gateway.ProbeRemote(ctx, remote)
		} else {
			cmd, _, rerr := downstream.Command(srv, vaultFor(st))
			if rerr != nil {
				return withHint(rerr, "store the secret with: gatehouse secret set ID")
			}
			cmd, prep, _, cerr := confineServer(srv, cmd, st.Dir(), "gatehouse", c.stderr)
			if cerr != nil {
				return withHint(cerr, "%s", confineHint(srv.Name, cerr))
			}
			defer prep.Cleanup()
			h, err = gateway.Probe(ctx, cmd, c.stderr)
		}
		if err != nil {
			fmt.Fprintf(c.stdout, "✘ %s: %v\n", srv.Name, err)
			fmt.Fprintf(c.stderr, "hint: %s\n", hint)
			return &exitError{1}
		}
		tools := fmt.Sprintf("%d tools", len(h.Tools))
		if len(h.Tools) == 1 {
			tools = "1 tool"
		}
		fmt.Fprintf(c.stdout, "✔ %s: connected in %s, %s (%s %s, protocol %s)\n",
			srv.Name, h.ConnectTime.Round(time.Millisecond), tools, h.ServerName, h.ServerVersion, h.ProtocolVersion)
		if f.tools {
			for _, t := range h.Tools {
				fmt.Fprintf(c.stdout, "  %-28s %s\n", t.Name, summary(t.Description, 72))
			}
		}
		return nil
	}),
}

func lookupServer(ctx context.Context, st *store.Store, name string) (store.Server, error) {
	srv, err := st.Server(ctx, name)
	if errors.Is(err, store.ErrNotFound) {
		return srv, withHint(fmt.Errorf("no server named %q in %s", name, st.Dir()),
			"see the registered servers with: gatehouse server list")
	}
	return srv, err
}

// namedServer opens the home's store for a command (what) whose one
// argument, pos, names a registered server, and returns the store, which
// the caller closes, and the server.
func (c *cli) namedServer(ctx context.Context, what string, pos []string) (*store.Store, store.Server, error) {
	if len(pos) != 1 {
		return nil, store.Server{}, usagef("%s: want exactly one server NAME", what)
	}
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, store.Server{}, err
	}
	srv, err := lookupServer(ctx, st, pos[0])
	if err != nil {
		st.Close()
		return nil, store.Server{}, err
	}
	return st, srv, nil
}

// summary is the first line of s, cut to at most n runes.
func summary(s string, n int) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// confinedState says whether the proxy starts s confined on this machine,
// whose Landlock ABI is abi (0: none).
func confinedState(s store.Server, abi int) string {
	switch {
	case s.Remote():
		return "remote"
	case !s.Confine:
		return "no"
	case abi >= confine.NeedABI(s.AllowNet):
		return "yes"
	case s.UnconfinedOK:
		return "unconfined"
	}
	return "refused"
}

// confinedColumn is confinedState for people.
func confinedColumn(s store.Server, abi int) string {
	st := confinedState(s, abi)
	switch st {
	case "yes":
		st = fmt.Sprintf("yes (landlock %d)", abi)
	case "unconfined":
		st = "no: cannot here (unconfined-ok)"
	case "refused":
		st = "no: cannot here, will not start"
	}
	if s.Quarantined {
		st += ", quarantined"
	}
	return st
}

// confinedNote says how a newly registered server will start.
func confinedNote(s store.Server) string {
	if !s.Confine {
		return " (unconfined)"
	}
	abi, err := confine.ABI()
	switch st := confinedState(s, abi); st {
	case "yes":
		return fmt.Sprintf(" (confined: Landlock ABI %d)", abi)
	case "unconfined":
		return fmt.Sprintf(" (to be confined, but not on this machine: %v; it will start unconfined, as --unconfined-ok says)", err)
	default:
		return fmt.Sprintf(" (to be confined, but not on this machine: the proxy will refuse to start it; Landlock ABI %d)", abi)
	}
}

var serverSetCmd = &command{
	name:    "server set",
	usage:   "NAME [--confine | --no-confine] [--allow-read PATH]... [--allow-write PATH]... [--allow-net PORT]... [--clear-allow] [--unconfined-ok | --no-unconfined-ok]",
	summary: "change how a registered server is confined",
	help: `
A confined server (Linux, Landlock) may read and execute the system's
programs and libraries and its own install, write a private temporary
folder and the folders its command line names, and nothing else of the
file system unless given: --allow-read and --allow-write add folders or
files, --allow-net a TCP port it may connect to (or * for any). Lists grow;
--clear-allow empties them first.

A server to be confined does not start where confinement cannot be applied
(no Landlock, or one too old to restrict the network), unless
--unconfined-ok: then it starts unconfined, and says so.`,
	flags: flagged(func(fs *flag.FlagSet, f *confinementFlags) {
		declareConfinementFlags(fs, f)
		fs.BoolVar(&f.noConfine, "no-confine", false, "start the server unconfined")
		fs.BoolVar(&f.noUnconfinedOK, "no-unconfined-ok", false, "refuse to start the server where it cannot be confined")
		fs.BoolVar(&f.clear, "clear-allow", false, "empty the allowed paths and ports before adding the ones given")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *confinementFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if f.confine && f.noConfine || f.unconfinedOK && f.noUnconfinedOK {
			return usagef("server set: a flag and its --no- form together")
		}
		st, srv, err := c.namedServer(ctx, "server set", pos)
		if err != nil {
			return err
		}
		defer st.Close()
		if srv.Remote() {
			return usagef("server set: %s is a remote server: Gatehouse does not start it, so it cannot be confined", srv.Name)
		}
		if err := f.apply(&srv); err != nil {
			return err
		}
		applyPackConfinement(&srv)
		if err := st.UpdateServer(ctx, srv); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: server %s%s\n", srv.Name, confinedNote(srv))
		return nil
	}),
}

var serverReviewCmd = &command{
	name:    "server review",
	usage:   "NAME",
	summary: "end a server's quarantine: its calls are decided by the policy alone",
	help: `
A server registered with --quarantine (or put back with 'server set NAME
--quarantine') has each of its calls held for a person's approval, whatever
the policy allows, until you review it: look at its tools and their risk
(gatehouse tools NAME), set the rules you want, then run this.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "server review", pos)
		if err != nil {
			return err
		}
		defer st.Close()
		if !srv.Quarantined {
			fmt.Fprintf(c.stderr, "gatehouse: server %s is not in quarantine\n", srv.Name)
			return nil
		}
		srv.Quarantined = false
		if err := st.UpdateServer(ctx, srv); err != nil {
			return err
		}
		fmt.Fprintf(c.stderr, "gatehouse: server %s reviewed: its calls are decided by the policy alone\n", srv.Name)
		return nil
	},
}

var serverLoginCmd = &command{
	name:    "server login",
	usage:   "NAME",
	summary: "sign in to a remote server that uses OAuth",
	help: `
Finds the server's authorization server, registers Gatehouse with it where
it offers dynamic registration (else give --oauth-client-id to server add),
prints the address to open, opens it in your browser when it can, and waits
for the browser to come back to Gatehouse on 127.0.0.1. The tokens go to the
OS keychain, and the proxies renew them without asking. Proxies that start
while you sign in wait for it.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "server login", pos)
		if err != nil {
			return err
		}
		defer st.Close()
		if srv.Auth != store.AuthOAuth {
			return usagef("server login: %s does not sign in with OAuth (register it with --oauth)", srv.Name)
		}
		ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
		defer cancel()
		err = downstream.SignIn(srv, vaultFor(st), st.Dir(), nil).Login(ctx, func(authURL string) {
			fmt.Fprintf(c.stderr, "gatehouse: open this address to sign in to %s:\n\n  %s\n\ngatehouse: waiting for the browser...\n", srv.Name, authURL)
			if err := openBrowser(authURL); err != nil {
				fmt.Fprintf(c.stderr, "hint: no browser could be opened here (%v): open the address yourself\n", err)
			}
		})
		if err != nil {
			return fmt.Errorf("sign in to %s: %w", srv.Name, err)
		}
		fmt.Fprintf(c.stderr, "gatehouse: signed in to %s\n", srv.Name)
		return nil
	},
}

var serverLogoutCmd = &command{
	name:    "server logout",
	usage:   "NAME",
	summary: "revoke and forget the sign-in to a remote server",
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "server logout", pos)
		if err != nil {
			return err
		}
		defer st.Close()
		if srv.Auth != store.AuthOAuth {
			return usagef("server logout: %s does not sign in with OAuth", srv.Name)
		}
		c.signOut(ctx, st, srv)
		return nil
	},
}

// signOut revokes the sign-in to srv where its authorization server offers
// revocation, and removes it from the keychain, saying what happened.
func (c *cli) signOut(ctx context.Context, st *store.Store, srv store.Server) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := downstream.SignIn(srv, vaultFor(st), st.Dir(), nil).Logout(ctx); err != nil {
		fmt.Fprintf(c.stderr, "gatehouse: sign-in to %s: %v\n", srv.Name, err)
		return
	}
	fmt.Fprintf(c.stderr, "gatehouse: signed out of %s\n", srv.Name)
}

var serverQuarantineNewCmd = &command{
	name:    "server quarantine-new",
	usage:   "[on | off]",
	summary: "say whether newly registered servers are quarantined until reviewed",
	help: `
With the setting on (the default), a server registered from now on, by
'server add' or by governing a client's config, is in quarantine: each of
its calls asks a person until you review it ('gatehouse server review
NAME'). A server a capability pack knows (see 'gatehouse server list') is
not: its tools are curated. 'server add --quarantine' and '--no-quarantine'
decide for one server. Servers already registered keep their state.

Without an argument, prints the setting.`,
	run: func(ctx context.Context, c *cli, fs *flag.FlagSet, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		if len(pos) > 1 || len(pos) == 1 && pos[0] != "on" && pos[0] != "off" {
			return usagef("server quarantine-new: want on, off, or nothing")
		}
		st, err := c.openStore(ctx)
		if err != nil {
			return err
		}
		defer st.Close()
		if len(pos) == 1 {
			if err := st.SetQuarantineNewServers(ctx, pos[0] == "on"); err != nil {
				return err
			}
		}
		s, err := st.Settings(ctx)
		if err != nil {
			return err
		}
		state := "off"
		if s.QuarantineNewServers {
			state = "on"
		}
		fmt.Fprintf(c.stdout, "%s\n", state)
		return nil
	},
}
