package app

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// A Keychain keeps the home folder's secrets: the evidence log's signing key
// and the servers' credentials. The OS keychain ([vault.Vault]) is the one
// Gatehouse uses; tests give their own.
type Keychain interface {
	SigningKey() (ed25519.PrivateKey, error)
	RotateSigningKey(announce func(next ed25519.PrivateKey) error) (ed25519.PrivateKey, error)
	Secret(id string) (string, error)
	SetSecret(id, value string) error
	DeleteSecret(id string) error
}

var _ Keychain = (*vault.Vault)(nil)

// core is what the views read and change: the home folder's store, its
// keychain, and, opened on first use, its evidence log and policy store.
// It keeps no copy of anything they hold.
type core struct {
	st *store.Store
	kc Keychain

	log  atomic.Pointer[receipts.Log]    // nil until opened
	rd   atomic.Pointer[receipts.Reader] // nil until opened, or log's
	open chan struct{}                   // one opening of the log at a time

	mu  sync.Mutex
	pol *policy.Store // guarded by mu; nil until opened

	// The search index's upgrade (receipts.Log.UpgradeIndex), run in the
	// background once the log is open: bg bounds it, indexLeft says how
	// many entries it has left to move (-1: none, or not known yet).
	bg        context.Context
	logger    *slog.Logger
	indexLeft atomic.Int64
}

func newCore(bg context.Context, st *store.Store, kc Keychain, log *slog.Logger) *core {
	c := &core{st: st, kc: timedKeychain{kc: kc, wait: keychainWait}, open: make(chan struct{}, 1), bg: bg, logger: log}
	c.indexLeft.Store(-1)
	return c
}

// evidence returns the evidence log, opening it with the keychain's signing
// key the first time. A failure (a locked keychain, a locked database) is
// returned, and the next call tries again. Callers wait for an opening
// under way, at most until ctx ends.
func (c *core) evidence(ctx context.Context) (*receipts.Log, error) {
	if l := c.log.Load(); l != nil {
		return l, nil
	}
	select {
	case c.open <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("open the evidence log: %w", ctx.Err())
	}
	defer func() { <-c.open }()
	if l := c.log.Load(); l != nil {
		return l, nil
	}
	key, err := c.kc.SigningKey()
	if err != nil {
		return nil, fmt.Errorf("open the evidence log: %w", err)
	}
	l, err := receipts.Open(ctx, c.st, key)
	if err != nil {
		return nil, err
	}
	// A rotation made elsewhere (gatehouse keys rotate) retires this key:
	// sign on with the keychain's new one.
	l.FollowKeys(c.kc.SigningKey)
	c.log.Store(l)
	go c.upgradeIndex(l)
	return l, nil
}

// reader returns the evidence log for reading, opening it the first time:
// it needs no signing key, so history, search and verification work while
// the keychain is locked. A failure (a locked database) is returned, and the
// next call tries again.
func (c *core) reader(ctx context.Context) (*receipts.Reader, error) {
	if r := c.rd.Load(); r != nil {
		return r, nil
	}
	if l := c.log.Load(); l != nil {
		c.rd.CompareAndSwap(nil, l.Reader)
		return c.rd.Load(), nil
	}
	r, err := receipts.OpenReader(ctx, c.st)
	if err != nil {
		return nil, fmt.Errorf("open the evidence log: %w", err)
	}
	c.rd.CompareAndSwap(nil, r)
	return c.rd.Load(), nil
}

// upgradeIndex finishes the upgrade of the log's search index, if one is
// under way, in the background: a short transaction at a time, so proxies'
// receipts barely wait. A failure (the database locked for long) is tried
// again a minute later.
func (c *core) upgradeIndex(l *receipts.Log) {
	for {
		left, upgrading, err := l.IndexBacklog(c.bg)
		if err == nil && !upgrading {
			c.indexLeft.Store(-1)
			return
		}
		if err == nil {
			c.indexLeft.Store(left)
			c.logger.Info("upgrading the search index", "entries_left", left)
			err = l.UpgradeIndex(c.bg, func(left int64) { c.indexLeft.Store(left) })
			if err == nil {
				c.logger.Info("search index upgraded")
				c.indexLeft.Store(-1)
				return
			}
		}
		if c.bg.Err() != nil {
			return
		}
		c.logger.Warn("upgrade the search index", "err", err)
		select {
		case <-c.bg.Done():
			return
		case <-time.After(time.Minute):
		}
	}
}

// openedReader returns the log's reader if it is open, else nil: it never
// waits.
func (c *core) openedReader() *receipts.Reader { return c.rd.Load() }

// openedLog returns the evidence log if it is open, without opening it:
// what polling uses, so that a keychain that cannot be reached is not asked
// again every second.
func (c *core) openedLog() *receipts.Log {
	return c.log.Load()
}

// keychainWait bounds one call to the keychain. A Secret Service that never
// answers (a daemon waiting on an unlock prompt nobody sees) must not leave
// the window waiting: the call is abandoned, and the view says the keychain
// is not available.
const keychainWait = 8 * time.Second

