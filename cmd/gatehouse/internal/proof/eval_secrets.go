package proof

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/gatehouse-dev/gatehouse/gateway/approval"
)

// newSecret returns a fresh credential-like value.
func newSecret() string {
	b := make([]byte, 20)
	rand.Read(b)
	return "sk-eval-" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(b))
}

// forms are the ways a value can be written that the proxy promises to
// catch: as it is, and in its common encodings. A base64 form is the part
// that does not depend on what precedes and follows the value, for each of
// the three alignments, in both alphabets.
func forms(v string) map[string]string {
	f := map[string]string{
		"raw": v,
		"hex": hex.EncodeToString([]byte(v)),
		"HEX": strings.ToUpper(hex.EncodeToString([]byte(v))),
		"url": url.QueryEscape(v),
	}
	for k := range 3 {
		for name, enc := range map[string]*base64.Encoding{"base64": base64.StdEncoding, "base64url": base64.URLEncoding} {
			b := enc.EncodeToString(append(make([]byte, k), v...))
			start, end := (k*8+5)/6, len(b)
			if (k+len(v))%3 != 0 {
				end -= 4
			}
			f[fmt.Sprintf("%s (alignment %d)", name, k)] = b[start:end]
		}
	}
	return f
}

// leaked reports in which form the value shows in data, once every JSON
// string in it is decoded (a client decodes \u escapes), and the texts of
// a content array are joined (a client shows them together); "" if none.
func leaked(v string, data []byte) string {
	texts := []string{string(data)}
	for line := range bytes.Lines(data) {
		var x any
		if json.Unmarshal(line, &x) == nil {
			collectStrings(x, &texts)
		}
	}
	for name, f := range forms(v) {
		for _, t := range texts {
			if strings.Contains(t, f) {
				return name
			}
		}
	}
	return ""
}

// collectStrings adds every string of x (keys too) to texts, and for each
// array the texts of its items joined.
func collectStrings(x any, texts *[]string) {
	switch v := x.(type) {
	case string:
		*texts = append(*texts, v)
	case []any:
		var joined strings.Builder
		for _, e := range v {
			if m, ok := e.(map[string]any); ok {
				if s, ok := m["text"].(string); ok {
					joined.WriteString(s)
				}
			}
			collectStrings(e, texts)
		}
		*texts = append(*texts, joined.String())
	case map[string]any:
		for k, e := range v {
			*texts = append(*texts, k)
			collectStrings(e, texts)
		}
	}
}

// secretLab makes a standard lab whose server holds API_TOKEN, a secret
// from the keychain, and may be asked to reveal it.
func (t *T) secretLab(ctx context.Context, serverFlags ...string) (*Lab, string, error) {
	l, err := t.Lab()
	if err != nil {
		return nil, "", err
	}
	secret := newSecret()
	if err := l.AddServer(ctx, serverName, secret+"\n", []string{"--secret-env", "API_TOKEN"}, serverFlags...); err != nil {
		return nil, "", err
	}
	if err := l.Policy(ctx, "mcp.adv.reveal", "ALLOW"); err != nil {
		return nil, "", err
	}
	return l, secret, nil
}

// noTrace fails if the value shows anywhere the lab can look: what the
// client received, the proxy's stderr (the client's MCP log), and every
// file of the home folder (database, logs).
func noTrace(l *Lab, s *Session, secret string) error {
	if f := leaked(secret, s.Received()); f != "" {
		return fmt.Errorf("the client received the secret (%s)", f)
	}
	if f := leaked(secret, []byte(s.Stderr())); f != "" {
		return fmt.Errorf("the proxy's stderr, which MCP clients keep in their logs, holds the secret (%s)", f)
	}
	return noTraceIn(l.Home, secret)
}

// noTraceIn fails if a file under dir holds the value as it is.
func noTraceIn(dir, secret string) error {
	var found []string
	filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if b, err := os.ReadFile(path); err == nil && bytes.Contains(b, []byte(secret)) {
			rel, _ := filepath.Rel(dir, path)
			found = append(found, rel)
		}
		return nil
	})
	if len(found) > 0 {
		return fmt.Errorf("the secret is in %s", strings.Join(found, ", "))
	}
	return nil
}

// revealCase asks the server to send its secret back as how.
func revealCase(name, how string) Case {
	return Case{
		Family: SecretLeakage, Name: name,
		Claim: "a credential the proxy gave the server does not reach the client, in any of the forms the proxy catches",
		Run: func(ctx context.Context, t *T) error {
			l, secret, err := t.secretLab(ctx)
			if err != nil {
				return err
			}
			s, err := l.Connect(ctx, serverName)
			if err != nil {
				return err
			}
			id := s.NewID()
			m, err := s.RoundTrip(ctx, id, fmt.Sprintf(`{"jsonrpc":"2.0","id":%s,"method":"tools/call","params":{"name":"reveal","arguments":{"variable":"API_TOKEN","as":%q},"_meta":{"progressToken":"leak"}}}`, id, how))
			if err != nil {
				return err
			}
			if err := wasRun(l, "reveal", how); err != nil {
				return err
			}
			if how == "sampling" {
				// The request goes out before the answer; wait for it.
				found := false
				for _, n := range s.Notes() {
					found = found || n.Method == "sampling/createMessage"
				}
				if !found {
					return fmt.Errorf("the server's sampling request did not reach the client")
				}
			}
			if err := s.Close(); err != nil {
				return fmt.Errorf("proxy exit: %w", err)
			}
			if err := noTrace(l, s, secret); err != nil {
				return err
			}
			if !bytes.Contains(m.Raw, []byte("redacted by Gatehouse")) && !strings.Contains(string(s.Received()), "redacted by Gatehouse") && how != "stderr" {
				return fmt.Errorf("nothing says the value was redacted: %.300s", m.Raw)
			}
			return nil
		},
	}
}

