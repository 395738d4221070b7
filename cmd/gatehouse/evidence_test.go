package main

import (
	"context"
	"github.com/zalando/go-keyring"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
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

// The keychain loses the log's signing key: the next command that signs
// makes a new key but the log refuses it, saying how to go on; after
// 'keys adopt --custody-break' the log is signed again, and verification
// reports the break where it happened, while entries before it verify.
func TestLostSigningKey(t *testing.T) {
	home := t.TempDir()
	gatehouse(t, home, "policy", "set", "mcp.a.b", "DENY") // an entry signed by the first key
	st, err := store.Open(context.Background(), home, nil)
	if err != nil {
		t.Fatal(err)
	}
	service := vaultFor(st).Service()
	st.Close()
	if err := keyring.Delete(service, "signing-key"); err != nil {
		t.Fatalf("delete the signing key: %v", err)
	}
	cmd := exec.Command(gatehouseBin, "--home", home, "policy", "set", "mcp.a.c", "DENY")
	out, err := cmd.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "not one of this log's keys") || !strings.Contains(string(out), "gatehouse keys adopt --custody-break") {
		t.Fatalf("signing with a lost key: %v\n%s", err, out)
	}
	if out, err := exec.Command(gatehouseBin, "--home", home, "keys", "adopt").CombinedOutput(); err == nil || !strings.Contains(string(out), "--custody-break") {
		t.Errorf("keys adopt without confirmation: %v\n%s", err, out)
	}
	gatehouse(t, home, "keys", "adopt", "--custody-break")
	gatehouse(t, home, "policy", "set", "mcp.a.c", "DENY")
	bundle := filepath.Join(t.TempDir(), "bundle")
	out, err = exec.Command(gatehouseBin, "--home", home, "export", "--out", bundle).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "custody of the log breaks here") || !strings.Contains(string(out), "was written, but does not verify") {
		t.Errorf("export after adopting a key: %v\n%s", err, out)
	}
	out, err = exec.Command(gatehouseBin, "verify", bundle).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "checks failed: key chain") {
		t.Errorf("verify after adopting a key: %v\n%s", err, out)
	}
}
