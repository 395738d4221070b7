// Package verify checks a Gatehouse evidence bundle offline: the folder (or
// .tar.gz archive) that `gatehouse export` writes, with nothing but the
// bundle itself and, optionally, a key or an earlier checkpoint the auditor
// already trusts. It reads no database and makes no network call; it
// imports only the standard library, the wire format ([entry]),
// golang.org/x/mod/sumdb/tlog and note, and an RFC 8785 canonicalizer. The
// format is specified in docs/evidence.md, so that an auditor can also write
// a verifier of their own.
//
// # Use
//
//	fsys, err := verify.Open("evidence-2025-06")
//	...
//	report, err := verify.Bundle(ctx, fsys, &verify.Options{PinKeyID: "3f9a0c1d2e4b5a69"})
//	report.WriteText(os.Stdout)
//	if !report.OK() { ... }
//
// # What is checked
//
// Each check is a row of the [Report], with the entries it failed on named
// by index and id:
//
//   - manifest: signed by a key of the log; the bundle holds exactly the
//     files it lists (anything else, in a folder or an archive, whatever its
//     name or case, fails), and nothing it says the export left out; every
//     file matches the SHA-256 the manifest gives it.
//   - canonical form: every line of entries.jsonl is an entry in RFC 8785
//     canonical form, of a known kind, with a body of that kind, every
//     member (ids, key ids, times, hashes, decisions, statuses) of the form
//     docs/evidence.md gives it, and exactly the members of the format.
//   - log order: one log, indexes ascending, no duplicates, none missing.
//   - key chain: the log's first entry announces its first key, signed by
//     that key; every later key is a rotation signed by a key announced
//     before it, which the rotation retires; keys.jwks.json holds exactly
//     those keys; the first key is the pinned one, when [Options] pin one.
//   - key resolution: every entry is signed by a key announced at or before
//     it and not retired before it. A retired key signs no checkpoint,
//     manifest or earlier checkpoint of a tree that holds its rotation
//     either (reported by those checks).
//   - signatures: every entry's Ed25519 signature.
//   - inclusion: every entry is a leaf of the checkpoint's tree (an audit
//     path each, or, for a bundle of the whole log, the tree rebuilt).
//   - prior trees: every entry's prev, the tree hash it signed, is the tree
//     of the entries before it.
//   - checkpoint: the note signature, by a key of the log.
//   - consistency: the checkpoint's tree extends an earlier checkpoint's
//     (the bundle's own consistency.json, and [Options.Since]).
//   - receipts and outcomes: every outcome follows the receipt that allowed
//     its call; no denied call has an outcome; no call has two.
//   - payloads: every argument and result matches its salted commitment;
//     a tombstone passes only where an erasure entry covers it, and a
//     payload without its data only where its entry signed that the log
//     did not keep it (over the log's size cap).
//   - erasures: every erasure entry names commitments its entries made, and
//     what it erased is gone; erasures are listed as such.
//   - witnesses (only for a bundle with cosignatures, or witnesses named in
//     [Options]): every cosignature of the checkpoint by a witness named
//     verifies (cosignature/v1), and enough of them cosigned; others are
//     reported and ignored.
//
// The report ends with the assurance reached ([Report.Assurance]): signed
// by the log; key pinned; witnessed by N of the M witnesses named.
//
// # What it cannot tell
//
// A bundle of part of the log proves that each entry in it is in the log; it
// cannot prove that no other entry matches the filters it was exported
// with. Whoever holds the signing key can write a new, self-consistent log:
// pin the first key ([Options.PinKeys], [Options.PinKeyID]) and keep the
// checkpoint of each export to check the next against ([Options.Since]).
package verify

import (
	"bytes"
	"cmp"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gowebpki/jcs"
	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/receipts/entry"
)

// Options configure [Bundle]. Nil options mean none.
type Options struct {
	// PinKeys are public keys the auditor trusts as the log's first key: the
	// bundle's first key entry must announce one of them. A log truncated
	// and re-signed from the start with a fresh key fails this.
	PinKeys []ed25519.PublicKey
	// PinKeyID pins the first key by its key id ([entry.KeyID]) instead.
	PinKeyID string
	// Since is the checkpoint file of an earlier export: the bundle's log
	// must extend it. A log truncated or rewritten since fails this.
	Since []byte
	// Witnesses are the witnesses the auditor trusts: a cosignature of the
	// checkpoint by one of them must verify, and counts; one by a witness
	// not named is reported and ignored.
	Witnesses []entry.WitnessKey
	// WitnessesRequired is how many of Witnesses must have cosigned the
	// checkpoint; fewer fails the witnesses check.
	WitnessesRequired int
}

// Bundle verifies the bundle in fsys and reports each check. It returns an
// error only when ctx ends first; every problem with the bundle is in the
// report.
func Bundle(ctx context.Context, fsys fs.FS, opts *Options) (*Report, error) {
	v := newVerifier(fsys, opts)
	v.listFiles()
	v.readManifest()
	v.readKeys()
	v.readCheckpoint()
	v.readEarlier()
	if err := v.readEntries(ctx); err != nil {
		return nil, err
	}
	v.finishKeys()
	v.finishCheckpoint()
	v.finishWitnesses()
	v.finishTree()
	v.finishConsistency()
	v.finishLinkage()
	v.finishErasures()
	v.finishManifest()
	v.finishReport()
	return v.report, nil
}

// A verifier is one run of Bundle.
type verifier struct {
	fsys   fs.FS
	opts   Options
	report *Report
	c      map[string]*Check

	present map[string]bool   // files in the bundle
	digests map[string]string // FileDigest of every file read

	manifest *Manifest
	listed   indexRuns // the manifest's indexes
	listedOK bool      // they parsed
	complete bool      // the bundle claims the whole log
	payloads bool      // the bundle holds payloads

	jwks map[string]ed25519.PublicKey // keys.jwks.json, by kid

	cpRaw []byte
	cp    *entry.Checkpoint // as the checkpoint file says, before its signature is checked

	earlier     []*earlier   // checkpoints to check consistency with
	consistency *Consistency // the bundle's consistency.json
	consProof   tlog.TreeProof

	// The log as the entries tell it.
	count      int64
	logID      string
	last       int64            // index of the last entry read; -1 before the first
	entries    map[string]*seen // by id
	keys       map[string]*keyInfo
	keyOrder   []string
	erasures   []erasureItem
	tombstones []tombstone
	order      []int64 // indexes, as read

	// A complete bundle's tree, rebuilt.
	tree         frontier
	treeBroken   bool                 // the entries stopped being 0, 1, 2, ...: the rebuilt tree is not the log's
	treeAt       map[int64]*tlog.Hash // tree hashes at the sizes of earlier checkpoints, once reached
	prevDiverged int64                // entries whose prev differs from the rebuilt tree, from the first on

	// Counts for the report's details.
	n struct {
		canonical, resolved, signed, included, prevs        int64
		outcomes, receipts, allowedWithout, payloadsOK      int64
		erased, payloadLines, erasureEntries, erasedOutside int64
	}
}

type earlier struct {
	source string // "--since-checkpoint" or "consistency.json"
	raw    []byte
	cp     entry.Checkpoint
}

type keyInfo struct {
	pub      ed25519.PublicKey
	index    int64  // of the entry that announced it
	entry    string // its id
	action   string
	previous string
	retired  int64 // index of the rotation that retired it; -1 while it is the latest
}

// retiredBefore reports whether the key was retired before a tree of size
// entries (or before entry size): whatever it signs over that tree fails.
func (k *keyInfo) retiredBefore(size int64) bool { return k.retired >= 0 && size > k.retired }

// seen is what the later checks need of an entry read. There is one per
// entry, a million for a large log, so it is kept small: kinds and
// decisions are the package's constants, a commitment its 32 bytes.
type seen struct {
	index     int64
	kind      entry.Kind
	decision  string            // receipts
	commit    [sha256.Size]byte // a receipt's args or an outcome's result commitment, if hasCommit
	hasCommit bool
	outcomes  uint8 // receipts: outcomes seen for it (counting stops at 2)
	payload   uint8 // what payloads.jsonl holds for it: payloadNone, payloadData, payloadErased or payloadNotKept
}

const (
	payloadNone uint8 = iota
	payloadData
	payloadErased
	payloadNotKept // the salt of a payload the log did not keep
)

// part is the payload part an entry of kind k commits to.
func part(k entry.Kind) string {
	if k == entry.KindReceipt {
		return "args"
	}
	return "result"
}

// commitment returns the commitment the entry signed for part p, if any.
func (c *seen) commitment(p string) (string, bool) {
	if !c.hasCommit || p != part(c.kind) {
		return "", false
	}
	return "sha256:" + hex.EncodeToString(c.commit[:]), true
}

// setCommitment keeps a commitment that checkBody found well formed.
func (c *seen) setCommitment(s string) {
	h, err := hex.DecodeString(strings.TrimPrefix(s, "sha256:"))
	if s == "" || err != nil || len(h) != sha256.Size {
		return
	}
	c.commit, c.hasCommit = [sha256.Size]byte(h), true
}

// kindOf returns the package's constant for kind k, so that a million
// entries share it.
func kindOf(k entry.Kind) entry.Kind {
	for _, c := range []entry.Kind{entry.KindReceipt, entry.KindOutcome, entry.KindKey, entry.KindPolicy, entry.KindPin, entry.KindErasure} {
		if k == c {
			return c
		}
	}
	return k
}

// decisionOf does the same for a receipt's decision.
func decisionOf(d string) string {
	for _, c := range []string{entry.Allow, entry.Deny, entry.ApprovalRequired} {
		if d == c {
			return c
		}
	}
	return d
}

type erasureItem struct {
	index  int64 // of the erasure entry
	id     string
	time   string
	reason string
	item   entry.Erased
}

type tombstone struct {
	index    int64
	entry    string
	part     string
	erasedBy string
	line     int
}

