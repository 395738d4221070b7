package stream

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collogs "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	coltrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// otlpReceiver is a minimal OTLP/HTTP receiver for the tests (not the
// OpenTelemetry Collector): it decodes the protobuf requests the exporter
// posts, and can be made to fail.
type otlpReceiver struct {
	mu    sync.Mutex
	down  bool
	logs  map[string]map[string]string // by entry id: attributes
	spans map[string]string            // by entry id: span name
}

func (o *otlpReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	body, _ := io.ReadAll(r.Body)
	switch r.URL.Path {
	case "/v1/logs":
		var req collogs.ExportLogsServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					attrs := map[string]string{"body": lr.Body.GetStringValue()}
					for _, kv := range lr.Attributes {
						v := kv.Value.GetStringValue()
						if v == "" {
							v = strconv.FormatInt(kv.Value.GetIntValue(), 10)
						}
						attrs[kv.Key] = v
					}
					o.logs[attrs["gatehouse.entry.id"]] = attrs
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collogs.ExportLogsServiceResponse{})
		w.Write(b)
	case "/v1/traces":
		var req coltrace.ExportTraceServiceRequest
		if err := proto.Unmarshal(body, &req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				for _, sp := range ss.Spans {
					for _, kv := range sp.Attributes {
						if kv.Key == "gatehouse.entry.id" {
							o.spans[kv.Value.GetStringValue()] = sp.Name
						}
					}
				}
			}
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&coltrace.ExportTraceServiceResponse{})
		w.Write(b)
	default:
		http.NotFound(w, r)
	}
}

func (o *otlpReceiver) setDown(d bool) { o.mu.Lock(); o.down = d; o.mu.Unlock() }
func (o *otlpReceiver) count() int     { o.mu.Lock(); defer o.mu.Unlock(); return len(o.logs) }

// syslogListener reads octet-counted RFC 5424 messages over TCP.
type syslogListener struct {
	ln   net.Listener
	mu   sync.Mutex
	msgs []string
}

func listenSyslog(t *testing.T) *syslogListener {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &syslogListener{ln: ln}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				br := bufio.NewReader(c)
				for {
					n, err := br.ReadString(' ')
					if err != nil {
						return
					}
					size, err := strconv.Atoi(strings.TrimSpace(n))
					if err != nil {
						return
					}
					msg := make([]byte, size)
					if _, err := io.ReadFull(br, msg); err != nil {
						return
					}
					s.mu.Lock()
					s.msgs = append(s.msgs, string(msg))
					s.mu.Unlock()
				}
			}()
		}
	}()
	return s
}

func (s *syslogListener) all() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.msgs...)
}

// appendCalls writes n calls to the log: a receipt each, and an outcome
// for those allowed. It returns the ids of the entries written.
func appendCalls(t *testing.T, l *receipts.Log, n int, secret string) []string {
	t.Helper()
	ctx := context.Background()
	var ids []string
	for i := range n {
		decision := "Allow"
		if i%3 == 2 {
			decision = "Deny"
		}
		args := fmt.Appendf(nil, `{"token":%q}`, secret)
		e, err := l.AppendReceipt(ctx, entry.Receipt{Capability: "mcp.github.create_issue", Server: "github", Tool: "create_issue",
			Decision: decision, Rule: "r1", Client: entry.Client{Name: "claude-code"}, Args: entry.Commit([]byte("salt0123456789ab"), args)}, args)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, e.ID)
		if decision == "Allow" {
			o, err := l.AppendOutcome(ctx, entry.Outcome{Receipt: e.ID, Status: "SUCCEEDED", DurationMS: 12.5}, []byte(`{"content":[{"type":"text","text":"`+secret+`"}]}`))
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, o.ID)
		}
	}
	return ids
}

