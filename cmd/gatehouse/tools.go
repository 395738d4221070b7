package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/gateway/policy"
)

// toolsFlags are the flags of gatehouse tools.
type toolsFlags struct {
	json bool
}

var toolsCmd = &command{
	name:    "tools",
	usage:   "NAME [--json]",
	summary: "list server NAME's tools with their risk, deciding rule and pin state",
	help: `
Lists the tools server NAME has listed through a Gatehouse proxy. Each tool is
pinned when it is first listed; a tool whose definition changed since then is
shown as changed, with the difference, and its calls are held for a person to
review until one is approved. DECISION is what the policy says for a call
without arguments (rules that constrain arguments may decide otherwise:
'gatehouse policy explain' takes arguments).

A server no client has used through a proxy yet has no tools here.`,
	flags: flagged(func(fs *flag.FlagSet, f *toolsFlags) {
		fs.BoolVar(&f.json, "json", false, "print JSON")
	}, runTools),
}

func runTools(ctx context.Context, c *cli, fs *flag.FlagSet, f *toolsFlags, args []string) error {
	pos, err := parse(fs, args, 0)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("tools: want exactly one server NAME")
	}
	st, ps, err := c.openPolicies(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	srv, err := lookupServer(ctx, st, pos[0])
	if err != nil {
		return err
	}
	pol, err := ps.Current(ctx)
	if err != nil {
		return err
	}
	pack := policy.PackByRef(srv.Pack)
	tools, err := gate.Tools(ctx, st, pol, srv.Name, srv.Trusted, pack)
	if err != nil {
		return err
	}
	if f.json {
		type change struct {
			Accepted json.RawMessage `json:"accepted"`
			Listed   json.RawMessage `json:"listed"`
		}
		type tool struct {
			Name        string    `json:"name"`
			Description string    `json:"description"`
			Risk        string    `json:"risk"`
			RiskWhy     []string  `json:"riskWhy"`
			Pack        string    `json:"pack,omitempty"`
			Decision    string    `json:"decision"`
			Rule        string    `json:"rule"`
			Pin         string    `json:"pin"`
			PinnedAt    time.Time `json:"pinnedAt"`
			Change      *change   `json:"change,omitempty"`
		}
		out := make([]tool, 0, len(tools))
		for _, t := range tools {
			j := tool{Name: t.Name, Description: t.Description, Risk: string(t.Risk), RiskWhy: t.RiskWhy, Pack: t.Pack, Decision: string(t.Decision),
				Rule: t.Rule, Pin: string(t.Pin), PinnedAt: t.PinnedAt}
			if t.Change != nil {
				j.Change = &change{Accepted: t.Change.Old, Listed: t.Change.New}
			}
			out = append(out, j)
		}
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if len(tools) == 0 {
		fmt.Fprintf(c.stderr, "gatehouse: server %s has listed no tools through Gatehouse yet\nhint: use it from a client through 'gatehouse proxy %s' (see 'gatehouse clients')\n", srv.Name, srv.Name)
		return nil
	}
	if pack != nil {
		fmt.Fprintf(c.stdout, "server %s: capability pack %s (%s): the tools it names are classified by it\n\n", srv.Name, pack.Ref(), pack.Name)
	}
	tw := tabwriter.NewWriter(c.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tRISK\tRISK FROM\tDECISION\tRULE\tPIN")
	for _, t := range tools {
		from := "name"
		if t.Pack != "" {
			from = "pack " + t.Pack
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", clean(t.Name), t.Risk, from, t.Decision, clean(t.Rule), pinText(t))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, t := range tools {
		if t.Change == nil {
			continue
		}
		fmt.Fprintf(c.stdout, "\n%s changed since it was accepted, listed so on %s (- as accepted, + as listed):\n",
			clean(t.Name), t.ChangedAt.Local().Format(time.DateTime))
		io.WriteString(c.stdout, diffLines(prettyLines(t.Change.Old), prettyLines(t.Change.New)))
	}
	return nil
}

func pinText(t gate.ToolStatus) string {
	if t.Pin == gate.Changed {
		return "changed: held for review"
	}
	return "pinned " + t.PinnedAt.Local().Format(time.DateOnly)
}

// serverTrustFlags are the flags of gatehouse server trust.
type serverTrustFlags struct {
	off bool
}

var serverTrustCmd = &command{
	name:    "server trust",
	usage:   "NAME [--off]",
	summary: "trust (or stop trusting) server NAME's tool annotations",
	help: `
A server's tools carry hints (readOnlyHint, destructiveHint, ...). Gatehouse
lets hints from an untrusted server only raise a tool's risk; once you trust
the server, a read-only hint may lower it too, so fewer of its calls need your
approval. Trust a server whose code you know, not one that could lie.`,
	flags: flagged(func(fs *flag.FlagSet, f *serverTrustFlags) {
		fs.BoolVar(&f.off, "off", false, "stop trusting it")
	}, func(ctx context.Context, c *cli, fs *flag.FlagSet, f *serverTrustFlags, args []string) error {
		pos, err := parse(fs, args, 0)
		if err != nil {
			return err
		}
		st, srv, err := c.namedServer(ctx, "server trust", pos)
		if err != nil {
			return err
		}
		defer st.Close()
		srv.Trusted = !f.off
		if err := st.UpdateServer(ctx, srv); err != nil {
			return err
		}
		if srv.Trusted {
			fmt.Fprintf(c.stderr, "gatehouse: server %s is trusted: its read-only hints may lower risk\n", srv.Name)
		} else {
			fmt.Fprintf(c.stderr, "gatehouse: server %s is not trusted: its hints can only raise risk\n", srv.Name)
		}
		return nil
	}),
}
