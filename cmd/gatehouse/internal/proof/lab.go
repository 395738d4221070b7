package proof

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// A Lab is one temporary Gatehouse home, driven by the real gatehouse
// binary: servers are registered with `gatehouse server add`, rules set
// with `gatehouse policy set`, proxies run as `gatehouse proxy NAME`
// processes, the log is read with `gatehouse export` and `gatehouse
// verify`. Its servers are the adversary (`gatehouse adversary-server`),
// which records every call it runs in one file, Record.
type Lab struct {
	Bin    string // the gatehouse binary
	Dir    string // the lab's folder
	Home   string // the Gatehouse home in it
	Record string // the adversary's record of the calls it ran

	// NoAudit leaves out the audit after the case (Audit): for a case that
	// damages the log on purpose.
	NoAudit bool

	keychain *Keychain
	env      []string

	mu       sync.Mutex
	sessions []*Session // guarded by mu
	bundles  int        // guarded by mu
}

// NewLab makes a lab in a new folder under parent.
func NewLab(bin, parent string, kc *Keychain) (*Lab, error) {
	dir, err := os.MkdirTemp(parent, "lab-")
	if err != nil {
		return nil, err
	}
	l := &Lab{Bin: bin, Dir: dir, Home: filepath.Join(dir, "home"), Record: filepath.Join(dir, "record.jsonl"), keychain: kc}
	if err := os.Mkdir(l.Home, 0o700); err != nil {
		return nil, err
	}
	l.env = append(os.Environ(), kc.Env...)
	// The lab's processes log what they must; nothing of the user's
	// settings applies.
	l.env = append(l.env, "GATEHOUSE_HOME="+l.Home, "GATEHOUSE_LOG_LEVEL=info")
	return l, nil
}

// Close kills the lab's proxies that still run and removes the lab's items
// from the user's keychain (a private keychain goes as a whole). The
// folder stays; the runner removes it.
func (l *Lab) Close() {
	l.stopProxies()
	if !l.keychain.Private {
		if st, err := store.Open(context.Background(), l.Home, nil); err == nil {
			vault.New(&vault.Options{Service: st.KeychainService()}).Purge()
			st.Close()
		}
	}
}

// stopProxies ends the lab's proxies as their clients going away does,
// and kills those that do not exit.
func (l *Lab) stopProxies() {
	l.mu.Lock()
	sessions := l.sessions
	l.mu.Unlock()
	var wg sync.WaitGroup
	for _, s := range sessions {
		wg.Go(func() { s.Close() })
	}
	wg.Wait()
}

// Command returns the command line of the gatehouse binary with args, in
// the lab's environment.
func (l *Lab) Command(ctx context.Context, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, l.Bin, append([]string{"--home", l.Home}, args...)...)
	cmd.Env = l.env
	cmd.Dir = l.Dir
	return cmd
}

