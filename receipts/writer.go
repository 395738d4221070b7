package receipts

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// # Shared commits
//
// Every proxy appends to the one log of its home folder. Committing is one
// fsync, and SQLite lets one process write at a time: with each process
// committing its own receipts, eight busy proxies took turns, and a call
// waited for the other seven's commits. With [Log.ShareCommits], the
// processes of a home share them instead: one of them, the home's writer,
// commits the receipts and outcomes of all, a batch per transaction.
//
//   - Election: the writer is the process that holds the lock of
//     writer.lock in the home folder. A process that has appends to commit
//     and finds no writer takes the lock, and serves writer.sock, a Unix
//     socket in the home folder (mode 0600 in a folder of mode 0700; on
//     Linux the writer also refuses a peer of another user, SO_PEERCRED).
//     The kernel lets go of the lock when the writer dies, and the next
//     process with appends takes over.
//   - A client sends its drafts (data only: the receipt's or outcome's
//     body, its payloads with their salts, its search columns) and waits.
//     The writer queues them with its own in its committer, signs each
//     with the log's key when it commits, and answers each with its signed
//     entry once the transaction has committed (synchronous=FULL): an
//     answer MUST NOT come before the entry is durable, and a receipt's
//     call runs only on that answer.
//   - A writer that dies (kill -9) closes its connections: every draft of
//     a client still waiting fails ([ErrWriterGone]), and the gate refuses
//     those calls, closed. They may or may not have been committed; none
//     of them ran. The next append elects a new writer. Drafts whose write
//     to the socket failed before a byte of them went cannot have reached
//     the writer: they are committed elsewhere, as the next append is.
//   - The log never forks whoever commits: every append, the writer's or a
//     process's own, is one IMMEDIATE transaction that reads the log's
//     size in it (log.go). So a process that cannot reach a writer (the
//     socket not served yet, a path too long for a socket, Windows, where
//     the standard library has no Unix socket listener it can secure)
//     commits its own appends, as every process did before.
//
// Appends that carry more than data (key rotations, erasures, the
// indexer's transactions) are committed by the process that makes them,
// under the same write lock.

// ErrWriterGone is the error of an append that was sent to the home's
// writer when that writer exited before it answered: the append may or may
// not be in the log, and its call MUST NOT run.
var ErrWriterGone = errors.New("the evidence log's writer exited before it acknowledged the append")

const (
	writerLockFile = "writer.lock"
	writerSocket   = "writer.sock"
)

// wireDraft is a draft on the socket.
type wireDraft struct {
	ID       uint64          `json:"id"`
	Kind     entry.Kind      `json:"kind"`
	Prefix   string          `json:"prefix"`
	Body     json.RawMessage `json:"body"`
	Columns  wireColumns     `json:"columns"`
	Payloads []wirePayload   `json:"payloads,omitempty"`
	Urgent   bool            `json:"urgent"`
}

type wireColumns struct {
	Server, Tool, Decision, Status, Client, Receipt string
}

type wirePayload struct {
	Part       string         `json:"part"`
	Salt       []byte         `json:"salt"`
	Data       []byte         `json:"data"`
	Commitment string         `json:"commitment"`
	NotKept    *entry.NotKept `json:"not_kept,omitempty"`
}

// wireAnswer is the writer's answer to one draft: the signed entry, or
// why it was not appended.
type wireAnswer struct {
	ID    uint64 `json:"id"`
	Entry []byte `json:"entry,omitempty"`
	Err   string `json:"err,omitempty"`
	// Closing, the writer's last word when it stops sharing: it has
	// answered every draft it read, and read no other. The client commits
	// the drafts it has no answer for elsewhere.
	Closing bool `json:"closing,omitempty"`
}

func toWire(d draft, urgent bool) (wireDraft, error) {
	body, err := json.Marshal(d.body)
	if err != nil {
		return wireDraft{}, err
	}
	w := wireDraft{Kind: d.kind, Prefix: d.prefix, Body: body, Urgent: urgent,
		Columns: wireColumns{d.index.server, d.index.tool, d.index.decision, d.index.status, d.index.client, d.index.receipt}}
	for _, p := range d.payloads {
		w.Payloads = append(w.Payloads, wirePayload{p.part, p.salt, p.data, p.commitment, p.notKept})
	}
	return w, nil
}

// travels reports whether an entry of kind k is committed by the home's
// writer for the process that makes it: receipts and outcomes, the entries
// calls wait for. Others (pins, policy versions) are committed where they
// are made, under the same write lock.
func travels(k entry.Kind) bool {
	return k == entry.KindReceipt || k == entry.KindOutcome
}

// fromWire checks a draft a client sent: only receipts and outcomes
// travel, each with the payload parts its kind has.
func fromWire(w wireDraft) (draft, error) {
	if !travels(w.Kind) {
		return draft{}, fmt.Errorf("a %s is not appended for another process", w.Kind)
	}
	if !json.Valid(w.Body) || len(w.Payloads) > 1 {
		return draft{}, errors.New("malformed draft")
	}
	c := w.Columns
	d := draft{kind: w.Kind, prefix: w.Prefix, body: w.Body,
		index: columns{c.Server, c.Tool, c.Decision, c.Status, c.Client, c.Receipt}}
	for _, p := range w.Payloads {
		d.payloads = append(d.payloads, payload{part: p.Part, salt: p.Salt, data: p.Data, commitment: p.Commitment, notKept: p.NotKept})
	}
	return d, nil
}

