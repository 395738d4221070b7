package main

import (
	"context"
	"testing"

	"github.com/gatehouse-dev/gatehouse/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// Homes never share keychain items: only the home in the user's config
// folder uses the plain service name; one named by $GATEHOUSE_HOME (how
// tests and profiles run) gets its own, even though it is then the default.
func TestVaultPerHome(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	t.Setenv(store.EnvHome, a)
	services := map[string]bool{}
	for _, dir := range []string{a, b} {
		st, err := store.Open(context.Background(), dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := vaultFor(st).Service()
		st.Close()
		if s == vault.DefaultService || services[s] {
			t.Errorf("home %s uses keychain service %q, shared with another home", dir, s)
		}
		services[s] = true
	}
}
