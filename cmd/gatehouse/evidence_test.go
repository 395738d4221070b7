package main

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
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

// A rotated log's public keys, exported as PEM or JWKS, are its whole key
// chain, oldest first: each PEM block is a key OpenSSL reads, and either
// file pins the log's first key for verify.
func TestKeysExportRotated(t *testing.T) {
	home := t.TempDir()
	gatehouse(t, home, "policy", "set", "mcp.a.b", "DENY")
	gatehouse(t, home, "keys", "rotate")
	gatehouse(t, home, "policy", "set", "mcp.a.c", "DENY")
	gatehouse(t, home, "keys", "rotate")
	gatehouse(t, home, "policy", "set", "mcp.a.d", "DENY")
	bundle := filepath.Join(t.TempDir(), "bundle")
	gatehouse(t, home, "export", "--out", bundle)
	data, err := os.ReadFile(filepath.Join(bundle, verify.FileKeys))
	if err != nil {
		t.Fatal(err)
	}
	var chain verify.JWKS
	if err := json.Unmarshal(data, &chain); err != nil || len(chain.Keys) != 3 {
		t.Fatalf("the bundle's keys = %d (%v), want the 3 of the chain", len(chain.Keys), err)
	}

	dir := t.TempDir()
	pemFile, jwksFile := filepath.Join(dir, "keys.pem"), filepath.Join(dir, "keys.jwks")
	pemOut := gatehouse(t, home, "keys", "export-public", "--format", "pem")
	jwksOut := gatehouse(t, home, "keys", "export-public")
	os.WriteFile(pemFile, []byte(pemOut), 0o600)
	os.WriteFile(jwksFile, []byte(jwksOut), 0o600)

	// The PEM: one PUBLIC KEY block per key of the chain, in its order,
	// with no headers; between them only lines that name the key.
	var blocks []*pem.Block
	rest := []byte(pemOut)
	for {
		b, r := pem.Decode(rest)
		if b == nil {
			break
		}
		before := strings.TrimSpace(string(rest[:len(rest)-len(r)]))
		if !strings.HasPrefix(before, "Gatehouse evidence log ") || strings.Count(before, "\n") != strings.Count(string(pem.EncodeToMemory(b)), "\n") {
			t.Errorf("block %d is preceded by %q, want one line naming the key", len(blocks), before)
		}
		blocks, rest = append(blocks, b), r
	}
	if strings.TrimSpace(string(rest)) != "" {
		t.Errorf("the PEM ends with %q, not a block", rest)
	}
	if len(blocks) != len(chain.Keys) {
		t.Fatalf("the PEM holds %d keys, want the chain's %d", len(blocks), len(chain.Keys))
	}
	for i, b := range blocks {
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		pub, ok := k.(ed25519.PublicKey)
		switch {
		case b.Type != "PUBLIC KEY" || len(b.Headers) != 0:
			t.Errorf("block %d is %q with headers %v, want PUBLIC KEY and none", i, b.Type, b.Headers)
		case err != nil || !ok:
			t.Errorf("block %d is not an Ed25519 PKIX public key: %v", i, err)
		case entry.KeyID(pub) != chain.Keys[i].Kid:
			t.Errorf("block %d is key %s, want the chain's %s", i, entry.KeyID(pub), chain.Keys[i].Kid)
		}
	}
	if !strings.Contains(pemOut, "key "+chain.Keys[0].Kid+": the log's first key") || !strings.Contains(pemOut, "key "+chain.Keys[2].Kid+": the current key") {
		t.Errorf("the PEM does not name the first and current keys:\n%s", pemOut)
	}

	// OpenSSL reads each key, and the file (its first).
	t.Run("openssl", func(t *testing.T) {
		openssl, err := exec.LookPath("openssl")
		if err != nil {
			if os.Getenv("GATEHOUSE_TEST_NO_OPENSSL") != "" {
				t.Skip("openssl is not installed, and GATEHOUSE_TEST_NO_OPENSSL is set: the PEM was checked in Go only")
			}
			t.Fatal("openssl is not installed: install it, or set GATEHOUSE_TEST_NO_OPENSSL=1 to check the PEM in Go only")
		}
		files := []string{pemFile}
		for i, b := range blocks {
			f := filepath.Join(dir, fmt.Sprintf("key%d.pem", i))
			os.WriteFile(f, pem.EncodeToMemory(b), 0o600)
			files = append(files, f)
		}
		for _, f := range files {
			if out, err := exec.Command(openssl, "pkey", "-pubin", "-in", f, "-noout").CombinedOutput(); err != nil {
				t.Errorf("openssl pkey -pubin -in %s -noout: %v\n%s", filepath.Base(f), err, out)
			}
		}
	})

	// Either file pins the log's first key; a later key alone does not.
	later := filepath.Join(dir, "later.pem")
	os.WriteFile(later, pem.EncodeToMemory(blocks[2]), 0o600)
	for _, tt := range []struct {
		pin string
		ok  bool
	}{{pemFile, true}, {jwksFile, true}, {filepath.Join(bundle, verify.FileKeys), true}, {later, false}} {
		out, err := exec.Command(gatehouseBin, "verify", "--pin-key", tt.pin, bundle).CombinedOutput()
		if ok := err == nil; ok != tt.ok {
			t.Errorf("verify --pin-key %s: ok = %v, want %v\n%s", filepath.Base(tt.pin), ok, tt.ok, out)
		}
	}
}
