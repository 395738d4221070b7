package approval

import (
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"
)

// An answer counts only when the process that wrote it passes the approver
// check, not merely the one that listened: a listener that hands its
// connection to another process (and then runs a Gatehouse program, so
// that the check at connect time passes) has that process's answers
// refused.
func TestAnswerWrittenByAnotherProcessIsRefused(t *testing.T) {
	path := socketPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dial := func() (*approverConn, net.Conn) {
		t.Helper()
		d := net.Dialer{Timeout: dialTimeout, Control: passCredentials}
		nc, err := d.Dial("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { nc.Close() })
		server, err := ln.Accept()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { server.Close() })
		// Only this process is the approver.
		ac, err := withCredentials(nc.(*net.UnixConn), func(pid int32, uid uint32) error {
			if int(pid) != os.Getpid() {
				return errors.New("not the approver's process")
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		ac.SetReadDeadline(time.Now().Add(10 * time.Second))
		return ac, server
	}

	// The listener's own process answers: read.
	ac, server := dial()
	if _, err := server.Write([]byte(`{"v":2,"type":"pending","id":"x","approver":"app"}` + "\n")); err != nil {
		t.Fatal(err)
	}
	if line, err := newLineReader(ac, maxReply).next(); err != nil || len(line) == 0 {
		t.Fatalf("the approver's own answer: %q, %v", line, err)
	}

	// Another process writes on the connection the listener accepted.
	ac, server = dial()
	f, err := server.(*net.UnixConn).File()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), "APPROVAL_TEST_HELPER=write-fd3", "APPROVAL_TEST_SOCKET="+path)
	cmd.ExtraFiles = []*os.File{f}
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the other process: %v: %s", err, out)
	}
	f.Close()
	line, err := newLineReader(ac, maxReply).next()
	if !errors.Is(err, errForgedAnswer) {
		t.Errorf("an answer another process wrote = %q, %v; want it refused (errForgedAnswer)", line, err)
	}
}

// A read whose deadline passes before the approver writes (the proxy reads
// with deadlines to report progress while a person decides) is a timeout,
// not an answer without credentials: the wait goes on.
func TestCredentialedReadTimesOut(t *testing.T) {
	path := socketPath(t)
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	d := net.Dialer{Timeout: dialTimeout, Control: passCredentials}
	nc, err := d.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	server, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer server.Close()
	ac, err := withCredentials(nc.(*net.UnixConn), func(int32, uint32) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	lr := newLineReader(ac, maxReply)
	ac.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
	if _, err := lr.next(); !isTimeout(err) {
		t.Fatalf("a read past its deadline = %v, want a timeout", err)
	}
	server.Write([]byte(`{"v":2,"type":"pending","id":"x","approver":"app"}` + "\n"))
	ac.SetReadDeadline(time.Now().Add(10 * time.Second))
	if line, err := lr.next(); err != nil || len(line) == 0 {
		t.Fatalf("the answer after a timeout = %q, %v", line, err)
	}
}
