package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"sync"

	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/stream"
)

// streamFlags name where the evidence stream goes.
type streamFlags struct {
	otlp   listFlag
	syslog listFlag
}

func declareExportFlags(fs *flag.FlagSet, f *streamFlags) {
	fs.Var(&f.otlp, "export-otlp", "send receipts and outcomes as OpenTelemetry logs and spans to the OTLP/HTTP `URL` (e.g. http://collector:4318; repeatable)")
	fs.Var(&f.syslog, "export-syslog", "send receipts and outcomes as RFC 5424 syslog to `ADDR`, tcp://HOST:PORT or udp://HOST:PORT (repeatable)")
}

// exportSettings takes the export destinations from the home's settings
// when neither --export-otlp nor --export-syslog is given.
func exportSettings(set store.Settings, fs *flag.FlagSet, f *streamFlags) {
	if flagGiven(fs, "export-otlp") || flagGiven(fs, "export-syslog") {
		return
	}
	f.otlp = append(f.otlp, set.ExportOTLP...)
	f.syslog = append(f.syslog, set.ExportSyslog...)
}

// startExports starts a streamer for each sink f names, until ctx ends.
// Each sink resumes from its own cursor in the home's database.
func startExports(ctx context.Context, c *cli, st *store.Store, f *streamFlags, m *httpfront.Metrics, log *slog.Logger) (wait func(), err error) {
	var sinks []stream.Sink
	for _, u := range f.otlp {
		s, err := stream.NewOTLP(ctx, u, &stream.OTLPOptions{ServiceVersion: version})
		if err != nil {
			return nil, usagef("--export-otlp: %v", err)
		}
		sinks = append(sinks, s)
	}
	for _, a := range f.syslog {
		s, err := stream.NewSyslog(a, nil)
		if err != nil {
			return nil, usagef("--export-syslog: %v", err)
		}
		sinks = append(sinks, s)
	}
	if len(sinks) == 0 {
		return func() {}, nil
	}
	s, err := stream.Open(ctx, st, &stream.Options{
		Logger: log.WithGroup("export"),
		Delivered: func(sink string, n int, err error, lag int64) {
			m.Set("gatehouse_export_lag_entries", float64(lag), "sink", sink)
			if err != nil {
				m.Add("gatehouse_export_errors_total", 1, "sink", sink)
				return
			}
			m.Add("gatehouse_export_records_total", float64(n), "sink", sink)
		},
	})
	if err != nil {
		return nil, err
	}
	var wg sync.WaitGroup
	for _, sink := range sinks {
		fmt.Fprintf(c.stderr, "gatehouse: exporting receipts and outcomes to %s\n", sink.Name())
		wg.Go(func() {
			defer sink.Close()
			s.Run(ctx, sink)
		})
	}
	return wg.Wait, nil
}

var exportStreamCmd = &command{
	name:    "export-stream",
	usage:   "[--export-otlp URL]... [--export-syslog ADDR]...",
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

With neither flag, it sends to the destinations of the home's settings
export.otlp and export.syslog (the app's Settings set them).`,
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
	if set, err := st.Settings(ctx); err == nil {
		exportSettings(set, fs, f)
	}
	if len(f.otlp)+len(f.syslog) == 0 {
		return withHint(usagef("export-stream: name a destination with --export-otlp or --export-syslog"),
			"or set the home's export.otlp or export.syslog setting (the app's Settings)")
	}
	log, closeLog := c.logger(st.LogPath(), "export")
	defer closeLog()
	wait, err := startExports(ctx, c, st, f, httpfront.NewMetrics(), log)
	if err != nil {
		return err
	}
	<-ctx.Done()
	wait()
	return nil
}
