package proof

import (
	"context"
	"fmt"
	"strings"
)

// remoteLab makes a lab whose server "adv" is the adversary reached over
// streamable HTTP, with a credential in the Authorization header, and the
// standard rules.
func (t *T) remoteLab(ctx context.Context) (*Lab, string, error) {
	l, err := t.Lab()
	if err != nil {
		return nil, "", err
	}
	url, err := l.RemoteServer(ctx, t)
	if err != nil {
		return nil, "", err
	}
	secret := newSecret()
	if _, _, err := l.Gatehouse(ctx, "Bearer "+secret+"\n", "server", "add", serverName, "--no-quarantine", "--url", url, "--secret-header", "Authorization"); err != nil {
		return nil, "", err
	}
	if _, _, err := l.Gatehouse(ctx, stdPolicy, "policy", "import", "-"); err != nil {
		return nil, "", err
	}
	if err := l.Policy(ctx, "mcp.adv.reveal", "ALLOW"); err != nil {
		return nil, "", err
	}
	return l, secret, nil
}

func remoteCases() []Case {
	return []Case{
		{
			Family: PolicyBypass, Name: "a remote server: a rule's denial",
			Claim: "a server reached over HTTP is governed as one the proxy starts: what a rule denies does not run",
			Run: func(ctx context.Context, t *T) error {
				l, _, err := t.remoteLab(ctx)
				if err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if res, err := s.CallTool(ctx, "echo", map[string]any{"message": "over http"}); err != nil || res.IsError || res.Text != "over http" {
					return fmt.Errorf("an allowed call over HTTP = %q, %v", res.Text, err)
				}
				res, err := s.CallTool(ctx, "delete_file", map[string]any{"path": "/eval/remote"})
				if err != nil {
					return err
				}
				if err := notRun(l, "delete_file", "/eval/remote"); err != nil {
					return err
				}
				return refusal("the denied call over HTTP", res, "denied")
			},
		},
		{
			Family: SecretLeakage, Name: "a remote server echoes its credential header",
			Claim: "a credential the proxy sends a remote server in a header does not come back to the client",
			Run: func(ctx context.Context, t *T) error {
				l, secret, err := t.remoteLab(ctx)
				if err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				for _, how := range []string{"raw", "base64", "rpc-error"} {
					res, err := s.CallTool(ctx, "reveal", map[string]any{"variable": "header:Authorization", "as": how})
					if err != nil {
						return err
					}
					if how == "raw" && !strings.Contains(res.Text, "redacted by Gatehouse") {
						return fmt.Errorf("the header's echo = %q, want it redacted", res.Text)
					}
				}
				if err := wasRun(l, "reveal", "header:Authorization"); err != nil {
					return err
				}
				if err := s.Close(); err != nil {
					return fmt.Errorf("proxy exit: %w", err)
				}
				return noTrace(l, s, secret)
			},
		},
		{
			Family: ProtocolAbuse, Name: "a remote server forges an answer",
			Claim: "a server reached over HTTP cannot answer a call it was never sent",
			Run: func(ctx context.Context, t *T) error {
				l, _, err := t.remoteLab(ctx)
				if err != nil {
					return err
				}
				if err := l.Policy(ctx, "mcp.adv.forge", "ALLOW"); err != nil {
					return err
				}
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if _, err := s.CallTool(ctx, "delete_file", map[string]any{"path": "/eval/remote-forged"}); err != nil {
					return err
				}
				// The denied call was request 3; the server answers it now.
				if _, err := s.CallTool(ctx, "forge", map[string]any{"id": 3}); err != nil {
					return err
				}
				if stray := s.Stray(); len(stray) > 0 {
					return fmt.Errorf("the client got %d answers to no request, the first: %.200s", len(stray), stray[0].Raw)
				}
				return goesOn(ctx, s, "a forged answer over HTTP")
			},
		},
	}
}
