package clients_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/gatehouse-dev/gatehouse/gateway/clients"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// memoryKeychain stands in for the OS keychain (*vault.Vault).
type memoryKeychain map[string]string

func (k memoryKeychain) Secret(id string) (string, error) {
	if v, ok := k[id]; ok {
		return v, nil
	}
	return "", fmt.Errorf("secret %s: %w", id, vault.ErrNotFound)
}
func (k memoryKeychain) SetSecret(id, v string) error { k[id] = v; return nil }
func (k memoryKeychain) DeleteSecret(id string) error { delete(k, id); return nil }

// Govern a Cursor config and put it back. The Env here is a scratch home
// folder; SystemEnv is the real machine.
func Example() {
	ctx := context.Background()
	home, _ := os.MkdirTemp("", "home")
	defer os.RemoveAll(home)
	config := filepath.Join(home, ".cursor", "mcp.json")
	os.MkdirAll(filepath.Dir(config), 0o755)
	original := []byte(`{
  "mcpServers": {
    "stripe": {
      "command": "npx",
      "args": ["-y", "@stripe/mcp"],
      "env": { "STRIPE_SECRET_KEY": "sk_test_0123456789abcdef" }
    }
  }
}
`)
	os.WriteFile(config, original, 0o600)

	st, err := store.Open(ctx, filepath.Join(home, "gatehouse"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	keychain := memoryKeychain{}
	m, err := clients.New(ctx, st, &clients.Options{
		Env: &clients.Env{
			GOOS: "linux", Home: home, Cwd: home,
			LookPath: func(file, path string) (string, error) { return "/usr/bin/" + file, nil },
			Running:  func(clients.ID) (bool, time.Time, error) { return false, time.Time{}, nil },
		},
		Keychain:   keychain,
		Executable: "/usr/local/bin/gatehouse",
	})
	if err != nil {
		log.Fatal(err)
	}

	plan, err := m.PlanGovern(ctx, clients.Selection{Clients: []clients.ID{clients.Cursor}})
	if err != nil {
		log.Fatal(err)
	}
	if err := m.Apply(ctx, plan); err != nil {
		log.Fatal(err)
	}
	for _, r := range plan.Results {
		fmt.Printf("%s: governed %v, through server %s, moved to the keychain: %v\n", r.Name, r.Done, r.Server, r.Secrets)
	}
	governed, _ := os.ReadFile(config)
	fmt.Print(string(governed))
	fmt.Println("keychain:", keychain["stripe.STRIPE_SECRET_KEY"])

	undo, _ := m.PlanUndo(ctx, clients.Selection{})
	m.Apply(ctx, undo)
	restored, _ := os.ReadFile(config)
	fmt.Println("restored exactly:", string(restored) == string(original))
	// Output:
	// stripe: governed true, through server stripe, moved to the keychain: [STRIPE_SECRET_KEY]
	// {
	//   "mcpServers": {
	//     "stripe": {
	//       "command": "/usr/local/bin/gatehouse",
	//       "args": ["proxy", "--client", "cursor", "stripe"]
	//     }
	//   }
	// }
	// keychain: sk_test_0123456789abcdef
	// restored exactly: true
}
