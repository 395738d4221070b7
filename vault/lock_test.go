package vault

import (
	"bytes"
	"crypto/ed25519"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatehouse-dev/gatehouse/internal/filelock"
	"github.com/zalando/go-keyring"
)

// Processes starting together on new homes end with one signing key per
// home: each home's processes are the test binary run again, started
// together, each asking its home's vault (locking the home's KeyLockFile)
// for the key as soon as its stdin closes.
func TestSigningKeyOnePerHome(t *testing.T) {
	if spec := os.Getenv("GATEHOUSE_VAULT_KEYCHILD"); spec != "" {
		keyChild(spec)
		return
	}
	testVault(t) // fails early without a keychain session
	const homes, procs = 3, 16
	type proc struct {
		home  int
		cmd   *exec.Cmd
		start io.WriteCloser
		out   bytes.Buffer
	}
	var all []*proc
	services := make([]string, homes)
	for h := range homes {
		services[h] = fmt.Sprintf("gatehouse-test-%s-%d", t.Name(), h)
		t.Cleanup(func() { keyring.DeleteAll(services[h]) })
		dir := t.TempDir()
		for range procs {
			p := &proc{home: h}
			p.cmd = exec.Command(os.Args[0], "-test.run=^TestSigningKeyOnePerHome$")
			p.cmd.Env = append(os.Environ(), "GATEHOUSE_VAULT_KEYCHILD="+services[h]+"\n"+dir)
			p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
			w, err := p.cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			p.start = w
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			all = append(all, p)
		}
	}
	for _, p := range all {
		p.start.Close()
	}
	var wg sync.WaitGroup
	for _, p := range all {
		wg.Go(func() { p.cmd.Wait() })
	}
	wg.Wait()

	keys := make([]map[string]int, homes)
	for h := range keys {
		keys[h] = map[string]int{}
	}
	for _, p := range all {
		if !p.cmd.ProcessState.Success() {
			t.Fatalf("a process of home %d: %v\n%s", p.home, p.cmd.ProcessState, p.out.String())
		}
		pub, _, _ := strings.Cut(p.out.String(), "\n")
		keys[p.home][pub]++
	}
	for h, got := range keys {
		k, err := New(&Options{Service: services[h]}).loadSigningKey()
		if err != nil {
			t.Fatalf("home %d: the keychain holds no key: %v", h, err)
		}
		stored := hex.EncodeToString(k.Public().(ed25519.PublicKey))
		if len(got) != 1 || got[stored] != procs {
			t.Errorf("home %d: %d processes used keys %v, want all %d to use the stored key %s", h, procs, got, procs, stored)
		}
	}
}

// keyChild waits for its stdin to close, then prints the public key of
// the signing key of the vault spec names ("SERVICE\nHOME").
func keyChild(spec string) {
	service, home, _ := strings.Cut(spec, "\n")
	io.Copy(io.Discard, os.Stdin)
	// Each process takes its own time to create the key, as processes
	// that start together do; without the lock, one that stores its key
	// early uses it while another stores its own later.
	testHookCreating = func() { time.Sleep(time.Duration(rand.IntN(250)) * time.Millisecond) }
	lock := filelock.New(filepath.Join(home, KeyLockFile))
	k, err := New(&Options{Service: service, KeyLock: lock}).SigningKey()
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	fmt.Println(hex.EncodeToString(k.Public().(ed25519.PublicKey)))
	os.Exit(0)
}
