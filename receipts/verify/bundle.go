package verify

import (
	"bufio"
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// The files of a bundle. Every one but the manifest is listed, with its
// SHA-256, in the signed manifest.
const (
	FileManifest     = "manifest.json"    // what the bundle holds, signed
	FileEntries      = "entries.jsonl"    // the entries, one per line, as signed and stored
	FilePayloads     = "payloads.jsonl"   // arguments and results, or their tombstones
	FileProofs       = "proofs.jsonl"     // per entry: inclusion and prior-tree proofs (partial bundles)
	FileKeys         = "keys.jwks.json"   // the log's public keys, as a JWK Set
	FileCheckpoint   = "checkpoint"       // the signed checkpoint the proofs lead to
	FileConsistency  = "consistency.json" // proof from an earlier checkpoint (--since-checkpoint)
	FileCosignatures = "cosignatures"     // witnesses' cosignatures of the checkpoint
	FileCSV          = "entries.csv"      // a view for spreadsheets
	FileReport       = "report.html"      // a view for people
)

// knownFiles are the files a bundle may hold, in the order they are listed.
var knownFiles = []string{
	FileManifest, FileEntries, FilePayloads, FileProofs, FileKeys,
	FileCheckpoint, FileConsistency, FileCosignatures, FileCSV, FileReport,
}

// Format and ManifestVersion identify a bundle's manifest.
const (
	Format          = "gatehouse-evidence-bundle"
	ManifestVersion = 1
)

// ManifestSigningPrefix is prepended to the manifest's canonical form
// (without sig) before signing, as [entry.SigningPrefix] is for entries: a
// signature over a manifest is never one over anything else.
const ManifestSigningPrefix = "gatehouse evidence bundle v1\n"

// A Manifest says what a bundle holds, and binds it: it is signed by a key of
// the log, and names every other file by its SHA-256, the checkpoint, and
// the indexes of the entries exported. Removing, adding or reordering an
// entry, or changing any byte of any file, shows against it.
type Manifest struct {
	Format     string    `json:"format"`  // Format
	Version    int       `json:"version"` // ManifestVersion
	Log        string    `json:"log"`     // the log's id
	ExportedAt string    `json:"exported_at"`
	Generator  string    `json:"generator"`       // the program that exported it
	Checkpoint TreeHead  `json:"checkpoint"`      // as in the checkpoint file
	Since      *TreeHead `json:"since,omitempty"` // the earlier checkpoint of consistency.json
	// Complete is true when the bundle holds every entry of the checkpoint's
	// tree; proofs.jsonl is then left out, since the verifier rebuilds the
	// tree from the entries themselves.
	Complete bool `json:"complete"`
	// Payloads is false when the export left arguments and results out.
	Payloads bool    `json:"payloads"`
	Filters  Filters `json:"filters"`
	// Indexes lists the indexes of the exported entries as ascending,
	// comma-separated runs: "0-2,5,9-11".
	Indexes string            `json:"indexes"`
	Counts  Counts            `json:"counts"`
	Files   map[string]string `json:"files"` // file name -> "sha256:<hex>"
	Key     string            `json:"key"`   // id of the signing key
	Sig     string            `json:"sig,omitempty"`
}

// A TreeHead is a log size and its tree hash (standard base64).
type TreeHead struct {
	Size int64  `json:"size"`
	Hash string `json:"hash"`
}

// Filters are the filters an export was asked for. They say how the entries
// were chosen; the verifier does not re-apply them.
type Filters struct {
	From      string   `json:"from,omitempty"` // RFC 3339, inclusive
	To        string   `json:"to,omitempty"`   // RFC 3339, exclusive
	Servers   []string `json:"servers,omitempty"`
	Decisions []string `json:"decisions,omitempty"`
	Statuses  []string `json:"statuses,omitempty"`
	Kinds     []string `json:"kinds,omitempty"`
}

// String writes the filters as command-line flags, or "none".
func (f Filters) String() string {
	var parts []string
	add := func(flag string, vs ...string) {
		for _, v := range vs {
			if v != "" {
				parts = append(parts, "--"+flag+" "+v)
			}
		}
	}
	add("from", f.From)
	add("to", f.To)
	add("server", f.Servers...)
	add("decision", f.Decisions...)
	add("status", f.Statuses...)
	add("kind", f.Kinds...)
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// Counts are the sizes of the bundle's files.
type Counts struct {
	Entries  int64 `json:"entries"`  // lines of entries.jsonl
	Selected int64 `json:"selected"` // entries that matched the filters; the others are there so that these verify
	Payloads int64 `json:"payloads"` // lines of payloads.jsonl
	Erased   int64 `json:"erased"`   // payload lines that are tombstones
}

// A PayloadLine is one line of payloads.jsonl: an entry's arguments or
// result with the salt of its commitment; for a payload the log did not
// keep (its entry's body says args_not_kept or result_not_kept), the salt
// alone and NotKept; or, once erased, a tombstone that names the erasure
// entry.
type PayloadLine struct {
	Index      int64   `json:"index"` // of the entry that commits to it
	Entry      string  `json:"entry"` // its id
	Part       string  `json:"part"`  // "args" (receipts) or "result" (outcomes)
	Commitment string  `json:"commitment"`
	Salt       *string `json:"salt,omitempty"`      // base64; absent once erased
	Data       *string `json:"data,omitempty"`      // base64; absent once erased, and when not kept
	NotKept    bool    `json:"not_kept,omitempty"`  // the log did not keep the payload: salt, no data
	ErasedBy   string  `json:"erased_by,omitempty"` // id of the erasure entry; only in tombstones
}

// Erased reports whether the line is a tombstone.
func (p *PayloadLine) Erased() bool { return p.ErasedBy != "" }

// A ProofLine is one line of proofs.jsonl, for the entry on the same line of
// entries.jsonl.
type ProofLine struct {
	Index int64  `json:"index"`
	ID    string `json:"id"`
	// LeafHash is the entry's Merkle leaf hash, SHA-256(0x00 || entry).
	LeafHash string `json:"leaf_hash"`
	// Inclusion is the RFC 6962 audit path from the leaf to the checkpoint's
	// tree hash.
	Inclusion []string `json:"inclusion"`
	// PrevConsistency is the RFC 6962 consistency proof from the tree of
	// size index (whose hash the entry signs as prev) to the checkpoint's
	// tree; empty for entry 0.
	PrevConsistency []string `json:"prev_consistency"`
}

// Consistency is consistency.json: the proof that the tree of an earlier
// checkpoint is a prefix of the bundle's.
type Consistency struct {
	OldCheckpoint string   `json:"old_checkpoint"` // the earlier checkpoint, signed note and all
	OldSize       int64    `json:"old_size"`
	OldHash       string   `json:"old_hash"`
	Proof         []string `json:"proof"`
}

// A JWKS is keys.jwks.json, a JSON Web Key Set (RFC 7517) of the log's keys.
type JWKS struct {
	Keys []JWK `json:"keys"`
}

// A JWK is an Ed25519 public key as RFC 8037 writes it, with Gatehouse's
// key id ([entry.KeyID]) as kid.
type JWK struct {
	Kty string `json:"kty"` // "OKP"
	Crv string `json:"crv"` // "Ed25519"
	X   string `json:"x"`   // base64url, no padding, of the 32-byte key
	Kid string `json:"kid"`
	Use string `json:"use,omitempty"` // "sig"
	Alg string `json:"alg,omitempty"` // "EdDSA"
}

// NewJWK returns the JWK of pub.
func NewJWK(pub ed25519.PublicKey) JWK {
	return JWK{Kty: "OKP", Crv: "Ed25519", X: base64.RawURLEncoding.EncodeToString(pub), Kid: entry.KeyID(pub), Use: "sig", Alg: "EdDSA"}
}

// PublicKey returns the key, checking that it is an Ed25519 key whose kid is
// its key id.
func (k JWK) PublicKey() (ed25519.PublicKey, error) {
	if k.Kty != "OKP" || k.Crv != "Ed25519" {
		return nil, fmt.Errorf("key %q is not an Ed25519 key (kty %q, crv %q)", k.Kid, k.Kty, k.Crv)
	}
	if (k.Use != "" && k.Use != "sig") || (k.Alg != "" && k.Alg != "EdDSA") {
		return nil, fmt.Errorf("key %q is not a signing key for EdDSA (use %q, alg %q)", k.Kid, k.Use, k.Alg)
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(k.X)
	if err != nil || len(b) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("key %q: x is not a base64url 32-byte key", k.Kid)
	}
	pub := ed25519.PublicKey(b)
	if id := entry.KeyID(pub); id != k.Kid {
		return nil, fmt.Errorf("key %q: its key id is %s", k.Kid, id)
	}
	return pub, nil
}

// SignManifest signs m with key, setting m.Key and m.Sig, and returns the
// manifest file: its canonical form and a newline.
func SignManifest(m *Manifest, key ed25519.PrivateKey) ([]byte, error) {
	m.Key = entry.KeyID(key.Public().(ed25519.PublicKey))
	m.Sig = ""
	msg, err := manifestSigningInput(m)
	if err != nil {
		return nil, fmt.Errorf("sign manifest: %w", err)
	}
	m.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(key, msg))
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("sign manifest: %w", err)
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, fmt.Errorf("sign manifest: %w", err)
	}
	return append(canon, '\n'), nil
}

