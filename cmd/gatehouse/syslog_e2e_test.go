package main

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts/stream"
)

// rsyslogd returns the path of Debian's rsyslogd. Where it is missing it
// fails as root (who can install it, as CI's .ci/deps.sh test does) and
// skips otherwise, saying how to install it.
func rsyslogd(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"rsyslogd", "/usr/sbin/rsyslogd"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Geteuid() == 0 {
		t.Fatal("rsyslogd is missing\nhint: .ci/deps.sh test installs it (apt-get install rsyslog)")
	}
	t.Skip("rsyslogd is missing and this user cannot install it\nhint: as root: apt-get install rsyslog   (or .ci/deps.sh test as root)")
	return ""
}

// startRsyslog runs rsyslogd in the foreground with a private
// configuration: a TCP input on addr, each message written as it came
// (RFC 5424, without its octet count) as a line of out. It keeps its pid
// file and work folder in dir and runs as the test's user.
func startRsyslog(t *testing.T, dir, addr, out string) {
	t.Helper()
	bin := rsyslogd(t)
	host, port, _ := strings.Cut(addr, ":")
	work := filepath.Join(dir, "work")
	if err := os.MkdirAll(work, 0o700); err != nil {
		t.Fatal(err)
	}
	conf := fmt.Sprintf(`global(workDirectory=%q)
module(load="imtcp")
template(name="raw" type="string" string="%%rawmsg%%\n")
ruleset(name="gatehouse") {
  action(type="omfile" file=%q template="raw")
}
input(type="imtcp" address=%q port=%q ruleset="gatehouse")
`, work, out, host, port)
	cfg := filepath.Join(dir, "rsyslog.conf")
	if err := os.WriteFile(cfg, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	check := exec.Command(bin, "-N1", "-f", cfg)
	if b, err := check.CombinedOutput(); err != nil {
		t.Fatalf("rsyslogd -N1 refuses the configuration: %v\n%s", err, b)
	}
	cmd := exec.Command(bin, "-n", "-f", cfg, "-i", filepath.Join(dir, "rsyslogd.pid"))
	log := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM) // in the foreground it ignores SIGINT
		<-done
	})
	listening(t, addr, done, log)
}

// listening waits until something accepts connections on addr, or fails
// the test when done closes first (the process exited) or after 30 s.
func listening(t *testing.T, addr string, done <-chan struct{}, log fmt.Stringer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return
		}
		select {
		case <-done:
			t.Fatalf("it exited before listening on %s:\n%s", addr, log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("nothing listens on %s after 30 s:\n%s", addr, log)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rfc5424 is a message of ours: PRI, version 1, timestamp, host, app
// name, procid, MSGID (the kind), our structured data, a BOM and the
// summary.
var rfc5424 = regexp.MustCompile(`^<(\d{1,3})>1 (\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z) (\S+) gatehouse (\d+) (receipt|outcome) \[` +
	regexp.QuoteMeta(stream.SyslogSDID) + `((?: [a-z_]+="(?:[^"\\\]]|\\["\\\]])*")*)\] \x{feff}(.+)$`)

var sdParam = regexp.MustCompile(`([a-z_]+)="((?:[^"\\\]]|\\["\\\]])*)"`)

// parseSyslog reads the lines rsyslog wrote: each record by its entry,
// and the lines that are not RFC 5424 messages of ours.
func parseSyslog(t *testing.T, file string) (got map[string]exported, bad []string, count int) {
	t.Helper()
	got = map[string]exported{}
	b, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return got, nil, 0
	}
	if err != nil {
		t.Fatal(err)
	}
	unescape := strings.NewReplacer(`\"`, `"`, `\\`, `\`, `\]`, `]`)
	for l := range strings.Lines(string(b)) {
		l = strings.TrimSuffix(l, "\n")
		m := rfc5424.FindStringSubmatch(l)
		if m == nil {
			bad = append(bad, l)
			continue
		}
		params := map[string]string{}
		for _, p := range sdParam.FindAllStringSubmatch(m[6], -1) {
			params[p[1]] = unescape.Replace(p[2])
		}
		if pri := m[1]; pri != "110" && pri != "109" && pri != "108" { // log audit (13), informational, notice, warning
			bad = append(bad, l)
			continue
		}
		got[params["entry"]] = exported{Kind: m[5], Receipt: params["receipt"], LeafHash: params["leaf_hash"]}
		count++
	}
	return got, bad, count
}

// Debian's rsyslog, listening on TCP, gets every receipt and outcome of an
// agent's MCP session through gatehouse serve --export-syslog, each an
// RFC 5424 message with the entry's id, leaf hash and receipt.
func TestRsyslogGetsEveryRecord(t *testing.T) {
	t.Parallel()
	rsyslogd(t)
	nm := npmPeers(t)
	home := t.TempDir()
	gatehouse(t, home, append([]string{"server", "add", "everything", "--"}, serverCmd(nm, "server-everything")...)...)
	allow(t, home, "mcp.everything.echo")
	denyRule(t, home, "mcp.everything.get-sum")
	token := strings.TrimSpace(gatehouse(t, home, "serve", "token", "add", "agent"))

	dir := t.TempDir()
	addr := freeAddr(t)
	out := filepath.Join(dir, "messages")
	startRsyslog(t, dir, addr, out)
	srv := startServed(t, home, "--export-syslog", "tcp://"+addr)
	cs := connectHTTP(t, srv.URL+"/mcp/everything", token)
	callTools(t, cs, "syslog", 3)
	cs.Close()
	want := evidenceOf(t, home, 3*2+1)
	var got map[string]exported
	var bad []string
	var n int
	waitUntil(t, 60*time.Second, "every record at rsyslog", func() bool {
		got, bad, n = parseSyslog(t, out)
		return containsAll(got, want)
	})
	if len(bad) > 0 {
		t.Errorf("rsyslog wrote lines that are not RFC 5424 messages of ours:\n%s", strings.Join(bad, "\n"))
	}
	t.Logf("%d receipts and outcomes, %d messages received", len(want), n)
}