// Gatehouse runs the gatehouse binary with args (and stdin, when not
// empty) and returns its stdout and stderr; err is set when it exits
// non-zero.
func (l *Lab) Gatehouse(ctx context.Context, stdin string, args ...string) (stdout, stderr string, err error) {
	cmd := l.Command(ctx, args...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	if err != nil {
		err = fmt.Errorf("gatehouse %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(e.String()))
	}
	return o.String(), e.String(), err
}

// Must runs the gatehouse binary with args and fails on a non-zero exit.
func (l *Lab) Must(ctx context.Context, args ...string) error {
	_, _, err := l.Gatehouse(ctx, "", args...)
	return err
}

// AddServer registers the adversary as server name: `gatehouse server add
// name addFlags... -- gatehouse adversary-server --record RECORD
// serverFlags...`. stdin feeds --secret-env values.
//
// Unless addFlags hold --quarantine, the server is registered with
// --no-quarantine: a lab's cases test what their policy decides, and the
// containment family tests quarantine itself.
func (l *Lab) AddServer(ctx context.Context, name, stdin string, addFlags []string, serverFlags ...string) error {
	if !slices.Contains(addFlags, "--quarantine") {
		addFlags = append([]string{"--no-quarantine"}, addFlags...)
	}
	args := append([]string{"server", "add", name}, addFlags...)
	args = append(args, "--", l.Bin, adversary.Command, "--record", l.Record)
	args = append(args, serverFlags...)
	_, _, err := l.Gatehouse(ctx, stdin, args...)
	return err
}

// Policy sets a rule: `gatehouse policy set capability decision extra...`.
func (l *Lab) Policy(ctx context.Context, capability, decision string, extra ...string) error {
	return l.Must(ctx, append([]string{"policy", "set", capability, decision}, extra...)...)
}

// Proxy starts `gatehouse proxy name flags...`, as an MCP client does.
func (l *Lab) Proxy(ctx context.Context, name string, flags ...string) (*Session, error) {
	return l.ProxyEnv(ctx, name, nil, flags...)
}

// ProxyEnv is Proxy with env added to the proxy's environment.
func (l *Lab) ProxyEnv(ctx context.Context, name string, env []string, flags ...string) (*Session, error) {
	cmd := exec.Command(l.Bin, append([]string{"proxy", name, "--home", l.Home}, flags...)...)
	cmd.Env = append(append([]string(nil), l.env...), env...)
	cmd.Dir = l.Dir
	s, err := startSession(cmd)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.sessions = append(l.sessions, s)
	l.mu.Unlock()
	return s, nil
}

// Programs starts `gatehouse programs`, the governed programs MCP server,
// and completes the handshake as client "eval".
func (l *Lab) Programs(ctx context.Context, flags ...string) (*Session, error) {
	cmd := exec.Command(l.Bin, append([]string{"programs", "--home", l.Home}, flags...)...)
	cmd.Env = l.env
	cmd.Dir = l.Dir
	s, err := startSession(cmd)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	l.sessions = append(l.sessions, s)
	l.mu.Unlock()
	if err := s.Initialize(ctx, "eval"); err != nil {
		return nil, fmt.Errorf("connect to gatehouse programs: %w", err)
	}
	return s, nil
}

// Connect starts a proxy for server name and completes the handshake as
// client "eval".
func (l *Lab) Connect(ctx context.Context, name string, flags ...string) (*Session, error) {
	s, err := l.Proxy(ctx, name, flags...)
	if err != nil {
		return nil, err
	}
	if err := s.Initialize(ctx, "eval"); err != nil {
		return nil, fmt.Errorf("connect to server %s through the proxy: %w", name, err)
	}
	return s, nil
}

// Runs returns the calls the adversary ran, in every process of the lab.
func (l *Lab) Runs() ([]adversary.Run, error) { return adversary.ReadRecord(l.Record) }

// RanWith reports whether a call of tool ran whose arguments hold marker.
func (l *Lab) RanWith(tool, marker string) (bool, error) {
	runs, err := l.Runs()
	if err != nil {
		return false, err
	}
	for _, r := range runs {
		if r.Tool == tool && strings.Contains(string(r.Args), marker) {
			return true, nil
		}
	}
	return false, nil
}

// Evidence is an export of the lab's log, and what verifying it said.
type Evidence struct {
	Dir      string
	Report   verify.Report
	Verified bool   // gatehouse verify exited 0
	Output   string // gatehouse verify's stderr
	Entries  []Entry
	payloads map[string][]byte // entry id + "/" + part -> data
}

// An Entry is one entry of an exported log, with the members the
// evaluation reads.
type Entry struct {
	Index int64  `json:"index"`
	ID    string `json:"id"`
	Kind  string `json:"kind"`
	Key   string `json:"key"` // id of the key that signed it
	Body  struct {
		Capability string          `json:"capability"`
		Tool       string          `json:"tool"`
		Decision   string          `json:"decision"`
		Rule       string          `json:"rule"`
		Client     entry.Client    `json:"client"`
		Approver   *entry.Approver `json:"approver"`
		Receipt    string          `json:"receipt"`
		Status     string          `json:"status"`
		Redactions []entry.Finding `json:"redactions"`
		Observed   *entry.Observed `json:"observed"`
	} `json:"body"`
}

// Export writes a bundle of the whole log with `gatehouse export`, checks
// it with `gatehouse verify --json` (extra are verify's flags), and reads
// it.
func (l *Lab) Export(ctx context.Context, extra ...string) (*Evidence, error) {
	l.mu.Lock()
	l.bundles++
	dir := filepath.Join(l.Dir, fmt.Sprintf("bundle-%d", l.bundles))
	l.mu.Unlock()
	if err := l.Must(ctx, "export", "--out", dir); err != nil {
		return nil, err
	}
	ev, err := l.Verify(ctx, dir, extra...)
	if err != nil {
		return nil, err
	}
	if err := ev.read(); err != nil {
		return nil, err
	}
	return ev, nil
}

// Verify runs `gatehouse verify --json extra... dir`.
func (l *Lab) Verify(ctx context.Context, dir string, extra ...string) (*Evidence, error) {
	ev := &Evidence{Dir: dir}
	out, stderr, err := l.Gatehouse(ctx, "", append(append([]string{"verify", "--json"}, extra...), dir)...)
	var exit *exec.ExitError
	switch {
	case err == nil:
		ev.Verified = true
	case errors.As(err, &exit) && exit.ExitCode() == 1:
	default:
		return nil, err
	}
	ev.Output = stderr
	if jerr := json.Unmarshal([]byte(out), &ev.Report); jerr != nil {
		return nil, fmt.Errorf("gatehouse verify --json %s: %v (stdout %.300q, stderr %.300q)", dir, jerr, out, stderr)
	}
	return ev, nil
}

func (ev *Evidence) read() error {
	f, err := os.Open(filepath.Join(ev.Dir, verify.FileEntries))
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		var e Entry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return fmt.Errorf("read %s: %w", verify.FileEntries, err)
		}
		ev.Entries = append(ev.Entries, e)
	}
	if err := sc.Err(); err != nil {
		return err
	}
	ev.payloads = map[string][]byte{}
	data, err := os.ReadFile(filepath.Join(ev.Dir, verify.FilePayloads))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for line := range bytes.Lines(data) {
		var p struct {
			Entry string `json:"entry"`
			Part  string `json:"part"`
			Data  string `json:"data"`
		}
		if err := json.Unmarshal(line, &p); err != nil {
			return fmt.Errorf("read %s: %w", verify.FilePayloads, err)
		}
		b, _ := base64.StdEncoding.DecodeString(p.Data)
		ev.payloads[p.Entry+"/"+p.Part] = b
	}
	return nil
}