func newVerifier(fsys fs.FS, opts *Options) *verifier {
	v := &verifier{
		fsys:    fsys,
		report:  &Report{},
		c:       map[string]*Check{},
		present: map[string]bool{},
		digests: map[string]string{},
		jwks:    map[string]ed25519.PublicKey{},
		last:    -1,
		entries: map[string]*seen{},
		keys:    map[string]*keyInfo{},
		treeAt:  map[int64]*tlog.Hash{},
	}
	if opts != nil {
		v.opts = *opts
	}
	for _, name := range checkOrder {
		c := &Check{Name: name}
		v.c[name] = c
		v.report.Checks = append(v.report.Checks, c)
	}
	return v
}

func (v *verifier) check(name string) *Check { return v.c[name] }

// fileProblem reports a problem with a whole file under check.
func (v *verifier) fileProblem(check, file, format string, args ...any) {
	v.check(check).fail(Problem{Index: -1, File: file, Msg: fmt.Sprintf(format, args...)})
}

// listFiles lists the bundle's files. Anything else in the bundle (a
// folder and what it holds, a link, a file whose name is not one of the
// format's, whatever its case, or a member of an archive that is not a
// file of the bundle) fails the manifest check: the signed manifest does
// not list it.
func (v *verifier) listFiles() {
	if a, ok := v.fsys.(*archiveFS); ok {
		for _, p := range a.problems {
			v.fileProblem(CheckManifest, p.name, "%s", p.msg)
		}
	}
	err := fs.WalkDir(v.fsys, ".", func(name string, de fs.DirEntry, err error) error {
		switch {
		case err != nil:
			v.fileProblem(CheckManifest, name, "cannot list: %v", err)
		case name == ".":
		case de.IsDir():
			v.fileProblem(CheckManifest, name+"/", "a folder: a bundle holds files only, and the signed manifest lists none in a folder")
		case strings.Contains(name, "/"):
			v.fileProblem(CheckManifest, name, "in a folder of the bundle: not listed in the signed manifest")
		case !de.Type().IsRegular():
			v.fileProblem(CheckManifest, name, "not a regular file (a link, or a device): a bundle holds regular files only")
		case !slices.Contains(knownFiles, name):
			msg := "not listed in the signed manifest, and not a file of the bundle format"
			for _, known := range knownFiles {
				if strings.EqualFold(name, known) {
					msg += fmt.Sprintf(" (names are case-sensitive: the format's file is %s)", known)
				}
			}
			v.fileProblem(CheckManifest, name, "%s", msg)
		default:
			v.present[name] = true
		}
		return nil
	})
	if err != nil {
		v.fileProblem(CheckManifest, "", "cannot list the bundle's files: %v", err)
	}
}

// readFile reads a whole file and records its digest; nil if it is absent
// or unreadable (reported under check).
func (v *verifier) readFile(name, check string) []byte {
	if !v.present[name] {
		return nil
	}
	data, err := fs.ReadFile(v.fsys, name)
	if err != nil {
		v.fileProblem(check, name, "cannot read: %v", err)
		return nil
	}
	v.digests[name] = digestOf(data)
	return data
}

// hashFile records the digest of a file, read as a stream.
func (v *verifier) hashFile(name string) {
	f, err := v.fsys.Open(name)
	if err != nil {
		v.fileProblem(CheckManifest, name, "cannot read: %v", err)
		return
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		v.fileProblem(CheckManifest, name, "cannot read: %v", err)
		return
	}
	v.digests[name] = FileDigest(h.Sum(nil))
}

func (v *verifier) readManifest() {
	c := v.check(CheckManifest)
	data := v.readFile(FileManifest, CheckManifest)
	v.payloads = v.present[FilePayloads]
	v.complete = !v.present[FileProofs]
	if data == nil {
		if !v.present[FileManifest] {
			v.fileProblem(CheckManifest, FileManifest, "missing: nothing says what the bundle holds, and nothing binds its files")
		}
		return
	}
	m, err := ParseManifest(data)
	if err != nil {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: err.Error()})
		return
	}
	v.manifest = m
	v.complete, v.payloads = m.Complete, m.Payloads
	v.report.ExportedAt, v.report.Generator, v.report.Filters = m.ExportedAt, m.Generator, m.Filters.String()
	runs, err := parseIndexes(m.Indexes)
	if err != nil {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: "indexes: " + err.Error()})
	} else {
		v.listed, v.listedOK = runs, true
	}
}

func (v *verifier) readKeys() {
	data := v.readFile(FileKeys, CheckKeyChain)
	if data == nil {
		if !v.present[FileKeys] {
			v.fileProblem(CheckKeyChain, FileKeys, "missing")
		}
		return
	}
	var set JWKS
	if err := decodeStrict(data, &set); err != nil {
		v.fileProblem(CheckKeyChain, FileKeys, "not a JWK Set: %v", err)
		return
	}
	for _, k := range set.Keys {
		pub, err := k.PublicKey()
		if err != nil {
			v.fileProblem(CheckKeyChain, FileKeys, "%v", err)
			continue
		}
		if _, dup := v.jwks[k.Kid]; dup {
			v.fileProblem(CheckKeyChain, FileKeys, "key %s is listed twice", k.Kid)
			continue
		}
		v.jwks[k.Kid] = pub
	}
}

func (v *verifier) readCheckpoint() {
	data := v.readFile(FileCheckpoint, CheckCheckpoint)
	if data == nil {
		if !v.present[FileCheckpoint] {
			v.fileProblem(CheckCheckpoint, FileCheckpoint, "missing: there is no tree to check the entries against")
		}
		return
	}
	cp, err := parseNoteCheckpoint(data)
	if err != nil {
		v.fileProblem(CheckCheckpoint, FileCheckpoint, "%v", err)
		return
	}
	v.cpRaw, v.cp = data, &cp
	v.report.Log, v.report.Size, v.report.TreeHash = cp.Log, cp.Size, entry.FormatTreeHash(cp.Hash)
}

// parseNoteCheckpoint reads the checkpoint in a signed note without checking
// its signatures (the keys are known only once the entries are read).
func parseNoteCheckpoint(note []byte) (entry.Checkpoint, error) {
	text, _, ok := strings.Cut(string(note), "\n\n")
	if !ok {
		return entry.Checkpoint{}, fmt.Errorf("%w: not a signed note (no blank line before the signatures)", entry.ErrMalformed)
	}
	return entry.ParseCheckpoint(text + "\n")
}

// oneStrictSignature checks that a note has one signature line, in
// canonical base64: note.Open accepts other spellings of the same
// signature, and ignores lines from keys it does not know.
func oneStrictSignature(note []byte) error {
	_, sigs, _ := strings.Cut(string(note), "\n\n")
	lines := strings.Split(strings.TrimSuffix(sigs, "\n"), "\n")
	if len(lines) != 1 {
		return fmt.Errorf("%d signature lines, want 1", len(lines))
	}
	f := strings.Fields(lines[0])
	if len(f) != 3 {
		return errors.New("malformed signature line")
	}
	if _, err := base64.StdEncoding.Strict().DecodeString(f[2]); err != nil {
		return errors.New("the signature is not in canonical base64")
	}
	return nil
}

// noteSigners returns the names of a note's signature lines, to say who
// signed a note no known key verifies.
func noteSigners(note []byte) []string {
	_, sigs, _ := strings.Cut(string(note), "\n\n")
	var names []string
	for line := range strings.SplitSeq(sigs, "\n") {
		if rest, ok := strings.CutPrefix(line, "— "); ok {
			name, _, _ := strings.Cut(rest, " ")
			names = append(names, strings.TrimPrefix(name, "gatehouse-"))
		}
	}
	return names
}

// readEarlier reads the checkpoints the bundle must be consistent with.
func (v *verifier) readEarlier() {
	c := v.check(CheckConsistency)
	if v.opts.Since != nil {
		cp, err := parseNoteCheckpoint(v.opts.Since)
		if err != nil {
			c.failf(-1, "", "--since-checkpoint: %v", err)
		} else {
			v.earlier = append(v.earlier, &earlier{source: "--since-checkpoint", raw: v.opts.Since, cp: cp})
		}
	}
	data := v.readFile(FileConsistency, CheckConsistency)
	if data == nil {
		return
	}
	var cons Consistency
	if err := decodeStrict(data, &cons); err != nil {
		v.fileProblem(CheckConsistency, FileConsistency, "malformed: %v", err)
		return
	}
	cp, err := parseNoteCheckpoint([]byte(cons.OldCheckpoint))
	if err != nil {
		v.fileProblem(CheckConsistency, FileConsistency, "old_checkpoint: %v", err)
		return
	}
	if cp.Size != cons.OldSize || entry.FormatTreeHash(cp.Hash) != cons.OldHash {
		v.fileProblem(CheckConsistency, FileConsistency, "old_size and old_hash (%d, %s) are not the old checkpoint's (%d, %s)",
			cons.OldSize, cons.OldHash, cp.Size, entry.FormatTreeHash(cp.Hash))
		return
	}
	proof, err := parseHashes(cons.Proof)
	if err != nil {
		v.fileProblem(CheckConsistency, FileConsistency, "proof: %v", err)
		return
	}
	v.consistency, v.consProof = &cons, proof
	v.earlier = append(v.earlier, &earlier{source: FileConsistency, raw: []byte(cons.OldCheckpoint), cp: cp})
}

// An item is one entry on its way through the checks: prepared in parallel
// (parsing, hashing, signature, proofs), then absorbed in log order.
type item struct {
	line int // in entries.jsonl, from 1
	raw  []byte
	leaf tlog.Hash

	e        *entry.Entry
	err      error // parsing
	body     any
	bodyErr  error
	fieldErr error // the entry's own members (3.1)

	sigChecked bool // with the JWKS key; otherwise with the chain's, when absorbed
	sigErr     error

	proofRaw  []byte // the line of proofs.jsonl (partial bundles); nil if there was none
	proofLine int
	proof     *ProofLine
	proofErr  error
	inclErr   error
	prevErr   error
}

const batchSize = 256

