package vault

import (
	"fmt"
	"sync/atomic"

	"github.com/zalando/go-keyring"
)

// inMemory is set once InMemory has replaced the OS keychain.
var inMemory atomic.Bool

// InMemory replaces the OS keychain, for the rest of this process and every
// Vault in it, with one held in memory that ends with the process: for
// demonstrations (gatehouse demo) that must not touch the user's keychain,
// and need none. Nothing it holds is written anywhere. Other processes do
// not see it, so a process that uses it must run everything that needs the
// keychain (proxies, the approver) itself.
func InMemory() {
	keyring.MockInit()
	inMemory.Store(true)
}

// Purge removes every item the vault holds under its service: the signing
// key and every secret. It is for homes that are thrown away afterwards
// (gatehouse eval's temporary homes); a purged home's log can no longer be
// appended to, though exports of it still verify.
func (v *Vault) Purge() error {
	if err := checkReachable(); err != nil {
		return err
	}
	if err := keyring.DeleteAll(v.service); err != nil {
		return fmt.Errorf("purge keychain service %s: %w", v.service, explain(err))
	}
	return nil
}
