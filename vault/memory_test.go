package vault

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestPurge(t *testing.T) {
	v := testVault(t)
	if _, err := v.SigningKey(); err != nil {
		t.Fatal(err)
	}
	if err := v.SetSecret("api", "value-1234"); err != nil {
		t.Fatal(err)
	}
	other := testVault(t)
	other.service += "-other"
	if err := other.SetSecret("api", "kept-5678"); err != nil {
		t.Fatal(err)
	}
	if err := v.Purge(); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if _, err := v.Secret("api"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Secret after Purge = %v, want ErrNotFound", err)
	}
	if _, err := v.get(signingKeyUser); !errors.Is(err, ErrNotFound) {
		t.Errorf("signing key after Purge = %v, want ErrNotFound", err)
	}
	if s, err := other.Secret("api"); err != nil || s != "kept-5678" {
		t.Errorf("another service's secret after Purge = %q, %v; want it kept", s, err)
	}
	other.Purge()
}

// InMemory replaces the keychain for the whole process, so it is tried in a
// process of its own: the test binary run again, without any D-Bus session.
func TestInMemory(t *testing.T) {
	if os.Getenv("GATEHOUSE_VAULT_INMEMORY") == "1" {
		inMemoryChild(t)
		return
	}
	if _, err := os.Stat("/run/user/" + itoa(os.Getuid()) + "/bus"); err == nil {
		t.Skip("this machine has a systemd user bus; the test needs one without")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestInMemory$", "-test.v")
	cmd.Env = append(os.Environ(), "GATEHOUSE_VAULT_INMEMORY=1", "DBUS_SESSION_BUS_ADDRESS=")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("in-memory keychain: %v\n%s", err, out)
	}
}

func inMemoryChild(t *testing.T) {
	v := New(&Options{Service: "gatehouse-test-memory"})
	if _, err := v.SigningKey(); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("SigningKey without a bus, before InMemory = %v, want ErrUnavailable", err)
	}
	InMemory()
	k1, err := v.SigningKey()
	if err != nil {
		t.Fatalf("SigningKey in memory: %v", err)
	}
	k2, err := New(&Options{Service: "gatehouse-test-memory"}).SigningKey()
	if err != nil || !k1.Equal(k2) {
		t.Errorf("a second vault of the service got another key (%v): the memory is not shared", err)
	}
	if err := v.SetSecret("api", "value-1234"); err != nil {
		t.Fatal(err)
	}
	if s, err := v.Secret("api"); err != nil || s != "value-1234" {
		t.Errorf("Secret = %q, %v", s, err)
	}
	if err := v.Purge(); err != nil {
		t.Fatal(err)
	}
	if _, err := v.Secret("api"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Secret after Purge = %v, want ErrNotFound", err)
	}
}
