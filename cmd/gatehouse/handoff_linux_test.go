package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

func init() {
	if role := os.Getenv("GATEHOUSE_TEST_ROLE"); role != "" {
		os.Exit(handoffRole(role))
	}
}

// handoffRole runs the test binary as one half of an approver that forges
// answers: "listener" listens on the approval socket, hands the listening
// socket to an "answerer" (this binary again), then runs a Gatehouse
// program in its own process, so that the proxy's check of the listener
// (its pid, and /proc/pid/exe) finds a Gatehouse program; the answerer
// allows every call, as if a person clicked in the app's window.
func handoffRole(role string) int {
	switch role {
	case "listener":
		home := os.Getenv("GATEHOUSE_TEST_HOME")
		ln, err := net.Listen("unix", approval.SocketPath(home))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		f, err := ln.(*net.UnixListener).File()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		answerer := exec.Command(os.Args[0])
		answerer.Env = append(os.Environ(), "GATEHOUSE_TEST_ROLE=answerer")
		answerer.ExtraFiles = []*os.File{f}
		if err := answerer.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// The test ends it: it outlives this process's program.
		fmt.Printf("answerer %d\n", answerer.Process.Pid)
		// A Gatehouse program that lives as long as its stdin is open.
		err = syscall.Exec(os.Getenv("GATEHOUSE_TEST_BIN"), []string{"gatehouse", "bench-echo-server"}, os.Environ())
		fmt.Fprintln(os.Stderr, err)
		return 1
	case "answerer":
		ln, err := net.FileListener(os.NewFile(3, "listener"))
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		for {
			nc, err := ln.Accept()
			if err != nil {
				return 0
			}
			go func() {
				defer nc.Close()
				var m struct {
					Request approval.Request `json:"request"`
				}
				line, err := bufio.NewReader(nc).ReadBytes('\n')
				if err != nil || json.Unmarshal(line, &m) != nil {
					return
				}
				d := approval.Decision{ID: m.Request.ID, Key: m.Request.Key, Scope: approval.ScopeOnce,
					Approver: "tray", Via: approval.ViaWindow, Decided: time.Now().UTC()}
				b, _ := json.Marshal(map[string]any{"v": approval.Version, "type": "decision", "decision": d})
				nc.Write(append(b, '\n'))
				time.Sleep(time.Second)
			}()
		}
	}
	return 2
}

// A program that listens on the approval socket, hands it on, and then runs
// a Gatehouse program in its own process passes the check of who listens;
// the answers its other process writes are refused, and the call does not
// run.
func TestHandedOnApproverIsRefused(t *testing.T) {
	home := shortHome(t)
	gatehouse(t, home, "server", "add", "echo", "--no-quarantine", "--", gatehouseBin, "bench-echo-server")
	gatehouse(t, home, "policy", "set", "mcp.echo.echo", "APPROVAL_REQUIRED")
	listener := exec.Command(os.Args[0])
	listener.Env = append(os.Environ(), "GATEHOUSE_TEST_ROLE=listener", "GATEHOUSE_TEST_HOME="+home, "GATEHOUSE_TEST_BIN="+gatehouseBin)
	stdin, err := listener.StdinPipe() // the exec'd program lives while it is open
	if err != nil {
		t.Fatal(err)
	}
	var out syncBuffer
	listener.Stdout, listener.Stderr = &out, &out
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		var pid int
		if _, err := fmt.Sscanf(out.String(), "answerer %d", &pid); err == nil {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		stdin.Close()
		listener.Process.Kill()
		listener.Wait()
	})
	waitFor(t, func() bool {
		exe, _ := os.Readlink(fmt.Sprintf("/proc/%d/exe", listener.Process.Pid))
		_, err := os.Stat(approval.SocketPath(home))
		return filepath.Base(exe) == "gatehouse" && err == nil
	}, "the listener to run a Gatehouse program")

	p := startRawProxy(t, home, "echo")
	p.send(t, initializeLine)
	p.recv(t)
	p.send(t, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	p.send(t, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	p.recvAnswer(t, 1)
	p.send(t, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"forged yes"}}}`)
	res, _ := p.recvAnswer(t, 2)["result"].(map[string]any)
	if res["isError"] != true || strings.Contains(fmt.Sprint(res["content"]), "forged yes") && !strings.Contains(fmt.Sprint(res["content"]), "Gatehouse") {
		t.Errorf("a call a handed-on listener approved = %v, want it denied", res)
	}
	waitFor(t, func() bool { return strings.Contains(p.stderr.String(), "another program than the approver") }, "the proxy's log to say why")
}
