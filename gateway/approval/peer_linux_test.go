package approval

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// A read whose deadline passes before the approver wrote anything is a
// timeout, which Ask's wait loop waits on: not an answer without
// credentials. Taking it for one turned every approval not answered within
// the wait into "no approver is running" instead of pending.
func TestCredentialedReadTimesOut(t *testing.T) {
	dir, err := os.MkdirTemp("", "appr-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	d := net.Dialer{Control: passCredentials}
	nc, err := d.DialContext(context.Background(), "unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	peer := <-accepted
	defer peer.Close()
	checked := 0
	cc, err := withCredentials(nc.(*net.UnixConn), func(pid int32, uid uint32) error { checked++; return nil })
	if err != nil {
		t.Fatal(err)
	}
	cc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	buf := make([]byte, 64)
	if n, err := cc.Read(buf); n != 0 || !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("Read past its deadline = %d, %v; want 0, a timeout", n, err)
	}
	// The answer that comes after it is read, with its writer checked.
	peer.Write([]byte("answer\n"))
	cc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := cc.Read(buf); err != nil || string(buf[:n]) != "answer\n" || checked != 1 {
		t.Fatalf("Read = %q, %v (writer checked %d times); want the answer, checked once", buf[:n], err, checked)
	}
}
