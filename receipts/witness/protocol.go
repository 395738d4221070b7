package witness

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/tlog"
)

// maxProofLines is the most consistency proof lines a request may carry
// (C2SP tlog-witness): a proof between trees of up to 2^63 entries is
// shorter.
const maxProofLines = 63

// maxBody bounds a request's body: an old size line, 63 hashes and a
// checkpoint with a few signatures fit many times over.
const maxBody = 64 << 10

// ErrMalformed is wrapped by the errors of [ParseAddCheckpoint].
var ErrMalformed = errors.New("malformed add-checkpoint request")

// An AddCheckpoint request: the size of the checkpoint the witness last
// cosigned for the log (as the client knows it), a consistency proof from
// that size to the checkpoint's, and the checkpoint, a signed note.
type AddCheckpoint struct {
	Old        int64
	Proof      tlog.TreeProof
	Checkpoint []byte
}

// Format writes the request's body: "old <size>", one base64 hash per line,
// an empty line, the checkpoint.
func (r AddCheckpoint) Format() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "old %d\n", r.Old)
	for _, h := range r.Proof {
		b.WriteString(base64.StdEncoding.EncodeToString(h[:]))
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(r.Checkpoint)
	return b.Bytes()
}

// ParseAddCheckpoint reads a request's body strictly: each line ends in LF;
// the first is "old", one space and a size in decimal without leading zeros;
// then at most 63 lines of canonical base64 of 32 bytes; then an empty line;
// then the checkpoint, which must not be empty (its note is checked by the
// witness, not here). Anything else is refused.
func ParseAddCheckpoint(body []byte) (AddCheckpoint, error) {
	var r AddCheckpoint
	line, rest, ok := bytes.Cut(body, []byte("\n"))
	if !ok {
		return r, fmt.Errorf("%w: no old size line", ErrMalformed)
	}
	num, ok := strings.CutPrefix(string(line), "old ")
	if !ok {
		return r, fmt.Errorf("%w: the first line is not \"old <size>\"", ErrMalformed)
	}
	old, err := strconv.ParseInt(num, 10, 64)
	if err != nil || old < 0 || strconv.FormatInt(old, 10) != num {
		return r, fmt.Errorf("%w: old size %q is not a decimal without leading zeros", ErrMalformed, num)
	}
	r.Old = old
	for {
		line, rest, ok = bytes.Cut(rest, []byte("\n"))
		if !ok {
			return r, fmt.Errorf("%w: no empty line before the checkpoint", ErrMalformed)
		}
		if len(line) == 0 {
			break
		}
		if len(r.Proof) == maxProofLines {
			return r, fmt.Errorf("%w: more than %d proof lines", ErrMalformed, maxProofLines)
		}
		h, err := base64.StdEncoding.Strict().DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != string(line) {
			return r, fmt.Errorf("%w: proof line %d is not canonical base64 of a 32-byte hash", ErrMalformed, len(r.Proof)+1)
		}
		r.Proof = append(r.Proof, tlog.Hash(h))
	}
	if len(rest) == 0 {
		return r, fmt.Errorf("%w: no checkpoint", ErrMalformed)
	}
	r.Checkpoint = rest
	return r, nil
}

// A checkpoint as C2SP tlog-checkpoint reads one: origin, size and root
// hash, and any extension lines, which the witness cosigns as they are.
type checkpoint struct {
	Origin string
	Size   int64
	Hash   tlog.Hash
}

// parseCheckpointText reads a checkpoint's note text.
func parseCheckpointText(text string) (checkpoint, error) {
	var c checkpoint
	if !strings.HasSuffix(text, "\n") {
		return c, errors.New("the checkpoint's text does not end in LF")
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	if len(lines) < 3 {
		return c, errors.New("a checkpoint has an origin, a size and a hash line")
	}
	if slices.Contains(lines, "") {
		return c, errors.New("the checkpoint has an empty line")
	}
	c.Origin = lines[0]
	size, err := strconv.ParseInt(lines[1], 10, 64)
	if err != nil || size < 0 || strconv.FormatInt(size, 10) != lines[1] {
		return c, fmt.Errorf("checkpoint size %q is not a decimal without leading zeros", lines[1])
	}
	c.Size = size
	h, err := base64.StdEncoding.Strict().DecodeString(lines[2])
	if err != nil || len(h) != tlog.HashSize || base64.StdEncoding.EncodeToString(h) != lines[2] {
		return c, fmt.Errorf("checkpoint hash %q is not canonical base64 of 32 bytes", lines[2])
	}
	c.Hash = tlog.Hash(h)
	return c, nil
}

// noteText returns the text of a signed note: what comes before the last
// empty line.
func noteText(msg []byte) (string, bool) {
	i := bytes.LastIndex(msg, []byte("\n\n"))
	if i < 0 {
		return "", false
	}
	return string(msg[:i+1]), true
}