func (v *verifier) readEntries(ctx context.Context) error {
	if !v.present[FileEntries] {
		v.fileProblem(CheckCanonical, FileEntries, "missing: the bundle holds no entries")
		return nil
	}
	entries, err := v.openLines(FileEntries)
	if err != nil {
		v.fileProblem(CheckCanonical, FileEntries, "cannot read: %v", err)
		return nil
	}
	defer entries.close()

	var proofs *lines
	if !v.complete {
		if !v.present[FileProofs] {
			v.fileProblem(CheckInclusion, FileProofs, "missing: a partial bundle needs a proof for each entry")
		} else if proofs, err = v.openLines(FileProofs); err != nil {
			v.fileProblem(CheckInclusion, FileProofs, "cannot read: %v", err)
			proofs = nil
		} else {
			defer proofs.close()
		}
	}
	var pays *payloadReader
	if v.payloads {
		if !v.present[FilePayloads] {
			v.fileProblem(CheckPayloads, FilePayloads, "missing, although the manifest says the export holds payloads")
		} else if l, err := v.openLines(FilePayloads); err != nil {
			v.fileProblem(CheckPayloads, FilePayloads, "cannot read: %v", err)
		} else {
			defer l.close()
			pays = &payloadReader{l: l, c: v.check(CheckPayloads)}
		}
	}
	for _, e := range v.earlier {
		v.treeAt[e.cp.Size] = nil
	}

	workers := runtime.GOMAXPROCS(0)
	batch := make([]item, 0, batchSize)
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("verify bundle: %w", err)
		}
		batch = batch[:0]
		for len(batch) < batchSize {
			raw := entries.r.next()
			if raw == nil {
				break
			}
			it := item{line: entries.r.n, raw: raw}
			if proofs != nil {
				it.proofRaw = proofs.r.next()
				it.proofLine = proofs.r.n
			}
			batch = append(batch, it)
		}
		if len(batch) == 0 {
			break
		}
		v.prepareAll(batch, workers)
		for i := range batch {
			v.absorb(&batch[i], pays)
		}
	}
	if err := entries.r.failed(); err != nil {
		v.fileProblem(CheckCanonical, FileEntries, "%v", err)
	}
	if proofs != nil {
		if err := proofs.r.failed(); err != nil {
			v.fileProblem(CheckInclusion, FileProofs, "%v", err)
		} else if extra := proofs.r.next(); extra != nil {
			v.check(CheckInclusion).fail(Problem{Index: -1, File: FileProofs, Line: proofs.r.n,
				Msg: "more lines than entries.jsonl has entries"})
		}
		proofs.finish(v)
	}
	if pays != nil {
		pays.rest(v)
		pays.l.finish(v)
	}
	entries.finish(v)
	return nil
}

// lines is a JSON Lines file being read, and hashed as it is read.
type lines struct {
	name string
	f    fs.File
	h    hash.Hash
	r    *lineReader
}

func (v *verifier) openLines(name string) (*lines, error) {
	f, err := v.fsys.Open(name)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &lines{name: name, f: f, h: h, r: newLineReader(io.TeeReader(f, h))}, nil
}

// finish reads what is left of the file, so that its digest covers all of
// it, and records the digest.
func (l *lines) finish(v *verifier) {
	if _, err := io.Copy(io.Discard, l.r.r); err != nil {
		v.fileProblem(CheckManifest, l.name, "cannot read: %v", err)
		return
	}
	v.digests[l.name] = FileDigest(l.h.Sum(nil))
}

func (l *lines) close() { l.f.Close() }

// prepareAll prepares a batch on up to workers goroutines; it returns when
// all are done.
func (v *verifier) prepareAll(batch []item, workers int) {
	if workers <= 1 || len(batch) < 2*workers {
		for i := range batch {
			v.prepare(&batch[i])
		}
		return
	}
	var wg sync.WaitGroup
	per := (len(batch) + workers - 1) / workers
	for lo := 0; lo < len(batch); lo += per {
		hi := min(lo+per, len(batch))
		wg.Go(func() {
			for i := lo; i < hi; i++ {
				v.prepare(&batch[i])
			}
		})
	}
	wg.Wait()
}

// prepare does an item's work that needs no other entry. It reads only what
// does not change while entries are read (the JWKS, the checkpoint).
func (v *verifier) prepare(it *item) {
	it.leaf = entry.LeafHash(it.raw)
	if e, err := entry.Parse(it.raw); err != nil {
		it.err = err
	} else {
		it.e = e
		it.fieldErr = checkFields(e)
		it.body, it.bodyErr = decodeBody(e)
		if pub, ok := v.jwks[e.Key]; ok {
			it.sigChecked = true
			it.sigErr = checkSignature(it.raw, e, pub)
		}
	}
	if it.proofRaw == nil || v.cp == nil {
		return
	}
	var p ProofLine
	if err := decodeStrict(it.proofRaw, &p); err != nil {
		it.proofErr = fmt.Errorf("malformed proof line: %v", err)
		return
	}
	it.proof = &p
	index := p.Index
	if it.e != nil {
		index = it.e.Index
	}
	leaf, err := entry.ParseTreeHash(p.LeafHash)
	switch {
	case err != nil:
		it.inclErr = fmt.Errorf("leaf_hash: %v", err)
	case leaf != it.leaf:
		it.inclErr = fmt.Errorf("the proof's leaf_hash %s is not the entry's, %s", p.LeafHash, entry.FormatTreeHash(it.leaf))
	case index >= v.cp.Size:
		it.inclErr = fmt.Errorf("index %d is beyond the checkpoint's %d entries", index, v.cp.Size)
	default:
		if hs, err := parseHashes(p.Inclusion); err != nil {
			it.inclErr = fmt.Errorf("inclusion: %v", err)
		} else if err := tlog.CheckRecord(hs, v.cp.Size, v.cp.Hash, index, it.leaf); err != nil {
			it.inclErr = fmt.Errorf("the audit path does not lead to the checkpoint's tree hash: %v", err)
		}
	}
	if it.e == nil {
		return
	}
	prev, err := entry.ParseTreeHash(it.e.Prev)
	switch {
	case err != nil:
		it.prevErr = err
	case index == 0:
		if prev != entry.EmptyTreeHash || len(p.PrevConsistency) != 0 {
			it.prevErr = errors.New("entry 0's prev is not the empty tree's hash")
		}
	case index > v.cp.Size:
		it.prevErr = fmt.Errorf("index %d is beyond the checkpoint's %d entries", index, v.cp.Size)
	default:
		if hs, err := parseHashes(p.PrevConsistency); err != nil {
			it.prevErr = fmt.Errorf("prev_consistency: %v", err)
		} else if err := tlog.CheckTree(hs, v.cp.Size, v.cp.Hash, index, prev); err != nil {
			it.prevErr = fmt.Errorf("the tree it signed as prev (%s, %d entries) is not a prefix of the checkpoint's: %v", it.e.Prev, index, err)
		}
	}
}

