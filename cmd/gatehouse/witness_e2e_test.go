package main

import (
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/bench"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/witness"
)

// startWitness runs gatehouse witness serve on loopback in home and returns
// its URL and verifier key, and a function that stops it.
func startWitness(t *testing.T, home string) (url, vkey string, stop func()) {
	t.Helper()
	cmd := exec.Command(gatehouseBin, "--home", home, "witness", "serve", "--listen", "127.0.0.1:0", "--name", "witness.test/w1")
	var out syncBuffer
	cmd.Stderr = &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stopped := false
	stop = func() {
		if !stopped {
			stopped = true
			cmd.Process.Signal(os.Interrupt)
			cmd.Wait()
		}
	}
	t.Cleanup(stop)
	urlRE := regexp.MustCompile(`serving (http://\S+)/add-checkpoint`)
	keyRE := regexp.MustCompile(`(?m)^gatehouse witness: key (\S+)$`)
	waitFor(t, func() bool { return keyRE.MatchString(out.String()) }, "the witness to listen:\n"+out.String())
	return urlRE.FindStringSubmatch(out.String())[1], keyRE.FindStringSubmatch(out.String())[1], stop
}

var cosignedRE = regexp.MustCompile(`(?m)^w1 +\S+ +(\d+) entries +(\S+) +(.*)$`)

// cosigned returns the size witness w1 last cosigned, as gatehouse
// witnesses list says.
func cosigned(t *testing.T, home string) (int64, string) {
	t.Helper()
	m := cosignedRE.FindStringSubmatch(gatehouse(t, home, "witnesses", "list"))
	if m == nil {
		return -1, ""
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n, m[3]
}

// A proxy's log, cosigned by a real witness on loopback across several
// submissions and a restart of the witness; a fork signed with the log's
// own key is refused; the export carries the cosignature, and verify counts
// it against the witnesses named.
func TestWitnessCosignsAProxysLog(t *testing.T) {
	t.Setenv("GATEHOUSE_WITNESS_INTERVAL", "50ms")
	logHome, witnessHome := t.TempDir(), t.TempDir()
	gatehouse(t, logHome, "server", "add", "echo", "--no-quarantine", "--", gatehouseBin, bench.ServeCommand)
	allow(t, logHome, "mcp.echo.*")
	url, wkey, stop := startWitness(t, witnessHome)

	// The log's owner reads what to give the witness's operator.
	m := regexp.MustCompile(`(?m)^a witness accepts it with: gatehouse witness add-log (\S+) (\S+)$`).FindStringSubmatch(gatehouse(t, logHome, "witnesses", "list"))
	if m == nil {
		t.Fatal("gatehouse witnesses list does not say how a witness accepts the log")
	}
	origin, logKey := m[1], m[2]
	gatehouse(t, witnessHome, "witness", "add-log", origin, logKey)
	gatehouse(t, logHome, "witnesses", "add", "w1", url, wkey)

	cs := connect(t, logHome, "echo", nil)
	call := func() {
		t.Helper()
		if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "echo", Arguments: map[string]any{"message": "hi"}}); err != nil {
			t.Fatal(err)
		}
	}
	last := int64(0)
	for i := range 3 {
		call()
		waitFor(t, func() bool { n, _ := cosigned(t, logHome); return n > last }, "the witness to cosign a larger checkpoint")
		last, _ = cosigned(t, logHome)
		if i == 1 {
			// The witness restarts, and remembers what it cosigned.
			stop()
			url2, _, stop2 := startWitness(t, witnessHome)
			t.Cleanup(stop2)
			if !strings.Contains(gatehouse(t, witnessHome, "witness", "logs"), origin+"  "+strconv.FormatInt(last, 10)+" entries") {
				t.Fatalf("after a restart the witness lost its state:\n%s", gatehouse(t, witnessHome, "witness", "logs"))
			}
			gatehouse(t, logHome, "witnesses", "remove", "w1")
			gatehouse(t, logHome, "witnesses", "add", "w1", url2, wkey)
			url = url2
			cs.Close()
			cs = connect(t, logHome, "echo", nil)
		}
	}
	if last < 5 {
		t.Errorf("the witness cosigned %d entries, want the log's 5 or more", last)
	}

	// A fork, signed with the log's own key: the same size with another
	// tree hash is refused with 409, a larger tree that does not extend
	// the one cosigned with 422; neither is cosigned.
	c := &cli{home: logHome, stderr: io.Discard}
	st, _, err := c.openLog(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	key, err := vaultFor(st).SigningKey()
	st.Close()
	if err != nil {
		t.Fatal(err)
	}
	forged := func(size int64) []byte {
		h := sha256.Sum256([]byte("a rewritten log"))
		b, err := entry.SignCheckpoint(entry.Checkpoint{Log: strings.TrimPrefix(origin, "gatehouse/log/"), Size: size, Hash: h}, key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		req  witness.AddCheckpoint
		want int
	}{
		{witness.AddCheckpoint{Old: last, Checkpoint: forged(last)}, http.StatusConflict},
		{witness.AddCheckpoint{Old: last, Proof: make([]tlog.Hash, 3), Checkpoint: forged(last + 3)}, http.StatusUnprocessableEntity},
	} {
		resp, err := http.Post(url+"/add-checkpoint", "text/plain", strings.NewReader(string(tc.req.Format())))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("a forked checkpoint of %s: %d %s, want %d", strings.Split(string(tc.req.Checkpoint), "\n")[1], resp.StatusCode, body, tc.want)
		}
	}
	if out := gatehouse(t, witnessHome, "witness", "logs"); !regexp.MustCompile(` 2 +gatehouse-`).MatchString(out) {
		t.Errorf("gatehouse witness logs does not count the 2 refused forks:\n%s", out)
	}

	// The export asks the witness, and carries its cosignature.
	bundle := filepath.Join(t.TempDir(), "bundle")
	cmd := exec.Command(gatehouseBin, "--home", logHome, "export", "--out", bundle)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "witness witness.test/w1 cosigned the checkpoint") {
		t.Fatalf("export: %v\n%s", err, out)
	}
	other := entry.WitnessKey{Name: "witness.test/w2", Key: ed25519.NewKeyFromSeed(make([]byte, 32)).Public().(ed25519.PublicKey)}
	if out := gatehouse(t, logHome, "verify", "--witness", wkey, bundle); !strings.Contains(out, "assurance: signed by the log, witnessed by 1 of the 1 witness named") {
		t.Errorf("verify --witness:\n%s", out)
	}
	vcmd := exec.Command(gatehouseBin, "verify", "--witness", wkey, "--witness", other.String(), "--witnesses-required", "2", bundle)
	vout, err := vcmd.CombinedOutput()
	if err == nil || !strings.Contains(string(vout), "witnessed by 1 of the 2 witnesses named; 2 required") {
		t.Errorf("verify with 2 required and 1 cosignature: %v\n%s", err, vout)
	}
}
