package main

import (
	"context"
	"errors"
	"path/filepath"

	"github.com/gatehouse-dev/gatehouse/gateway/policy"
	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// vaultFor returns the keychain view of the home folder st: the home in
// the user's config folder uses the service "gatehouse"; any other home (a
// profile, a test, one named by $GATEHOUSE_HOME) gets its own service, named
// after its path, so that homes never share keys. Its processes create the
// signing key holding the home's signing-key.lock: one key per home.
func vaultFor(st *store.Store) *vault.Vault {
	return vault.New(&vault.Options{
		Service: st.KeychainService(),
		KeyLock: filelock.New(filepath.Join(st.Dir(), vault.KeyLockFile)),
	})
}

// openLog opens the home folder and its evidence log, signing with the key
// the keychain holds for it (created on first use). The caller closes the
// store.
func (c *cli) openLog(ctx context.Context) (*store.Store, *receipts.Log, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	key, err := vaultFor(st).SigningKey()
	if err != nil {
		st.Close()
		if errors.Is(err, vault.ErrUnavailable) {
			return nil, nil, withHint(err, "the evidence log's signing key lives in the OS keychain; make it reachable and retry")
		}
		return nil, nil, err
	}
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		st.Close()
		if errors.Is(err, receipts.ErrForeignKey) {
			return nil, nil, withHint(err, "%s", foreignKeyHint)
		}
		return nil, nil, err
	}
	return st, l, nil
}

// openReader opens the home folder and its evidence log for reading: no
// signing key (the keychain is not asked), nothing written. The caller
// closes the store.
func (c *cli) openReader(ctx context.Context) (*store.Store, *receipts.Reader, error) {
	st, err := c.openStore(ctx)
	if err != nil {
		return nil, nil, err
	}
	r, err := receipts.OpenReader(ctx, st)
	if err != nil {
		st.Close()
		return nil, nil, err
	}
	return st, r, nil
}

// foreignKeyHint is the way on when the keychain's key is not the log's.
const foreignKeyHint = "the keychain does not hold the key that signs this log (was it deleted, or is this another machine's log?). " +
	"Restore that key to the keychain if you can; otherwise start signing with the keychain's key, knowing that " +
	"verification will report a break in custody there: gatehouse keys adopt --custody-break"

// policyRecorder writes each saved policy version to the evidence log.
func policyRecorder(l *receipts.Log) policy.Recorder {
	return policy.RecorderFunc(func(ctx context.Context, version int64, hash string) error {
		_, err := l.AppendEvent(ctx, entry.KindPolicy, entry.PolicyEvent{Version: version, Hash: hash})
		return err
	})
}
