package seed

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"flag"
	"os"
	"testing"

	"github.com/gatehouse-dev/gatehouse/gateway/gate"
	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
	"github.com/gatehouse-dev/gatehouse/vault"
)

var into = flag.String("seed-home", "", "seed this home `folder` with the OS keychain, for trying the app by hand")

// mapSecrets is a keychain in a map.
type mapSecrets map[string]string

func (m mapSecrets) SetSecret(id, v string) error { m[id] = v; return nil }

func TestHome(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	_, key, _ := ed25519.GenerateKey(rand.Reader)
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	secrets := mapSecrets{}
	if err := Home(ctx, st, l, &Options{Calls: 60, Secrets: secrets, Seed: 1}); err != nil {
		t.Fatal(err)
	}
	servers, err := st.Servers(ctx)
	if err != nil || len(servers) != len(Servers) {
		t.Fatalf("Servers = %d, %v; want %d", len(servers), err, len(Servers))
	}
	if len(secrets) != 2 {
		t.Errorf("secrets stored = %v, want the github and slack credentials", secrets)
	}
	p, err := l.Search(ctx, receipts.Query{Kind: "receipt", Limit: 1000})
	if err != nil || len(p.Hits) != 60 {
		t.Errorf("receipts = %d, %v; want 60", len(p.Hits), err)
	}
	decisions := map[string]int{}
	for _, h := range p.Hits {
		decisions[h.Decision]++
	}
	if decisions["ALLOW"] == 0 || decisions["DENY"] == 0 {
		t.Errorf("decisions = %v, want some allowed and some denied", decisions)
	}
	pol := Policy()
	tools, err := gate.Tools(ctx, st, pol, "github", false, nil)
	if err != nil {
		t.Fatal(err)
	}
	changed := 0
	for _, tl := range tools {
		if tl.Pin == gate.Changed {
			changed++
		}
	}
	if len(tools) != 5 || changed != 1 {
		t.Errorf("github's tools: %d, %d changed; want 5, 1 changed", len(tools), changed)
	}
	if p, _ := l.Search(ctx, receipts.Query{Kind: "erasure"}); len(p.Hits) != 1 {
		t.Errorf("erasures = %d, want 1", len(p.Hits))
	}

	// What it wrote verifies, as an export.
	out := t.TempDir() + "/bundle"
	if _, err := l.Export(ctx, out, nil); err != nil {
		t.Fatal(err)
	}
	fsys, err := verify.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := verify.Bundle(ctx, fsys, nil)
	if err != nil || !rep.OK() {
		t.Errorf("the seeded log does not verify: %v, %+v", err, rep.Failed())
	}
}

// TestSeedHome seeds the folder given with -seed-home, with the OS keychain,
// so that the app can be tried by hand on a realistic home:
//
//	go test ./internal/seed -run TestSeedHome -seed-home /tmp/gh
//	gatehouse-app --home /tmp/gh
func TestSeedHome(t *testing.T) {
	if *into == "" {
		t.Skip("no -seed-home")
	}
	ctx := context.Background()
	if _, err := os.Stat(*into); err == nil {
		t.Fatalf("%s exists: seed a new folder", *into)
	}
	st, err := store.Open(ctx, *into, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	v := vault.New(&vault.Options{Service: st.KeychainService()})
	key, err := v.SigningKey()
	if err != nil {
		t.Fatal(err)
	}
	l, err := receipts.Open(ctx, st, key)
	if err != nil {
		t.Fatal(err)
	}
	if err := Home(ctx, st, l, &Options{Secrets: v}); err != nil {
		t.Fatal(err)
	}
}
