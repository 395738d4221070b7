package entry

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

func testWitness(t *testing.T, name string) (WitnessKey, ed25519.PrivateKey) {
	t.Helper()
	seed := sha256.Sum256([]byte(name))
	priv := ed25519.NewKeyFromSeed(seed[:])
	return WitnessKey{Name: name, Key: priv.Public().(ed25519.PublicKey)}, priv
}

func TestCosignatureRoundTrip(t *testing.T) {
	logKey := ed25519.NewKeyFromSeed(make([]byte, 32))
	cp := Checkpoint{Log: "ozh6zex7x45rm3j567r", Size: 5, Hash: tlog.Hash{1, 2, 3}}
	signed, err := SignCheckpoint(cp, logKey)
	if err != nil {
		t.Fatal(err)
	}
	wk, wpriv := testWitness(t, "witness.example/w1")
	at := time.Unix(1679315147, 0)
	line, err := Cosign(cp.Text(), wk.Name, wpriv, at)
	if err != nil {
		t.Fatal(err)
	}

	// The vkey reads back as the same key.
	back, err := ParseWitnessKey(wk.String())
	if err != nil || back.Name != wk.Name || !back.Key.Equal(wk.Key) {
		t.Fatalf("ParseWitnessKey(%s) = %v, %v", wk, back, err)
	}

	// x/mod's note reads the log's signature and the cosignature together,
	// with our verifier for algorithm 0x04.
	lv, _ := LogVerifierKey(logKey.Public().(ed25519.PublicKey))
	v, err := note.NewVerifier(lv)
	if err != nil {
		t.Fatal(err)
	}
	n, err := note.Open(append(signed, line...), note.VerifierList(v, wk.Verifier()))
	if err != nil {
		t.Fatalf("note.Open: %v", err)
	}
	if len(n.Sigs) != 2 {
		t.Fatalf("note.Open verified %d signatures, want 2", len(n.Sigs))
	}

	sl, err := ParseSignatureLine(strings.TrimSuffix(line, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := VerifyCosignature(wk, cp.Text(), sl)
	if err != nil || !got.Equal(at) {
		t.Fatalf("VerifyCosignature = %v, %v; want %v", got, err, at)
	}

	// Another checkpoint, another time, another witness: each fails.
	other := cp
	other.Size = 6
	if _, err := VerifyCosignature(wk, other.Text(), sl); err == nil {
		t.Errorf("a cosignature verified over another checkpoint")
	}
	forged := SignatureLine{Name: sl.Name, KeyHash: sl.KeyHash, Sig: append([]byte(nil), sl.Sig...)}
	forged.Sig[7]++ // the timestamp
	if _, err := VerifyCosignature(wk, cp.Text(), forged); err == nil {
		t.Errorf("a cosignature verified with its time changed")
	}
	wk2, _ := testWitness(t, "witness.example/w2")
	if _, err := VerifyCosignature(wk2, cp.Text(), sl); err == nil {
		t.Errorf("w1's cosignature verified as w2's")
	}
	// A log signature (algorithm 1) with the same key is not a cosignature:
	// the key hash differs.
	logLine := strings.SplitN(string(signed), "\n\n", 2)[1]
	ls, err := ParseSignatureLine(strings.TrimSuffix(logLine, "\n"))
	if err != nil {
		t.Fatal(err)
	}
	lk := WitnessKey{Name: ls.Name, Key: logKey.Public().(ed25519.PublicKey)}
	if _, err := VerifyCosignature(lk, cp.Text(), ls); err == nil {
		t.Errorf("the log's own signature verified as a cosignature")
	}
}

func TestParseWitnessKeyRefuses(t *testing.T) {
	wk, _ := testWitness(t, "w")
	good := wk.String()
	name, hash, b64 := func() (string, string, string) {
		p := strings.SplitN(good, "+", 3)
		return p[0], p[1], p[2]
	}()
	raw, _ := base64.StdEncoding.DecodeString(b64)
	alg1 := append([]byte{1}, raw[1:]...)
	for _, tc := range []struct{ name, vkey string }{
		{"empty", ""},
		{"no hash", name + "+" + b64},
		{"upper-case hash", name + "+" + strings.ToUpper(hash) + "+" + b64},
		{"wrong hash", name + "+00000000+" + b64},
		{"algorithm 1", name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(alg1)},
		{"short key", name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(raw[:20])},
		{"space in name", "a b+" + hash + "+" + b64},
		{"a byte more", name + "+" + hash + "+" + base64.StdEncoding.EncodeToString(append(raw, 0))},
		{"base64 with a line break", name + "+" + hash + "+" + b64[:10] + "\n" + b64[10:]},
	} {
		if _, err := ParseWitnessKey(tc.vkey); err == nil {
			t.Errorf("%s: ParseWitnessKey(%q) = nil error", tc.name, tc.vkey)
		}
	}
}
