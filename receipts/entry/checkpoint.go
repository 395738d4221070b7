package entry

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"
	"golang.org/x/mod/sumdb/tlog"
)

// A Checkpoint states the size and tree hash of a log. Its text is
//
//	gatehouse/log/<log id>
//	<size, decimal>
//	<tree hash, base64>
//
// signed as a note (golang.org/x/mod/sumdb/note) by the log's key, whose note
// name is "gatehouse-" followed by its key id.
type Checkpoint struct {
	Log  string
	Size int64
	Hash tlog.Hash
}

// Origin is the checkpoint's first line for log id.
func Origin(log string) string { return "gatehouse/log/" + log }

// Text is the checkpoint's signed text.
func (c Checkpoint) Text() string {
	return fmt.Sprintf("%s\n%d\n%s\n", Origin(c.Log), c.Size, FormatTreeHash(c.Hash))
}

// ParseCheckpoint reads a checkpoint's text (the note's text, without the
// signatures).
func ParseCheckpoint(text string) (Checkpoint, error) {
	lines := strings.Split(text, "\n")
	if len(lines) != 4 || lines[3] != "" || !strings.HasPrefix(lines[0], "gatehouse/log/") {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint is not three lines starting with gatehouse/log/", ErrMalformed)
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint size %q", ErrMalformed, lines[1])
	}
	h, err := ParseTreeHash(lines[2])
	if err != nil {
		return Checkpoint{}, fmt.Errorf("%w: checkpoint hash: %v", ErrMalformed, err)
	}
	return Checkpoint{Log: strings.TrimPrefix(lines[0], "gatehouse/log/"), Size: size, Hash: h}, nil
}

// SignCheckpoint returns c as a signed note.
func SignCheckpoint(c Checkpoint, key ed25519.PrivateKey) ([]byte, error) {
	return note.Sign(&note.Note{Text: c.Text()}, noteSigner{key})
}

// OpenCheckpoint verifies a signed checkpoint against the public keys given
// and returns it and the id of the key that signed it.
func OpenCheckpoint(msg []byte, keys []ed25519.PublicKey) (Checkpoint, string, error) {
	var vs []note.Verifier
	for _, k := range keys {
		vkey, err := note.NewEd25519VerifierKey(NoteName(KeyID(k)), k)
		if err != nil {
			return Checkpoint{}, "", err
		}
		v, err := note.NewVerifier(vkey)
		if err != nil {
			return Checkpoint{}, "", err
		}
		vs = append(vs, v)
	}
	n, err := note.Open(msg, note.VerifierList(vs...))
	if err != nil {
		return Checkpoint{}, "", fmt.Errorf("%w: checkpoint: %v", ErrSignature, err)
	}
	c, err := ParseCheckpoint(n.Text)
	if err != nil {
		return Checkpoint{}, "", err
	}
	return c, strings.TrimPrefix(n.Sigs[0].Name, "gatehouse-"), nil
}

// NoteName is the note signer name of key id.
func NoteName(keyID string) string { return "gatehouse-" + keyID }

// noteSigner signs notes with an Ed25519 key, as note.NewSigner would from a
// key string, without the key ever being written out as one.
type noteSigner struct{ key ed25519.PrivateKey }

func (s noteSigner) Name() string {
	return NoteName(KeyID(s.key.Public().(ed25519.PublicKey)))
}

func (s noteSigner) KeyHash() uint32 {
	// As note computes it: the first 4 bytes of SHA-256(name "\n" alg key),
	// with alg 1 for Ed25519.
	h := sha256.New()
	h.Write([]byte(s.Name() + "\n"))
	h.Write(append([]byte{1}, s.key.Public().(ed25519.PublicKey)...))
	return binary.BigEndian.Uint32(h.Sum(nil))
}

func (s noteSigner) Sign(msg []byte) ([]byte, error) { return ed25519.Sign(s.key, msg), nil }

var _ note.Signer = noteSigner{}
