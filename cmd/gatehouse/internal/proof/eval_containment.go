package proof

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"github.com/gatehouse-dev/gatehouse/gateway/confine"
)

// containmentCases hold a server to less than the user's own reach: a
// confined server cannot leave its folders and ports whatever it does; a
// quarantined one runs nothing a person did not approve until the user
// reviews it.
func containmentCases() []Case {
	return []Case{
		{
			Family: Containment, Name: "a quarantined server called before review",
			Claim: "a server in quarantine runs no call without a person's approval, even one a rule allows, until the user reviews it",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				if err := l.AddServer(ctx, serverName, "", []string{"--quarantine"}); err != nil {
					return err
				}
				if _, _, err := l.Gatehouse(ctx, stdPolicy, "policy", "import", "-"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				const marker = "eval: before review"
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": marker})
				if err != nil {
					return err
				}
				if err := notRun(l, "echo", marker); err != nil {
					return err
				}
				if err := refusal("an allowed call to a quarantined server", res, "quarantine", "gatehouse server review adv"); err != nil {
					return err
				}
				if err := l.Must(ctx, "server", "review", serverName); err != nil {
					return err
				}
				const after = "eval: after review"
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": after}); err != nil || res.IsError {
					return fmt.Errorf("after review, the allowed call was refused (%v): %s", err, res.Text)
				}
				return wasRun(l, "echo", after)
			},
		},
		{
			Family: Containment, Name: "a server escaping its confinement",
			Claim: "a confined server, on an allowed harmless call, cannot read outside its folders, write into the Gatehouse home, or connect to a port it did not declare",
			Run: func(ctx context.Context, t *T) error {
				if v, err := confine.ABI(); err != nil || v < confine.NetABI {
					return fmt.Errorf("%w: confinement needs Landlock ABI %d (this kernel: %d, %v)", ErrSkip, confine.NetABI, v, err)
				}
				l, err := t.Lab()
				if err != nil {
					return err
				}
				// The record is the one file of the lab the server may write.
				if err := os.WriteFile(l.Record, nil, 0o600); err != nil {
					return err
				}
				if err := l.AddServer(ctx, serverName, "", []string{"--allow-write", l.Record}); err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.status", "ALLOW"); err != nil {
					return err
				}
				secret := filepath.Join(l.Dir, "id_ed25519")
				if err := os.WriteFile(secret, []byte("PRIVATE KEY\n"), 0o600); err != nil {
					return err
				}
				ln, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					return err
				}
				defer ln.Close()
				var accepted atomic.Int32
				go func() {
					for {
						c, err := ln.Accept()
						if err != nil {
							return
						}
						accepted.Add(1)
						c.Close()
					}
				}()
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				planted := filepath.Join(l.Home, "planted.txt")
				res, err := s.CallTool(ctx, "status", map[string]any{"read": secret, "write": planted, "connect": ln.Addr().String()})
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("the allowed call did not run: %s", res.Text)
				}
				var escaped []string
				for _, act := range []string{"read " + secret, "write " + planted, "connect " + ln.Addr().String()} {
					if !strings.Contains(res.Text, act+": failed") {
						escaped = append(escaped, act)
					}
				}
				if _, err := os.Stat(planted); err == nil {
					escaped = append(escaped, "a file planted in the home")
				}
				if n := accepted.Load(); n > 0 {
					escaped = append(escaped, fmt.Sprintf("%d connections accepted", n))
				}
				if len(escaped) > 0 {
					return fmt.Errorf("the server got out: %s (it reported: %q)", strings.Join(escaped, "; "), res.Text)
				}
				return nil
			},
		},
	}
}