func manifestSigningInput(m *Manifest) ([]byte, error) {
	unsigned := *m
	unsigned.Sig = ""
	raw, err := json.Marshal(&unsigned)
	if err != nil {
		return nil, err
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return nil, err
	}
	return append([]byte(ManifestSigningPrefix), canon...), nil
}

// ParseManifest reads a manifest file: canonical JSON and one newline. It
// does not check the signature.
func ParseManifest(data []byte) (*Manifest, error) {
	body, ok := bytes.CutSuffix(data, []byte("\n"))
	if !ok {
		return nil, fmt.Errorf("%w: manifest does not end in a newline", entry.ErrMalformed)
	}
	canon, err := jcs.Transform(body)
	if err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", entry.ErrMalformed, err)
	}
	if !bytes.Equal(canon, body) {
		return nil, fmt.Errorf("manifest: %w", entry.ErrNotCanonical)
	}
	var m Manifest
	if err := decodeStrict(body, &m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", entry.ErrMalformed, err)
	}
	// As for entries: member names exactly as written, whatever their case
	// in Go.
	if raw, err := json.Marshal(&m); err != nil {
		return nil, fmt.Errorf("%w: manifest: %v", entry.ErrMalformed, err)
	} else if again, err := jcs.Transform(raw); err != nil || !bytes.Equal(again, body) {
		return nil, fmt.Errorf("%w: manifest member names are not exactly the format's", entry.ErrMalformed)
	}
	if m.Format != Format || m.Version != ManifestVersion {
		return nil, fmt.Errorf("%w: manifest is %q version %d, want %q version %d", entry.ErrMalformed, m.Format, m.Version, Format, ManifestVersion)
	}
	if m.Sig == "" || m.Key == "" {
		return nil, fmt.Errorf("%w: manifest is not signed", entry.ErrMalformed)
	}
	return &m, nil
}

