package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// valuesFlag collects a repeatable filter flag whose values may also be
// given comma-separated.
type valuesFlag []string

func (l *valuesFlag) String() string { return strings.Join(*l, ",") }

func (l *valuesFlag) Set(v string) error {
	for part := range strings.SplitSeq(v, ",") {
		if part = strings.TrimSpace(part); part != "" {
			*l = append(*l, part)
		}
	}
	return nil
}

// exportFlags are the flags of gatehouse export.
type exportFlags struct {
	out             string
	from            string
	to              string
	server          valuesFlag
	decision        valuesFlag
	status          valuesFlag
	kind            valuesFlag
	sinceCheckpoint string
	noPayloads      bool
}

var exportCmd = &command{
	name:    "export",
	usage:   "--out PATH [--from TIME] [--to TIME] [--server NAME]... [--decision D]... [--status S]... [--kind K]... [--since-checkpoint FILE] [--no-payloads]",
	summary: "write an evidence bundle that an auditor verifies offline",
	help: `
Writes the evidence log, or the part of it the filters choose, as a bundle:
a folder, or a gzipped tar archive when PATH ends in .tar.gz. It holds the
entries as they were signed, their arguments and results (or the tombstones
of erased ones), the log's public keys, a checkpoint signed now, a proof
that each entry is in it, a CSV and a readable report.html, bound together
by a signed manifest. 'gatehouse verify PATH' checks it with nothing else;
docs/evidence.md specifies the format for auditors who write their own
verifier.

Filters (each may be repeated, or given comma-separated; all must match):
  --from, --to     entries at or after --from and before --to: RFC 3339 times,
                   or dates (local time; --to DATE includes that day)
  --server NAME    calls to server NAME (receipts and outcomes), and the pin
                   entries of its tools' definitions
  --decision D     calls decided ALLOW, DENY or APPROVAL_REQUIRED
  --status S       calls whose outcome is SUCCEEDED, FAILED or UNKNOWN
  --kind K         entries of kind receipt, outcome, key, policy, pin or erasure

A filtered bundle also holds what its entries need to verify: every key
entry, the receipt of each outcome, and the erasure entry of each erased
payload. The checkpoint is always of the whole log.

Keep each bundle's checkpoint file: with --since-checkpoint it, the next
export proves that the log still extends it (nothing was removed or
rewritten in between), and the export fails if it does not.

With witnesses configured ('gatehouse witnesses add'), the export asks each
to cosign its checkpoint (waiting up to 10 seconds) and puts what they
answer in the bundle's cosignatures file, with any cosignature of the same
checkpoint the log already kept; it says which witnesses answered. A
witness that is down or refuses is reported, and the export goes on.

The bundle is readable by you alone: it holds arguments and results
(leave them out with --no-payloads).`,
	flags: flagged(func(fs *flag.FlagSet, f *exportFlags) {
		fs.StringVar(&f.out, "out", "", "write the bundle to `PATH` (a new folder, or PATH.tar.gz)")
		fs.StringVar(&f.from, "from", "", "entries at or after `TIME` (RFC 3339 or YYYY-MM-DD)")
		fs.StringVar(&f.to, "to", "", "entries before `TIME` (RFC 3339, or YYYY-MM-DD for the end of that day)")
		fs.Var(&f.server, "server", "calls to server `NAME` (repeatable)")
		fs.Var(&f.decision, "decision", "calls with `DECISION` ALLOW, DENY or APPROVAL_REQUIRED (repeatable)")
		fs.Var(&f.status, "status", "calls whose outcome has `STATUS` SUCCEEDED, FAILED or UNKNOWN (repeatable)")
		fs.Var(&f.kind, "kind", "entries of `KIND` receipt, outcome, key, policy, pin or erasure (repeatable)")
		fs.StringVar(&f.sinceCheckpoint, "since-checkpoint", "", "prove the log consistent with the checkpoint `FILE` of an earlier export")
		fs.BoolVar(&f.noPayloads, "no-payloads", false, "leave arguments and results out: commitments only")
	}, runExport),
}

