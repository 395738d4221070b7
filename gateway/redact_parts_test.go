package gateway

import (
	"strings"
	"testing"
)

// A secret that holds a credential inside it (a connection string, a
// --flag=value, an HTTP authorization) has that credential redacted alone
// too: a server echoes the password of its connection string, not the
// string.
func TestRedactsTheCredentialInsideASecret(t *testing.T) {
	r := newRedactor(map[string]string{
		"pg.arg3":     "postgresql://app:pw%2Fhunter-22@db.internal/app",
		"x.arg2":      "--api-key=sk-0123456789abcdef",
		"s.url":       "https://mcp.example.com/mcp?region=europe-west&api_key=qk-0123456789",
		"gh.Auth":     "Bearer ghp_S3cr3tT0kenValue42",
		"plain.TOKEN": "just-a-token-value",
	})
	for _, tc := range []struct{ in, gone, kept string }{
		{"auth failed for app with password pw/hunter-22", "pw/hunter-22", "auth failed for app"},
		{"raw form pw%2Fhunter-22 in a log", "pw%2Fhunter-22", "in a log"},
		{"key sk-0123456789abcdef refused", "sk-0123456789abcdef", "refused"},
		{"query key qk-0123456789 in europe-west", "qk-0123456789", "europe-west"},
		{"token ghp_S3cr3tT0kenValue42", "ghp_S3cr3tT0kenValue42", "token"},
		{"just-a-token-value", "just-a-token-value", ""},
	} {
		got := r.redactText(tc.in)
		if strings.Contains(got, tc.gone) || !strings.Contains(got, tc.kept) {
			t.Errorf("redactText(%q) = %q, want %q gone and %q kept", tc.in, got, tc.gone, tc.kept)
		}
	}
}
