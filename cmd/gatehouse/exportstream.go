package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/stream"
)

// streamFlags name where the evidence stream goes.
type streamFlags struct {
	otlp    listFlag
	syslog  listFlag
	headers listFlag
}

func declareExportFlags(fs *flag.FlagSet, f *streamFlags) {
	fs.Var(&f.otlp, "export-otlp", "send receipts and outcomes as OpenTelemetry logs and spans to the OTLP/HTTP `URL` (e.g. http://collector:4318; repeatable)")
	fs.Var(&f.syslog, "export-syslog", "send receipts and outcomes as RFC 5424 syslog to `ADDR`, tcp://HOST:PORT or udp://HOST:PORT (repeatable)")
	fs.Var(&f.headers, "export-otlp-header", "send the header `NAME=vault://secret/ID` with every OTLP request, its value read from the OS keychain (repeatable)")
}

// exportDestinations are the export flags' destinations when any is
// given, else the home's settings' (unless export is off there).
func exportDestinations(set store.Settings, fs *flag.FlagSet, f *streamFlags) (stream.Destinations, error) {
	if !flagGiven(fs, "export-otlp") && !flagGiven(fs, "export-syslog") && !flagGiven(fs, "export-otlp-header") {
		if set.ExportOff {
			return stream.Destinations{}, nil
		}
		return stream.Destinations{OTLP: set.ExportOTLP, Syslog: set.ExportSyslog, OTLPHeaders: set.ExportOTLPHeaders}, nil
	}
	d := stream.Destinations{OTLP: f.otlp, Syslog: f.syslog}
	for _, h := range f.headers {
		name, ref, ok := strings.Cut(h, "=")
		if !ok {
			return d, usagef("--export-otlp-header %q: want NAME=vault://secret/ID", name)
		}
		if err := stream.CheckHeader(name, ref); err != nil {
			// The value is not repeated: it may be the credential itself.
			return d, withHint(usagef("--export-otlp-header: %v", err), "keep the value in the keychain (gatehouse secret set ID) and give %s=vault://secret/ID", name)
		}
		if d.OTLPHeaders == nil {
			d.OTLPHeaders = map[string]string{}
		}
		d.OTLPHeaders[name] = ref
	}
	return d, nil
}

var exportStreamCmd = &command{
	name:    "export-stream",
	usage:   "[--export-otlp URL]... [--export-otlp-header NAME=vault://secret/ID]... [--export-syslog ADDR]...",
	summary: "send every receipt and outcome, as the log grows, to a collector or a SIEM",
	help: `
Runs until interrupted, sending each receipt and outcome of the evidence
log to an OpenTelemetry collector (OTLP over HTTP with protobuf: a log
record for each entry, a span for each call that ended or was refused) and
to syslog receivers (RFC 5424; over TCP framed by octet counting, or UDP).
gatehouse serve does the same with the same flags.

Delivery is at least once: each destination has a cursor in the home's
database that moves only once the destination took the records, so one
that was down, or a Gatehouse that was stopped, resumes where it was and
nothing is skipped (OTLP answers each request; syslog over TCP does not,
and a receiver that dies loses what was in its socket).

A record carries the log's id, the entry's index, id and leaf hash (check
it against gatehouse export and verify), the receipt id, server, tool,
client, decision and rule, and for an outcome its status and duration; it
never carries arguments or results.

--export-otlp-header NAME=vault://secret/ID sends a header with every
OTLP request (a collector's Authorization), its value read from the OS
keychain when the stream starts (gatehouse secret set ID): the value is
never on the command line, in a file or in a log.

With no export flag, it sends to the destinations of the home's settings
export.otlp, export.syslog and export.otlp_headers (the app's Settings set
them), unless export.enabled is off.`,
	flags: flagged(func(fs *flag.FlagSet, f *streamFlags) { declareExportFlags(fs, f) }, runExportStream),
}

func runExportStream(ctx context.Context, c *cli, fs *flag.FlagSet, f *streamFlags, args []string) error {
	if err := noArgs(fs, args); err != nil {
		return err
	}
	st, err := c.openStore(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	set, err := st.Settings(ctx)
	if err != nil {
		set = store.Settings{}
	}
	d, err := exportDestinations(set, fs, f)
	if err != nil {
		return err
	}
	if d.Empty() {
		hint := "or set the home's export.otlp or export.syslog setting (the app's Settings)"
		if set.ExportOff {
			hint = "the home's export destinations are turned off (export.enabled, in the app's Settings)"
		}
		return withHint(usagef("export-stream: name a destination with --export-otlp or --export-syslog"), "%s", hint)
	}
	log, closeLog := c.logger(st.LogPath(), "export")
	defer closeLog()
	sinks, err := d.Sinks(ctx, vaultFor(st), version)
	if err != nil {
		return withHint(fmt.Errorf("export-stream: %w", err), "a header's secret lives in the OS keychain: gatehouse secret set ID")
	}
	for _, s := range sinks {
		fmt.Fprintf(c.stderr, "gatehouse: exporting receipts and outcomes to %s\n", s.Name())
	}
	wait, err := stream.Start(ctx, st, sinks, &stream.Options{Logger: log.WithGroup("export")})
	if err != nil {
		return err
	}
	<-ctx.Done()
	wait()
	return nil
}