// shared is a Log's part in the home's shared commits.
type shared struct {
	l    *Log
	dir  string
	stop context.Context // ends with the Log's sharing

	mu     sync.Mutex
	lock   *os.File     // the writer's lock, while this process is the writer; guarded by mu
	ln     net.Listener // guarded by mu
	client *writerConn  // the connection to the writer, when another process is; guarded by mu
	serves sync.WaitGroup
}

// ShareCommits makes l commit its receipts and outcomes together with the
// other processes of its home folder that share theirs ([# Shared
// commits]): through the home's writer, or as it. It returns the function
// that ends the sharing: a writer stops taking drafts, answers those it
// has, and lets another process take over. Without a home folder (a
// database opened alone) it does nothing.
func (l *Log) ShareCommits() (stop func()) {
	if l.home == "" || !socketsSupported {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &shared{l: l, dir: l.home, stop: ctx}
	l.commits.mu.Lock()
	l.commits.shared = s
	l.commits.mu.Unlock()
	return func() {
		l.commits.mu.Lock()
		l.commits.shared = nil
		l.commits.mu.Unlock()
		cancel()
		s.mu.Lock()
		if s.ln != nil {
			s.closeListener()
		}
		if s.client != nil {
			s.client.nc.Close()
		}
		s.mu.Unlock()
		s.serves.Wait()
		s.mu.Lock()
		if s.lock != nil {
			s.lock.Close()
			s.lock = nil
		}
		s.mu.Unlock()
	}
}

// forward sends batch to the home's writer and waits for its answers. It
// returns false, having touched nothing, when this process is to commit
// batch itself: it is the writer (it became it, if there was none), or no
// writer can be reached.
func (s *shared) forward(batch []*job) bool {
	s.mu.Lock()
	if s.lock != nil {
		s.mu.Unlock()
		return false
	}
	c := s.client
	if c == nil || c.dead() {
		s.client = nil
		if f, err := filelock.TryLock(filepath.Join(s.dir, writerLockFile)); err == nil {
			s.lock = f
			s.serve()
			s.mu.Unlock()
			return false
		}
		nc, err := dialWriter(filepath.Join(s.dir, writerSocket))
		if err != nil {
			s.mu.Unlock()
			return false // a writer starting, or none that can serve: commit here
		}
		c = newWriterConn(nc, s.l.appended, s.l.commits.push)
		s.client = c
	}
	s.mu.Unlock()
	c.send(batch)
	return true
}

// serve makes this process the home's writer: it listens on the socket
// and queues what clients send in its committer. s.mu is held.
func (s *shared) serve() {
	path := filepath.Join(s.dir, writerSocket)
	os.Remove(path) // a socket the last writer left; we hold the lock
	ln, err := listenWriter(path)
	if err != nil {
		return // commits here, for this process alone
	}
	s.ln = ln
	s.serves.Go(func() {
		defer ln.Close()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return // closed, or the deadline closeListener set
			}
			if err := checkPeer(nc); err != nil {
				nc.Close()
				continue
			}
			s.serves.Go(func() { s.serveConn(nc) })
		}
	})
}

// closeListener stops taking connections without resetting any that
// reached the socket: its name goes first, so that no client can connect
// any more, then the connections already queued are accepted (and told
// that the writer is closing, serveConn) until none is left. Closing the
// listener with connections queued would reset them, drafts sent and
// unread, and their calls would fail as if the writer had died. s.mu is
// held.
func (s *shared) closeListener() {
	ul, ok := s.ln.(*net.UnixListener)
	if !ok {
		s.ln.Close()
		return
	}
	os.Remove(filepath.Join(s.dir, writerSocket))
	ul.SetDeadline(time.Now().Add(50 * time.Millisecond)) // the accept loop closes it then
}

// serveConn reads a client's drafts, queues each in the committer, and
// answers each once it is committed.
func (s *shared) serveConn(nc net.Conn) {
	defer nc.Close()
	go func() {
		<-s.stop.Done()
		nc.SetReadDeadline(time.Now()) // stop reading; answer what is queued
	}()
	var wmu sync.Mutex
	enc := json.NewEncoder(nc)
	answer := func(a wireAnswer) {
		wmu.Lock()
		enc.Encode(a)
		wmu.Unlock()
	}
	var pending sync.WaitGroup
	dec := json.NewDecoder(bufio.NewReader(nc))
	for {
		var w wireDraft
		if err := dec.Decode(&w); err != nil {
			pending.Wait()
			if s.stop.Err() != nil {
				answer(wireAnswer{Closing: true})
				// Closing with drafts unread would reset the connection and
				// lose the answers on their way: the client closes first.
				if uc, ok := nc.(*net.UnixConn); ok {
					uc.CloseWrite()
				}
				nc.SetReadDeadline(time.Now().Add(time.Second))
				io.Copy(io.Discard, nc)
			}
			return
		}
		d, err := fromWire(w)
		if err != nil {
			answer(wireAnswer{ID: w.ID, Err: err.Error()})
			continue
		}
		j := s.l.commits.enqueue(d, w.Urgent, true)
		pending.Go(func() {
			<-j.done
			if j.err != nil {
				answer(wireAnswer{ID: w.ID, Err: j.err.Error()})
				return
			}
			answer(wireAnswer{ID: w.ID, Entry: j.data})
		})
	}
}

