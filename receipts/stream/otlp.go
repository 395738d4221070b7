package stream

import (
	"context"
	"crypto/sha256"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlplog/otlploghttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	otellog "go.opentelemetry.io/otel/log"
	sdklog "go.opentelemetry.io/otel/sdk/log"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// scope names the instrumentation scope of every exported record.
const scope = "github.com/gatehouse-dev/gatehouse/receipts/stream"

// OTLPOptions configure an OTLP sink. Nil options mean the defaults.
type OTLPOptions struct {
	// Headers are sent with every request (a collector's bearer token).
	// They MUST NOT be logged.
	Headers map[string]string
	// Timeout bounds each export; zero means 10 s.
	Timeout time.Duration
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
}

// otlpSink sends each record as an OpenTelemetry log record, and each call
// that ended (an outcome) or was refused (a receipt not allowed) as a span,
// over OTLP/HTTP with protobuf. The OpenTelemetry SDK makes the records;
// the sink exports them itself, synchronously, so that it knows they were
// taken before the cursor moves.
type otlpSink struct {
	name   string
	logs   *otlploghttp.Exporter
	spans  *otlptrace.Exporter
	lp     *sdklog.LoggerProvider
	tp     *sdktrace.TracerProvider
	logger otellog.Logger
	tracer trace.Tracer
	col    *collector
}

// NewOTLP returns a sink that posts to the OTLP/HTTP endpoint base (e.g.
// http://collector:4318), at base/v1/logs and base/v1/traces.
func NewOTLP(ctx context.Context, base string, opts *OTLPOptions) (Sink, error) {
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" {
		return nil, fmt.Errorf("OTLP endpoint %q: want http(s)://HOST:PORT", base)
	}
	if opts == nil {
		opts = &OTLPOptions{}
	}
	timeout := opts.Timeout
	if timeout <= 0 {
		timeout = 10 * time.Second
	}
	root := strings.TrimRight(base, "/")
	// The SDK's own retries are off: the streamer retries from its cursor.
	logs, err := otlploghttp.New(ctx, otlploghttp.WithEndpointURL(root+"/v1/logs"), otlploghttp.WithHeaders(opts.Headers),
		otlploghttp.WithTimeout(timeout), otlploghttp.WithRetry(otlploghttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("OTLP logs: %w", err)
	}
	spans, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(root+"/v1/traces"), otlptracehttp.WithHeaders(opts.Headers),
		otlptracehttp.WithTimeout(timeout), otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}))
	if err != nil {
		return nil, fmt.Errorf("OTLP traces: %w", err)
	}
	res := resource.NewSchemaless(attribute.String("service.name", "gatehouse"), attribute.String("service.version", opts.ServiceVersion))
	col := &collector{}
	lp := sdklog.NewLoggerProvider(sdklog.WithResource(res), sdklog.WithProcessor(col))
	tp := sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSpanProcessor(col),
		sdktrace.WithIDGenerator(entryIDs{}), sdktrace.WithSampler(sdktrace.AlwaysSample()))
	return &otlpSink{name: "otlp:" + root, logs: logs, spans: spans, lp: lp, tp: tp, col: col,
		logger: lp.Logger(scope), tracer: tp.Tracer(scope)}, nil
}

func (s *otlpSink) Name() string { return s.name }

func (s *otlpSink) Deliver(ctx context.Context, recs []Record) error {
	s.col.reset()
	for _, r := range recs {
		attrs := attributes(r)
		tid, sid := ids(r)
		sctx := trace.ContextWithSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
		var lr otellog.Record
		lr.SetTimestamp(r.Time)
		lr.SetObservedTimestamp(time.Now())
		lr.SetEventName("gatehouse." + r.Kind)
		lr.SetSeverity(otellog.SeverityInfo)
		lr.SetSeverityText("INFO")
		if (r.Kind == "receipt" && r.Decision != "Allow") || (r.Kind == "outcome" && r.Status != "SUCCEEDED") {
			lr.SetSeverity(otellog.SeverityWarn)
			lr.SetSeverityText("WARN")
		}
		lr.SetBody(attribute.StringValue(r.Summary()))
		lr.AddAttributes(attrs...)
		s.logger.Emit(sctx, lr)
		// A span for each call that ended, and each that did not run.
		if r.Kind == "outcome" || r.Decision != "Allow" {
			start := r.Time
			if r.Kind == "outcome" {
				start = r.Time.Add(-time.Duration(r.DurationMS * float64(time.Millisecond)))
			}
			_, span := s.tracer.Start(withIDs(ctx, tid, sid), "tools/call "+r.Tool, trace.WithTimestamp(start),
				trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(attrs...))
			if r.Kind == "receipt" {
				span.SetStatus(codes.Error, "refused: "+r.Decision)
			} else if r.Status != "SUCCEEDED" {
				span.SetStatus(codes.Error, r.Status)
			}
			span.End(trace.WithTimestamp(r.Time))
		}
	}
	logs, spans := s.col.take()
	if len(logs) > 0 {
		if err := s.logs.Export(ctx, logs); err != nil {
			return fmt.Errorf("OTLP logs: %w", err)
		}
	}
	if len(spans) > 0 {
		if err := s.spans.ExportSpans(ctx, spans); err != nil {
			return fmt.Errorf("OTLP traces: %w", err)
		}
	}
	return nil
}

