package entry

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/mod/sumdb/note"
)

// # Cosignatures
//
// A witness cosigns a checkpoint after checking that it is consistent with
// every checkpoint of the same log it cosigned before (C2SP tlog-witness).
// Its cosignature is a signed-note signature line of the C2SP
// tlog-cosignature format, cosignature/v1:
//
//	— <witness name> base64(key hash || timestamp || signature)
//
// where the key hash is the first 4 bytes of SHA-256(name || 0x0A || 0x04 ||
// public key), the timestamp 8 bytes, big-endian, of POSIX seconds, and the
// signature Ed25519 over
//
//	cosignature/v1
//	time <timestamp, decimal>
//	<the checkpoint's text, every line with its LF>

// CosignatureAlg is the signed-note algorithm byte of a cosignature/v1 key:
// an Ed25519 key that signs the cosigned message, not the note's text.
const CosignatureAlg = 0x04

// cosignatureSize is the decoded size of a cosignature/v1 signature line:
// key hash, timestamp, Ed25519 signature.
const cosignatureSize = 4 + 8 + ed25519.SignatureSize

// ErrCosignature is wrapped by every error about a cosignature that is not
// one, or does not verify.
var ErrCosignature = errors.New("bad cosignature")

// A WitnessKey names a witness and its cosignature/v1 public key.
type WitnessKey struct {
	Name string
	Key  ed25519.PublicKey
}

// KeyHash is the key hash of the witness's signature lines.
func (k WitnessKey) KeyHash() uint32 {
	h := sha256.New()
	h.Write([]byte(k.Name + "\n"))
	h.Write([]byte{CosignatureAlg})
	h.Write(k.Key)
	return binary.BigEndian.Uint32(h.Sum(nil))
}

// String is the witness's verifier key, as signed-note writes one:
// name+<key hash, 8 hex digits>+base64(0x04 || public key).
func (k WitnessKey) String() string {
	return fmt.Sprintf("%s+%08x+%s", k.Name, k.KeyHash(), base64.StdEncoding.EncodeToString(append([]byte{CosignatureAlg}, k.Key...)))
}

