package httpfront

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatehouse-dev/gatehouse/internal/store"
)

type memKeeper map[string]string

func (m memKeeper) SetClientToken(client, token string) error { m[client] = token; return nil }
func (m memKeeper) DeleteClientToken(client string) error     { delete(m, client); return nil }

func TestTokens(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := store.Open(ctx, dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keeper := memKeeper{}
	tokens, err := OpenTokens(ctx, st, keeper)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokens.Add(ctx, "laptop")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, TokenPrefix) || len(tok) < 40 || keeper["laptop"] != tok {
		t.Fatalf("Add = %q, keychain holds %q", tok, keeper["laptop"])
	}
	if _, err := tokens.Add(ctx, "laptop"); !errors.Is(err, ErrTokenExists) {
		t.Errorf("a second Add = %v, want ErrTokenExists", err)
	}
	other, _ := tokens.Add(ctx, "ci")
	for _, tt := range []struct {
		token, client string
		ok            bool
	}{{tok, "laptop", true}, {other, "ci", true}, {tok + "x", "", false}, {tok[:len(tok)-1], "", false}, {"", "", false}, {"Bearer " + tok, "", false}} {
		c, ok, err := tokens.Authenticate(ctx, tt.token)
		if err != nil || c.Name != tt.client || ok != tt.ok || c.Servers != nil {
			t.Errorf("Authenticate(%.12q) = %q, %v, %v; want %q, %v", tt.token, c, ok, err, tt.client, tt.ok)
		}
	}
	if err := tokens.Revoke(ctx, "laptop"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := tokens.Authenticate(ctx, tok); ok {
		t.Error("a revoked token still authenticates")
	}
	if _, ok := keeper["laptop"]; ok {
		t.Error("the keychain still holds a revoked token")
	}
	if err := tokens.Revoke(ctx, "laptop"); !errors.Is(err, ErrNoToken) {
		t.Errorf("a second Revoke = %v, want ErrNoToken", err)
	}
	list, _ := tokens.List(ctx)
	if len(list) != 2 || list[0].Client != "laptop" || list[0].Revoked.IsZero() || !list[1].Revoked.IsZero() {
		t.Errorf("List = %+v", list)
	}
	// A new token for the client after a revocation.
	if _, err := tokens.Add(ctx, "laptop"); err != nil {
		t.Errorf("Add after Revoke: %v", err)
	}
	// A token for some servers says so, in List and to the front.
	ci2, err := tokens.Add(ctx, "deploy", "github", "docs", "github")
	if err != nil {
		t.Fatal(err)
	}
	c, ok, err := tokens.Authenticate(ctx, ci2)
	if err != nil || !ok || !slices.Equal(c.Servers, []string{"docs", "github"}) {
		t.Errorf("Authenticate(scoped) = %+v, %v, %v; want servers [docs github]", c, ok, err)
	}
	if !c.Reaches("github") || c.Reaches("filesystem") {
		t.Errorf("%+v reaches github %v, filesystem %v; want true, false", c, c.Reaches("github"), c.Reaches("filesystem"))
	}
	list, _ = tokens.List(ctx)
	if last := list[len(list)-1]; last.Client != "deploy" || !slices.Equal(last.Servers, []string{"docs", "github"}) || list[0].Servers != nil {
		t.Errorf("List = %+v; want deploy's servers [docs github] and laptop's nil", list)
	}
	// No token is written anywhere in the home folder.
	st.Close()
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, _ := os.ReadFile(path)
		if bytes.Contains(b, []byte(tok)) || bytes.Contains(b, []byte(other)) {
			t.Errorf("%s holds a token", path)
		}
		return nil
	})
}