// Every receipt and outcome reaches both sinks, including those written
// while the OTLP receiver was down and those written while the streamer
// was stopped; nothing of the arguments or results does.
func TestDeliveredAtLeastOnce(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "sk-live-DO-NOT-EXPORT-4242"
	want := appendCalls(t, l, 6, secret)

	rx := &otlpReceiver{logs: map[string]map[string]string{}, spans: map[string]string{}}
	srv := httptest.NewServer(rx)
	defer srv.Close()
	syslog := listenSyslog(t)

	run := func(ctx context.Context) (stop func()) {
		s, err := Open(ctx, st, &Options{Poll: 20 * time.Millisecond, MaxBackoff: 50 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		otlp, err := NewOTLP(ctx, srv.URL, nil)
		if err != nil {
			t.Fatal(err)
		}
		sys, err := NewSyslog("tcp://"+syslog.ln.Addr().String(), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for _, sink := range []Sink{otlp, sys} {
			wg.Go(func() { s.Run(ctx, sink); sink.Close() })
		}
		return func() { cancel(); wg.Wait() }
	}
	waitFor := func(what string, f func() bool) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for !f() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}

	stop := run(ctx)
	waitFor("the first calls", func() bool { return rx.count() == len(want) })
	// The receiver goes down; calls go on; it comes back.
	rx.setDown(true)
	want = append(want, appendCalls(t, l, 3, secret)...)
	time.Sleep(100 * time.Millisecond)
	rx.setDown(false)
	waitFor("the calls made while the receiver was down", func() bool { return rx.count() == len(want) })
	// Gatehouse stops; calls go on; it starts again from its cursor.
	stop()
	want = append(want, appendCalls(t, l, 3, secret)...)
	stop = run(ctx)
	defer stop()
	waitFor("the calls made while the streamer was stopped", func() bool { return rx.count() == len(want) })
	waitFor("syslog", func() bool { return len(syslog.all()) >= len(want) })
	// A batch's spans are exported after its log records: wait for them
	// too before counting.
	waitFor("the spans", func() bool {
		rx.mu.Lock()
		defer rx.mu.Unlock()
		return len(rx.spans) >= 12
	})

	rx.mu.Lock()
	defer rx.mu.Unlock()
	for _, id := range want {
		a := rx.logs[id]
		if a == nil {
			t.Errorf("entry %s was not delivered over OTLP", id)
			continue
		}
		if a["gatehouse.entry.leaf_hash"] == "" || a["gatehouse.receipt.id"] == "" || a["gen_ai.tool.name"] != "create_issue" || a["gatehouse.client"] != "claude-code" {
			t.Errorf("entry %s: attributes %v", id, a)
		}
		for k, v := range a {
			if strings.Contains(v, secret) {
				t.Errorf("entry %s: %s holds the arguments' secret", id, k)
			}
		}
	}
	// A span for each outcome and each refusal.
	spans := 0
	for _, name := range rx.spans {
		if name != "tools/call create_issue" {
			t.Errorf("span %q", name)
		}
		spans++
	}
	if spans != 12 {
		t.Errorf("%d spans, want 12 (8 outcomes, 4 refusals)", spans)
	}
	seen := map[string]bool{}
	for _, m := range syslog.all() {
		if strings.Contains(m, secret) {
			t.Errorf("a syslog message holds the secret: %s", m)
		}
		if !strings.HasPrefix(m, "<") || !strings.Contains(m, " gatehouse ") || !strings.Contains(m, "["+SyslogSDID+" ") {
			t.Errorf("not an RFC 5424 message of ours: %s", m)
		}
		for _, id := range want {
			if strings.Contains(m, `entry="`+id+`"`) {
				seen[id] = true
			}
		}
	}
	if len(seen) != len(want) {
		t.Errorf("syslog got %d of %d entries", len(seen), len(want))
	}
}

func TestFormatSyslog(t *testing.T) {
	r := Record{Log: "L", Index: 7, ID: "o-1", LeafHash: "aGFzaA==", Kind: "outcome", Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC),
		Receipt: "r-1", Server: "git]hub", Tool: `say"hi\`, Client: "cc", Decision: "Allow", Rule: "r", Status: "FAILED", DurationMS: 1.5}
	got := string(FormatSyslog(r, 13, "host one"))
	want := "<108>1 2026-05-01T12:00:00.000000Z hostone gatehouse " + strconv.Itoa(osPid()) +
		` outcome [gatehouse@32473 log="L" index="7" entry="o-1" leaf_hash="aGFzaA==" receipt="r-1" server="git\]hub" tool="say\"hi\\" client="cc" decision="Allow" rule="r" status="FAILED" duration_ms="1.5"] ` +
		"\ufefftools/call say\"hi\\ on git]hub by cc: FAILED in 1.5 ms (receipt r-1)"
	if got != want {
		t.Errorf("FormatSyslog =\n%s\nwant\n%s", got, want)
	}
}
