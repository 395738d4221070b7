package vault

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/zalando/go-keyring"
)

// These tests use the real keychain: make test runs them inside a private
// D-Bus session with gnome-keyring (.ci/keyring-session.sh), under a
// service name of their own.
func testVault(t *testing.T) *Vault {
	t.Helper()
	if os.Getenv("DBUS_SESSION_BUS_ADDRESS") == "" && os.Getenv("GATEHOUSE_TEST_KEYRING") == "" {
		t.Fatal("no keychain session: run the tests with make test (or .ci/keyring-session.sh go test ./vault)")
	}
	v := New(&Options{Service: "gatehouse-test-" + t.Name()})
	t.Cleanup(func() { keyring.DeleteAll(v.service) })
	return v
}

func TestSigningKey(t *testing.T) {
	v := testVault(t)
	k1, err := v.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	k2, err := New(&Options{Service: v.service}).SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(k1, k2) {
		t.Error("a second vault on the same service created another key instead of loading the first")
	}
	announced := false
	k3, err := v.RotateSigningKey(func(ed25519.PrivateKey) error { announced = true; return nil })
	if err != nil {
		t.Fatal(err)
	}
	k4, _ := v.SigningKey()
	if !announced || bytes.Equal(k3, k1) || !bytes.Equal(k3, k4) {
		t.Error("after rotation the current key is not the new one, or it was not announced")
	}
	// A failed announcement changes nothing.
	if _, err := v.RotateSigningKey(func(ed25519.PrivateKey) error { return errors.New("log is full") }); err == nil {
		t.Error("rotation succeeded although the announcement failed")
	}
	if k5, _ := v.SigningKey(); !bytes.Equal(k5, k4) {
		t.Error("a failed rotation replaced the key")
	}
}

func TestDamagedKey(t *testing.T) {
	v := testVault(t)
	if err := keyring.Set(v.service, signingKeyUser, "not json"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.SigningKey(); err == nil || !bytes.Contains([]byte(err.Error()), []byte("gatehouse keys rotate")) {
		t.Errorf("SigningKey with a damaged item = %v, want an error with the way out", err)
	}
}

func TestNoSessionBus(t *testing.T) {
	t.Setenv("DBUS_SESSION_BUS_ADDRESS", "")
	if _, err := os.Stat("/run/user/" + itoa(os.Getuid()) + "/bus"); err == nil {
		t.Fatal("this machine has a systemd user bus; the test needs one without")
	}
	_, err := New(&Options{Service: "gatehouse-test-nobus"}).SigningKey()
	if !errors.Is(err, ErrUnavailable) || !bytes.Contains([]byte(err.Error()), []byte("DBUS_SESSION_BUS_ADDRESS")) {
		t.Errorf("SigningKey without a bus = %v, want ErrUnavailable naming the variable", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func TestSecrets(t *testing.T) {
	v := testVault(t)
	if err := v.SetSecret("gh-token", "ghp_0123456789abcdef"); err != nil {
		t.Fatal(err)
	}
	if s, err := v.Secret("gh-token"); err != nil || s != "ghp_0123456789abcdef" {
		t.Errorf("Secret = %q, %v", s, err)
	}
	if err := v.DeleteSecret("gh-token"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Secret("gh-token"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Secret after delete = %v, want ErrNotFound", err)
	}
	if err := v.DeleteSecret("gh-token"); !errors.Is(err, ErrNotFound) {
		t.Errorf("DeleteSecret twice = %v, want ErrNotFound", err)
	}
}

func TestSecretLimits(t *testing.T) {
	v := testVault(t)
	tests := []struct {
		name, id, value string
		want            error
	}{
		{"too large", "big", strings.Repeat("x", MaxSecretBytes+1), ErrTooLarge},
		{"empty", "empty", "", nil},
		{"bad id", "../etc", "x", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := v.SetSecret(tt.id, tt.value)
			if err == nil || (tt.want != nil && !errors.Is(err, tt.want)) {
				t.Errorf("SetSecret = %v, want an error (%v)", err, tt.want)
			}
			if _, err := v.Secret(tt.id); err == nil {
				t.Error("a refused secret was stored")
			}
		})
	}
}

// A witness's key is its own: created once in the keychain, loaded after,
// never the log's signing key, and left alone by a rotation of that key.
func TestWitnessKey(t *testing.T) {
	v := testVault(t)
	w1, err := v.WitnessKey()
	if err != nil {
		t.Fatal(err)
	}
	w2, err := New(&Options{Service: v.service}).WitnessKey()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(w1, w2) {
		t.Error("a second vault on the same service created another witness key instead of loading the first")
	}
	s, err := v.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(s, w1) {
		t.Error("the witness key is the log's signing key")
	}
	if _, err := v.RotateSigningKey(nil); err != nil {
		t.Fatal(err)
	}
	if w3, _ := v.WitnessKey(); !bytes.Equal(w3, w1) {
		t.Error("a rotation of the signing key changed the witness key")
	}
}
