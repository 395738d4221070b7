package witness

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

func openLog(t *testing.T) *receipts.Log {
	t.Helper()
	st, err := store.Open(context.Background(), t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	seed := sha256.Sum256([]byte("gatehouse log"))
	l, err := receipts.Open(context.Background(), st, ed25519.NewKeyFromSeed(seed[:]))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func appendReceipts(t *testing.T, l *receipts.Log, n int) {
	t.Helper()
	for range n {
		if _, err := l.AppendReceipt(context.Background(), entry.Receipt{
			Capability: "mcp.files.read_file", Server: "files", Tool: "read_file",
			Decision: entry.Allow, Rule: "default", Client: entry.Client{Name: "test"},
		}, []byte(`{"path":"a"}`)); err != nil {
			t.Fatal(err)
		}
	}
}

func logVKey(t *testing.T, l *receipts.Log) string {
	t.Helper()
	keys, err := l.Keys(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	v, err := entry.LogVerifierKey(keys[0].Public)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func verifyBundle(t *testing.T, dir string, opts *verify.Options) *verify.Report {
	t.Helper()
	fsys, err := verify.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	r, err := verify.Bundle(context.Background(), fsys, opts)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// A log's writer submits as it appends; its export carries the witness's
// cosignature; the verifier counts it against the witnesses named.
func TestExportCarriesCosignatures(t *testing.T) {
	ctx := context.Background()
	l := openLog(t)
	appendReceipts(t, l, 3)

	w1, _ := openWitness(t, "")
	if err := w1.AddLog(ctx, entry.Origin(l.ID()), logVKey(t, l)); err != nil {
		t.Fatal(err)
	}
	c1 := serve(t, w1)
	// A second witness, named by the auditor, that this log never reaches.
	w2key := entry.WitnessKey{Name: "witness.test/w2", Key: witnessKey("w2").Public().(ed25519.PublicKey)}

	sub := NewSubmitter(l, []*Client{c1}, &SubmitterOptions{Interval: time.Millisecond})
	for range 3 {
		sub.SubmitNow(ctx)
		st, err := l.WitnessStatus(ctx, c1.Key.String())
		if err != nil || st.OK.IsZero() || st.Failure != "" {
			t.Fatalf("after a submission: %+v, %v", st, err)
		}
		appendReceipts(t, l, 2)
	}
	// The witness is behind by two entries: the export asks it again.
	out := filepath.Join(t.TempDir(), "bundle")
	x, err := l.Export(ctx, out, &receipts.ExportOptions{Witnesses: []receipts.Cosigner{c1.Cosigner()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Witnessed) != 1 || x.Witnessed[0].Err != nil {
		t.Fatalf("Witnessed = %+v", x.Witnessed)
	}

	// No witness named: the bundle verifies, and says so.
	r := verifyBundle(t, out, nil)
	if !r.OK() || r.Assurance != "signed by the log" {
		t.Fatalf("no witness named: ok %v, assurance %q", r.OK(), r.Assurance)
	}
	// Two named, one cosigned.
	opts := &verify.Options{Witnesses: []entry.WitnessKey{w1.Key(), w2key}, WitnessesRequired: 1}
	r = verifyBundle(t, out, opts)
	if want := "signed by the log, witnessed by 1 of the 2 witnesses named"; !r.OK() || r.Assurance != want {
		t.Fatalf("assurance %q (ok %v), want %q", r.Assurance, r.OK(), want)
	}
	opts.WitnessesRequired = 2
	r = verifyBundle(t, out, opts)
	if c := r.Check(verify.CheckWitnesses); r.OK() || c.Status != verify.Failed ||
		!strings.Contains(c.Problems[0].Msg, "witnessed by 1 of the 2 witnesses named; 2 required") {
		t.Fatalf("2 required: ok %v, %+v", r.OK(), c)
	}

	// A cosignature changed after export fails, as its own check and the
	// manifest's.
	path := filepath.Join(out, verify.FileCosignatures)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSuffix(string(b), "\n")
	i := strings.LastIndex(line, " ")
	sig, _ := base64.StdEncoding.DecodeString(line[i+1:])
	sig[len(sig)-1] ^= 1
	if err := os.WriteFile(path, []byte(line[:i+1]+base64.StdEncoding.EncodeToString(sig)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	opts.WitnessesRequired = 1
	r = verifyBundle(t, out, opts)
	if r.Check(verify.CheckWitnesses).Status != verify.Failed || r.Check(verify.CheckManifest).Status != verify.Failed {
		t.Fatalf("a tampered cosignature: witnesses %s, manifest %s", r.Check(verify.CheckWitnesses).Status, r.Check(verify.CheckManifest).Status)
	}
}

// A witness that is down delays nothing and is reported; the export goes
// on without it.
func TestWitnessDownIsReported(t *testing.T) {
	ctx := context.Background()
	l := openLog(t)
	appendReceipts(t, l, 2)
	down := &Client{URL: "http://127.0.0.1:1", Key: entry.WitnessKey{Name: "down", Key: witnessKey("down").Public().(ed25519.PublicKey)}}
	NewSubmitter(l, []*Client{down}, nil).SubmitNow(ctx)
	st, err := l.WitnessStatus(ctx, down.Key.String())
	if err != nil || st.Failed.IsZero() || !strings.Contains(st.Failure, "connect") {
		t.Fatalf("WitnessStatus = %+v, %v; want a failure to connect", st, err)
	}
	out := filepath.Join(t.TempDir(), "bundle")
	x, err := l.Export(ctx, out, &receipts.ExportOptions{Witnesses: []receipts.Cosigner{down.Cosigner()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(x.Witnessed) != 1 || x.Witnessed[0].Err == nil {
		t.Fatalf("Witnessed = %+v; want the failure", x.Witnessed)
	}
	if _, err := os.Stat(filepath.Join(out, verify.FileCosignatures)); !os.IsNotExist(err) {
		t.Errorf("a bundle without cosignatures has a cosignatures file: %v", err)
	}
	if r := verifyBundle(t, out, nil); !r.OK() || r.Check(verify.CheckWitnesses) != nil {
		t.Errorf("a bundle without witnesses: ok %v, witnesses check %v", r.OK(), r.Check(verify.CheckWitnesses))
	}
}
