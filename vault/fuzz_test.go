package vault

import (
	"strings"
	"testing"
)

// A reference parses to an id only when it is exactly the prefix and a
// valid id, and the id makes the same reference again.
func FuzzParseRef(f *testing.F) {
	for _, s := range []string{
		"vault://secret/api-key", "vault://secret/", "vault://secret/../x", "vault://secret/a b",
		"VAULT://secret/x", "vault://secret/x\n", "vault://secret/" + strings.Repeat("a", 129), "x",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := ParseRef(s)
		if !ok {
			if id != "" {
				t.Fatalf("ParseRef(%q) = %q, false: an id for no reference", s, id)
			}
			return
		}
		if err := ValidateSecretID(id); err != nil {
			t.Fatalf("ParseRef(%q) = %q, an invalid id: %v", s, id, err)
		}
		if Ref(id) != s {
			t.Fatalf("Ref(ParseRef(%q)) = %q", s, Ref(id))
		}
		if strings.ContainsAny(id, "/\\ \t\n\x00") {
			t.Fatalf("ParseRef(%q) = %q: an id that could cross a path or hide a character", s, id)
		}
	})
}
