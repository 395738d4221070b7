package proof

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
	"github.com/gatehouse-dev/gatehouse/gateway/approval"
	"github.com/gatehouse-dev/gatehouse/internal/store"
)

// Faults runs the fault injection. After each fault the case's audit checks
// that the log verifies and that every call the server ran has its
// receipt; each case checks that the next call works, or fails saying
// Gatehouse refused it and why.
func Faults(ctx context.Context, cfg Config) (*Report, error) {
	return run(ctx, cfg, "gatehouse eval --faults", faultCases())
}

func faultCases() []Case {
	return []Case{
		{
			Family: FaultInjection, Name: "proxies killed with SIGKILL at random points",
			Claim: "across thousands of calls, proxies killed at random points leave no call run without its receipt, a log that verifies, and a next call that works",
			Run:   killProxies,
		},
		{
			Family: FaultInjection, Name: "the server crashes mid-call",
			Claim: "a server that dies mid-call leaves the call UNKNOWN, later calls refused saying why, and the next proxy working",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.crash", "ALLOW"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				// Calls in flight when it dies are answered too.
				s.Send(`{"jsonrpc":"2.0","id":"slow","method":"tools/call","params":{"name":"slow","arguments":{"ms":5000}}}`)
				res, err := s.CallTool(ctx, "crash", map[string]any{})
				if err != nil {
					return err
				}
				if err := refusal("the call the server died in", res, "exited"); err != nil {
					return err
				}
				if res, err = s.CallTool(ctx, "echo", map[string]any{"message": "after"}); err != nil {
					return err
				}
				if err := refusal("the next call", res, "exited", "reconnect"); err != nil {
					return err
				}
				return nextWorks(ctx, l)
			},
		},
		{
			Family: FaultInjection, Name: "the database locked by another process",
			Claim: "while another process holds the database locked, calls are refused saying why, none runs, and the next call works once it lets go",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": "before"}); err != nil || res.IsError {
					return fmt.Errorf("the call before the lock failed (%v): %s", err, res.Text)
				}
				if err := l.waitPinned(ctx, len(adversary.ToolNames())); err != nil {
					return err
				}
				release, err := lockDatabase(ctx, l.Home)
				if err != nil {
					return err
				}
				defer release()
				// The running proxy waits for the database up to its busy
				// timeout (10s), then refuses.
				start := time.Now()
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "while-locked"})
				if err != nil {
					return err
				}
				if err := refusal("a call while the database is locked", res, "did not run", "locked"); err != nil {
					return err
				}
				t.Note("the model was told, after %v: %s", time.Since(start).Round(100*time.Millisecond), clip(res.Text, 140))
				if d := time.Since(start); d > 25*time.Second {
					return fmt.Errorf("the proxy took %v to refuse a call while the database was locked, past what clients wait", d.Round(time.Second))
				}
				// A proxy started meanwhile cannot open the home: it answers
				// every request saying so.
				fresh, err := l.Proxy(ctx, serverName)
				if err != nil {
					return err
				}
				m, err := fresh.Request(ctx, "initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "eval", "version": "1"}})
				if err != nil {
					return err
				}
				if m.Error == nil || !strings.Contains(m.Error.Message, "Gatehouse") || !strings.Contains(m.Error.Message, "locked") {
					return fmt.Errorf("a proxy started while the database is locked answered initialize with %.300s, want an error saying why", m.Raw)
				}
				if res, err = fresh.CallTool(ctx, "echo", map[string]any{"message": "while-locked"}); err != nil {
					return err
				}
				if err := refusal("a call through a proxy started while the database is locked", res, "locked"); err != nil {
					return err
				}
				release()
				if err := notRun(l, "echo", "while-locked"); err != nil {
					return err
				}
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": "after"}); err != nil || res.IsError {
					return fmt.Errorf("the call after the lock was released failed (%v): %s", err, res.Text)
				}
				return nil
			},
		},
		{
			Family: FaultInjection, Name: "the disk full",
			Claim: "when the proxy cannot write (its file size limit makes every write fail as on a full disk), calls are refused saying why, none runs, and the next call works once it can",
			Run: func(ctx context.Context, t *T) error {
				l, s, err := t.stdSession(ctx)
				if err != nil {
					return err
				}
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": "before"}); err != nil || res.IsError {
					return fmt.Errorf("the call before the disk filled failed (%v): %s", err, res.Text)
				}
				restore, err := fillDisk(s.PID())
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "disk-full"})
				if rerr := restore(); rerr != nil && err == nil {
					err = rerr
				}
				if err != nil {
					return err
				}
				if err := refusal("a call on a full disk", res, "did not run"); err != nil {
					return err
				}
				t.Note("the model was told: %s", clip(res.Text, 160))
				if err := notRun(l, "echo", "disk-full"); err != nil {
					return err
				}
				res, err = s.CallTool(ctx, "echo", map[string]any{"message": "after"})
				if err != nil {
					return err
				}
				if res.IsError {
					// A proxy may not recover; then it must say so, and a
					// new one must work.
					if err := refusal("the call after the disk was freed", res); err != nil {
						return err
					}
					return nextWorks(ctx, l)
				}
				return nil
			},
		},
		{
			Family: FaultInjection, Name: "the keychain disappears",
			Claim: "when the keychain goes away, a running proxy refuses what needs it, a new one refuses every call saying why, nothing runs unrecorded, and all works once it is back",
			Run: func(ctx context.Context, t *T) error {
				if !t.Keychain().CanDisappear() {
					return fmt.Errorf("%w: needs the private keychain (Linux, with dbus-daemon and gnome-keyring-daemon)", ErrSkip)
				}
				// This case kills the run's keychain: it runs on one of its
				// own.
				kc, err := OpenKeychain(ctx)
				if err != nil {
					return err
				}
				t.Cleanup(kc.Close)
				l, err := NewLab(t.cfg.Gatehouse, t.dir, kc)
				if err != nil {
					return err
				}
				t.labs = append(t.labs, l)
				if err := l.AddServer(ctx, serverName, "", nil); err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.echo", "ALLOW", "--secret", "api-key"); err != nil {
					return err
				}
				if _, _, err := l.Gatehouse(ctx, "sk-keychain-0123456789\n", "secret", "set", "api-key"); err != nil {
					return err
				}
				running, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if res, err := running.CallTool(ctx, "echo", map[string]any{"message": "before"}); err != nil || res.IsError {
					return fmt.Errorf("the call before the keychain went failed (%v): %s", err, res.Text)
				}
				if err := kc.Kill(); err != nil {
					return err
				}
				// The running proxy signs with the key it holds; a call that
				// needs a secret from the keychain cannot be made.
				res, err := running.CallTool(ctx, "echo", map[string]any{"message": "vault://secret/api-key"})
				if err != nil {
					return err
				}
				if err := refusal("a call needing a secret while the keychain is gone", res, "did not run", "keychain"); err != nil {
					return err
				}
				fresh, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				res, err = fresh.CallTool(ctx, "echo", map[string]any{"message": "no-keychain"})
				if err != nil {
					return err
				}
				if err := refusal("a call through a proxy started without the keychain", res, "did not run", "keychain"); err != nil {
					return err
				}
				t.Note("the model was told: %s", clip(res.Text, 160))
				if err := notRun(l, "echo", "no-keychain"); err != nil {
					return err
				}
				if err := kc.Restart(ctx); err != nil {
					return err
				}
				return nextWorks(ctx, l)
			},
		},
		{
			Family: FaultInjection, Name: "the approver killed mid-approval",
			Claim: "an approver that dies while a call waits for it leaves the call denied, saying no approver is running",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				approver := l.Command(ctx, "approvals")
				approver.Stdin = strings.NewReader("") // never answers...
				r, w, _ := os.Pipe()
				approver.Stdin = r // ...and keeps its input open
				defer w.Close()
				if err := approver.Start(); err != nil {
					return err
				}
				defer func() { approver.Process.Kill(); approver.Wait() }()
				if err := waitForFile(ctx, approval.SocketPath(l.Home)); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				wait := s.Expect(`"waiting"`)
				s.Send(`{"jsonrpc":"2.0","id":"waiting","method":"tools/call","params":{"name":"write_file","arguments":{"path":"/eval/orphan","content":"x"}}}`)
				// Once the request is on the approver's screen, kill it.
				time.Sleep(300 * time.Millisecond)
				approver.Process.Signal(syscall.SIGKILL)
				m, err := wait(ctx)
				if err != nil {
					return err
				}
				if err := refusal("the call whose approver died", m.Tool(), "did not run"); err != nil {
					return err
				}
				if err := notRun(l, "write_file", "/eval/orphan"); err != nil {
					return err
				}
				return goesOn(ctx, s, "the approver's death")
			},
		},
	}
}

