package app

import (
	"crypto/ed25519"
	"crypto/rand"
	"fmt"
	"sync"

	"github.com/gatehouse-dev/gatehouse/vault"
)

// fakeKeychain is a keychain in memory. Setting err makes every call fail
// with it, as a locked or absent keychain does.
type fakeKeychain struct {
	mu      sync.Mutex
	key     ed25519.PrivateKey
	secrets map[string]string
	err     error
}

var _ Keychain = (*fakeKeychain)(nil)

func newFakeKeychain() *fakeKeychain {
	_, k, _ := ed25519.GenerateKey(rand.Reader)
	return &fakeKeychain{key: k, secrets: map[string]string{}}
}

// fail makes every call fail with err (nil: work again).
func (f *fakeKeychain) fail(err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.err = err
}

func (f *fakeKeychain) SigningKey() (ed25519.PrivateKey, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	return f.key, nil
}

func (f *fakeKeychain) RotateSigningKey(announce func(ed25519.PrivateKey) error) (ed25519.PrivateKey, error) {
	f.mu.Lock()
	if f.err != nil {
		f.mu.Unlock()
		return nil, f.err
	}
	f.mu.Unlock()
	_, next, _ := ed25519.GenerateKey(rand.Reader)
	if err := announce(next); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.key = next
	return next, nil
}

func (f *fakeKeychain) Secret(id string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	v, ok := f.secrets[id]
	if !ok {
		return "", fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
	}
	return v, nil
}

func (f *fakeKeychain) SetSecret(id, value string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	f.secrets[id] = value
	return nil
}

func (f *fakeKeychain) DeleteSecret(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if _, ok := f.secrets[id]; !ok {
		return fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
	}
	delete(f.secrets, id)
	return nil
}

// snapshot returns the secrets held.
func (f *fakeKeychain) snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for k, v := range f.secrets {
		out[k] = v
	}
	return out
}

// errLocked is what a locked keychain returns.
var errLocked = fmt.Errorf("%w: the login keyring is locked", vault.ErrUnavailable)
