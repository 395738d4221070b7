package vault

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/zalando/go-keyring"
)

// RefPrefix starts a reference to a secret: vault://secret/<id>. A server's
// registration may hold references in place of values (a whole environment
// variable, argument, header or URL); the proxy resolves them from the
// keychain only when it starts or reaches the server.
const RefPrefix = "vault://secret/"

// MaxSecretBytes bounds a secret on every platform. The keychains of macOS
// and Windows refuse less than this (about 2.5-3 KB, reported as a clear
// error when it happens); the Secret Service has no limit of its own, and
// nothing that goes into an environment variable or a header needs more.
const MaxSecretBytes = 64 << 10

var secretIDRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidateSecretID reports whether id can name a secret.
func ValidateSecretID(id string) error {
	if !secretIDRE.MatchString(id) {
		return fmt.Errorf("invalid secret id %q: use 1-128 letters, digits, '.', '-' or '_', starting with a letter or digit", id)
	}
	return nil
}

// Ref returns the reference to secret id.
func Ref(id string) string { return RefPrefix + id }

// ParseRef returns the secret id of a reference, and whether s is one.
func ParseRef(s string) (string, bool) {
	id, ok := strings.CutPrefix(s, RefPrefix)
	if !ok || ValidateSecretID(id) != nil {
		return "", false
	}
	return id, true
}

// ErrTooLarge is returned for a value over the size a keychain holds.
var ErrTooLarge = errors.New("secret too large")

func secretUser(id string) string { return "secret/" + id }

// SetSecret stores value as secret id, replacing any value it had.
func (v *Vault) SetSecret(id, value string) error {
	if err := ValidateSecretID(id); err != nil {
		return err
	}
	if value == "" {
		return fmt.Errorf("secret %s: empty value", id)
	}
	if len(value) > MaxSecretBytes {
		return fmt.Errorf("secret %s: %w: %d bytes, the limit is %d; nothing was stored", id, ErrTooLarge, len(value), MaxSecretBytes)
	}
	err := v.set(secretUser(id), value)
	if errors.Is(err, ErrUnavailable) && strings.Contains(err.Error(), "too large") {
		return fmt.Errorf("secret %s: %w: %d bytes is more than this platform's keychain holds; nothing was stored", id, ErrTooLarge, len(value))
	}
	if err != nil {
		return fmt.Errorf("store secret %s: %w", id, err)
	}
	return nil
}

// Secret returns the value of secret id, or an error wrapping [ErrNotFound].
func (v *Vault) Secret(id string) (string, error) {
	if err := ValidateSecretID(id); err != nil {
		return "", err
	}
	s, err := v.get(secretUser(id))
	if err != nil {
		return "", fmt.Errorf("secret %s: %w", id, err)
	}
	return s, nil
}

// DeleteSecret removes secret id, or returns an error wrapping [ErrNotFound].
func (v *Vault) DeleteSecret(id string) error {
	if err := ValidateSecretID(id); err != nil {
		return err
	}
	if err := checkReachable(); err != nil {
		return err
	}
	err := keyring.Delete(v.service, secretUser(id))
	if errors.Is(err, keyring.ErrNotFound) {
		return fmt.Errorf("secret %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("delete secret %s: %w", id, explain(err))
	}
	return nil
}