// verifyManifest checks m's signature with pub, the key m.Key names.
func verifyManifest(m *Manifest, pub ed25519.PublicKey) error {
	sig, err := base64.StdEncoding.Strict().DecodeString(m.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: manifest sig is not a base64 Ed25519 signature", entry.ErrSignature)
	}
	msg, err := manifestSigningInput(m)
	if err != nil {
		return fmt.Errorf("%w: manifest: %v", entry.ErrMalformed, err)
	}
	if !ed25519.Verify(pub, msg, sig) {
		return fmt.Errorf("manifest: %w", entry.ErrSignature)
	}
	return nil
}

// FileDigest is how the manifest names a file's contents.
func FileDigest(sum []byte) string { return "sha256:" + hex.EncodeToString(sum) }

// digestOf returns the FileDigest of data.
func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return FileDigest(sum[:])
}

// decodeStrict decodes one JSON value into v, refusing unknown fields and
// anything after the value.
func decodeStrict(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("data after the JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("data after the JSON value")
	}
	return nil
}

// FormatIndexes writes ascending indexes as runs: "0-2,5,9-11".
func FormatIndexes(idx []int64) string {
	var b strings.Builder
	for i := 0; i < len(idx); {
		j := i
		for j+1 < len(idx) && idx[j+1] == idx[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.FormatInt(idx[i], 10))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.FormatInt(idx[j], 10))
		}
		i = j + 1
	}
	return b.String()
}

