package proof

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/gatehouse-dev/gatehouse/vault"
)

// ErrNoKeychain is returned when no keychain can hold the labs' signing
// keys: the evaluation cannot run (exit status 2).
var ErrNoKeychain = errors.New("no keychain for the evaluation")

// A Keychain is where the proxies of the evaluation keep their signing keys
// and secrets. On Linux, when dbus-daemon and gnome-keyring-daemon are
// installed, it is a private one: a D-Bus session bus and a Secret Service
// of its own in a temporary folder, which the user's keyring never sees and
// which the fault suite can make disappear. Elsewhere it is the user's own
// keychain, in which each lab's items live under a service of their own and
// are removed when the lab closes.
type Keychain struct {
	// Env are the variables a process needs to reach the keychain (empty
	// for the user's own).
	Env []string
	// Private is true when the keychain was started for the evaluation.
	Private bool
	// Describe says what the keychain is, for the report.
	Describe string

	session *privateSession // nil unless Private
}

// OpenKeychain starts a private keychain where it can, and otherwise checks
// that the user's keychain is reachable. ctx bounds the start only.
func OpenKeychain(ctx context.Context) (*Keychain, error) {
	s, err := startPrivate(ctx)
	if err == nil {
		return &Keychain{Env: s.env(), Private: true, session: s,
			Describe: "a private keychain (a D-Bus session and gnome-keyring of its own, in a temporary folder)"}, nil
	}
	if !errors.Is(err, errNoPrivate) {
		return nil, fmt.Errorf("%w: %w", ErrNoKeychain, err)
	}
	// The user's keychain: try it under a throw-away service.
	b := make([]byte, 6)
	rand.Read(b)
	v := vault.New(&vault.Options{Service: "gatehouse-eval-probe-" + hex.EncodeToString(b)})
	if err := v.SetSecret("probe", "probe-value"); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoKeychain, err)
	}
	v.Purge()
	return &Keychain{Describe: "your keychain (each lab's items under a service of their own, removed afterwards)"}, nil
}

// CanDisappear reports whether Kill can make the keychain go away.
func (k *Keychain) CanDisappear() bool { return k.Private }

// Kill makes the keychain disappear: its Secret Service is killed with
// SIGKILL. Only a private keychain can be killed.
func (k *Keychain) Kill() error {
	if !k.Private {
		return errors.New("only a private keychain can be made to disappear")
	}
	return k.session.killDaemon()
}

// Restart starts the Secret Service again on the same keyring, after Kill.
func (k *Keychain) Restart(ctx context.Context) error {
	if !k.Private {
		return nil
	}
	return k.session.startDaemon(ctx)
}

// Close stops a private keychain and removes its folder.
func (k *Keychain) Close() {
	if k.session != nil {
		k.session.close()
	}
}
