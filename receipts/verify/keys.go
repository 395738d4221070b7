package verify

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// ParsePublicKeys reads the Ed25519 public keys in a key file, for
// [Options.PinKeys]. It accepts what `gatehouse keys export-public` writes
// and the bundle holds:
//
//   - a JWK Set (keys.jwks.json, or export-public's default output);
//   - a single JWK;
//   - PEM ("PUBLIC KEY", PKIX), one block per key, as export-public
//     --format pem writes (the lines between blocks are ignored);
//   - the base64 of the 32-byte key, as export-public --format raw writes;
//   - a note verifier key (name+hash+base64).
func ParsePublicKeys(data []byte) ([]ed25519.PublicKey, error) {
	text := bytes.TrimSpace(data)
	switch {
	case len(text) == 0:
		return nil, errors.New("parse public key: empty")
	case text[0] == '{':
		return parseJWKFile(text)
	case bytes.Contains(text, []byte("-----BEGIN ")):
		return parsePEM(text)
	}
	// A note verifier key is name+hash+base64(0x01 || key): after its
	// second '+', 44 characters of base64. Split so, a plain base64 key
	// never leaves that much.
	if pub, err := parseNoteKey(string(text)); err == nil {
		return []ed25519.PublicKey{pub}, nil
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(string(text)); err == nil && len(b) == ed25519.PublicKeySize {
			return []ed25519.PublicKey{ed25519.PublicKey(b)}, nil
		}
	}
	return nil, errors.New("parse public key: not a JWK Set, JWK, PEM public key, base64 Ed25519 key or note verifier key")
}

func parseJWKFile(text []byte) ([]ed25519.PublicKey, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(text, &probe); err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	var jwks []JWK
	if _, ok := probe["keys"]; ok {
		var set JWKS
		if err := json.Unmarshal(text, &set); err != nil {
			return nil, fmt.Errorf("parse JWK Set: %w", err)
		}
		jwks = set.Keys
	} else {
		var k JWK
		if err := json.Unmarshal(text, &k); err != nil {
			return nil, fmt.Errorf("parse JWK: %w", err)
		}
		if k.Kid == "" {
			// A JWK need not carry a kid; the key itself is what is pinned.
			b, _ := base64.RawURLEncoding.DecodeString(k.X)
			if len(b) == ed25519.PublicKeySize {
				k.Kid = entry.KeyID(b)
			}
		}
		jwks = []JWK{k}
	}
	if len(jwks) == 0 {
		return nil, errors.New("parse JWK Set: no keys")
	}
	out := make([]ed25519.PublicKey, 0, len(jwks))
	for _, k := range jwks {
		pub, err := k.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("parse JWK: %w", err)
		}
		out = append(out, pub)
	}
	return out, nil
}

func parsePEM(text []byte) ([]ed25519.PublicKey, error) {
	var out []ed25519.PublicKey
	for {
		var b *pem.Block
		b, text = pem.Decode(text)
		if b == nil {
			break
		}
		if b.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("parse PEM: %q block, want PUBLIC KEY", b.Type)
		}
		k, err := x509.ParsePKIXPublicKey(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("parse PEM: %w", err)
		}
		pub, ok := k.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("parse PEM: a %T, want an Ed25519 key", k)
		}
		out = append(out, pub)
	}
	if len(out) == 0 {
		return nil, errors.New("parse PEM: no PUBLIC KEY block")
	}
	return out, nil
}

// parseNoteKey reads a note verifier key: name+hash+base64(0x01 || key).
func parseNoteKey(s string) (ed25519.PublicKey, error) {
	parts := strings.SplitN(s, "+", 3)
	if len(parts) != 3 || len(parts[1]) != 8 {
		return nil, errors.New("not name+hash+key")
	}
	b, err := base64.StdEncoding.DecodeString(parts[2])
	if err != nil || len(b) != 1+ed25519.PublicKeySize || b[0] != 1 {
		return nil, errors.New("not an Ed25519 note key")
	}
	return ed25519.PublicKey(b[1:]), nil
}