func secretCases() []Case {
	return []Case{
		revealCase("echoed as it is", "raw"),
		revealCase("in base64", "base64"),
		revealCase("in base64url, shifted", "base64url"),
		revealCase("in hex", "hex"),
		revealCase("in upper-case hex", "HEX"),
		revealCase("URL-encoded", "url"),
		revealCase("split across content items", "split"),
		revealCase("in \\u escapes", "unicode-escape"),
		revealCase("in a JSON-RPC error", "rpc-error"),
		revealCase("in an error result", "is-error"),
		revealCase("in structured content", "structured"),
		revealCase("in a log notification", "log"),
		revealCase("in a progress notification", "progress"),
		revealCase("in a sampling request", "sampling"),
		revealCase("on the server's stderr", "stderr"),
		{
			Family: SecretLeakage, Name: "in a tool's description",
			Claim: "a credential the server writes into its tool list does not reach the client",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.Lab()
				if err != nil {
					return err
				}
				secret := newSecret()
				desc := filepath.Join(l.Dir, "descriptions.json")
				if err := os.WriteFile(desc, []byte(mustJSON(map[string]string{"echo": "Echo. Debug token: " + secret})), 0o600); err != nil {
					return err
				}
				if err := l.AddServer(ctx, serverName, secret+"\n", []string{"--secret-env", "API_TOKEN"}, "--descriptions", desc); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				return noTrace(l, s, secret)
			},
		},
		{
			Family: SecretLeakage, Name: "a vault reference echoed",
			Claim: "a secret the gate puts into arguments (vault://) is redacted from the answer, and the receipt holds the reference, never the value",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				secret := newSecret()
				if _, _, err := l.Gatehouse(ctx, secret+"\n", "secret", "set", "mail-password"); err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.echo", "ALLOW", "--secret", "mail-password"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "vault://secret/mail-password"})
				if err != nil {
					return err
				}
				if res.IsError || !strings.Contains(res.Text, "redacted by Gatehouse") {
					return fmt.Errorf("the echo of a resolved reference = %q, want the value redacted", res.Text)
				}
				runs, err := l.Runs()
				if err != nil {
					return err
				}
				if len(runs) != 1 || !strings.Contains(string(runs[0].Args), secret) {
					return fmt.Errorf("the server did not get the secret's value in place of the reference")
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				if err := noTrace(l, s, secret); err != nil {
					return err
				}
				ev, err := l.Export(ctx)
				if err != nil {
					return err
				}
				rs := ev.Receipts("echo")
				if len(rs) != 1 || !strings.Contains(string(ev.Args(rs[0].ID)), "vault://secret/mail-password") {
					return fmt.Errorf("the receipt does not record the reference as the agent sent it")
				}
				return noTraceIn(ev.Dir, secret)
			},
		},
		{
			Family: SecretLeakage, Name: "a vault reference no rule binds",
			Claim: "a vault:// reference that no rule binds to the tool is not resolved, and the call does not run",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				secret := newSecret()
				if _, _, err := l.Gatehouse(ctx, secret+"\n", "secret", "set", "bank-token"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "vault://secret/bank-token"})
				if err != nil {
					return err
				}
				if err := refusal("the unbound reference", res, "vault://secret/bank-token", "did not run"); err != nil {
					return err
				}
				if err := notRun(l, "echo", "bank-token"); err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				return noTrace(l, s, secret)
			},
		},
		{
			Family: SecretLeakage, Name: "arguments shown to the approver",
			Claim: "the approver is shown the reference an agent passed, never the secret it stands for",
			Run: func(ctx context.Context, t *T) error {
				l, err := t.stdLab(ctx)
				if err != nil {
					return err
				}
				secret := newSecret()
				if _, _, err := l.Gatehouse(ctx, secret+"\n", "secret", "set", "deploy-key"); err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.write_file", "APPROVAL_REQUIRED"); err != nil {
					return err
				}
				a, err := l.StartApprover(func(int, approval.Request) (approval.Scope, bool) { return approval.ScopeDeny, true })
				if err != nil {
					return err
				}
				defer a.Stop()
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if _, err := s.CallTool(ctx, "write_file", map[string]any{"path": "/eval/key", "content": "vault://secret/deploy-key"}); err != nil {
					return err
				}
				shown := a.Shown()
				if len(shown) != 1 {
					return fmt.Errorf("the approver was asked %d times, want once", len(shown))
				}
				if strings.Contains(string(shown[0].Args), secret) {
					return fmt.Errorf("the approver was shown the secret's value")
				}
				if !strings.Contains(string(shown[0].Args), "vault://secret/deploy-key") {
					return fmt.Errorf("the approver was not shown the reference: %s", shown[0].Args)
				}
				return nil
			},
		},
	}
}