func runExport(ctx context.Context, c *cli, flags *flag.FlagSet, f *exportFlags, args []string) error {
	if err := noArgs(flags, args); err != nil {
		return err
	}
	out := f.out
	if out == "" {
		return usagef("export: --out PATH is required")
	}
	filter, err := exportFilter(f.from, f.to, f.server, f.decision, f.status, f.kind)
	if err != nil {
		return err
	}
	opts := &receipts.ExportOptions{
		Filter:     filter,
		NoPayloads: f.noPayloads,
		Generator:  "gatehouse " + buildVersion(),
	}
	if name := f.sinceCheckpoint; name != "" {
		if opts.Since, err = os.ReadFile(name); err != nil {
			return fmt.Errorf("export: %w", err)
		}
	}

	st, l, err := c.openLog(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	clients := witnessClients(ctx, st, slog.New(slog.DiscardHandler))
	for _, wc := range clients {
		opts.Witnesses = append(opts.Witnesses, wc.Cosigner())
	}
	x, err := l.Export(ctx, out, opts)
	switch {
	case errors.Is(err, fs.ErrExist):
		return withHint(err, "choose a new --out: an export never overwrites one")
	case errors.Is(err, receipts.ErrInconsistent):
		return withHint(err, "nothing was written; this is what the check is for: keep the earlier bundle and find out what changed the log")
	case err != nil:
		return err
	}

	m := x.Manifest
	fmt.Fprintf(c.stderr, "gatehouse export: wrote %s: %d entries", out, m.Counts.Entries)
	switch {
	case m.Complete:
		fmt.Fprint(c.stderr, " (the whole log)")
	default:
		fmt.Fprintf(c.stderr, " (%d chosen by the filters, %d more so that they verify)", m.Counts.Selected, m.Counts.Entries-m.Counts.Selected)
	}
	if m.Payloads {
		fmt.Fprintf(c.stderr, ", %d payloads (%d erased)", m.Counts.Payloads, m.Counts.Erased)
	}
	fmt.Fprintln(c.stderr)
	fmt.Fprintf(c.stderr, "gatehouse export: checkpoint of log %s at %d entries, signed by key %s\n", x.Checkpoint.Log, x.Checkpoint.Size, m.Key)
	if m.Since != nil {
		fmt.Fprintf(c.stderr, "gatehouse export: the log extends the earlier checkpoint of %d entries\n", m.Since.Size)
	}

	var vopts verify.Options
	for i, a := range x.Witnessed {
		wc := clients[i]
		vopts.Witnesses = append(vopts.Witnesses, wc.Key)
		switch {
		case a.Err == nil:
			fmt.Fprintf(c.stderr, "gatehouse export: witness %s cosigned the checkpoint\n", wc.Key.Name)
		case a.Kept:
			fmt.Fprintf(c.stderr, "gatehouse export: witness %s did not answer (%v); the bundle carries the cosignature it gave this checkpoint earlier\n", wc.Key.Name, a.Err)
		default:
			fmt.Fprintf(c.stderr, "gatehouse export: witness %s did not cosign: %v\n", wc.Key.Name, a.Err)
		}
	}

	// Check what was written, as an auditor will.
	bundle, err := verify.Open(out)
	if err != nil {
		return err
	}
	report, err := verify.Bundle(ctx, bundle, &vopts)
	if err != nil {
		return err
	}
	if !report.OK() {
		report.WriteText(c.stderr)
		return fmt.Errorf("export: %s was written, but does not verify: the log itself fails the checks above", out)
	}
	fmt.Fprintf(c.stderr, "gatehouse export: verified: %d checks passed\n", len(report.Checks))
	fmt.Fprintf(c.stderr, "hint: auditors check it with: gatehouse verify --pin-key %s %s\n", x.FirstKey, out)
	return nil
}

// exportFilter builds the filter from the flags, refusing values that could
// match nothing by mistake.
func exportFilter(from, to string, servers, decisions, statuses, kinds []string) (receipts.ExportFilter, error) {
	var f receipts.ExportFilter
	var err error
	if f.From, err = parseBound(from, false); err != nil {
		return f, usagef("export: --from: %v", err)
	}
	if f.To, err = parseBound(to, true); err != nil {
		return f, usagef("export: --to: %v", err)
	}
	if !f.From.IsZero() && !f.To.IsZero() && !f.From.Before(f.To) {
		return f, usagef("export: --from %s is not before --to %s", from, to)
	}
	f.Servers = servers
	for _, d := range decisions {
		d = strings.ToUpper(d)
		if d != entry.Allow && d != entry.Deny && d != entry.ApprovalRequired {
			return f, usagef("export: --decision %q: want ALLOW, DENY or APPROVAL_REQUIRED", d)
		}
		f.Decisions = append(f.Decisions, d)
	}
	for _, s := range statuses {
		s = strings.ToUpper(s)
		if s != entry.Succeeded && s != entry.Failed && s != entry.Unknown {
			return f, usagef("export: --status %q: want SUCCEEDED, FAILED or UNKNOWN", s)
		}
		f.Statuses = append(f.Statuses, s)
	}
	for _, k := range kinds {
		kind := entry.Kind(strings.ToLower(k))
		if !kind.Known() {
			return f, usagef("export: --kind %q: want receipt, outcome, key, policy, pin or erasure", k)
		}
		f.Kinds = append(f.Kinds, kind)
	}
	return f, nil
}

// parseBound reads an RFC 3339 time or a date in local time; a date as an
// upper bound means the end of that day.
func parseBound(s string, upper bool) (time.Time, error) {
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	d, err := time.ParseInLocation(time.DateOnly, s, time.Local)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2025-06-30T14:00:00Z) nor a date (2025-06-30)", s)
	}
	if upper {
		d = d.AddDate(0, 0, 1)
	}
	return d, nil
}
