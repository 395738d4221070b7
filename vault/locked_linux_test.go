package vault

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A locked keyring: every operation fails with ErrUnavailable and says to
// unlock it, nothing is written elsewhere, and nothing prompts. The keyring
// is locked in a keychain session of its own (a nested
// .ci/keyring-session.sh), since locking the shared one would break the
// tests that run beside this one.
func TestLockedKeyring(t *testing.T) {
	if os.Getenv("GATEHOUSE_LOCKED_ROLE") == "1" {
		lockedRole()
		return
	}
	script, err := filepath.Abs(filepath.Join("..", ".ci", "keyring-session.sh"))
	if err != nil {
		t.Fatal(err)
	}
	// Read, not only run: go test's cache then knows the result depends on it.
	if _, err := os.ReadFile(script); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", script, os.Args[0], "-test.run", "^TestLockedKeyring$", "-test.v")
	cmd.Env = append(os.Environ(), "GATEHOUSE_LOCKED_ROLE=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the locked-keyring run failed: %v\n%s", err, out)
	}
	text := string(out)
	for _, op := range []string{"SetSecret", "Secret", "SigningKey"} {
		line := ""
		for _, l := range strings.Split(text, "\n") {
			if strings.HasPrefix(l, op+": ") {
				line = l
			}
		}
		if !strings.Contains(line, "unavailable=true") || !strings.Contains(line, "the keyring is locked; unlock it") {
			t.Errorf("%s on a locked keyring: %q, want ErrUnavailable saying to unlock it\n%s", op, line, text)
		}
	}
	if strings.Contains(text, "value-while-locked") {
		t.Errorf("the value appeared in the output:\n%s", text)
	}
}

// lockedRole stores a secret, locks the keyring over D-Bus, and reports
// what each operation says.
func lockedRole() {
	v := New(&Options{Service: "gatehouse-test-locked"})
	if err := v.SetSecret("before", "stored-before-lock"); err != nil {
		fmt.Println("setup:", err)
		os.Exit(1)
	}
	out, err := exec.Command("dbus-send", "--session", "--dest=org.freedesktop.secrets", "--type=method_call", "--print-reply",
		"/org/freedesktop/secrets", "org.freedesktop.Secret.Service.Lock",
		"array:objpath:/org/freedesktop/secrets/collection/login").CombinedOutput()
	if err != nil {
		fmt.Printf("lock: %v: %s\n", err, out)
		os.Exit(1)
	}
	report := func(op string, err error) {
		fmt.Printf("%s: unavailable=%v %v\n", op, errors.Is(err, ErrUnavailable), err)
	}
	report("SetSecret", v.SetSecret("while", "value-while-locked"))
	_, err = v.Secret("before")
	report("Secret", err)
	_, err = v.SigningKey()
	report("SigningKey", err)
}