// indexRuns is a parsed Indexes field.
type indexRuns [][2]int64 // [first, last], ascending, disjoint

// parseIndexes reads FormatIndexes's output, refusing anything it would not
// write.
func parseIndexes(s string) (indexRuns, error) {
	if s == "" {
		return nil, nil
	}
	var runs indexRuns
	for part := range strings.SplitSeq(s, ",") {
		a, b, isRun := strings.Cut(part, "-")
		first, err1 := parseIndex(a)
		last, err2 := first, error(nil)
		if isRun {
			last, err2 = parseIndex(b)
		}
		if err1 != nil || err2 != nil || (isRun && last <= first) {
			return nil, fmt.Errorf("bad run %q", part)
		}
		if n := len(runs); n > 0 && first <= runs[n-1][1]+1 {
			return nil, fmt.Errorf("run %q is not after the one before it", part)
		}
		runs = append(runs, [2]int64{first, last})
	}
	return runs, nil
}

func parseIndex(s string) (int64, error) {
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || strconv.FormatInt(n, 10) != s {
		return 0, fmt.Errorf("bad index %q", s)
	}
	return n, nil
}

// count is the number of indexes in the runs.
func (r indexRuns) count() int64 {
	var n int64
	for _, run := range r {
		n += run[1] - run[0] + 1
	}
	return n
}

// maxLine bounds one line of a JSON Lines file: a payload is at most what an
// MCP message may be (the proxy's limit is 8 MiB), in base64.
const maxLine = 64 << 20

// lineReader reads a JSON Lines file line by line, and refuses a line that
// is not ended by a newline or is longer than maxLine.
type lineReader struct {
	r   *bufio.Reader
	n   int // lines read
	err error
}

func newLineReader(r io.Reader) *lineReader {
	return &lineReader{r: bufio.NewReaderSize(r, 64<<10)}
}

// next returns the next line without its newline, a copy the caller may
// keep, or nil at the end or on error (see err).
func (l *lineReader) next() []byte {
	if l.err != nil {
		return nil
	}
	var line []byte
	for {
		frag, err := l.r.ReadSlice('\n')
		line = append(line, frag...)
		if err == bufio.ErrBufferFull {
			if len(line) > maxLine {
				l.err = fmt.Errorf("line %d is longer than %d bytes", l.n+1, maxLine)
				return nil
			}
			continue
		}
		if err == io.EOF {
			if len(line) > 0 {
				l.err = fmt.Errorf("line %d does not end in a newline", l.n+1)
			} else {
				l.err = io.EOF
			}
			return nil
		}
		if err != nil {
			l.err = err
			return nil
		}
		break
	}
	l.n++
	return line[:len(line)-1]
}

// failed returns the reader's error, if it stopped on anything but the end.
func (l *lineReader) failed() error {
	if l.err == io.EOF {
		return nil
	}
	return l.err
}

// parseHashes decodes a list of base64 tree hashes.
func parseHashes(ss []string) ([]tlog.Hash, error) {
	out := make([]tlog.Hash, len(ss))
	for i, s := range ss {
		h, err := entry.ParseTreeHash(s)
		if err != nil {
			return nil, err
		}
		out[i] = h
	}
	return out, nil
}

// FormatHashes encodes tree hashes as the bundle's files write them.
func FormatHashes(hs []tlog.Hash) []string {
	out := make([]string, len(hs))
	for i, h := range hs {
		out[i] = entry.FormatTreeHash(h)
	}
	return out
}
