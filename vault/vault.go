// Package vault keeps Gatehouse's secrets in the operating system's keychain
// (macOS Keychain, Windows Credential Manager, the Secret Service on Linux,
// through github.com/zalando/go-keyring) and nowhere else: no value it holds
// is ever written to the database, a log, a receipt, a config file or
// stdout.
//
// Today it holds the evidence log's signing key: an Ed25519 key created in the
// keychain the first time it is needed, and loaded by every Gatehouse process.
// A home has one signing key however many processes start on it at once:
// creation (and rotation) holds a lock the home's processes share
// ([Options.KeyLock], a lock file in the home folder), and a process that
// waited for it uses the key the holder stored.
//
// When the keychain cannot be reached (no Secret Service on a Linux without a
// desktop session, a locked keyring), operations fail with an error that
// says what to install or unlock; nothing falls back to plain text.
package vault

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"

	"github.com/zalando/go-keyring"
)

// DefaultService is the keychain service name Gatehouse's items live under.
const DefaultService = "gatehouse"

// ErrUnavailable wraps every failure to reach the keychain.
var ErrUnavailable = errors.New("keychain unavailable")

// ErrNotFound is returned for a secret the keychain does not hold.
var ErrNotFound = errors.New("not in the keychain")

// A Vault is a view of the keychain under one service name.
type Vault struct {
	service string
	keyLock Locker
}

// A Locker is a lock shared by the processes of one home: Lock waits for
// it until ctx ends, and returns the function that lets go.
// internal/filelock's Mutex is one.
type Locker interface {
	Lock(ctx context.Context) (unlock func(), err error)
}

// Options configure [New]. Nil options mean the defaults.
type Options struct {
	// Service is the keychain service name; empty means DefaultService.
	// Separate profiles (and tests) use separate services.
	Service string
	// KeyLock is the lock the processes of the home that share the vault
	// hold while they create or rotate the signing key (the lock file
	// KeyLockFile in the home folder), so that processes starting at once
	// on a new home create one key between them. Nil means none: one
	// process alone uses the vault.
	KeyLock Locker
}

// New returns the vault for opts.Service.
func New(opts *Options) *Vault {
	v := &Vault{service: DefaultService}
	if opts != nil && opts.Service != "" {
		v.service = opts.Service
	}
	if opts != nil {
		v.keyLock = opts.KeyLock
	}
	return v
}

const signingKeyUser = "signing-key"

// KeyLockFile is the name of the lock file, in the home folder, for
// [Options.KeyLock].
const KeyLockFile = "signing-key.lock"

// keyLockWait bounds how long a process waits for another one creating or
// rotating the key (a keychain that asks the user to unlock it may take a
// while).
const keyLockWait = 2 * time.Minute

// testHookCreating, when set, runs in SigningKey between finding no key
// and creating one.
var testHookCreating func()

// lockKey takes the home's key lock ([Options.KeyLock]) and returns the
// function that lets go of it.
func (v *Vault) lockKey() (unlock func(), err error) {
	if v.keyLock == nil {
		return func() {}, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), keyLockWait)
	defer cancel()
	unlock, err = v.keyLock.Lock(ctx)
	if err != nil {
		return nil, fmt.Errorf("wait for another Gatehouse process creating the signing key: %w", err)
	}
	return unlock, nil
}

// storedKey is how the signing key sits in the keychain.
type storedKey struct {
	Seed string `json:"seed"` // base64 of the 32-byte Ed25519 seed
}

// SigningKey returns the evidence log's signing key, creating it in the
// keychain on first use. Processes of one home ([Options.KeyLock]) that find
// no key at the same moment MUST end with the same key: the one that
// creates it holds the home's key lock from before it looks again until
// the key is stored, and the others, once they hold the lock, find it.
func (v *Vault) SigningKey() (ed25519.PrivateKey, error) {
	k, err := v.loadSigningKey()
	if !errors.Is(err, ErrNotFound) {
		return k, err
	}
	unlock, err := v.lockKey()
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	defer unlock()
	if k, err := v.loadSigningKey(); !errors.Is(err, ErrNotFound) {
		return k, err // created while this process waited
	}
	if testHookCreating != nil {
		testHookCreating()
	}
	_, k, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	if err := v.storeSigningKey(k); err != nil {
		return nil, err
	}
	return v.loadSigningKey()
}

// RotateSigningKey creates a new signing key, calls announce with it (the
// evidence log records the rotation, signed by the old key), and only then
// makes it the current key in the keychain, replacing the old one. If
// announce fails, nothing changes. Entries the old key signed stay
// verifiable through its public key, which the log holds.
func (v *Vault) RotateSigningKey(announce func(next ed25519.PrivateKey) error) (ed25519.PrivateKey, error) {
	if err := checkReachable(); err != nil {
		return nil, err
	}
	unlock, err := v.lockKey()
	if err != nil {
		return nil, fmt.Errorf("rotate signing key: %w", err)
	}
	defer unlock()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create signing key: %w", err)
	}
	if announce != nil {
		if err := announce(k); err != nil {
			return nil, err
		}
	}
	if err := v.storeSigningKey(k); err != nil {
		return nil, err
	}
	return k, nil
}