// timedKeychain gives up on a keychain call after wait. The call itself
// cannot be cancelled; it is left to finish on its own.
type timedKeychain struct {
	kc   Keychain
	wait time.Duration
}

// within runs f, giving up after k.wait.
func within[T any](k timedKeychain, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-time.After(k.wait):
		var zero T
		return zero, fmt.Errorf("%w: the keychain did not answer within %v (is it waiting for an unlock prompt?)", vault.ErrUnavailable, k.wait)
	}
}

func (k timedKeychain) SigningKey() (ed25519.PrivateKey, error) {
	return within(k, k.kc.SigningKey)
}

func (k timedKeychain) Secret(id string) (string, error) {
	return within(k, func() (string, error) { return k.kc.Secret(id) })
}

func (k timedKeychain) SetSecret(id, value string) error {
	_, err := within(k, func() (struct{}, error) { return struct{}{}, k.kc.SetSecret(id, value) })
	return err
}

func (k timedKeychain) DeleteSecret(id string) error {
	_, err := within(k, func() (struct{}, error) { return struct{}{}, k.kc.DeleteSecret(id) })
	return err
}

// RotateSigningKey is not bounded: the new key is announced in the log
// before the keychain keeps it, and giving up between the two would leave
// the log announcing a key nothing signs with.
func (k timedKeychain) RotateSigningKey(announce func(next ed25519.PrivateKey) error) (ed25519.PrivateKey, error) {
	return k.kc.RotateSigningKey(announce)
}

// policies returns the policy store. It reads without the keychain; saving
// a version records it in the evidence log first, which needs the signing
// key.
func (c *core) policies(ctx context.Context) (*policy.Store, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pol != nil {
		return c.pol, nil
	}
	rec := policy.RecorderFunc(func(ctx context.Context, version int64, hash string) error {
		l, err := c.evidence(ctx)
		if err != nil {
			return err
		}
		_, err = l.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: version, Hash: hash})
		return err
	})
	p, err := policy.Open(ctx, c.st, &policy.Options{Recorder: rec})
	if err != nil {
		return nil, err
	}
	c.pol = p
	return p, nil
}

// A problem is an error as the window explains it: what went wrong in a
// few words, the error itself, and what to do about it.
type problem struct {
	title string
	text  string
	hint  string
	retry bool // it may go away by itself: the view tries again later
}

// explain turns err, which happened while doing what (a short phrase,
// "read the server list"), into a problem.
func explain(what string, err error) problem {
	p := problem{title: "Could not " + what, text: sentence(err)}
	switch {
	case errors.Is(err, vault.ErrUnavailable):
		p.title = "The keychain is not available"
		p.hint = keychainHint
		p.retry = true
	case store.IsLocked(err):
		p.title = "The Gatehouse database is locked"
		p.hint = "Another program holds a lock on " + store.DatabaseFile + " (a backup tool, a database browser, a stuck gatehouse process). Gatehouse tries again by itself."
		p.retry = true
	case errors.Is(err, context.DeadlineExceeded):
		p.title = "Gatehouse took too long to " + what
		p.hint = "The disk or the database may be busy. Gatehouse tries again by itself."
		p.retry = true
	}
	return p
}

// keychainHint says how to make the keychain reachable, per system.
var keychainHint = "Gatehouse keeps its signing key and your servers' credentials in the OS keychain. " +
	"On Linux, install and unlock a Secret Service (sudo apt-get install gnome-keyring, then log in again, or unlock it in Passwords and Keys); " +
	"on macOS, unlock the login keychain in Keychain Access; on Windows, sign in to Credential Manager."

// addRule makes r a rule of the policy, in place of any rule with its ID,
// as a new version of the policy. Saving the version MUST record it in the
// evidence log first (the policy store's recorder does), so a standing
// answer given in the window is in the log as every policy change is.
func (c *core) addRule(ctx context.Context, r policy.Rule) error {
	ps, err := c.policies(ctx)
	if err != nil {
		return err
	}
	cur, err := ps.Current(ctx)
	if err != nil {
		return fmt.Errorf("read the policy: %w", err)
	}
	next := cur.Clone()
	next.Rules = slices.DeleteFunc(next.Rules, func(have policy.Rule) bool { return have.ID == r.ID })
	next.Rules = append(next.Rules, r)
	if _, err := ps.Save(ctx, next); err != nil {
		return fmt.Errorf("save the rule %s: %w", r.ID, err)
	}
	return nil
}

// reviewServer ends the quarantine of the server called name, as gatehouse
// server review does: from then on its calls are decided by the policy
// alone. A server not in quarantine is left as it is.
func (c *core) reviewServer(ctx context.Context, name string) error {
	srv, err := c.st.Server(ctx, name)
	if err != nil {
		return fmt.Errorf("review server %s: %w", name, err)
	}
	if !srv.Quarantined {
		return nil
	}
	srv.Quarantined = false
	if err := c.st.UpdateServer(ctx, srv); err != nil {
		return fmt.Errorf("review server %s: %w", name, err)
	}
	return nil
}