// checkSignature checks the signature of entry e, whose stored bytes are
// raw, with pub. It is entry.Verify without encoding the entry again: for
// bytes Parse accepted (canonical, exactly the format's members), the
// canonical form without sig is raw without its `,"sig":"..."` member
// (docs/evidence.md, 3.4). That member is the last such text in raw: after
// the body come only the format's own members, whose strings cannot hold a
// quote.
func checkSignature(raw []byte, e *entry.Entry, pub ed25519.PublicKey) error {
	if id := entry.KeyID(pub); id != e.Key {
		return fmt.Errorf("%w: key %s does not match the entry's key id %s", entry.ErrSignature, id, e.Key)
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(e.Sig)
	if err != nil || len(sig) != ed25519.SignatureSize {
		return fmt.Errorf("%w: sig is not a base64 Ed25519 signature", entry.ErrSignature)
	}
	member := `,"sig":"` + e.Sig + `"`
	i := bytes.LastIndex(raw, []byte(member))
	if i < 0 {
		return fmt.Errorf("%w: no sig member", entry.ErrMalformed)
	}
	msg := make([]byte, 0, len(entry.SigningPrefix)+len(raw)-len(member))
	msg = append(msg, entry.SigningPrefix...)
	msg = append(msg, raw[:i]...)
	msg = append(msg, raw[i+len(member):]...)
	if !ed25519.Verify(pub, msg, sig) {
		return entry.ErrSignature
	}
	return nil
}

// decodeBody decodes an entry's body into its kind's type, refusing unknown
// fields.
func decodeBody(e *entry.Entry) (any, error) {
	var body any
	switch e.Kind {
	case entry.KindReceipt:
		body = new(entry.Receipt)
	case entry.KindOutcome:
		body = new(entry.Outcome)
	case entry.KindKey:
		body = new(entry.KeyEvent)
	case entry.KindPolicy:
		body = new(entry.PolicyEvent)
	case entry.KindPin:
		body = new(entry.PinEvent)
	case entry.KindErasure:
		body = new(entry.ErasureEvent)
	default:
		return nil, fmt.Errorf("unknown kind %q", e.Kind)
	}
	if err := decodeStrict(e.Body, body); err != nil {
		return nil, fmt.Errorf("body of a %s entry: %v", e.Kind, err)
	}
	// encoding/json matches member names whatever their case, and takes
	// the last of two: accept only the bytes the body read would be
	// written as, which also holds every required member, and no optional
	// one that is empty.
	if raw, err := json.Marshal(body); err != nil {
		return nil, fmt.Errorf("body of a %s entry: %v", e.Kind, err)
	} else if again, err := jcs.Transform(raw); err != nil || !bytes.Equal(again, e.Body) {
		return nil, fmt.Errorf("body of a %s entry: its members are not exactly the format's (a required member missing, an optional one present but empty, or a name in another case or twice)", e.Kind)
	}
	if err := checkBody(body); err != nil {
		return nil, fmt.Errorf("body of a %s entry: %v", e.Kind, err)
	}
	return body, nil
}

// checkBody checks the values a body's kind allows (docs/evidence.md, 3.5).
func checkBody(body any) error {
	switch b := body.(type) {
	case *entry.Receipt:
		switch {
		case b.Server == "" || b.Tool == "":
			return errors.New("server and tool must not be empty")
		case b.Capability != entry.Capability(b.Server, b.Tool):
			return fmt.Errorf("capability %q is not %q, mcp.<server>.<tool>", b.Capability, entry.Capability(b.Server, b.Tool))
		case b.Decision != entry.Allow && b.Decision != entry.Deny && b.Decision != entry.ApprovalRequired:
			return fmt.Errorf("decision %q is not ALLOW, DENY or APPROVAL_REQUIRED", b.Decision)
		}
		if err := firstErr(
			commitment("args", b.Args, false),
			sha256Hex("policy_hash", b.PolicyHash, true),
			sha256Hex("tool_hash", b.ToolHash, true),
			checkApprover(b.Approver),
			checkConfinement(b.Confinement),
			checkProgram(b.Program),
			checkObserved(b),
		); err != nil {
			return err
		}
		return checkNotKept("args_not_kept", b.ArgsNotKept)
	case *entry.Outcome:
		switch {
		case b.Status != entry.Succeeded && b.Status != entry.Failed && b.Status != entry.Unknown:
			return fmt.Errorf("status %q is not SUCCEEDED, FAILED or UNKNOWN", b.Status)
		case !entryID(b.Receipt, "r"):
			return fmt.Errorf("receipt %q is not a receipt's id (r-, then 19 base32 characters)", b.Receipt)
		case b.DurationMS < 0:
			return fmt.Errorf("duration_ms %v is negative", b.DurationMS)
		}
		if err := commitment("result", b.Result, true); err != nil {
			return err
		}
		for _, r := range b.Redactions {
			if r.Secret == "" || r.Encoding == "" || r.Count < 1 {
				return fmt.Errorf("redaction %+v: secret and encoding must not be empty, and count must be at least 1", r)
			}
		}
		if b.Result == "" && b.ResultNotKept != nil {
			return errors.New("result_not_kept, but no result to commit to")
		}
		return checkNotKept("result_not_kept", b.ResultNotKept)
	case *entry.KeyEvent:
		switch {
		case !keyID(b.KeyID):
			return fmt.Errorf("key_id %q is not a key id (16 lowercase hex digits)", b.KeyID)
		case b.Action == "added" && b.Previous != "":
			return errors.New("an added key has no previous key")
		case b.Action == "rotated" && !keyID(b.Previous):
			return fmt.Errorf("previous %q is not a key id (16 lowercase hex digits)", b.Previous)
		}
		// An unknown action, and a public key that is not one, are the key
		// chain's to report.
	case *entry.PolicyEvent:
		if b.Version < 0 {
			return fmt.Errorf("version %d is negative", b.Version)
		}
		return sha256Hex("hash", b.Hash, false)
	case *entry.PinEvent:
		if b.Server == "" || b.Tool == "" {
			return errors.New("server and tool must not be empty")
		}
		old := b.OldHash
		if rest, ok := strings.CutPrefix(old, "legacy:"); ok {
			old = rest // a pin made before pins covered the whole definition
		}
		return firstErr(sha256Hex("old_hash", old, true), sha256Hex("new_hash", b.NewHash, false))
	case *entry.ErasureEvent:
		for _, x := range b.Erased {
			if !entryID(x.Entry, "r") && !entryID(x.Entry, "o") {
				return fmt.Errorf("erased entry %q is not a receipt's or an outcome's id", x.Entry)
			}
			if err := commitment("erased commitment", x.Commitment, false); err != nil {
				return err
			}
		}
	}
	return nil
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// commitment checks a payload commitment: "sha256:" and 64 lowercase hex
// digits, or "" where optional.
func commitment(name, c string, optional bool) error { return sha256Hex(name, c, optional) }

// sha256Hex checks a "sha256:<64 lowercase hex digits>" value, or "" where
// optional.
func sha256Hex(name, c string, optional bool) error {
	if c == "" && optional {
		return nil
	}
	if h, ok := strings.CutPrefix(c, "sha256:"); !ok || !lowerHex(h, 64) {
		return fmt.Errorf("%s %q is not sha256: and 64 lowercase hex digits", name, c)
	}
	return nil
}

func lowerHex(s string, n int) bool {
	return len(s) == n && strings.Trim(s, "0123456789abcdef") == ""
}

func keyID(s string) bool { return lowerHex(s, 16) }

// base32ID reports whether s is 19 characters of the lowercase base32
// alphabet, as [entry.NewID] writes after its prefix.
func base32ID(s string) bool {
	return len(s) == 19 && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz234567") == ""
}

// entryID reports whether s is an entry id with prefix p.
func entryID(s, p string) bool {
	rest, ok := strings.CutPrefix(s, p+"-")
	return ok && base32ID(rest)
}

// idPrefix is the prefix of the ids of entries of kind k.
func idPrefix(k entry.Kind) string {
	switch k {
	case entry.KindReceipt:
		return "r"
	case entry.KindOutcome:
		return "o"
	case entry.KindKey:
		return "k"
	}
	return "e"
}

// utcTime reports whether s is an RFC 3339 time in UTC ("Z") with at most
// nine digits of fraction, as Gatehouse writes them.
func utcTime(s string) bool {
	const layout = "2006-01-02T15:04:05"
	if len(s) < len(layout)+1 || s[len(s)-1] != 'Z' {
		return false
	}
	if frac := s[len(layout) : len(s)-1]; frac != "" {
		if len(frac) < 2 || len(frac) > 10 || frac[0] != '.' || strings.Trim(frac[1:], "0123456789") != "" {
			return false
		}
	}
	_, err := time.Parse(time.RFC3339Nano, s)
	return err == nil
}

// checkFields checks the entry's own members (docs/evidence.md, 3.1) beyond
// what [entry.Parse] does.
func checkFields(e *entry.Entry) error {
	switch {
	case !base32ID(e.Log):
		return fmt.Errorf("log %q is not a log id (19 lowercase base32 characters)", e.Log)
	case !entryID(e.ID, idPrefix(e.Kind)):
		return fmt.Errorf("id %q is not the id of a %s entry (%s-, then 19 lowercase base32 characters)", e.ID, e.Kind, idPrefix(e.Kind))
	case !keyID(e.Key):
		return fmt.Errorf("key %q is not a key id (16 lowercase hex digits)", e.Key)
	case !utcTime(e.Time):
		return fmt.Errorf("time %q is not RFC 3339 in UTC (Z) with at most nine digits of fraction", e.Time)
	}
	return nil
}

// approverScopes are the scopes an approver's answer may have.
var approverScopes = []string{"once", "session", "minutes", "always", "deny", "always-deny"}

func checkApprover(a *entry.Approver) error {
	switch {
	case a == nil:
		return nil
	case a.Kind == "":
		return errors.New("approver kind must not be empty")
	case !slices.Contains(approverScopes, a.Scope):
		return fmt.Errorf("approver scope %q is not one of %s", a.Scope, strings.Join(approverScopes, ", "))
	case a.Until != "" && !utcTime(a.Until):
		return fmt.Errorf("approver until %q is not RFC 3339 in UTC (Z)", a.Until)
	case a.Via != "" && !slices.Contains(approverVias, a.Via):
		return fmt.Errorf("approver via %q is not one of %s", a.Via, strings.Join(approverVias, ", "))
	}
	return nil
}

// checkConfinement checks what a receipt says of its server's confinement:
// a confined server names its mechanism and ABI, an unconfined one neither.
func checkConfinement(c *entry.Confinement) error {
	switch {
	case c == nil:
		return nil
	case c.Confined && c.Mechanism != entry.MechanismLandlock:
		return fmt.Errorf("confinement mechanism %q is not %s", c.Mechanism, entry.MechanismLandlock)
	case c.Confined && c.ABI < 1:
		return fmt.Errorf("confinement abi %d is not a Landlock ABI (1 or more)", c.ABI)
	case !c.Confined && (c.Mechanism != "" || c.ABI != 0):
		return errors.New("an unconfined server's receipt names a confinement mechanism or ABI")
	}
	return nil
}

// checkProgram checks what a receipt says of the program step it was made
// for: a name, the program's hash, a trace id, a step name and a place.
func checkProgram(p *entry.Program) error {
	if p == nil {
		return nil
	}
	switch {
	case p.Name == "" || p.Trace == "" || p.Step == "":
		return errors.New("a program step's name, trace and step must not be empty")
	case p.Seq < 1:
		return fmt.Errorf("a program step's seq %d is not 1 or more", p.Seq)
	}
	return sha256Hex("program hash", p.Hash, false)
}

// checkObserved checks what a receipt says a rule in observe mode would
// have decided: a valid decision, by a named rule other than the one that
// decided the call.
func checkObserved(b *entry.Receipt) error {
	o := b.Observed
	switch {
	case o == nil:
		return nil
	case o.Decision != entry.Allow && o.Decision != entry.Deny && o.Decision != entry.ApprovalRequired:
		return fmt.Errorf("observed decision %q is not ALLOW, DENY or APPROVAL_REQUIRED", o.Decision)
	case o.Rule == "":
		return errors.New("observed rule must not be empty")
	case o.Rule == b.Rule:
		return fmt.Errorf("observed rule %q is the rule that decided the call: an observed rule is not applied", o.Rule)
	}
	return nil
}

// approverVias are the ways an approver may say it took an answer.
var approverVias = []string{entry.ViaWindow, entry.ViaTerminal, entry.ViaPiped, entry.ViaAutomatic, entry.ViaGrant, entry.ViaPlan}

// checkNotKept checks what a body says of a payload the log did not keep:
// it was over the cap.
func checkNotKept(name string, n *entry.NotKept) error {
	if n != nil && (n.Cap < 0 || n.Size <= n.Cap) {
		return fmt.Errorf("%s: a payload of %d bytes is not over a cap of %d", name, n.Size, n.Cap)
	}
	return nil
}

// notKeptOf returns what the body of a receipt or outcome says of a payload
// the log did not keep: nil when it kept it, or for another body.
func notKeptOf(body any) *entry.NotKept {
	switch b := body.(type) {
	case *entry.Receipt:
		return b.ArgsNotKept
	case *entry.Outcome:
		return b.ResultNotKept
	}
	return nil
}

// absorb runs the checks that need the entries before it, in log order.
func (v *verifier) absorb(it *item, pays *payloadReader) {
	v.count++
	pos := v.count - 1
	at := func(name string, format string, args ...any) {
		p := Problem{Index: -1, File: FileEntries, Line: it.line, Msg: fmt.Sprintf(format, args...)}
		if it.e != nil {
			p.Index, p.ID, p.File, p.Line = it.e.Index, it.e.ID, "", 0
		}
		v.check(name).fail(p)
	}

	if it.err != nil {
		at(CheckCanonical, "%v", it.err)
		v.check(CheckSignatures).fail(Problem{Index: -1, File: FileEntries, Line: it.line, Msg: "not checked: the line is not an entry"})
		v.absorbInclusion(it, pos, at)
		return
	}
	e := it.e
	if it.fieldErr != nil {
		at(CheckCanonical, "%v", it.fieldErr)
	}
	if it.bodyErr != nil {
		at(CheckCanonical, "%v", it.bodyErr)
	}
	if it.fieldErr == nil && it.bodyErr == nil {
		v.n.canonical++
	}

	rec := v.absorbOrder(it, at)
	if k, ok := it.body.(*entry.KeyEvent); ok {
		v.absorbKey(e, k, at)
	}

	// Key resolution and signature.
	k := v.keys[e.Key]
	switch {
	case k == nil:
		at(CheckKeys, "signed by key %s, which the log does not announce before this entry", e.Key)
	case k.retiredBefore(e.Index):
		at(CheckKeys, "signed by key %s, which the rotation at entry %d retired: a retired key signs nothing after its retirement", e.Key, k.retired)
	default:
		v.n.resolved++
	}
	switch {
	case it.sigChecked && it.sigErr != nil:
		at(CheckSignatures, "%v", it.sigErr)
	case it.sigChecked:
		v.n.signed++
	case k != nil:
		if err := checkSignature(it.raw, e, k.pub); err != nil {
			at(CheckSignatures, "%v", err)
		} else {
			v.n.signed++
		}
	default:
		at(CheckSignatures, "cannot be checked: no public key for key %s in the log or keys.jwks.json", e.Key)
	}

	v.absorbInclusion(it, pos, at)
	if rec != nil {
		v.absorbCall(e, rec, it.body, at)
	}
	if pays != nil {
		pays.entry(v, e, rec, notKeptOf(it.body))
	}
}

// absorbOrder checks an entry's place in the log, and returns its record;
// nil for an id seen before.
func (v *verifier) absorbOrder(it *item, at func(string, string, ...any)) *seen {
	e := it.e
	if v.logID == "" {
		v.logID = e.Log
	}
	switch {
	case v.cp != nil && e.Log != v.cp.Log:
		at(CheckOrder, "belongs to log %s; the checkpoint is of log %s", e.Log, v.cp.Log)
	case e.Log != v.logID:
		at(CheckOrder, "belongs to log %s; the entries before it to log %s", e.Log, v.logID)
	}
	switch {
	case v.last >= 0 && e.Index == v.last:
		at(CheckOrder, "appears twice (again at line %d)", it.line)
	case v.last >= 0 && e.Index < v.last:
		at(CheckOrder, "out of order: comes after entry %d", v.last)
	}
	rec, dup := v.entries[e.ID]
	switch {
	case dup && rec.index != e.Index:
		at(CheckOrder, "its id %s is also entry %d's", e.ID, rec.index)
		rec = nil
	case dup:
		rec = nil // the same entry again: reported above
	default:
		rec = &seen{index: e.Index, kind: kindOf(e.Kind)}
		v.entries[e.ID] = rec
	}
	if v.cp != nil && e.Index >= v.cp.Size {
		at(CheckOrder, "beyond the checkpoint, whose tree has %d entries", v.cp.Size)
	}
	v.order = append(v.order, e.Index)
	if e.Index > v.last {
		v.last = e.Index
	}
	return rec
}

// absorbKey follows the key chain through a key entry.
func (v *verifier) absorbKey(e *entry.Entry, k *entry.KeyEvent, at func(string, string, ...any)) {
	raw, err := base64.StdEncoding.Strict().DecodeString(k.PublicKey)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		at(CheckKeyChain, "public_key is not a base64 Ed25519 key")
		return
	}
	pub := ed25519.PublicKey(raw)
	if id := entry.KeyID(pub); id != k.KeyID {
		at(CheckKeyChain, "announces key %s, but its public key's id is %s", k.KeyID, id)
		return
	}
	if prior, dup := v.keys[k.KeyID]; dup {
		at(CheckKeyChain, "announces key %s again (first announced at entry %d)", k.KeyID, prior.index)
		return
	}
	first := len(v.keys) == 0
	switch k.Action {
	case "added":
		switch {
		case e.Key != k.KeyID:
			at(CheckKeyChain, "an added key signs its own announcement; this one is signed by %s", e.Key)
		case first && e.Index != 0:
			at(CheckKeyChain, "the log's first key is announced at entry %d; the log must begin with it", e.Index)
		case !first:
			at(CheckKeyChain, "adds key %s with no rotation signed by a key before it: custody of the log breaks here, and what this key signs is vouched for by nothing before it", k.KeyID)
		}
	case "rotated":
		prev := v.keys[k.Previous]
		switch {
		case first:
			at(CheckKeyChain, "the log's first key entry is a rotation (from %s), not a self-signed key", k.Previous)
		case prev == nil:
			at(CheckKeyChain, "rotates from key %s, which the log does not announce before it", k.Previous)
		case e.Key != k.Previous:
			at(CheckKeyChain, "a rotation is signed by the key it replaces, %s; this one is signed by %s", k.Previous, e.Key)
		case prev.retired >= 0:
			at(CheckKeyChain, "rotates from key %s, which the rotation at entry %d already retired", k.Previous, prev.retired)
		default:
			prev.retired = e.Index
		}
	default:
		at(CheckKeyChain, "unknown key action %q", k.Action)
	}
	v.keys[k.KeyID] = &keyInfo{pub: pub, index: e.Index, entry: e.ID, action: k.Action, previous: k.Previous, retired: -1}
	v.keyOrder = append(v.keyOrder, k.KeyID)
}

func (v *verifier) absorbInclusion(it *item, pos int64, at func(string, string, ...any)) {
	if v.cp == nil {
		return
	}
	if !v.complete {
		switch {
		case it.proofRaw == nil:
			at(CheckInclusion, "no proof: proofs.jsonl has no line for it")
			return
		case it.proofErr != nil:
			v.check(CheckInclusion).fail(Problem{Index: -1, File: FileProofs, Line: it.proofLine, Msg: it.proofErr.Error()})
			return
		case it.e != nil && it.proof.Index != it.e.Index:
			at(CheckInclusion, "proofs.jsonl line %d is for entry %d", it.proofLine, it.proof.Index)
			return
		case it.e != nil && it.proof.ID != it.e.ID:
			at(CheckInclusion, "proofs.jsonl line %d names id %s", it.proofLine, it.proof.ID)
		case it.inclErr != nil:
			at(CheckInclusion, "%v", it.inclErr)
		default:
			v.n.included++
		}
		if it.e != nil {
			if it.prevErr != nil {
				at(CheckPrev, "%v", it.prevErr)
			} else {
				v.n.prevs++
			}
		}
		return
	}

	// A complete bundle: the tree is rebuilt from the entries, which must be
	// entry 0, 1, 2, ... in order.
	if !v.treeBroken && (it.e == nil || it.e.Index != pos) {
		v.treeBroken = true
		v.check(CheckPrev).note("not checked from line %d of entries.jsonl on: the entries are not the log's, in order", it.line)
	}
	if !v.treeBroken {
		switch {
		case it.e.Prev == entry.FormatTreeHash(v.tree.root()):
			v.n.prevs++
		case v.prevDiverged == 0:
			at(CheckPrev, "prev is not the tree hash of the %d entries before it: one of them was changed, removed or inserted", pos)
			v.prevDiverged = 1
		default:
			// Every later entry signed a tree with the same change in it:
			// counted, not listed.
			v.check(CheckPrev).Failures++
			v.prevDiverged++
		}
	}
	v.tree.push(it.leaf)
	if _, ok := v.treeAt[v.tree.size]; ok && !v.treeBroken {
		h := v.tree.root()
		v.treeAt[v.tree.size] = &h
	}
}

// absorbCall keeps what the linkage, payload and erasure checks need of
// entry e, whose record is rec.
func (v *verifier) absorbCall(e *entry.Entry, rec *seen, body any, at func(string, string, ...any)) {
	switch b := body.(type) {
	case *entry.Receipt:
		v.n.receipts++
		rec.decision = decisionOf(b.Decision)
		rec.setCommitment(b.Args)
	case *entry.Outcome:
		v.n.outcomes++
		rec.setCommitment(b.Result)
		r := v.entries[b.Receipt]
		if r != nil && r.index >= e.Index {
			r = nil // not before it
		}
		switch {
		case r == nil:
			at(CheckLinkage, "an outcome for receipt %s, which is not in the bundle before it", b.Receipt)
		case r.kind != entry.KindReceipt:
			at(CheckLinkage, "an outcome for %s, which is a %s entry, not a receipt", b.Receipt, r.kind)
		case r.decision != entry.Allow:
			r.outcomes = min(r.outcomes+1, 2)
			at(CheckLinkage, "an outcome for receipt %s (entry %d), whose decision is %s: a call ran that was not allowed", b.Receipt, r.index, r.decision)
		default:
			r.outcomes = min(r.outcomes+1, 2)
			if r.outcomes > 1 {
				at(CheckLinkage, "a second outcome for receipt %s (entry %d): one call, two results", b.Receipt, r.index)
			}
		}
	case *entry.ErasureEvent:
		v.n.erasureEntries++
		if len(b.Erased) == 0 {
			at(CheckErasures, "an erasure entry that erases nothing")
		}
		for _, x := range b.Erased {
			v.erasures = append(v.erasures, erasureItem{index: e.Index, id: e.ID, time: e.Time, reason: b.Reason, item: x})
		}
	}
}

// A payloadReader walks payloads.jsonl alongside the entries.
type payloadReader struct {
	l    *lines
	c    *Check
	next *PayloadLine
	line int
	done bool
}

func (p *payloadReader) peek() *PayloadLine {
	for p.next == nil && !p.done {
		raw := p.l.r.next()
		if raw == nil {
			p.done = true
			if err := p.l.r.failed(); err != nil {
				p.c.fail(Problem{Index: -1, File: FilePayloads, Msg: err.Error()})
			}
			return nil
		}
		var pl PayloadLine
		if err := decodeStrict(raw, &pl); err != nil {
			p.c.fail(Problem{Index: -1, File: FilePayloads, Line: p.l.r.n, Msg: "malformed: " + err.Error()})
			continue
		}
		p.next, p.line = &pl, p.l.r.n
	}
	return p.next
}

// entry checks the payload lines of entry e, whose record is c (nil for a
// duplicate); nk is what its body says of a payload the log did not keep.
func (p *payloadReader) entry(v *verifier, e *entry.Entry, c *seen, nk *entry.NotKept) {
	for pl := p.peek(); pl != nil && pl.Index < e.Index; pl = p.peek() {
		p.c.fail(Problem{Index: pl.Index, ID: pl.Entry, File: FilePayloads, Line: p.line,
			Msg: "a payload for an entry that is not in entries.jsonl here (missing, or out of order)"})
		p.next = nil
	}
	for pl := p.peek(); pl != nil && pl.Index == e.Index; pl = p.peek() {
		p.next = nil
		v.n.payloadLines++
		v.checkPayload(e, c, pl, nk, p.line)
	}
	if c == nil {
		return
	}
	switch {
	case c.hasCommit && c.payload == payloadNone && nk != nil:
		p.c.failf(e.Index, e.ID, "payloads.jsonl has no line for the %s, which the entry signed were not kept (%d bytes, over the cap of %d): neither their salt, marked not_kept, nor a tombstone",
			partName(part(c.kind)), nk.Size, nk.Cap)
	case c.hasCommit && c.payload == payloadNone:
		p.c.failf(e.Index, e.ID, "payloads.jsonl has neither the %s it commits to nor a tombstone", part(c.kind))
	}
}

// rest reports payload lines after the last entry.
func (p *payloadReader) rest(v *verifier) {
	for pl := p.peek(); pl != nil; pl = p.peek() {
		p.c.fail(Problem{Index: pl.Index, ID: pl.Entry, File: FilePayloads, Line: p.line,
			Msg: "a payload for an entry that is not in entries.jsonl"})
		p.next = nil
	}
}

func (v *verifier) checkPayload(e *entry.Entry, c *seen, pl *PayloadLine, nk *entry.NotKept, line int) {
	cp := v.check(CheckPayloads)
	fail := func(format string, args ...any) {
		cp.fail(Problem{Index: e.Index, ID: e.ID, File: FilePayloads, Line: line, Msg: fmt.Sprintf(format, args...)})
	}
	if pl.Entry != e.ID {
		fail("names entry %s", pl.Entry)
		return
	}
	if c == nil {
		fail("a payload for an entry read twice")
		return
	}
	want, ok := c.commitment(pl.Part)
	if !ok {
		fail("a %s entry commits to no %q payload", e.Kind, pl.Part)
		return
	}
	if c.payload != payloadNone {
		fail("a second %s payload", pl.Part)
		return
	}
	if pl.Commitment != want {
		fail("its commitment %s is not the one the entry signed, %s", pl.Commitment, want)
		return
	}
	if pl.Erased() {
		c.payload = payloadErased
		if pl.Salt != nil || pl.Data != nil || pl.NotKept {
			fail("a tombstone that still carries salt, data or not_kept")
			return
		}
		v.tombstones = append(v.tombstones, tombstone{index: e.Index, entry: e.ID, part: pl.Part, erasedBy: pl.ErasedBy, line: line})
		return
	}
	if nk != nil || pl.NotKept {
		c.payload = payloadNotKept
		v.checkNotKeptLine(e, pl, nk, fail)
		return
	}
	c.payload = payloadData
	if pl.Salt == nil || pl.Data == nil {
		fail("neither salt and data nor a tombstone")
		return
	}
	salt, err1 := base64.StdEncoding.Strict().DecodeString(*pl.Salt)
	data, err2 := base64.StdEncoding.Strict().DecodeString(*pl.Data)
	switch {
	case err1 != nil || len(salt) != entry.SaltSize:
		fail("salt is not %d bytes of base64", entry.SaltSize)
	case err2 != nil:
		fail("data is not base64")
	case entry.Commit(salt, data) != want:
		fail("the %s do not match the commitment the entry signed", partName(pl.Part))
	default:
		v.n.payloadsOK++
	}
}

// checkNotKeptLine checks the line of a payload that the entry, or the
// line, says the log did not keep. The entry's signed body is the
// authority: a line must say not_kept exactly when it does, and carry the
// salt and no data. A bundle that carries data the entry says the log did
// not keep fails, even data that matches the commitment: it is not the
// log's as signed. Without the data, the commitment cannot be checked here;
// whoever kept the payload can check it with the salt.
func (v *verifier) checkNotKeptLine(e *entry.Entry, pl *PayloadLine, nk *entry.NotKept, fail func(string, ...any)) {
	what := partName(pl.Part)
	if nk == nil {
		fail("says the %s were not kept, but the entry signed no %s_not_kept: the log kept them, and the bundle leaves them out", what, pl.Part)
		return
	}
	switch {
	case pl.Data != nil:
		fail("carries the %s, which the entry signed the log did not keep (%d bytes, over its cap of %d)", what, nk.Size, nk.Cap)
		return
	case !pl.NotKept:
		fail("neither data nor not_kept, for %s the entry signed were not kept", what)
		return
	case pl.Salt == nil:
		fail("the salt of %s not kept is missing", what)
		return
	}
	if salt, err := base64.StdEncoding.Strict().DecodeString(*pl.Salt); err != nil || len(salt) != entry.SaltSize {
		fail("salt is not %d bytes of base64", entry.SaltSize)
		return
	}
	v.report.NotKept = append(v.report.NotKept, NotKept{Entry: e.ID, Index: e.Index, Part: pl.Part, Size: nk.Size, Cap: nk.Cap})
}

func partName(part string) string {
	if part == "args" {
		return "arguments"
	}
	return part
}

func (v *verifier) finishKeys() {
	c := v.check(CheckKeyChain)
	if len(v.keyOrder) == 0 {
		c.failf(-1, "", "the bundle holds no key entry: nothing in the log vouches for its keys")
	}
	for _, id := range v.keyOrder {
		k := v.keys[id]
		switch pub, ok := v.jwks[id]; {
		case !ok:
			c.fail(Problem{Index: k.index, File: FileKeys, Msg: fmt.Sprintf("does not list key %s, which entry %d announces", id, k.index)})
		case !pub.Equal(k.pub):
			c.fail(Problem{Index: k.index, File: FileKeys, Msg: fmt.Sprintf("key %s is not the one entry %d announces", id, k.index)})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(v.jwks)) {
		if v.keys[id] == nil {
			c.fail(Problem{Index: -1, File: FileKeys, Msg: fmt.Sprintf("lists key %s, which the log never announces", id)})
		}
	}
	var chain []string
	for _, id := range v.keyOrder {
		k := v.keys[id]
		link := fmt.Sprintf("%s (%s at entry %d", id, k.action, k.index)
		if k.retired >= 0 {
			link += fmt.Sprintf(", retired at entry %d", k.retired)
		}
		chain = append(chain, link+")")
	}
	c.Detail = fmt.Sprintf("%d %s: %s", len(v.keyOrder), plural(len(v.keyOrder), "key", "keys"), strings.Join(chain, " -> "))
	if len(v.keyOrder) == 0 {
		c.Detail = "no keys"
		return
	}
	first := v.keys[v.keyOrder[0]]
	v.report.FirstKey = v.keyOrder[0]
	switch {
	case len(v.opts.PinKeys) > 0:
		v.report.Pinned = true
		ok := false
		var pins []string
		for _, p := range v.opts.PinKeys {
			ok = ok || p.Equal(first.pub)
			pins = append(pins, entry.KeyID(p))
		}
		if !ok {
			c.failf(first.index, first.entry, "the log's first key is %s, not the pinned %s: this is not the log you pinned, or it was signed again from the start with another key",
				v.keyOrder[0], strings.Join(pins, ", "))
		} else {
			c.Detail += "; first key pinned"
		}
	case v.opts.PinKeyID != "":
		v.report.Pinned = true
		if v.keyOrder[0] != v.opts.PinKeyID {
			c.failf(first.index, first.entry, "the log's first key is %s, not the pinned %s: this is not the log you pinned, or it was signed again from the start with another key",
				v.keyOrder[0], v.opts.PinKeyID)
		} else {
			c.Detail += "; first key pinned (by id)"
		}
	}
}

// logKeys returns the public keys the log announces.
func (v *verifier) logKeys() []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for _, id := range v.keyOrder {
		out = append(out, v.keys[id].pub)
	}
	return out
}

func (v *verifier) finishCheckpoint() {
	c := v.check(CheckCheckpoint)
	if v.cp == nil {
		c.Detail = "no checkpoint"
		return
	}
	_, kid, err := entry.OpenCheckpoint(v.cpRaw, v.logKeys())
	if err == nil {
		err = oneStrictSignature(v.cpRaw)
	}
	if err != nil {
		c.fail(Problem{Index: -1, File: FileCheckpoint, Msg: fmt.Sprintf("not signed by a key the log announces (signed by %s): %v",
			orDash(strings.Join(noteSigners(v.cpRaw), ", ")), err)})
		c.Detail = fmt.Sprintf("log %s, %d entries", v.cp.Log, v.cp.Size)
		return
	}
	v.report.SignedBy = kid
	c.Detail = fmt.Sprintf("log %s, %d entries, signed by key %s", v.cp.Log, v.cp.Size, kid)
	if k := v.keys[kid]; k != nil && k.retiredBefore(v.cp.Size) {
		c.fail(Problem{Index: -1, File: FileCheckpoint, Msg: fmt.Sprintf("signed by key %s, which the rotation at entry %d retired: a checkpoint of %d entries is signed by the key current at its size",
			kid, k.retired, v.cp.Size)})
	}
}

func (v *verifier) finishTree() {
	ci, cp := v.check(CheckInclusion), v.check(CheckPrev)
	v.report.Entries, v.report.Complete = v.count, v.complete
	if v.cp == nil {
		ci.Detail, cp.Detail = "no checkpoint to check against", "no checkpoint to check against"
		ci.Status, cp.Status = Skipped, Skipped
		return
	}
	if !v.complete {
		ci.Detail = fmt.Sprintf("%d of %d entries: audit paths to the checkpoint's tree hash", v.n.included, v.count)
		cp.Detail = fmt.Sprintf("%d of %d entries: consistency proofs from the tree each signed", v.n.prevs, v.count)
		return
	}
	root := v.tree.root()
	switch {
	case v.tree.size != v.cp.Size:
		ci.failf(-1, "", "the bundle claims the whole log, but holds %d entries of the checkpoint's %d", v.tree.size, v.cp.Size)
	case v.treeBroken:
		ci.failf(-1, "", "the bundle claims the whole log, but its entries are not entries 0 to %d in order", v.cp.Size-1)
	case root != v.cp.Hash:
		ci.failf(-1, "", "the tree of the bundle's %d entries hashes to %s; the checkpoint says %s",
			v.tree.size, entry.FormatTreeHash(root), entry.FormatTreeHash(v.cp.Hash))
	default:
		v.n.included = v.count
	}
	ci.Detail = fmt.Sprintf("%d of %d entries: the tree of the whole log rebuilt from them", v.n.included, v.count)
	cp.Detail = fmt.Sprintf("%d of %d entries: prev is the tree of the entries before", v.n.prevs, v.count)
	if v.prevDiverged > 1 {
		cp.note("the %d entries after the first one named also signed trees that differ from the bundle's: the change is before them", v.prevDiverged-1)
	}
}

func (v *verifier) finishConsistency() {
	c := v.check(CheckConsistency)
	if len(v.earlier) == 0 {
		c.Detail = "no earlier checkpoint could be read"
		if c.Failures == 0 {
			c.Status = Skipped
			c.Detail = "no earlier checkpoint given (--since-checkpoint FILE)"
		}
		return
	}
	if v.cp == nil {
		c.Detail = "no checkpoint to check against"
		return
	}
	var done []string
	for _, old := range v.earlier {
		fail := func(format string, args ...any) {
			c.failf(-1, "", "%s: %s", old.source, fmt.Sprintf(format, args...))
		}
		_, kid, err := entry.OpenCheckpoint(old.raw, v.logKeys())
		if err == nil {
			if serr := oneStrictSignature(old.raw); serr != nil {
				fail("the earlier checkpoint: %v", serr)
				continue
			}
		}
		if err != nil {
			fail("the earlier checkpoint is signed by %s, a key this log never announces: the log was replaced, or signed again with other keys",
				orDash(strings.Join(noteSigners(old.raw), ", ")))
			continue
		}
		if k := v.keys[kid]; k.retiredBefore(old.cp.Size) {
			fail("the earlier checkpoint of %d entries is signed by key %s, which the rotation at entry %d retired: it is not the log's", old.cp.Size, kid, k.retired)
			continue
		}
		switch {
		case old.cp.Log != v.cp.Log:
			fail("the earlier checkpoint is of log %s, the bundle of log %s", old.cp.Log, v.cp.Log)
			continue
		case old.cp.Size > v.cp.Size:
			fail("the log has %d entries, fewer than the %d of the earlier checkpoint: it was truncated", v.cp.Size, old.cp.Size)
			continue
		}
		checked := false
		if old.cp.Size == v.cp.Size {
			// The same tree, or another: no proof is needed to tell.
			if old.cp.Hash != v.cp.Hash {
				fail("the earlier checkpoint is of the same %d entries, with tree hash %s; the bundle's is %s: the log was rewritten since",
					old.cp.Size, entry.FormatTreeHash(old.cp.Hash), entry.FormatTreeHash(v.cp.Hash))
				continue
			}
			checked = true
		}
		if h := v.treeAt[old.cp.Size]; v.complete && h != nil {
			if *h != old.cp.Hash {
				fail("the log's first %d entries hash to %s; the earlier checkpoint says %s: the log was rewritten since",
					old.cp.Size, entry.FormatTreeHash(*h), entry.FormatTreeHash(old.cp.Hash))
				continue
			}
			checked = true
		}
		if cons := v.consistency; cons != nil && cons.OldSize == old.cp.Size && cons.OldHash == entry.FormatTreeHash(old.cp.Hash) {
			var err error
			if old.cp.Size == v.cp.Size {
				if old.cp.Hash != v.cp.Hash || len(v.consProof) != 0 {
					err = errors.New("same size, different tree")
				}
			} else {
				err = tlog.CheckTree(v.consProof, v.cp.Size, v.cp.Hash, old.cp.Size, old.cp.Hash)
			}
			if err != nil {
				fail("the consistency proof from %d to %d entries fails: %v", old.cp.Size, v.cp.Size, err)
				continue
			}
			checked = true
		}
		if !checked {
			fail("the bundle has no consistency proof from the earlier checkpoint's %d entries: export again with --since-checkpoint of it", old.cp.Size)
			continue
		}
		done = append(done, fmt.Sprintf("%d entries (%s)", old.cp.Size, old.source))
	}
	c.Detail = "extends the checkpoint of " + orDash(strings.Join(done, " and "))
	if len(done) == 0 {
		c.Detail = "no earlier checkpoint could be checked"
	}
}

func (v *verifier) finishLinkage() {
	c := v.check(CheckLinkage)
	for _, cl := range v.entries {
		if cl.kind == entry.KindReceipt && cl.decision == entry.Allow && cl.outcomes == 0 {
			v.n.allowedWithout++
		}
	}
	c.Detail = fmt.Sprintf("%d %s, %d %s", v.n.outcomes, plural(int(v.n.outcomes), "outcome", "outcomes"),
		v.n.receipts, plural(int(v.n.receipts), "receipt", "receipts"))
	if v.n.allowedWithout > 0 {
		c.note("%d allowed %s no outcome in the bundle (still running, the proxy stopped before writing it, or left out by the filters)",
			v.n.allowedWithout, plural(int(v.n.allowedWithout), "call has", "calls have"))
	}
}

func (v *verifier) finishErasures() {
	ce, cp := v.check(CheckErasures), v.check(CheckPayloads)
	type key struct{ entry, part string }
	by := map[key]erasureItem{}
	for _, x := range v.erasures {
		k := key{x.item.Entry, x.item.Part}
		fail := func(format string, args ...any) {
			ce.failf(x.index, x.id, "%s", fmt.Sprintf(format, args...))
		}
		if x.item.Part != "args" && x.item.Part != "result" {
			fail("erases part %q of %s; parts are args and result", x.item.Part, x.item.Entry)
			continue
		}
		if prior, dup := by[k]; dup {
			fail("erases the %s of %s, already erased by entry %d", x.item.Part, x.item.Entry, prior.index)
			continue
		}
		by[k] = x
		cl := v.entries[x.item.Entry]
		if cl == nil || (cl.kind != entry.KindReceipt && cl.kind != entry.KindOutcome) {
			if v.complete {
				fail("erases the %s of %s, which is not in the log", x.item.Part, x.item.Entry)
			} else {
				v.n.erasedOutside++
			}
			continue
		}
		switch {
		case cl.index >= x.index:
			fail("erases the %s of %s (entry %d), which comes after it", x.item.Part, x.item.Entry, cl.index)
		case x.item.Part != part(cl.kind):
			fail("erases the %s of %s, a %s entry, which has none", x.item.Part, x.item.Entry, cl.kind)
		case !cl.hasCommit:
			fail("names commitment %s for the %s of %s, which committed to none", x.item.Commitment, x.item.Part, x.item.Entry)
		case mustCommitment(cl) != x.item.Commitment:
			fail("names commitment %s for the %s of %s; the entry signed %s", x.item.Commitment, x.item.Part, x.item.Entry, mustCommitment(cl))
		case v.payloads && cl.payload == payloadData:
			fail("erased the %s of %s (entry %d), but payloads.jsonl still holds them", x.item.Part, x.item.Entry, cl.index)
		case v.payloads && cl.payload == payloadNotKept:
			fail("erased the %s of %s (entry %d), but payloads.jsonl still holds their salt", x.item.Part, x.item.Entry, cl.index)
		default:
			v.report.Erasures = append(v.report.Erasures, Erasure{Entry: x.item.Entry, Index: cl.index, Part: x.item.Part,
				ErasedBy: x.id, ErasedIndex: x.index, Time: x.time, Reason: x.reason})
		}
	}
	for _, t := range v.tombstones {
		x, ok := by[key{t.entry, t.part}]
		switch {
		case !ok:
			cp.fail(Problem{Index: t.index, ID: t.entry, File: FilePayloads, Line: t.line,
				Msg: fmt.Sprintf("the %s are a tombstone, but no erasure entry in the bundle erased them", partName(t.part))})
		case x.id != t.erasedBy:
			cp.fail(Problem{Index: t.index, ID: t.entry, File: FilePayloads, Line: t.line,
				Msg: fmt.Sprintf("the tombstone names erasure %s; entry %d (%s) is the one that erased it", t.erasedBy, x.index, x.id)})
		default:
			v.n.erased++
		}
	}

	cp.Detail = fmt.Sprintf("%d match the commitments their entries signed; %d erased (commitment not checkable, covered by an erasure entry)", v.n.payloadsOK, v.n.erased)
	if n := len(v.report.NotKept); n > 0 {
		cp.Detail += fmt.Sprintf("; %d not kept (over the log's size cap, as their entries signed: commitment checkable only with the payload kept elsewhere)", n)
	}
	for i, x := range v.report.NotKept {
		if i == 50 {
			cp.note("... and %d more not kept", len(v.report.NotKept)-50)
			break
		}
		cp.note("not kept: the %s of entry %d (%s), %d bytes, over the log's cap of %d bytes", x.Part, x.Index, x.Entry, x.Size, x.Cap)
	}
	if v.n.payloadLines == 0 {
		cp.Detail = "no payloads"
	}
	if !v.payloads && cp.Failures == 0 {
		cp.Status, cp.Detail = Skipped, "the export left payloads out: commitments only"
	}
	ce.Detail = fmt.Sprintf("%d erasure %s; %d %s erased", v.n.erasureEntries, plural(int(v.n.erasureEntries), "entry", "entries"),
		len(v.report.Erasures), plural(len(v.report.Erasures), "payload", "payloads"))
	if v.n.erasedOutside > 0 {
		ce.Detail += fmt.Sprintf(" (and %d of entries outside this bundle)", v.n.erasedOutside)
	}
	slices.SortStableFunc(v.report.Erasures, func(a, b Erasure) int { return cmp.Compare(a.ErasedIndex, b.ErasedIndex) })
	for i, x := range v.report.Erasures {
		if i == 50 {
			ce.note("... and %d more", len(v.report.Erasures)-50)
			break
		}
		ce.note("erasure: the %s of entry %d (%s), by entry %d (%s) at %s: %q", x.Part, x.Index, x.Entry, x.ErasedIndex, x.ErasedBy, x.Time, x.Reason)
	}
}

func (v *verifier) finishManifest() {
	c := v.check(CheckManifest)
	m := v.manifest
	if m == nil {
		c.Detail = "none"
		return
	}
	// Hash the files not read for their contents (the CSV of a large log
	// is hundreds of megabytes: streamed, not read whole).
	for _, name := range knownFiles {
		if _, done := v.digests[name]; !done && v.present[name] {
			v.hashFile(name)
		}
	}
	if k := v.keys[m.Key]; k == nil {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: fmt.Sprintf("signed by key %s, which the log never announces", m.Key)})
	} else if err := verifyManifest(m, k.pub); err != nil {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: err.Error()})
	} else if k.retiredBefore(m.Checkpoint.Size) {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: fmt.Sprintf("signed by key %s, which the rotation at entry %d retired: a manifest of a checkpoint of %d entries is signed by the key current at its size",
			m.Key, k.retired, m.Checkpoint.Size)})
	}
	if v.cp != nil && (m.Log != v.cp.Log || m.Checkpoint.Size != v.cp.Size || m.Checkpoint.Hash != entry.FormatTreeHash(v.cp.Hash)) {
		c.fail(Problem{Index: -1, File: FileManifest, Msg: fmt.Sprintf("names log %s at %d entries, %s; the checkpoint file says log %s at %d entries, %s",
			m.Log, m.Checkpoint.Size, m.Checkpoint.Hash, v.cp.Log, v.cp.Size, entry.FormatTreeHash(v.cp.Hash))})
	}
	files := 0
	for _, name := range knownFiles[1:] {
		want, listed := m.Files[name]
		switch {
		case listed && !v.present[name]:
			c.fail(Problem{Index: -1, File: name, Msg: "listed in the signed manifest, but missing"})
		case !listed && v.present[name]:
			c.fail(Problem{Index: -1, File: name, Msg: "not listed in the signed manifest: it was added after export"})
		case listed && v.digests[name] != want:
			c.fail(Problem{Index: -1, File: name, Msg: "does not match the SHA-256 the signed manifest gives it: it was changed after export"})
		case listed:
			files++
		}
	}
	for _, name := range slices.Sorted(maps.Keys(m.Files)) {
		if !slices.Contains(knownFiles[1:], name) {
			c.fail(Problem{Index: -1, File: name, Msg: "the manifest lists a file that is not part of the format"})
		}
	}
	// What the manifest says the export left out must not be there, even
	// listed and signed: the manifest's own word is what a reader of the
	// bundle goes by.
	if !m.Payloads && v.present[FilePayloads] {
		c.fail(Problem{Index: -1, File: FilePayloads, Msg: "present, but the signed manifest says the export left payloads out (payloads: false)"})
	}
	if !m.Payloads && (m.Counts.Payloads != 0 || m.Counts.Erased != 0) {
		c.failf(-1, "", "the manifest says the export left payloads out, but counts %d payloads, %d erased", m.Counts.Payloads, m.Counts.Erased)
	}
	if m.Complete && v.present[FileProofs] {
		c.fail(Problem{Index: -1, File: FileProofs, Msg: "present, but the signed manifest says the bundle holds the whole log (complete: true), which needs no proofs"})
	}
	if v.listedOK {
		v.compareListed()
	}
	if m.Counts.Entries != v.count {
		c.failf(-1, "", "the manifest counts %d entries; entries.jsonl has %d", m.Counts.Entries, v.count)
	}
	if v.payloads && m.Counts.Payloads != v.n.payloadLines {
		c.failf(-1, "", "the manifest counts %d payloads; payloads.jsonl has %d", m.Counts.Payloads, v.n.payloadLines)
	}
	if v.payloads && m.Counts.Erased != int64(len(v.tombstones)) {
		c.failf(-1, "", "the manifest counts %d erased payloads; payloads.jsonl has %d tombstones", m.Counts.Erased, len(v.tombstones))
	}
	if m.Counts.Selected > m.Counts.Entries {
		c.failf(-1, "", "the manifest counts more entries chosen by the filters (%d) than entries (%d)", m.Counts.Selected, m.Counts.Entries)
	}
	if m.Complete && v.cp != nil && m.Indexes != fmt.Sprintf("0-%d", v.cp.Size-1) && !(v.cp.Size == 1 && m.Indexes == "0") {
		c.failf(-1, "", "the manifest claims the whole log, but lists indexes %q", m.Indexes)
	}
	switch cons := v.consistency; {
	case m.Since == nil && v.present[FileConsistency]:
		c.fail(Problem{Index: -1, File: FileConsistency, Msg: "present, but the signed manifest names no earlier checkpoint (no since)"})
	case m.Since != nil && cons == nil:
		c.failf(-1, "", "the manifest names an earlier checkpoint (%d entries), but there is no valid consistency.json", m.Since.Size)
	case m.Since != nil && (m.Since.Size != cons.OldSize || m.Since.Hash != cons.OldHash):
		c.fail(Problem{Index: -1, File: FileConsistency, Msg: "is not from the earlier checkpoint the manifest names"})
	}
	c.Detail = fmt.Sprintf("signed by key %s; %d files match their digests; %d entries listed", m.Key, files, v.listed.count())
}