// writerConn is a client's connection to the home's writer.
type writerConn struct {
	nc       net.Conn
	onAppend func()       // Log.OnAppend's, after each entry committed
	requeue  func(j *job) // commits j elsewhere, when the writer stopped before reading it

	mu      sync.Mutex
	next    uint64                     // guarded by mu
	pending map[uint64]*job            // guarded by mu
	sent    map[uint64]json.RawMessage // the bodies sent, canonical, by id; guarded by mu
	closed  bool                       // guarded by mu
}

func newWriterConn(nc net.Conn, onAppend func(), requeue func(*job)) *writerConn {
	c := &writerConn{nc: nc, onAppend: onAppend, requeue: requeue, pending: map[uint64]*job{}, sent: map[uint64]json.RawMessage{}}
	go c.read()
	return c
}

func (c *writerConn) dead() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closed
}

// send sends the jobs of batch; each is done when its answer comes, or
// failed with ErrWriterGone when the connection ends first. When not a
// byte of batch reached the writer (it had died before: the write fails
// at once), none of it can be in the log, and the jobs are committed
// elsewhere (requeue), as when a writer hands back drafts it never read.
func (c *writerConn) send(batch []*job) {
	c.mu.Lock()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	var ids []uint64
	for _, j := range batch {
		w, err := toWire(j.d, j.urgent)
		if err != nil {
			j.fail(err)
			continue
		}
		if c.closed {
			j.fail(ErrWriterGone)
			continue
		}
		// The entry's body will be the canonical form of the one sent.
		canon, err := jcs.Transform(w.Body)
		if err != nil {
			j.fail(err)
			continue
		}
		c.next++
		w.ID = c.next
		c.pending[w.ID] = j
		c.sent[w.ID] = canon
		ids = append(ids, w.ID)
		enc.Encode(w)
	}
	if buf.Len() == 0 {
		c.mu.Unlock()
		return
	}
	n, err := c.nc.Write(buf.Bytes())
	if err == nil {
		c.mu.Unlock()
		return
	}
	var unsent []*job
	if n == 0 && c.requeue != nil {
		for _, id := range ids {
			unsent = append(unsent, c.pending[id])
			delete(c.pending, id)
			delete(c.sent, id)
		}
	}
	c.closed = true
	c.mu.Unlock()
	c.nc.Close() // read fails the jobs still pending
	for _, j := range unsent {
		c.requeue(j)
	}
}

func (c *writerConn) read() {
	dec := json.NewDecoder(bufio.NewReader(c.nc))
	for {
		var a wireAnswer
		err := dec.Decode(&a)
		c.mu.Lock()
		if err == nil && a.Closing && c.requeue != nil {
			// None of the drafts still pending was read: none is in the
			// log, and each can go to the next writer, or be committed here.
			c.closed = true
			jobs := c.pending
			c.pending, c.sent = map[uint64]*job{}, map[uint64]json.RawMessage{}
			c.mu.Unlock()
			c.nc.Close()
			for _, j := range jobs {
				c.requeue(j)
			}
			return
		}
		if err != nil {
			c.closed = true
			for id, j := range c.pending {
				delete(c.pending, id)
				j.fail(fmt.Errorf("%w: %v", ErrWriterGone, errors.Join(err, io.ErrUnexpectedEOF)))
			}
			c.mu.Unlock()
			c.nc.Close()
			return
		}
		j := c.pending[a.ID]
		body := c.sent[a.ID]
		delete(c.pending, a.ID)
		delete(c.sent, a.ID)
		c.mu.Unlock()
		if j == nil {
			continue
		}
		if a.Err != "" {
			j.fail(fmt.Errorf("the evidence log's writer: %s", a.Err))
			continue
		}
		// The writer is this user's own process (checkPeer): its entry is
		// read as the log stores it, and checked to be the one sent.
		e := new(entry.Entry)
		err = json.Unmarshal(a.Entry, e)
		if err == nil && (e.Kind != j.d.kind || !bytes.Equal(e.Body, body) || e.ID == "" || e.Sig == "") {
			err = errors.New("the writer's entry is not the one sent")
		}
		if err != nil {
			j.fail(fmt.Errorf("the evidence log's writer: %w", err))
			continue
		}
		j.e = e
		close(j.done)
		if c.onAppend != nil {
			c.onAppend()
		}
	}
}
