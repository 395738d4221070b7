package receipts

import "testing"

func TestTypedQuery(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"a", ""},
		{"al", ""},
		{"ali", "ali*"},
		{"alice ", "alice "},
		{"alice b", "alice "},
		{"alice bob", "alice bob*"},
		{"alice@e", "alice@"},
		{"alice@exa", "alice@exa*"},
		{"alice@example.", "alice@example."},
		{"alice@example.co", "alice@example."},
		{"alice@example.com", "alice@example.com*"},
		{"read_f", "read_"},
		{"read_fil", "read_fil*"},
		{`"drop tab`, `"drop tab`},
		{`"drop table" ord`, `"drop table" ord*`},
		{"invoice*", "invoice*"},
		{"café", "café*"},
		{"日本語", "日本語*"},
	}
	for _, tt := range tests {
		if got := TypedQuery(tt.in); got != tt.want {
			t.Errorf("TypedQuery(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
