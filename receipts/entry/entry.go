// Package entry is the wire format of Gatehouse's evidence log: how one entry
// is encoded, signed and hashed, how payloads are committed to, and how a
// checkpoint of the log reads. It has no storage and no I/O, so that a
// verifier needs nothing else; docs/evidence.md specifies the same format in
// prose for auditors who write their own.
//
// # Entries
//
// An entry is a JSON object in RFC 8785 canonical form (JCS):
//
//	{"body":{...},"id":"r-...","index":7,"key":"3f9a...","kind":"receipt",
//	 "log":"...","prev":"<base64 tree hash>","sig":"<base64>","time":"...","v":1}
//
// sig is an Ed25519 signature by key over [SigningPrefix] followed by the
// canonical form of the entry without its sig member. The entry's bytes as
// signed and stored (with sig) are the leaf of an RFC 6962 Merkle tree, as
// golang.org/x/mod/sumdb/tlog computes it: the record hash is
// SHA-256(0x00 || entry). prev is the tree hash of the log before this entry
// (of size index), which binds every entry to all those before it.
package entry

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/tlog"
)

// Version is the format version carried in every entry's v member.
const Version = 1

// SigningPrefix is prepended to an entry's canonical form (without sig)
// before signing, so that a signature over an entry can never be taken for a
// signature over anything else.
const SigningPrefix = "gatehouse evidence entry v1\n"

// Kind says what an entry records.
type Kind string

const (
	KindReceipt Kind = "receipt" // an authorization decision, before a call
	KindOutcome Kind = "outcome" // what a call that ran did, after it
	KindKey     Kind = "key"     // a signing key added or rotated
	KindPolicy  Kind = "policy"  // a policy version
	KindPin     Kind = "pin"     // a tool definition accepted or changed
	KindErasure Kind = "erasure" // payloads erased
)

// Known reports whether k is a kind this version defines.
func (k Kind) Known() bool {
	switch k {
	case KindReceipt, KindOutcome, KindKey, KindPolicy, KindPin, KindErasure:
		return true
	}
	return false
}

// An Entry is one signed record of the log.
type Entry struct {
	V     int             `json:"v"`
	Log   string          `json:"log"`   // the log's id
	Index int64           `json:"index"` // position in the log, from 0
	ID    string          `json:"id"`    // unique, random; how other entries and people refer to it
	Kind  Kind            `json:"kind"`
	Time  string          `json:"time"` // RFC 3339, UTC, nanoseconds
	Key   string          `json:"key"`  // id of the signing key ([KeyID])
	Prev  string          `json:"prev"` // base64 tree hash of the log's first Index entries
	Body  json.RawMessage `json:"body"` // kind-specific; see the body types
	Sig   string          `json:"sig,omitempty"`
}

// Errors a verifier reports; each wraps one of these.
var (
	ErrNotCanonical = errors.New("not in canonical form")
	ErrMalformed    = errors.New("malformed entry")
	ErrSignature    = errors.New("bad signature")
)

// signingInput is what the signature covers.
func (e *Entry) signingInput() ([]byte, error) {
	unsigned := *e
	unsigned.Sig = ""
	raw, err := json.Marshal(&unsigned)
	if err != nil {
		return nil, err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append([]byte(SigningPrefix), canon...), nil
}

// MaxIndex is the largest index an entry can have: 2^53. The canonical form
// (RFC 8785) writes numbers as IEEE doubles, which hold every integer up to
// 2^53 exactly; a larger index would be signed rounded.
const MaxIndex = 1 << 53

// Sign sets e.Key and e.Sig with key and returns the entry's canonical bytes:
// what is stored, exported and hashed into the log.
//
// Only the body needs RFC 8785's general algorithm: the entry's other
// members are a fixed set of strings and integers, which Sign writes in
// their canonical order and form directly (the same bytes as transforming
// the whole entry, which FuzzSignParse checks, at a third of the cost: the
// evidence log signs an entry for every call and every outcome).
func Sign(e *Entry, key ed25519.PrivateKey) ([]byte, error) {
	if e.Index > MaxIndex || e.Index < 0 {
		return nil, fmt.Errorf("sign entry: index %d is not from 0 to %d, the integers JSON numbers hold exactly", e.Index, int64(MaxIndex))
	}
	e.V = Version
	e.Key = KeyID(key.Public().(ed25519.PublicKey))
	e.Sig = ""
	body := []byte(e.Body)
	if body == nil {
		body = []byte("null") // as encoding/json writes a nil RawMessage
	}
	body, err := jcs.Transform(body)
	if err != nil {
		return nil, fmt.Errorf("sign entry: %w", err)
	}
	// The members in RFC 8785's order (by UTF-16 code units; here all
	// ASCII): body, id, index, key, kind, log, prev, [sig,] time, v.
	buf := make([]byte, 0, len(SigningPrefix)+len(body)+len(e.ID)+len(e.Log)+len(e.Prev)+len(e.Time)+256)
	buf = append(buf, SigningPrefix...)
	buf = append(buf, `{"body":`...)
	buf = append(buf, body...)
	buf = appendMember(buf, "id", e.ID)
	buf = append(buf, `,"index":`...)
	buf = strconv.AppendInt(buf, e.Index, 10)
	buf = appendMember(buf, "key", e.Key)
	buf = appendMember(buf, "kind", string(e.Kind))
	buf = appendMember(buf, "log", e.Log)
	buf = appendMember(buf, "prev", e.Prev)
	split := len(buf) // where sig goes
	buf = appendMember(buf, "time", e.Time)
	buf = append(buf, `,"v":`...)
	buf = strconv.AppendInt(buf, int64(e.V), 10)
	buf = append(buf, '}')
	e.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, buf))
	unsigned := buf[len(SigningPrefix):]
	out := make([]byte, 0, len(unsigned)+len(e.Sig)+8)
	out = append(out, unsigned[:split-len(SigningPrefix)]...)
	out = appendMember(out, "sig", e.Sig)
	out = append(out, unsigned[split-len(SigningPrefix):]...)
	return out, nil
}

