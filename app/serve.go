package app

import (
	"context"
	"path/filepath"
	"sync"

	"github.com/gatehouse-dev/gatehouse/gateway/httpfront"
	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// serving runs the home's HTTP front in the app's own process, through the
// core's [httpfront.Service], as gatehouse serve does: the same gate, the
// same tokens, the same settings. In-process rather than a child
// gatehouse serve, so that its state (where it listens, its sessions, why
// it stopped) is read from it rather than parsed from a log, and so that
// it cannot outlive the app: [UI.Close] stops it.
type serving struct {
	u  *UI
	kc httpfront.Keychain

	mu   sync.Mutex
	svc  *httpfront.Service // guarded by mu; nil while stopped
	err  error              // guarded by mu: why it last failed to start, or stopped by itself
	gen  uint64             // guarded by mu: counts starts and stops, so a stale watcher says nothing
	done bool               // guarded by mu: the app is closing; nothing starts
}

// A serveState is what the Settings and the Status say of serving.
type serveState struct {
	on       bool
	url      string
	tls      bool
	sessions int
	err      error
}

func newServing(u *UI, kc Keychain) *serving {
	hk, ok := kc.(httpfront.Keychain)
	if !ok {
		hk = vault.New(&vault.Options{
			Service: u.st.KeychainService(),
			KeyLock: filelock.New(filepath.Join(u.st.Dir(), vault.KeyLockFile)),
		})
	}
	return &serving{u: u, kc: hk}
}

// state is how serving stands now.
func (s *serving) state() serveState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := serveState{err: s.err}
	if s.svc != nil {
		st.on, st.url, st.tls, st.sessions = true, s.svc.URL(), s.svc.Config().TLS(), s.svc.Sessions()
	}
	return st
}

// tokens are the clients' tokens, whether or not serving runs: the same
// table and keychain entries as gatehouse serve token.
func (s *serving) tokens(ctx context.Context) (*httpfront.Tokens, error) {
	return httpfront.OpenTokens(ctx, s.u.st, s.kc)
}

// start starts serving with the home's settings (stopping it first if it
// runs), and returns why it could not. It blocks on the listener and the
// keychain: call it off the Fyne thread.
func (s *serving) start(ctx context.Context) error {
	s.stop()
	set, err := s.u.st.Settings(ctx)
	if err != nil {
		return s.failed(err)
	}
	cfg := httpfront.ConfigFromSettings(set)
	svc, err := httpfront.Start(ctx, s.u.st, s.kc, cfg, &httpfront.ServiceOptions{
		Logger:  s.u.log.WithGroup("serve"),
		Version: s.u.version,
	})
	if err != nil {
		return s.failed(err)
	}
	s.mu.Lock()
	if s.done {
		s.mu.Unlock()
		svc.Stop()
		return nil
	}
	s.gen++
	gen := s.gen
	s.svc, s.err = svc, nil
	s.mu.Unlock()
	go func() {
		<-svc.Done()
		s.mu.Lock()
		if s.gen == gen {
			s.svc, s.err = nil, svc.Err()
		}
		s.mu.Unlock()
		s.u.do(s.u.serveChanged)
	}()
	return nil
}

func (s *serving) failed(err error) error {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
	return err
}

// stop stops serving, ending every session, and waits until it has.
func (s *serving) stop() {
	s.mu.Lock()
	svc := s.svc
	s.svc, s.err = nil, nil
	s.gen++
	s.mu.Unlock()
	if svc != nil {
		svc.Stop()
	}
}

// close stops serving for good: the app is closing.
func (s *serving) close() {
	s.mu.Lock()
	s.done = true
	s.mu.Unlock()
	s.stop()
}

// startWithApp starts serving when the home's settings say the app
// serves; a failure is kept for the Settings to show.
func (s *serving) startWithApp() {
	goRead(s.u, func(ctx context.Context) (struct{}, error) {
		set, err := s.u.st.Settings(ctx)
		if err != nil || !set.ServeEnabled {
			return struct{}{}, err
		}
		return struct{}{}, s.start(context.WithoutCancel(ctx))
	}, func(struct{}, error) { s.u.serveChanged() })
}

// serveChanged shows serving's state in the Settings and the Status.
func (u *UI) serveChanged() {
	st := u.serve.state()
	u.status.serving = ""
	switch {
	case st.on:
		u.status.serving = "serving over HTTP at " + st.url
	case st.err != nil:
		u.status.serving = "not serving over HTTP: see Settings"
	}
	u.statusChanged()
	u.settings.serve.show(st)
}