// clip cuts s to n runes.
func clip(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// nextWorks checks that a new proxy makes an allowed call.
func nextWorks(ctx context.Context, l *Lab) error {
	s, err := l.Connect(ctx, serverName)
	if err != nil {
		return fmt.Errorf("the next proxy: %w", err)
	}
	res, err := s.CallTool(ctx, "echo", map[string]any{"message": "next"})
	if err != nil {
		return fmt.Errorf("the next proxy: %w", err)
	}
	if res.IsError || res.Text != "next" {
		return fmt.Errorf("the next proxy's call failed: %q", res.Text)
	}
	return s.Close()
}

// killProxies runs the calls of the kill -9 fault: rounds of two proxies
// at once, each sent a burst of calls without waiting and killed at a
// random moment, until the calls are spent.
func killProxies(ctx context.Context, t *T) error {
	l, err := t.stdLab(ctx)
	if err != nil {
		return err
	}
	total := t.cfg.Calls
	if total <= 0 {
		total = 3000
	}
	seed := t.cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, 0))
	sent, kills := 0, 0
	for sent < total {
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for p := range 2 {
			n := min(10+rng.IntN(50), max(total-sent, 1))
			// The kill comes once a random number of the calls have been
			// answered (the others in flight: decided or not, recorded or
			// not, running or not), a moment later; one proxy in eight
			// is killed while it starts, answers or not.
			k := Kill{After: rng.IntN(n + 1), Extra: time.Duration(rng.IntN(2000)) * time.Microsecond}
			if rng.IntN(8) == 0 {
				k = Kill{After: -1, Extra: time.Duration(rng.IntN(30)) * time.Millisecond}
			}
			first := sent
			sent += n
			wg.Go(func() { errs[p] = killRound(ctx, l, first, n, k) })
			kills++
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}
	runs, err := l.Runs()
	if err != nil {
		return err
	}
	t.Note("%d calls sent to %d proxies, each killed with SIGKILL at a random point (seed %d); %d ran", sent, kills, seed, len(runs))
	if len(runs) == 0 {
		return errors.New("no call ran before its proxy was killed: the kills came too early to test anything")
	}
	return nextWorks(ctx, l)
}