const witnessKeyUser = "witness-key"

// WitnessKey returns the key this home cosigns other logs' checkpoints
// with when it runs a witness (gatehouse witness serve), creating it in the
// keychain on first use. It is not the evidence log's signing key: a
// witness's key vouches for others' logs, never for its own.
func (v *Vault) WitnessKey() (ed25519.PrivateKey, error) {
	k, err := v.loadKey(witnessKeyUser)
	if !errors.Is(err, ErrNotFound) {
		return k, err
	}
	unlock, err := v.lockKey()
	if err != nil {
		return nil, fmt.Errorf("create witness key: %w", err)
	}
	defer unlock()
	if k, err := v.loadKey(witnessKeyUser); !errors.Is(err, ErrNotFound) {
		return k, err
	}
	_, k, err = ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("create witness key: %w", err)
	}
	b, _ := json.Marshal(storedKey{Seed: base64.StdEncoding.EncodeToString(k.Seed())})
	if err := v.set(witnessKeyUser, string(b)); err != nil {
		return nil, err
	}
	return v.loadKey(witnessKeyUser)
}

func (v *Vault) loadSigningKey() (ed25519.PrivateKey, error) { return v.loadKey(signingKeyUser) }

func (v *Vault) loadKey(user string) (ed25519.PrivateKey, error) {
	s, err := v.get(user)
	if err != nil {
		return nil, err
	}
	var sk storedKey
	seed, derr := []byte(nil), json.Unmarshal([]byte(s), &sk)
	if derr == nil {
		seed, derr = base64.StdEncoding.DecodeString(sk.Seed)
	}
	if derr != nil || len(seed) != ed25519.SeedSize {
		if user == witnessKeyUser {
			return nil, fmt.Errorf("witness key in the keychain (service %q) is damaged", v.service)
		}
		return nil, fmt.Errorf("signing key in the keychain (service %q) is damaged; rotate it with: gatehouse keys rotate", v.service)
	}
	return ed25519.NewKeyFromSeed(seed), nil
}

func (v *Vault) storeSigningKey(k ed25519.PrivateKey) error {
	b, _ := json.Marshal(storedKey{Seed: base64.StdEncoding.EncodeToString(k.Seed())})
	return v.set(signingKeyUser, string(b))
}

func (v *Vault) get(user string) (string, error) {
	if err := checkReachable(); err != nil {
		return "", err
	}
	s, err := keyring.Get(v.service, user)
	if errors.Is(err, keyring.ErrNotFound) {
		return "", fmt.Errorf("%s: %w", user, ErrNotFound)
	}
	if err != nil {
		return "", explain(err)
	}
	return s, nil
}

func (v *Vault) set(user, value string) error {
	if err := checkReachable(); err != nil {
		return err
	}
	if err := keyring.Set(v.service, user, value); err != nil {
		return explain(err)
	}
	return nil
}

// checkReachable fails early where go-keyring would otherwise start a stray
// D-Bus daemon of its own (it runs dbus-launch when no session bus is known).
func checkReachable() error {
	if inMemory.Load() || runtime.GOOS != "linux" && runtime.GOOS != "freebsd" {
		return nil
	}
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") != "" {
		return nil
	}
	if _, err := os.Stat(fmt.Sprintf("/run/user/%d/bus", os.Getuid())); err == nil {
		return nil
	}
	return fmt.Errorf("%w: no D-Bus session bus (DBUS_SESSION_BUS_ADDRESS is unset and /run/user/%d/bus does not exist); "+
		"run Gatehouse in a desktop session, or pass DBUS_SESSION_BUS_ADDRESS to it (an MCP client passes its servers only a few variables: put it in the server entry's env)",
		ErrUnavailable, os.Getuid())
}

// explain turns the keychain library's errors into what a person can act on.
func explain(err error) error {
	msg := err.Error()
	switch {
	case errors.Is(err, keyring.ErrSetDataTooBig):
		return fmt.Errorf("%w: the value is too large for this keychain", ErrUnavailable)
	case strings.Contains(msg, "org.freedesktop.secrets") && strings.Contains(msg, "not provided"):
		return fmt.Errorf("%w: no Secret Service is running; install and start one (Debian: apt install gnome-keyring, or KeePassXC with its Secret Service enabled): %v", ErrUnavailable, err)
	case strings.Contains(msg, "unlock"):
		return fmt.Errorf("%w: the keyring is locked; unlock it (log in to the desktop, or open Passwords and Keys) and retry: %v", ErrUnavailable, err)
	case strings.Contains(msg, "dbus-launch"):
		return fmt.Errorf("%w: no D-Bus session bus: %v", ErrUnavailable, err)
	}
	return fmt.Errorf("%w: %v", ErrUnavailable, err)
}

// Service returns the keychain service name the vault's items live under.
func (v *Vault) Service() string { return v.service }
