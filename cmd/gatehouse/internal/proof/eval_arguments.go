package proof

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/cmd/gatehouse/internal/proof/adversary"
)

// argumentCases check what governing does with secrets in a client's own
// file that are not in an environment variable: a password in a server's
// command line, and a reference to a keychain secret the file names itself.
func argumentCases() []Case {
	return []Case{
		{
			Family: SecretLeakage, Name: "a password in a server's command line",
			Claim: "governing an entry whose command line holds a database password moves it to the keychain: the client's file, the home's files and what the client receives never hold it, the server still starts with it, and undo puts the file back byte for byte",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				secret := newSecret()
				orig, err := cursorConfig(l, map[string]any{"warehouse": map[string]any{
					"command": l.Bin,
					"args":    []string{adversary.Command, "--record", l.Record, "--dsn", "postgresql://app:" + secret + "@db.internal/app"},
				}})
				if err != nil {
					return err
				}
				govern, _ := l.asUser(ctx, "clients", "govern", "cursor")
				if now, err := os.ReadFile(cursorPath(l)); err != nil {
					return err
				} else if bytes.Contains(now, []byte(secret)) {
					return fmt.Errorf("the entry was not governed, its password still in the client's file: %.300s", govern)
				}
				if err := l.Policy(ctx, "mcp.warehouse.reveal", "ALLOW"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, "warehouse")
				if err != nil {
					return err
				}
				// Sent back as it is, the command line reaches the client
				// with the password redacted (noTrace below); reversed, no
				// redaction can see it, which shows what the server got.
				if res, err := s.CallTool(ctx, "reveal", map[string]any{"variable": "argv"}); err != nil {
					return err
				} else if res.IsError {
					return fmt.Errorf("reveal failed: %.300s", res.Raw)
				}
				res, err := s.CallTool(ctx, "reveal", map[string]any{"variable": "argv", "as": "reversed"})
				if err != nil {
					return err
				}
				if want := reversed("--dsn postgresql://app:" + secret + "@db.internal/app"); !strings.Contains(res.Text, want) {
					return fmt.Errorf("the server did not start with its connection string: %.300s", res.Raw)
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				if err := noTrace(l, s, secret); err != nil {
					return err
				}
				if _, err := l.asUser(ctx, "clients", "undo", "cursor"); err != nil {
					return err
				}
				if back, err := os.ReadFile(cursorPath(l)); err != nil {
					return err
				} else if !bytes.Equal(back, orig) {
					return fmt.Errorf("undo did not give back the file as it was:\n%s", back)
				}
				return noTraceIn(l.Home, secret)
			},
		},
		{
			Family: SecretLeakage, Name: "a client's file names a keychain secret",
			Claim: "an entry whose client file names another server's keychain secret (vault://) is not governed, and its server never receives the secret",
			Run: func(ctx context.Context, t *T) error {
				l, secret, err := t.secretLab(ctx)
				if err != nil {
					return err
				}
				if _, err := cursorConfig(l, map[string]any{"borrower": map[string]any{
					"command": l.Bin,
					"args":    []string{adversary.Command, "--record", l.Record},
					"env":     map[string]string{"REGION": "vault://secret/" + serverName + ".API_TOKEN"},
				}}); err != nil {
					return err
				}
				l.asUser(ctx, "clients", "govern", "cursor")
				list, _, err := l.Gatehouse(ctx, "", "server", "list")
				if err != nil {
					return err
				}
				if !slices.ContainsFunc(strings.Split(list, "\n"), func(line string) bool { return strings.HasPrefix(line, "borrower ") }) {
					return nil // not registered: nothing can start it with the secret
				}
				if err := l.Policy(ctx, "mcp.borrower.reveal", "ALLOW"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, "borrower")
				if err != nil {
					return err
				}
				defer s.Close()
				res, err := s.CallTool(ctx, "reveal", map[string]any{"variable": "REGION", "as": "reversed"})
				if err != nil {
					return err
				}
				if strings.Contains(res.Text, reversed(secret)) {
					return fmt.Errorf("the server of a client file's entry received %s's API token, which the file named by reference", serverName)
				}
				return nil
			},
		},
	}
}

// cursorPath is Cursor's config file in the lab's user folder.
func cursorPath(l *Lab) string {
	return filepath.Join(l.Dir, "user", ".cursor", "mcp.json")
}

// cursorConfig writes Cursor's config file with servers in the lab's user
// folder, and returns its bytes.
func cursorConfig(l *Lab, servers map[string]any) ([]byte, error) {
	data := []byte(mustJSON(map[string]any{"mcpServers": servers}) + "\n")
	if err := os.MkdirAll(filepath.Dir(cursorPath(l)), 0o700); err != nil {
		return nil, err
	}
	return data, os.WriteFile(cursorPath(l), data, 0o600)
}

// asUser runs the gatehouse binary with args as the lab's user, whose home
// folder holds the MCP clients' files, and returns its stderr.
func (l *Lab) asUser(ctx context.Context, args ...string) (string, error) {
	cmd := l.Command(ctx, args...)
	cmd.Env = append(cmd.Env, "HOME="+filepath.Join(l.Dir, "user"))
	var e bytes.Buffer
	cmd.Stderr = &e
	if err := cmd.Run(); err != nil {
		return e.String(), fmt.Errorf("gatehouse %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(e.String()))
	}
	return e.String(), nil
}

// reversed is s backwards, as the adversary's reveal "reversed" sends it.
func reversed(s string) string {
	r := []rune(s)
	slices.Reverse(r)
	return string(r)
}