// Kill says when killRound kills its proxy: once After of its calls have
// been answered (-1: at once, as it starts), and Extra later.
type Kill struct {
	After int
	Extra time.Duration
}

// killRound starts a proxy, sends it the handshake and n calls at once,
// and kills it when k says.
func killRound(ctx context.Context, l *Lab, first, n int, k Kill) error {
	s, err := l.Proxy(ctx, serverName)
	if err != nil {
		return err
	}
	answered := make(chan struct{}, n)
	for i := first; i < first+n; i++ {
		wait := s.Expect(fmt.Sprint(i))
		go func() {
			if _, err := wait(ctx); err == nil {
				answered <- struct{}{}
			}
		}()
	}
	var b strings.Builder
	b.WriteString(`{"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"eval","version":"1"}}}` + "\n")
	b.WriteString(`{"jsonrpc":"2.0","method":"notifications/initialized"}` + "\n")
	for i := first; i < first+n; i++ {
		tool, arg := "echo", "message"
		if i%7 == 3 {
			tool, arg = "delete_file", "path"
		}
		fmt.Fprintf(&b, `{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":{%q:"kill-%d"}}}`+"\n", i, tool, arg, i)
	}
	go s.Send(strings.TrimSuffix(b.String(), "\n")) // may fail once killed
	for range max(k.After, 0) {
		select {
		case <-answered:
		case <-s.Exited():
			return fmt.Errorf("a proxy exited by itself before it was killed:\n%s", tail(s.Stderr(), 1000))
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	select {
	case <-time.After(k.Extra):
	case <-ctx.Done():
	}
	s.Kill()
	return nil
}

// lockDatabase holds the home's database locked for writing, as another
// process in the middle of a long write transaction does: no other
// connection may write until release is called (once; later calls do
// nothing).
func lockDatabase(ctx context.Context, home string) (release func(), err error) {
	st, err := store.Open(ctx, home, nil)
	if err != nil {
		return nil, err
	}
	conn, err := st.DB().Conn(ctx)
	if err != nil {
		st.Close()
		return nil, err
	}
	for _, stmt := range []string{"BEGIN IMMEDIATE", "UPDATE log_meta SET value = value"} {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			conn.Close()
			st.Close()
			return nil, fmt.Errorf("lock the database: %s: %w", stmt, err)
		}
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			conn.ExecContext(context.Background(), "ROLLBACK")
			conn.Close()
			st.Close()
		})
	}, nil
}

// waitForFile waits until path exists.
func waitForFile(ctx context.Context, path string) error {
	for ctx.Err() == nil {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("%s did not appear", filepath.Base(path))
}
