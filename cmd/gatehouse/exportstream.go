package main

import (
	"context"
	"flag"
	"log/slog"

	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// exportFlags name where the evidence stream goes.
type streamFlags struct {
	otlp   string
	syslog string
}

func declareExportFlags(fs *flag.FlagSet, f *streamFlags) {
	fs.StringVar(&f.otlp, "export-otlp", "", "send receipts and outcomes as OpenTelemetry logs and spans to the OTLP/HTTP `URL` (e.g. http://collector:4318)")
	fs.StringVar(&f.syslog, "export-syslog", "", "send receipts and outcomes as RFC 5424 syslog to `ADDR` (tcp://host:601 or udp://host:514)")
}

func startExports(ctx context.Context, c *cli, st *store.Store, f *streamFlags, m *httpfront.Metrics, log *slog.Logger) error {
	return nil
}
