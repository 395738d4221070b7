package vault

import (
	"errors"
	"fmt"

	"github.com/zalando/go-keyring"
)

// tokenUser is the keychain account of a client's access token for
// gatehouse serve. Tokens live apart from the secrets a rule can bind
// (secret/...): no policy can put one into a tool call.
func tokenUser(client string) string { return "serve-token/" + client }

// SetClientToken keeps client's access token for gatehouse serve, replacing
// any token it had. client is named as a secret id is.
func (v *Vault) SetClientToken(client, token string) error {
	if err := ValidateSecretID(client); err != nil {
		return fmt.Errorf("client name: %w", err)
	}
	if err := v.set(tokenUser(client), token); err != nil {
		return fmt.Errorf("store the token of %s: %w", client, err)
	}
	return nil
}

// ClientToken returns client's access token, or an error wrapping
// [ErrNotFound].
func (v *Vault) ClientToken(client string) (string, error) {
	if err := ValidateSecretID(client); err != nil {
		return "", fmt.Errorf("client name: %w", err)
	}
	s, err := v.get(tokenUser(client))
	if err != nil {
		return "", fmt.Errorf("token of %s: %w", client, err)
	}
	return s, nil
}

// DeleteClientToken removes client's access token, or returns an error
// wrapping [ErrNotFound].
func (v *Vault) DeleteClientToken(client string) error {
	if err := ValidateSecretID(client); err != nil {
		return fmt.Errorf("client name: %w", err)
	}
	if err := checkReachable(); err != nil {
		return err
	}
	err := keyring.Delete(v.service, tokenUser(client))
	if errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("token of %s: %w", client, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete the token of %s: %w", client, explain(err))
	}
	return nil
}
