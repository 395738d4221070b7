//go:build unix

package receipts

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

func appendOne(tb testing.TB, l *Log, marker string) *entry.Entry {
	tb.Helper()
	r, o := call(tb, l, "files", "read_file", entry.Allow, "cursor", `{"path":"/srv/`+marker+`.txt"}`, entry.Succeeded, `"ok"`)
	if o.Index <= r.Index {
		tb.Fatalf("outcome %d before its receipt %d", o.Index, r.Index)
	}
	return r
}

// Two logs of one home that share commits: the first to commit becomes
// the writer, and the other's receipts and outcomes are committed by it,
// each acknowledged with its signed entry.
func TestSharedCommits(t *testing.T) {
	home, seed := t.TempDir(), newSeed(t)
	w, _ := openShared(t, home, seed)
	defer w.ShareCommits()()
	appendOne(t, w, "first")
	c, _ := openShared(t, home, seed)
	defer c.ShareCommits()()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() { appendOne(t, c, fmt.Sprintf("client%d", i)) })
	}
	wg.Wait()
	if s := w.commits.shared; s == nil || s.lock == nil {
		t.Fatal("the first log to commit is not the home's writer")
	}
	if s := c.commits.shared; s == nil || s.client == nil {
		t.Fatal("the second log did not send its appends to the writer")
	}
	if n := verifyLog(t, w); n != 1+2+40 {
		t.Errorf("size %d, want 43", n)
	}
	if p := mustSearch(t, w, Query{Text: "client7"}); len(p.Hits) != 1 || p.Hits[0].Status != entry.Succeeded {
		t.Errorf("Search(client7) = %+v, want the receipt with its outcome's status", p.Hits)
	}
}

// A receipt with a write of its caller's (AppendReceiptWith) is committed
// by the process that makes it, write and all, even when another process
// is the home's writer.
func TestReceiptWithWriteStaysHere(t *testing.T) {
	ctx := context.Background()
	home, seed := t.TempDir(), newSeed(t)
	w, _ := openShared(t, home, seed)
	defer w.ShareCommits()()
	appendOne(t, w, "first")
	c, cst := openShared(t, home, seed)
	defer c.ShareCommits()()
	appendOne(t, c, "through-the-writer")
	if s := c.commits.shared; s == nil || s.client == nil {
		t.Fatal("the second log did not send its appends to the writer")
	}
	if _, err := cst.DB().ExecContext(ctx, `CREATE TABLE notes (n TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	r, err := c.AppendReceiptWith(ctx, sampleReceipt(), nil, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO notes (n) VALUES ('here')`)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := cst.DB().QueryRowContext(ctx, `SELECT count(*) FROM notes`).Scan(&n); err != nil || n != 1 {
		t.Errorf("notes after the receipt: %d (%v), want 1", n, err)
	}
	if size := verifyLog(t, w); size != r.Index+1 {
		t.Errorf("log size %d, want %d", size, r.Index+1)
	}
}

// A writer killed with kill -9: the next append elects a new writer (here
// the client itself), and nothing acknowledged is lost.
func TestWriterKilled(t *testing.T) {
	home, seed := t.TempDir(), newSeed(t)
	l, _ := openShared(t, home, seed)
	cmd := startRole(t, "sharer", home, seed, "w", 0)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || !strings.HasPrefix(line, "writer ") {
		t.Fatalf("sharer: %q, %v", line, err)
	}
	defer l.ShareCommits()()
	before := appendOne(t, l, "before")
	if l.commits.shared.client == nil {
		t.Fatal("the append did not go through the writer")
	}
	cmd.Process.Kill()
	cmd.Wait()
	after := appendOne(t, l, "after")
	if l.commits.shared.lock == nil {
		t.Error("the surviving log did not take over as the writer")
	}
	n := verifyLog(t, l)
	if n != 1+1+2+2 || after.Index <= before.Index {
		t.Errorf("size %d, indexes %d then %d: want 6 entries in order", n, before.Index, after.Index)
	}
}

// The drafts a client sent to a writer that dies before answering fail
// with ErrWriterGone: their calls must not run.
func TestWriterGoneFailsPending(t *testing.T) {
	a, b := net.Pipe()
	c := newWriterConn(a, nil, nil)
	go func() {
		bufio.NewReader(b).ReadString('\n') // the draft arrives; the writer dies
		b.Close()
	}()
	j := &job{d: draft{kind: entry.KindReceipt, prefix: "r", body: entry.Receipt{Server: "files"}}, urgent: true, done: make(chan struct{})}
	c.send([]*job{j})
	<-j.done
	if !errors.Is(j.err, ErrWriterGone) || j.e != nil {
		t.Fatalf("pending append = %v, %v; want ErrWriterGone", j.e, j.err)
	}
	j2 := &job{d: j.d, done: make(chan struct{})}
	c.send([]*job{j2})
	<-j2.done
	if !errors.Is(j2.err, ErrWriterGone) {
		t.Errorf("append on a dead connection = %v, want ErrWriterGone", j2.err)
	}
}

// A client takes the writer's answer only for the entry it sent: an entry
// with another body fails the append (its call does not run).
func TestWriterAnswerChecked(t *testing.T) {
	key := newKey(t)
	for _, tc := range []struct {
		name string
		body string // the body of the entry the writer answers with
		ok   bool
	}{
		{"same body, canonical", `{"decision":"ALLOW","server":"files"}`, true},
		{"another body", `{"decision":"ALLOW","server":"mail"}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := net.Pipe()
			c := newWriterConn(a, nil, nil)
			defer a.Close()
			go func() {
				line, _ := bufio.NewReader(b).ReadBytes('\n')
				var w wireDraft
				json.Unmarshal(line, &w)
				e := &entry.Entry{Log: "l", Index: 1, ID: "r-1", Kind: entry.KindReceipt, Time: "2025-06-30T12:00:00Z",
					Prev: entry.FormatTreeHash(entry.EmptyTreeHash), Body: json.RawMessage(tc.body)}
				data, _ := entry.Sign(e, key)
				json.NewEncoder(b).Encode(wireAnswer{ID: w.ID, Entry: data})
			}()
			// Sent as encoding/json writes it: members in the struct's order.
			j := &job{d: draft{kind: entry.KindReceipt, prefix: "r", body: struct {
				Server   string `json:"server"`
				Decision string `json:"decision"`
			}{"files", "ALLOW"}}, urgent: true, done: make(chan struct{})}
			c.send([]*job{j})
			<-j.done
			if ok := j.err == nil && j.e != nil && j.e.ID == "r-1"; ok != tc.ok {
				t.Errorf("append answered with body %s: %v, %v; want ok %v", tc.body, j.e, j.err, tc.ok)
			}
		})
	}
}