// appendMember appends ,"name":"value" to b, value written as RFC 8785
// writes a string (as ECMAScript's JSON.stringify does): only '"', '\\'
// and control characters escaped, everything else as it is, and each
// byte that is not UTF-8 as U+FFFD, as encoding/json coerces it.
func appendMember(b []byte, name, value string) []byte {
	b = append(b, `,"`...)
	b = append(b, name...)
	b = append(b, `":"`...)
	for i := 0; i < len(value); {
		c := value[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			b = append(b, c)
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(value[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, value[i:i+size]...)
			}
			i += size
			continue
		}
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\b':
			b = append(b, `\b`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\f':
			b = append(b, `\f`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			const hex = "0123456789abcdef"
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
	}
	return append(b, '"')
}

// Parse decodes stored entry bytes, checking that they are canonical and
// well formed. It does not check the signature: see [Verify].
func Parse(data []byte) (*Entry, error) {
	canon, err := jcs.Transform(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !bytes.Equal(canon, data) {
		return nil, ErrNotCanonical
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var e Entry
	if err := dec.Decode(&e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	switch {
	case e.V != Version:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, e.V, Version)
	case e.Index < 0:
		return nil, fmt.Errorf("%w: negative index", ErrMalformed)
	case e.Index > MaxIndex:
		return nil, fmt.Errorf("%w: index beyond %d", ErrMalformed, int64(MaxIndex))
	case e.ID == "" || e.Log == "" || e.Key == "" || e.Sig == "":
		return nil, fmt.Errorf("%w: missing id, log, key or sig", ErrMalformed)
	case !e.Kind.Known():
		return nil, fmt.Errorf("%w: unknown kind %q", ErrMalformed, e.Kind)
	case len(e.Body) == 0 || e.Body[0] != '{':
		return nil, fmt.Errorf("%w: body is not an object", ErrMalformed)
	}
	if _, err := time.Parse(time.RFC3339Nano, e.Time); err != nil {
		return nil, fmt.Errorf("%w: time: %v", ErrMalformed, err)
	}
	if _, err := ParseTreeHash(e.Prev); err != nil {
		return nil, fmt.Errorf("%w: prev: %v", ErrMalformed, err)
	}
	// encoding/json matches member names regardless of case, and lets the
	// last of two such names win: accept only the bytes Sign would write for
	// the entry read, or "Body" could stand for "body" under a valid
	// signature.
	if raw, err := json.Marshal(&e); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrMalformed, err)
	} else if again, err := jcs.Transform(raw); err != nil || !bytes.Equal(again, data) {
		return nil, fmt.Errorf("%w: member names are not exactly the format's", ErrMalformed)
	}
	return &e, nil
}

// Verify checks e's signature with pub, which must be the key e.Key names.
func Verify(e *Entry, pub ed25519.PublicKey) error {
	if KeyID(pub) != e.Key {
		return fmt.Errorf("%w: key %s does not match the entry's key id %s", ErrSignature, KeyID(pub), e.Key)
	}
	// Strict: the unused bits of the last character must be zero, so that
	// one signature has one spelling.
	sig, err := base64.StdEncoding.Strict().DecodeString(e.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: sig is not a base64 Ed25519 signature", ErrSignature)
	}
	msg, err := e.signingInput()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return ErrSignature
	}
	return nil
}

// LeafHash is the Merkle leaf hash of stored entry bytes.
func LeafHash(data []byte) tlog.Hash { return tlog.RecordHash(data) }

// KeyID names an Ed25519 public key: the lowercase hex of the first 8 bytes
// of SHA-256 over the 32-byte key.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:8])
}

// FormatTreeHash and ParseTreeHash convert a tree hash to and from its
// standard base64 form.
func FormatTreeHash(h tlog.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

func ParseTreeHash(s string) (tlog.Hash, error) {
	var h tlog.Hash
	b, err := base64.StdEncoding.Strict().DecodeString(s)
	if err != nil || len(b) != len(h) {
		return h, fmt.Errorf("not a base64 SHA-256 hash: %q", s)
	}
	copy(h[:], b)
	return h, nil
}

// EmptyTreeHash is the tree hash of an empty log, as RFC 6962 and tlog
// define it (SHA-256 of the empty string), the prev of entry 0.
var EmptyTreeHash tlog.Hash = sha256.Sum256(nil)