func (s *otlpSink) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.lp.Shutdown(ctx)
	s.tp.Shutdown(ctx)
	s.logs.Shutdown(ctx)
	return s.spans.Shutdown(ctx)
}

// attributes are a record's fields, named by the OpenTelemetry semantic
// conventions for MCP and GenAI where they have a name (mcp.method.name,
// gen_ai.operation.name, gen_ai.tool.name, error.type), and under
// gatehouse.* otherwise.
func attributes(r Record) []attribute.KeyValue {
	a := []attribute.KeyValue{
		attribute.String("mcp.method.name", "tools/call"),
		attribute.String("gen_ai.operation.name", "execute_tool"),
		attribute.String("gen_ai.tool.name", r.Tool),
		attribute.String("gatehouse.server", r.Server),
		attribute.String("gatehouse.client", r.Client),
		attribute.String("gatehouse.log.id", r.Log),
		attribute.Int64("gatehouse.entry.index", r.Index),
		attribute.String("gatehouse.entry.id", r.ID),
		attribute.String("gatehouse.entry.kind", r.Kind),
		attribute.String("gatehouse.entry.leaf_hash", r.LeafHash),
		attribute.String("gatehouse.receipt.id", r.Receipt),
		attribute.String("gatehouse.decision", r.Decision),
		attribute.String("gatehouse.rule", r.Rule),
	}
	if r.Session != "" {
		a = append(a, attribute.String("gatehouse.session", r.Session))
	}
	if r.Approver != "" {
		a = append(a, attribute.String("gatehouse.approver.scope", r.Approver))
	}
	if r.Kind == "outcome" {
		a = append(a, attribute.String("gatehouse.outcome.status", r.Status),
			attribute.Float64("gatehouse.outcome.duration_ms", r.DurationMS))
		if r.Status != "SUCCEEDED" {
			a = append(a, attribute.String("error.type", r.Status))
		}
		if r.ErrorCode != 0 {
			a = append(a, attribute.Int64("rpc.jsonrpc.error_code", r.ErrorCode))
		}
	} else if r.Decision != "Allow" {
		a = append(a, attribute.String("error.type", "refused"))
	}
	return a
}

// ids derives a record's trace id from its receipt (a call's receipt and
// outcome share a trace) and its span id from the entry, so that a record
// delivered twice has the same ids.
func ids(r Record) (trace.TraceID, trace.SpanID) {
	th := sha256.Sum256([]byte("gatehouse trace " + r.Log + " " + r.Receipt))
	sh := sha256.Sum256([]byte("gatehouse span " + r.Log + " " + r.ID))
	var tid trace.TraceID
	var sid trace.SpanID
	copy(tid[:], th[:])
	copy(sid[:], sh[:])
	return tid, sid
}

type idsKey struct{}

func withIDs(ctx context.Context, tid trace.TraceID, sid trace.SpanID) context.Context {
	return context.WithValue(ctx, idsKey{}, [2]any{tid, sid})
}

// entryIDs gives a span the ids withIDs put in its context.
type entryIDs struct{}

func (entryIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	v, _ := ctx.Value(idsKey{}).([2]any)
	tid, _ := v[0].(trace.TraceID)
	sid, _ := v[1].(trace.SpanID)
	return tid, sid
}

func (entryIDs) NewSpanID(ctx context.Context, _ trace.TraceID) trace.SpanID {
	_, sid := entryIDs{}.NewIDs(ctx)
	return sid
}

// collector is the SDK's log and span processor that only collects, for
// the sink to export itself.
type collector struct {
	mu    sync.Mutex
	logs  []sdklog.Record         // guarded by mu
	spans []sdktrace.ReadOnlySpan // guarded by mu
}

func (c *collector) reset() {
	c.mu.Lock()
	c.logs, c.spans = nil, nil
	c.mu.Unlock()
}

func (c *collector) take() ([]sdklog.Record, []sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, s := c.logs, c.spans
	c.logs, c.spans = nil, nil
	return l, s
}

func (c *collector) Enabled(context.Context, sdklog.EnabledParameters) bool { return true }

func (c *collector) OnEmit(_ context.Context, r *sdklog.Record) error {
	c.mu.Lock()
	c.logs = append(c.logs, r.Clone())
	c.mu.Unlock()
	return nil
}

func (c *collector) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

func (c *collector) OnEnd(s sdktrace.ReadOnlySpan) {
	c.mu.Lock()
	c.spans = append(c.spans, s)
	c.mu.Unlock()
}

func (c *collector) Shutdown(context.Context) error   { return nil }
func (c *collector) ForceFlush(context.Context) error { return nil }

var (
	_ sdklog.Processor       = (*collector)(nil)
	_ sdktrace.SpanProcessor = (*collector)(nil)
)
