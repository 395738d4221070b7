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
				// A newly governed server is in quarantine until its user
				// has looked at it.
				if err := l.Must(ctx, "server", "review", "warehouse"); err != nil {
					return err
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
				if err := l.Must(ctx, "server", "review", "borrower"); err != nil {
					return err
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
		machineCase(),
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

// machineCase governs the MCP clients of a realistic machine, runs a
// session, exports, and undoes.
func machineCase() Case {
	return Case{
		Family: SecretLeakage, Name: "a messy machine governed, used, exported and undone",
		Claim: "after governing Claude Desktop (a database URL with a password), ~/.claude.json (forty projects with tokens in env, headers and a URL's query), Cursor and Codex, using a server and exporting, no secret is in any file of the home or any governed config in any encoding looked for; undo gives back every file byte for byte",
		Run: func(ctx context.Context, t *T) error {
			l, err := t.Lab()
			if err != nil {
				return err
			}
			user := filepath.Join(l.Dir, "user")
			adv := func(args ...string) []string {
				return append([]string{adversary.Command, "--record", l.Record}, args...)
			}
			var secrets []string
			secret := func() string {
				s := newSecret()
				secrets = append(secrets, s)
				return s
			}
			files := map[string][]byte{}
			put := func(rel string, v any) error {
				data := []byte(mustJSON(v) + "\n")
				if s, ok := v.(string); ok {
					data = []byte(s)
				}
				path := filepath.Join(user, rel)
				if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
					return err
				}
				files[path] = data
				return os.WriteFile(path, data, 0o600)
			}
			dbPassword, ghToken := secret(), secret()
			if err := put(".config/Claude/claude_desktop_config.json", map[string]any{
				"mcpServers": map[string]any{
					"postgres": map[string]any{"command": l.Bin, "args": adv("--dsn", "postgresql://app:"+dbPassword+"@db.internal/app")},
					"github":   map[string]any{"command": l.Bin, "args": adv(), "env": map[string]string{"GITHUB_PERSONAL_ACCESS_TOKEN": ghToken}},
				},
				"preferences": map[string]any{"menuBarEnabled": true},
			}); err != nil {
				return err
			}
			projects := map[string]any{}
			for i := range 40 {
				dir := filepath.Join(user, "src", fmt.Sprintf("app-%02d", i))
				if err := os.MkdirAll(dir, 0o700); err != nil {
					return err
				}
				servers := map[string]any{
					"tools": map[string]any{"type": "stdio", "command": l.Bin, "args": adv(), "env": map[string]string{"API_KEY": secret(), "LOG_LEVEL": "debug"}},
				}
				if i%4 == 0 {
					servers["remote"] = map[string]any{"type": "http", "url": "https://mcp.example.com/mcp", "headers": map[string]string{"Authorization": "Bearer " + secret()}}
				}
				if i%10 == 0 {
					servers["search"] = map[string]any{"type": "http", "url": "https://search.example.com/mcp?api_key=" + secret()}
				}
				projects[dir] = map[string]any{"allowedTools": []string{}, "mcpServers": servers, "hasTrustDialogAccepted": true}
			}
			if err := put(".claude.json", map[string]any{"numStartups": 12, "mcpServers": map[string]any{}, "projects": projects}); err != nil {
				return err
			}
			if err := put(".cursor/mcp.json", map[string]any{"mcpServers": map[string]any{
				"leaky": map[string]any{"command": l.Bin, "args": adv("--dsn", "--api-key="+secret())},
			}}); err != nil {
				return err
			}
			if err := put(".codex/config.toml", fmt.Sprintf("model = \"gpt-5\"\n\n[mcp_servers.warehouse]\ncommand = %q\nargs = [%q, \"--record\", %q, \"--dsn\", 'mysql://app:%s@db/app']\n",
				l.Bin, adversary.Command, l.Record, secret())); err != nil {
				return err
			}
			if out, err := l.asUser(ctx, "clients", "govern"); err != nil && !strings.Contains(out, "governed through") {
				return err
			}
			list, _, err := l.Gatehouse(ctx, "", "server", "list")
			if err != nil {
				return err
			}
			// 2 + 40 + 10 + 4 + 1 + 1 entries, each its own server.
			if n := strings.Count(strings.TrimSpace(list), "\n"); n < 58 {
				return fmt.Errorf("governing registered %d servers, want 58: %.500s", n, list)
			}
			for path := range files {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				for _, s := range secrets {
					if f := leaked(s, data); f != "" {
						return fmt.Errorf("%s still holds a secret (%s) after governing", path, f)
					}
				}
			}
			// Use two of the servers: their secrets reach them, and what the
			// client sees is redacted.
			for _, server := range []string{"postgres", "github"} {
				if err := l.Must(ctx, "server", "review", server); err != nil {
					return err
				}
			}
			if err := l.Policy(ctx, "mcp.postgres.reveal", "ALLOW"); err != nil {
				return err
			}
			if err := l.Policy(ctx, "mcp.github.reveal", "ALLOW"); err != nil {
				return err
			}
			for server, variable := range map[string]string{"postgres": "argv", "github": "GITHUB_PERSONAL_ACCESS_TOKEN"} {
				s, err := l.Connect(ctx, server)
				if err != nil {
					return err
				}
				for _, how := range []string{"raw", "base64", "hex", "url"} {
					res, err := s.CallTool(ctx, "reveal", map[string]any{"variable": variable, "as": how})
					if err != nil {
						return err
					}
					if res.IsError {
						return fmt.Errorf("%s's reveal did not run: %.300s", server, res.Raw)
					}
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				for _, v := range []string{dbPassword, ghToken} {
					if f := leaked(v, s.Received()); f != "" {
						return fmt.Errorf("the client of %s received a secret (%s)", server, f)
					}
				}
			}
			if err := os.Mkdir(filepath.Join(l.Home, "exports"), 0o700); err != nil {
				return err
			}
			if err := l.Must(ctx, "export", "--out", filepath.Join(l.Home, "exports", "bundle")); err != nil {
				return err
			}
			inHome := func(when string) error {
				return filepath.WalkDir(l.Home, func(path string, d os.DirEntry, err error) error {
					if err != nil || !d.Type().IsRegular() {
						return err // folders, and the sockets of the approver and the log's writer
					}
					data, err := os.ReadFile(path)
					if err != nil {
						return err
					}
					for _, s := range secrets {
						if f := leaked(s, data); f != "" {
							rel, _ := filepath.Rel(l.Home, path)
							return fmt.Errorf("%s: the home's %s holds a secret (%s)", when, rel, f)
						}
					}
					return nil
				})
			}
			if err := inHome("after governing, two sessions and an export"); err != nil {
				return err
			}
			if _, err := l.asUser(ctx, "clients", "undo"); err != nil {
				return err
			}
			for path, want := range files {
				if got, err := os.ReadFile(path); err != nil {
					return err
				} else if !bytes.Equal(got, want) {
					return fmt.Errorf("undo did not give back %s byte for byte", path)
				}
			}
			return inHome("after undo")
		},
	}
}
