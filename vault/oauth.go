package vault

import (
	"errors"
	"fmt"

	"github.com/zalando/go-keyring"
)

func grantUser(server string) string { return "oauth/" + server }

// OAuthGrant returns what Gatehouse holds to sign in to the remote server
// called server (its OAuth client and tokens, as package gateway/oauth
// writes them), or an error wrapping [ErrNotFound].
func (v *Vault) OAuthGrant(server string) (string, error) {
	s, err := v.get(grantUser(server))
	if err != nil {
		return "", fmt.Errorf("sign-in to %s: %w", server, err)
	}
	return s, nil
}

// SetOAuthGrant stores grant for the remote server called server,
// replacing what it held.
func (v *Vault) SetOAuthGrant(server, grant string) error {
	if grant == "" {
		return fmt.Errorf("sign-in to %s: empty value", server)
	}
	if len(grant) > MaxSecretBytes {
		return fmt.Errorf("sign-in to %s: %w: %d bytes", server, ErrTooLarge, len(grant))
	}
	if err := v.set(grantUser(server), grant); err != nil {
		return fmt.Errorf("store sign-in to %s: %w", server, err)
	}
	return nil
}

// DeleteOAuthGrant removes what the vault holds for signing in to server;
// it is not an error when it holds nothing.
func (v *Vault) DeleteOAuthGrant(server string) error {
	if err := checkReachable(); err != nil {
		return err
	}
	err := keyring.Delete(v.service, grantUser(server))
	if err != nil && !errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("delete sign-in to %s: %w", server, explain(err))
	}
	return nil
}