// Receipts returns the receipts for tool (every tool when empty).
func (ev *Evidence) Receipts(tool string) []Entry {
	var out []Entry
	for _, e := range ev.Entries {
		if e.Kind == "receipt" && (tool == "" || e.Body.Tool == tool) {
			out = append(out, e)
		}
	}
	return out
}

// Args returns the arguments a receipt recorded.
func (ev *Evidence) Args(receipt string) []byte { return ev.payloads[receipt+"/args"] }

// Outcome returns the outcome of a receipt, or nil.
func (ev *Evidence) Outcome(receipt string) *Entry {
	for i, e := range ev.Entries {
		if e.Kind == "outcome" && e.Body.Receipt == receipt {
			return &ev.Entries[i]
		}
	}
	return nil
}

// Failed returns the names of the checks that failed.
func (ev *Evidence) Failed() []string {
	var names []string
	for _, c := range ev.Report.Checks {
		if c.Status == verify.Failed {
			names = append(names, c.Name)
		}
	}
	return names
}

// Audit exports the lab's log and checks what must hold after any case:
// the bundle verifies, and every call the adversary ran has a receipt that
// allowed it, with the arguments it ran with (or, where the gate put a
// secret into them, a receipt for that tool).
func (l *Lab) Audit(ctx context.Context) error {
	ev, err := l.Export(ctx)
	if err != nil {
		return fmt.Errorf("export the log: %w", err)
	}
	if !ev.Verified {
		return fmt.Errorf("the log does not verify: %s failed", strings.Join(ev.Failed(), ", "))
	}
	runs, err := l.Runs()
	if err != nil {
		return err
	}
	return receiptsCover(ev, runs)
}

// receiptsCover checks that every run has its own ALLOW receipt.
func receiptsCover(ev *Evidence, runs []adversary.Run) error {
	type key struct{ tool, args string }
	free := map[key]int{}
	byTool := map[string]int{}
	for _, r := range ev.Receipts("") {
		if r.Body.Decision != "ALLOW" {
			continue
		}
		free[key{r.Body.Tool, canonical(ev.Args(r.ID))}]++
		byTool[r.Body.Tool]++
	}
	var loose []adversary.Run
	for _, run := range runs {
		k := key{run.Called, canonical(run.Args)}
		if free[k] > 0 {
			free[k]--
			byTool[run.Called]--
			continue
		}
		loose = append(loose, run)
	}
	// Arguments the gate changed (a vault:// reference resolved): a receipt
	// of the tool not matched otherwise.
	for _, run := range loose {
		if byTool[run.Called] > 0 {
			byTool[run.Called]--
			continue
		}
		return fmt.Errorf("the server ran %s(%.120s) (its call %d in process %d) and no receipt allowed it", run.Called, run.Args, run.Seq, run.PID)
	}
	return nil
}

// canonical re-encodes JSON with sorted keys, for comparison.
func canonical(b []byte) string {
	var v any
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	out, _ := json.Marshal(v)
	return string(out)
}

// writeJSON writes v to path as JSON.
func writeJSON(path string, v any) error {
	return os.WriteFile(path, []byte(mustJSON(v)), 0o600)
}

// waitPinned waits until n tools of the adversary are pinned: the gate
// pins the tools it is shown on a goroutine of its own.
func (l *Lab) waitPinned(ctx context.Context, n int) error {
	st, err := store.Open(ctx, l.Home, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		var got int
		if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM pins`).Scan(&got); err != nil {
			return err
		}
		if got >= n {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d tools pinned after 10s", got, n)
		}
	}
}

// RemoteServer starts the adversary on streamable HTTP, as a process of
// its own (a remote server is not the proxy's child), recording into the
// lab's record, and returns its URL. It stops when the case ends.
func (l *Lab) RemoteServer(ctx context.Context, t *T, serverFlags ...string) (string, error) {
	args := append([]string{adversary.Command, "--http", "127.0.0.1:0", "--record", l.Record}, serverFlags...)
	cmd := exec.Command(l.Bin, args...)
	cmd.Env = l.env
	out, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("the remote server printed no URL: %w", err)
	}
	return strings.TrimSpace(line), nil
}