func (v *verifier) finishReport() {
	if v.report.Log == "" {
		v.report.Log = v.logID
	}
	cc := v.check(CheckCanonical)
	cc.Detail = fmt.Sprintf("%d of %d entries", v.n.canonical, v.count)
	co := v.check(CheckOrder)
	co.Detail = fmt.Sprintf("%d entries of log %s", v.count, orDash(v.logID))
	if v.complete {
		co.Detail += ": the whole log"
	}
	v.check(CheckKeys).Detail = fmt.Sprintf("%d of %d entries signed by a key announced at or before them", v.n.resolved, v.count)
	v.check(CheckSignatures).Detail = fmt.Sprintf("%d of %d Ed25519 signatures valid", v.n.signed, v.count)
	for _, c := range v.report.Checks {
		switch {
		case c.Failures > 0:
			c.Status = Failed
		case c.Status == "":
			c.Status = OK
		}
	}
	v.report.Assurance = v.assurance()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// compareListed compares the indexes read with those the manifest lists.
func (v *verifier) compareListed() {
	c := v.check(CheckOrder)
	seen := slices.Clone(v.order)
	slices.Sort(seen)
	seen = slices.Compact(seen)
	byIndex := map[int64]string{}
	i := 0
	for _, run := range v.listed {
		for i < len(seen) && seen[i] < run[0] {
			byIndex[seen[i]] = ""
			i++
		}
		// Indexes of the run not seen, as ranges.
		next := run[0]
		for ; i < len(seen) && seen[i] <= run[1]; i++ {
			if seen[i] > next {
				c.failf(-1, "", "%s listed in the signed manifest but missing from entries.jsonl", span(next, seen[i]-1))
			}
			next = seen[i] + 1
		}
		if next <= run[1] {
			c.failf(-1, "", "%s listed in the signed manifest but missing from entries.jsonl", span(next, run[1]))
		}
	}
	for ; i < len(seen); i++ {
		byIndex[seen[i]] = ""
	}
	if len(byIndex) == 0 {
		return
	}
	for id, rec := range v.entries {
		if _, ok := byIndex[rec.index]; ok {
			byIndex[rec.index] = id
		}
	}
	for _, index := range slices.Sorted(maps.Keys(byIndex)) {
		c.failf(index, byIndex[index], "not listed in the signed manifest: it was added after export")
	}
}

func span(first, last int64) string {
	if first == last {
		return fmt.Sprintf("entry %d", first)
	}
	return fmt.Sprintf("entries %d-%d", first, last)
}

// mustCommitment is the commitment of an entry that has one.
func mustCommitment(c *seen) string {
	return "sha256:" + hex.EncodeToString(c.commit[:])
}