// ParseWitnessKey reads a witness's verifier key (name+hash+base64). It
// MUST be canonical: a valid note name, the key hash in 8 lowercase hex
// digits that match the key, algorithm 0x04, a 32-byte key, canonical
// base64.
func ParseWitnessKey(vkey string) (WitnessKey, error) {
	name, rest, ok1 := strings.Cut(vkey, "+")
	hash, b64, ok2 := strings.Cut(rest, "+")
	if !ok1 || !ok2 || !validNoteName(name) {
		return WitnessKey{}, fmt.Errorf("witness key %q: not name+hash+key", vkey)
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || len(raw) != 1+ed25519.PublicKeySize || base64.StdEncoding.EncodeToString(raw) != b64 {
		return WitnessKey{}, fmt.Errorf("witness key %q: the key is not canonical base64 of 33 bytes", vkey)
	}
	if raw[0] != CosignatureAlg {
		return WitnessKey{}, fmt.Errorf("witness key %q: algorithm %#02x, want %#02x (cosignature/v1)", vkey, raw[0], CosignatureAlg)
	}
	k := WitnessKey{Name: name, Key: ed25519.PublicKey(raw[1:])}
	if len(hash) != 8 || !isLowerHex(hash) || hash != fmt.Sprintf("%08x", k.KeyHash()) {
		return WitnessKey{}, fmt.Errorf("witness key %q: key hash %q is not the key's (%08x)", vkey, hash, k.KeyHash())
	}
	return k, nil
}

func isLowerHex(s string) bool {
	_, err := hex.DecodeString(s)
	return err == nil && strings.ToLower(s) == s
}

// validNoteName is signed-note's rule for a key name: not empty, valid
// UTF-8, no Unicode space, no control character, no plus sign.
func validNoteName(name string) bool {
	if name == "" || !utf8.ValidString(name) || strings.Contains(name, "+") {
		return false
	}
	for _, r := range name {
		if r <= 0x20 || r == 0x7f || r == 0x85 || r == 0xa0 || r == 0x1680 || (r >= 0x2000 && r <= 0x200a) ||
			r == 0x2028 || r == 0x2029 || r == 0x202f || r == 0x205f || r == 0x3000 {
			return false
		}
	}
	return true
}

// CosignedMessage is what a cosignature/v1 signs: the header line, the time
// line and the checkpoint's text.
func CosignedMessage(text string, t int64) []byte {
	return []byte("cosignature/v1\ntime " + strconv.FormatInt(t, 10) + "\n" + text)
}

// Cosign returns the witness's cosignature of a checkpoint's text (its
// lines, each with its LF, without signatures) at time t, as a signature
// line ending in LF.
func Cosign(text, name string, key ed25519.PrivateKey, t time.Time) (string, error) {
	if !validNoteName(name) {
		return "", fmt.Errorf("cosign: %q is not a valid note name", name)
	}
	if !strings.HasSuffix(text, "\n") || strings.Contains(text, "\n\n") {
		return "", fmt.Errorf("cosign: the checkpoint's text must be lines ending in LF, none empty")
	}
	ts := t.Unix()
	if ts < 0 {
		return "", fmt.Errorf("cosign: time %v is before 1970", t)
	}
	k := WitnessKey{Name: name, Key: key.Public().(ed25519.PublicKey)}
	sig := make([]byte, 0, cosignatureSize)
	sig = binary.BigEndian.AppendUint32(sig, k.KeyHash())
	sig = binary.BigEndian.AppendUint64(sig, uint64(ts))
	sig = append(sig, ed25519.Sign(key, CosignedMessage(text, ts))...)
	return "— " + name + " " + base64.StdEncoding.EncodeToString(sig) + "\n", nil
}

// A SignatureLine is one signature line of a signed note, read strictly.
type SignatureLine struct {
	Name    string
	KeyHash uint32
	Sig     []byte // after the key hash
}

// ParseSignatureLine reads one signature line of a note, without its LF:
// "— ", a valid note name, one space, canonical base64 of at least 5 bytes.
func ParseSignatureLine(line string) (SignatureLine, error) {
	rest, ok := strings.CutPrefix(line, "— ")
	if !ok {
		return SignatureLine{}, errors.New("a signature line begins with an em dash (U+2014) and a space")
	}
	name, b64, ok := strings.Cut(rest, " ")
	if !ok || !validNoteName(name) {
		return SignatureLine{}, errors.New("malformed signature line: want a note name, one space, base64")
	}
	raw, err := base64.StdEncoding.Strict().DecodeString(b64)
	if err != nil || base64.StdEncoding.EncodeToString(raw) != b64 {
		return SignatureLine{}, errors.New("the signature is not canonical base64")
	}
	if len(raw) < 5 {
		return SignatureLine{}, errors.New("the signature is too short to hold a key hash")
	}
	return SignatureLine{Name: name, KeyHash: binary.BigEndian.Uint32(raw), Sig: raw[4:]}, nil
}

// VerifyCosignature checks that sl is k's cosignature/v1 of the checkpoint
// text, and returns the time it carries. sl must be by k (name and key
// hash): a line by another key is no cosignature of k's.
func VerifyCosignature(k WitnessKey, text string, sl SignatureLine) (time.Time, error) {
	if sl.Name != k.Name || sl.KeyHash != k.KeyHash() {
		return time.Time{}, fmt.Errorf("%w: the line is by %s (key hash %08x), not by %s (%08x)", ErrCosignature, sl.Name, sl.KeyHash, k.Name, k.KeyHash())
	}
	if len(sl.Sig) != cosignatureSize-4 {
		return time.Time{}, fmt.Errorf("%w: %d bytes after the key hash, want %d (timestamp and Ed25519 signature)", ErrCosignature, len(sl.Sig), cosignatureSize-4)
	}
	ts := binary.BigEndian.Uint64(sl.Sig)
	if ts > math.MaxInt64 {
		return time.Time{}, fmt.Errorf("%w: timestamp beyond 2^63-1", ErrCosignature)
	}
	if !ed25519.Verify(k.Key, CosignedMessage(text, int64(ts)), sl.Sig[8:]) {
		return time.Time{}, fmt.Errorf("%w: the signature by %s does not verify over this checkpoint", ErrCosignature, k.Name)
	}
	return time.Unix(int64(ts), 0).UTC(), nil
}

// Verifier returns a note verifier for the witness's cosignatures, for
// [note.Open] over a checkpoint with cosignature lines.
func (k WitnessKey) Verifier() note.Verifier { return cosigVerifier{k} }

type cosigVerifier struct{ k WitnessKey }

func (v cosigVerifier) Name() string    { return v.k.Name }
func (v cosigVerifier) KeyHash() uint32 { return v.k.KeyHash() }
func (v cosigVerifier) Verify(msg, sig []byte) bool {
	_, err := VerifyCosignature(v.k, string(msg), SignatureLine{Name: v.k.Name, KeyHash: v.k.KeyHash(), Sig: sig})
	return err == nil
}

var _ note.Verifier = cosigVerifier{}

// LogVerifierKey is the signed-note verifier key of a log key: the key
// witnesses are told to accept the log's checkpoints by.
func LogVerifierKey(pub ed25519.PublicKey) (string, error) {
	return note.NewEd25519VerifierKey(NoteName(KeyID(pub)), pub)
}
