package receipts

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"context"
	"crypto/ed25519"
	"crypto/sha256"
	"database/sql"
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"html/template"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/gatehouse-dev/gatehouse/internal/atomicfile"
	"github.com/gatehouse-dev/gatehouse/receipts/entry"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// # Export
//
// [Log.Export] writes an evidence bundle: a folder (or a .tar.gz of one) an
// auditor checks with nothing else, with package [verify] or a verifier of
// their own written from docs/evidence.md. Its files are named in package
// verify (FileEntries, ...): the entries as signed and stored, their
// payloads or tombstones, the log's public keys, a checkpoint signed now,
// an inclusion proof for each entry (unless the bundle holds the whole log),
// optionally a consistency proof from an earlier export's checkpoint, a CSV
// and an HTML report, and a manifest, signed, that binds them all.
//
// The export reads one snapshot of the database (a read transaction: in WAL
// mode it blocks no writer), so the checkpoint, the entries and the proofs
// agree even while proxies append.

// ExportFilter chooses the entries of an export, with the meaning of the
// same filters in [Query]. Each list matches any of its values; the filters
// given must all match. The zero ExportFilter chooses the whole log.
type ExportFilter struct {
	From, To  time.Time    // entries at or after From and before To; zero means unbounded
	Servers   []string     // calls to these servers (receipts, outcomes), and pins of their tools
	Decisions []string     // calls with these decisions (ALLOW, DENY, APPROVAL_REQUIRED)
	Statuses  []string     // calls whose outcome has these statuses (SUCCEEDED, FAILED, UNKNOWN)
	Kinds     []entry.Kind // entries of these kinds
}

// IsZero reports whether f chooses every entry.
func (f ExportFilter) IsZero() bool {
	return f.From.IsZero() && f.To.IsZero() && len(f.Servers) == 0 && len(f.Decisions) == 0 &&
		len(f.Statuses) == 0 && len(f.Kinds) == 0
}

// ExportOptions configure [Log.Export]. Nil options export the whole log
// with its payloads.
type ExportOptions struct {
	Filter ExportFilter
	// Since is the checkpoint file of an earlier export. The bundle then
	// holds a proof that this log extends it; if it does not, Export fails
	// with ErrInconsistent.
	Since []byte
	// NoPayloads leaves arguments and results out: the bundle holds their
	// commitments only.
	NoPayloads bool
	// Generator names the program in the manifest and the report;
	// "gatehouse" if empty.
	Generator string
	// Witnesses are asked, during the export, to cosign its checkpoint.
	// The bundle carries what they answer, and the cosignatures of the same
	// checkpoint the log kept from earlier submissions; a witness that does
	// not answer in time or refuses is reported in [Exported.Witnessed],
	// and the export goes on without it.
	Witnesses []Cosigner
	// WitnessTimeout bounds the wait for the witnesses; 0 means 10 s.
	WitnessTimeout time.Duration
}

// A Cosigner is a witness an export asks to cosign its checkpoint
// (package witness makes one from a witness's URL and key).
type Cosigner interface {
	// Key is the witness's verifier key.
	Key() string
	// Cosign submits checkpoint, a signed note of size entries, and
	// returns the witness's cosignature line and its time. prove returns
	// a consistency proof from an earlier size to size.
	Cosign(ctx context.Context, checkpoint []byte, size int64, prove func(old int64) (tlog.TreeProof, error)) (string, time.Time, error)
}

// A WitnessAnswer is how one witness answered an export.
type WitnessAnswer struct {
	Witness string // its verifier key
	Err     error  // nil: the bundle carries its cosignature
	Kept    bool   // it did not answer, and the bundle carries the cosignature the log kept
}

// ErrInconsistent is returned when the log does not extend the earlier
// checkpoint an export was asked to prove consistency with: the log was
// truncated, rewritten, or is another log.
var ErrInconsistent = errors.New("the log does not extend the earlier checkpoint")

// An Exported bundle: where it is and what it holds.
type Exported struct {
	Path       string
	Archive    bool // a .tar.gz
	Manifest   verify.Manifest
	Checkpoint entry.Checkpoint
	FirstKey   string // the log's first key: the one auditors pin
	Witnessed  []WitnessAnswer
}

// Export writes a bundle of the entries opts.Filter chooses to out: a new
// folder, or a gzipped tar archive of one when out ends in .tar.gz or .tgz.
// out must not exist. The bundle also holds the entries the chosen ones need
// to verify: every key entry, the receipt of each outcome, and the erasure
// entry of each erased payload. It is written beside out and renamed into
// place, so out is either the whole bundle or absent. The log's key signs
// the bundle's checkpoint and manifest, which is why Export is the writer's
// ([Log]); it writes nothing to the log.
func (l *Log) Export(ctx context.Context, out string, opts *ExportOptions) (*Exported, error) {
	if err := l.sync(ctx); err != nil {
		return nil, err
	}
	if opts == nil {
		opts = &ExportOptions{}
	}
	archive := strings.HasSuffix(out, ".tar.gz") || strings.HasSuffix(out, ".tgz")
	if _, err := os.Lstat(out); err == nil {
		return nil, fmt.Errorf("export: %s: %w", out, fs.ErrExist)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("export: %w", err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(out), ".gatehouse-export-*")
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	defer os.RemoveAll(tmp)

	x, err := l.writeBundle(ctx, tmp, opts)
	if err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	x.Path, x.Archive = out, archive
	if archive {
		top := strings.TrimSuffix(strings.TrimSuffix(filepath.Base(out), ".tgz"), ".tar.gz")
		if err := writeArchive(tmp, out, top); err != nil {
			return nil, fmt.Errorf("export: %w", err)
		}
		return x, nil
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, fmt.Errorf("export: %w", err)
	}
	return x, nil
}

// Why an entry is in a bundle.
const (
	notExported uint8 = iota
	whySelected
	whyKey
	whyReceipt
	whyErasure
)

var whyText = [...]string{"", "selected", "key chain", "receipt of an exported outcome", "erasure of an exported payload"}

// erasedPart is a payload erased, as the export needs to know it.
type erasedPart struct {
	part string
	by   int64  // index of the erasure entry
	byID string // its id
}

// bundleWriter is one export in progress.
type bundleWriter struct {
	l    *Log
	key  ed25519.PrivateKey // signs the checkpoint and the manifest: one key for both, whatever a rotation meanwhile
	ctx  context.Context
	tx   *sql.Tx
	dir  string
	opts *ExportOptions

	size     int64
	why      []uint8 // by index: why the entry is exported, or notExported
	indexes  []int64 // exported, ascending
	complete bool
	erased   map[int64][]erasedPart // by the index of the entry whose payload it was
	hashes   tlog.HashReader
	root     tlog.Hash

	checkpoint []byte // the signed checkpoint
	witnessed  []WitnessAnswer

	files    map[string]string // name -> digest
	keys     []keyRow
	summary  reportSummary
	manifest verify.Manifest
}

func (l *Log) writeBundle(ctx context.Context, dir string, opts *ExportOptions) (*Exported, error) {
	// A read transaction is one snapshot of the database; BEGIN DEFERRED
	// (what ReadOnly gives) takes no write lock.
	tx, err := l.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	w := &bundleWriter{l: l, key: l.currentKey(), ctx: ctx, tx: tx, dir: dir, opts: opts, files: map[string]string{}}
	if err := tx.QueryRowContext(ctx, `SELECT coalesce(max(idx) + 1, 0) FROM entries`).Scan(&w.size); err != nil {
		return nil, fmt.Errorf("read log size: %w", err)
	}
	if w.size == 0 {
		return nil, errors.New("the log is empty")
	}
	// The checkpoint and the manifest are signed over this size: not by a
	// key retired before it.
	if w.key, err = l.liveKey(ctx, tx, w.key, w.size); err != nil {
		return nil, err
	}
	if err := w.choose(); err != nil {
		return nil, err
	}
	if err := w.loadHashes(); err != nil {
		return nil, err
	}
	if w.root, err = tlog.TreeHash(w.size, w.hashes); err != nil {
		return nil, fmt.Errorf("tree hash: %w", err)
	}
	// The keys first, and the earlier checkpoint checked against them,
	// before anything else is written.
	steps := []func() error{w.readKeys, w.writeConsistency, w.writeEntries, w.writePayloads, w.writeKeys, w.writeCheckpoint, w.writeCosignatures, w.writeReport, w.writeManifest}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := step(); err != nil {
			return nil, err
		}
	}
	first := ""
	if len(w.keys) > 0 {
		first = w.keys[0].ID
	}
	return &Exported{Manifest: w.manifest, Checkpoint: entry.Checkpoint{Log: l.id, Size: w.size, Hash: w.root}, FirstKey: first,
		Witnessed: w.witnessed}, nil
}

// choose decides which entries the bundle holds.
func (w *bundleWriter) choose() error {
	f := w.opts.Filter
	w.why = make([]uint8, w.size)
	if f.IsZero() {
		for i := range w.why {
			w.why[i] = whySelected
		}
	} else {
		var receipts []int64
		rows, err := w.tx.QueryContext(w.ctx, `SELECT e.idx, e.kind, e.time_ns,
				CASE WHEN e.kind = 'outcome' THEN coalesce(r.server, '') ELSE e.server END,
				CASE WHEN e.kind = 'outcome' THEN coalesce(r.decision, '') ELSE e.decision END,
				e.status, coalesce(r.idx, -1)
			FROM entries e LEFT JOIN entries r ON e.kind = 'outcome' AND r.id = e.receipt_id
			WHERE e.idx < ?`, w.size)
		if err != nil {
			return fmt.Errorf("choose entries: %w", err)
		}
		for rows.Next() {
			var (
				idx, timeNS, receipt           int64
				kind, server, decision, status string
			)
			if err := rows.Scan(&idx, &kind, &timeNS, &server, &decision, &status, &receipt); err != nil {
				rows.Close()
				return fmt.Errorf("choose entries: %w", err)
			}
			if !f.matches(entry.Kind(kind), time.Unix(0, timeNS), server, decision, status) {
				continue
			}
			w.why[idx] = whySelected
			if receipt >= 0 {
				receipts = append(receipts, receipt)
			}
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return fmt.Errorf("choose entries: %w", err)
		}
		for _, r := range receipts {
			if r < w.size && w.why[r] == notExported {
				w.why[r] = whyReceipt
			}
		}
		if err := w.eachIndex(`SELECT idx FROM entries WHERE kind = 'key' AND idx < ?`, func(idx int64) {
			if w.why[idx] == notExported {
				w.why[idx] = whyKey
			}
		}); err != nil {
			return fmt.Errorf("choose key entries: %w", err)
		}
	}

	// Erased payloads: their tombstones name an erasure entry, which comes
	// with them. In a snapshot every erasure entry is older than its size.
	w.erased = map[int64][]erasedPart{}
	rows, err := w.tx.QueryContext(w.ctx, `SELECT p.entry_idx, p.part, p.erased_by, er.id
		FROM payloads p JOIN entries er ON er.idx = p.erased_by
		WHERE p.erased_by IS NOT NULL AND p.entry_idx < ? ORDER BY p.entry_idx, p.part`, w.size)
	if err != nil {
		return fmt.Errorf("read erasures: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		var ep erasedPart
		if err := rows.Scan(&idx, &ep.part, &ep.by, &ep.byID); err != nil {
			return fmt.Errorf("read erasures: %w", err)
		}
		if ep.by >= w.size {
			return fmt.Errorf("read erasures: entry %d erased by entry %d, past the log's %d entries", idx, ep.by, w.size)
		}
		w.erased[idx] = append(w.erased[idx], ep)
		if w.why[idx] != notExported && w.why[ep.by] == notExported {
			w.why[ep.by] = whyErasure
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read erasures: %w", err)
	}

	w.complete = true
	for idx, why := range w.why {
		if why == notExported {
			w.complete = false
			continue
		}
		w.indexes = append(w.indexes, int64(idx))
	}
	return nil
}

func (f ExportFilter) matches(kind entry.Kind, t time.Time, server, decision, status string) bool {
	in := func(list []string, v string) bool {
		return len(list) == 0 || slices.ContainsFunc(list, func(x string) bool { return strings.EqualFold(x, v) })
	}
	return (f.From.IsZero() || !t.Before(f.From)) && (f.To.IsZero() || t.Before(f.To)) &&
		(len(f.Kinds) == 0 || slices.Contains(f.Kinds, kind)) &&
		(len(f.Servers) == 0 || slices.Contains(f.Servers, server)) &&
		(len(f.Decisions) == 0 || decision != "" && in(f.Decisions, decision)) &&
		(len(f.Statuses) == 0 || status != "" && in(f.Statuses, status))
}

func (w *bundleWriter) eachIndex(query string, f func(int64)) error {
	rows, err := w.tx.QueryContext(w.ctx, query, w.size)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		if err := rows.Scan(&idx); err != nil {
			return err
		}
		f(idx)
	}
	return rows.Err()
}

// A lookup by index costs about as much as reading a hundred rows in a
// scan; a payload may be megabytes. The export scans a table when it needs
// more than a share of its rows: one in fifty for entries, one in four for
// payloads.
func (w *bundleWriter) scanEntries() bool  { return int64(len(w.indexes))*50 >= w.size }
func (w *bundleWriter) scanPayloads() bool { return int64(len(w.indexes))*4 >= w.size }

// maxMemoryHashes bounds the stored hashes loadHashes holds: 32 bytes each,
// about two per entry (1 GiB: a log of 16 million entries).
const maxMemoryHashes = 32 << 20

// loadHashes prepares the tree's stored hashes for the proofs: read all at
// once into memory when there are more than a few proofs to make (a query
// per proof costs far more than reading its hashes in a scan), else read
// for each proof.
func (w *bundleWriter) loadHashes() error {
	if w.complete || len(w.indexes) < 64 || tlog.StoredHashCount(w.size) > maxMemoryHashes {
		w.hashes = txHashReader{ctx: w.ctx, tx: w.tx}
		return nil
	}
	n := tlog.StoredHashCount(w.size)
	all := make([]tlog.Hash, 0, n)
	rows, err := w.tx.QueryContext(w.ctx, `SELECT idx, hash FROM log_hashes WHERE idx < ? ORDER BY idx`, n)
	if err != nil {
		return fmt.Errorf("read tree hashes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return fmt.Errorf("read tree hashes: %w", err)
		}
		if idx != int64(len(all)) || len(b) != tlog.HashSize {
			return fmt.Errorf("read tree hashes: hash %d is missing or damaged", len(all))
		}
		all = append(all, tlog.Hash(b))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read tree hashes: %w", err)
	}
	if int64(len(all)) != n {
		return fmt.Errorf("read tree hashes: %d of %d", len(all), n)
	}
	w.hashes = tlog.HashReaderFunc(func(idx []int64) ([]tlog.Hash, error) {
		out := make([]tlog.Hash, len(idx))
		for i, x := range idx {
			if x < 0 || x >= int64(len(all)) {
				return nil, fmt.Errorf("tree hash %d out of range", x)
			}
			out[i] = all[x]
		}
		return out, nil
	})
	return nil
}

// txHashReader reads stored hashes inside the export's transaction, all of
// one call's in one query.
type txHashReader struct {
	ctx context.Context
	tx  *sql.Tx
}

func (r txHashReader) ReadHashes(indexes []int64) ([]tlog.Hash, error) {
	list, _ := json.Marshal(indexes)
	rows, err := r.tx.QueryContext(r.ctx, `SELECT idx, hash FROM log_hashes WHERE idx IN (SELECT value FROM json_each(?))`, string(list))
	if err != nil {
		return nil, fmt.Errorf("read tree hashes: %w", err)
	}
	defer rows.Close()
	got := make(map[int64]tlog.Hash, len(indexes))
	for rows.Next() {
		var idx int64
		var b []byte
		if err := rows.Scan(&idx, &b); err != nil {
			return nil, fmt.Errorf("read tree hashes: %w", err)
		}
		if len(b) != tlog.HashSize {
			return nil, fmt.Errorf("read tree hash %d: %d bytes", idx, len(b))
		}
		got[idx] = tlog.Hash(b)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read tree hashes: %w", err)
	}
	out := make([]tlog.Hash, len(indexes))
	for i, idx := range indexes {
		h, ok := got[idx]
		if !ok {
			return nil, fmt.Errorf("read tree hash %d: missing", idx)
		}
		out[i] = h
	}
	return out, nil
}

// bundleFile is a file of the bundle being written, hashed as it is.
type bundleFile struct {
	name string
	f    *os.File
	h    hash.Hash
	*bufio.Writer
}

func (w *bundleWriter) create(name string) (*bundleFile, error) {
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	return &bundleFile{name: name, f: f, h: h, Writer: bufio.NewWriterSize(io.MultiWriter(f, h), 256<<10)}, nil
}

// close flushes and syncs the file and records its digest.
func (bf *bundleFile) close(w *bundleWriter) error {
	err := bf.Flush()
	if err == nil {
		err = bf.f.Sync()
	}
	if cerr := bf.f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s: %w", bf.name, err)
	}
	w.files[bf.name] = verify.FileDigest(bf.h.Sum(nil))
	return nil
}

// abort closes a file after an error.
func (bf *bundleFile) abort() { bf.f.Close() }

// writeJSONLine writes v as one line.
func writeJSONLine(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	_, err = w.Write(b)
	return err
}

// exportRow is one entry of the bundle as it is read.
type exportRow struct {
	idx  int64
	data []byte
}

// eachEntry calls f for each exported entry, in order: from a scan of the
// table, or a lookup per entry (scanEntries).
func (w *bundleWriter) eachEntry(f func(exportRow) error) error {
	if w.scanEntries() {
		rows, err := w.tx.QueryContext(w.ctx, `SELECT idx, data FROM entries WHERE idx < ? ORDER BY idx`, w.size)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r exportRow
			if err := rows.Scan(&r.idx, &r.data); err != nil {
				return err
			}
			if w.why[r.idx] == notExported {
				continue
			}
			if err := f(r); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	stmt, err := w.tx.PrepareContext(w.ctx, `SELECT data FROM entries WHERE idx = ?`)
	if err != nil {
		return err
	}
	defer stmt.Close()
	for _, idx := range w.indexes {
		r := exportRow{idx: idx}
		if err := stmt.QueryRowContext(w.ctx, idx).Scan(&r.data); err != nil {
			return fmt.Errorf("read entry %d: %w", idx, err)
		}
		if err := f(r); err != nil {
			return err
		}
	}
	return nil
}

// writeEntries writes entries.jsonl, proofs.jsonl (for a partial bundle) and
// entries.csv in one pass, and gathers what the report needs.
func (w *bundleWriter) writeEntries() error {
	ef, err := w.create(verify.FileEntries)
	if err != nil {
		return err
	}
	defer ef.abort()
	var pf *bundleFile
	if !w.complete {
		if pf, err = w.create(verify.FileProofs); err != nil {
			return err
		}
		defer pf.abort()
	}
	cf, err := w.create(verify.FileCSV)
	if err != nil {
		return err
	}
	defer cf.abort()
	cw := csv.NewWriter(cf)
	if err := cw.Write(csvHeader); err != nil {
		return err
	}
	w.summary = newReportSummary()

	err = w.eachEntry(func(r exportRow) error {
		var e entry.Entry
		if err := json.Unmarshal(r.data, &e); err != nil {
			return fmt.Errorf("entry %d: %w", r.idx, err)
		}
		if e.Index != r.idx {
			return fmt.Errorf("entry %d: the stored entry says index %d", r.idx, e.Index)
		}
		if bytesContainNewline(r.data) {
			return fmt.Errorf("entry %d: stored bytes hold a newline", r.idx)
		}
		if _, err := ef.Write(r.data); err != nil {
			return err
		}
		if err := ef.WriteByte('\n'); err != nil {
			return err
		}
		if pf != nil {
			if err := w.writeProof(pf, &e, r.data); err != nil {
				return err
			}
		}
		row := w.describe(&e)
		w.summary.add(row)
		return cw.Write(row.csv())
	})
	if err != nil {
		return fmt.Errorf("write entries: %w", err)
	}
	cw.Flush()
	if err := cw.Error(); err != nil {
		return fmt.Errorf("write %s: %w", verify.FileCSV, err)
	}
	for _, bf := range []*bundleFile{ef, pf, cf} {
		if bf != nil {
			if err := bf.close(w); err != nil {
				return err
			}
		}
	}
	return nil
}

func bytesContainNewline(b []byte) bool { return slices.Contains(b, '\n') }

// writeProof writes the proof line of entry e: its audit path, and the
// consistency proof from the tree it signed as prev.
func (w *bundleWriter) writeProof(pf *bundleFile, e *entry.Entry, data []byte) error {
	incl, err := tlog.ProveRecord(w.size, e.Index, w.hashes)
	if err != nil {
		return fmt.Errorf("prove entry %d: %w", e.Index, err)
	}
	var prev tlog.TreeProof
	if e.Index > 0 {
		if prev, err = tlog.ProveTree(w.size, e.Index, w.hashes); err != nil {
			return fmt.Errorf("prove entry %d's prev: %w", e.Index, err)
		}
	}
	return writeJSONLine(pf, verify.ProofLine{
		Index: e.Index, ID: e.ID, LeafHash: entry.FormatTreeHash(entry.LeafHash(data)),
		Inclusion: verify.FormatHashes(incl), PrevConsistency: verify.FormatHashes(prev),
	})
}

// writePayloads writes payloads.jsonl, unless the export leaves payloads
// out.
func (w *bundleWriter) writePayloads() error {
	if w.opts.NoPayloads {
		return nil
	}
	pf, err := w.create(verify.FilePayloads)
	if err != nil {
		return err
	}
	defer pf.abort()
	ids := map[int64]string{}
	write := func(idx int64, part, commitment string, salt, data []byte, erased, notKept bool) error {
		id := ids[idx]
		pl := verify.PayloadLine{Index: idx, Entry: id, Part: part, Commitment: commitment}
		switch {
		case erased:
			for _, ep := range w.erased[idx] {
				if ep.part == part {
					pl.ErasedBy = ep.byID
				}
			}
			if pl.ErasedBy == "" {
				return fmt.Errorf("payload %s of entry %d: erased, by no entry", part, idx)
			}
			w.summary.erasedPayloads++
		case notKept:
			// The salt without the data: whoever kept the payload can show
			// that it is the one the entry committed to.
			s := base64.StdEncoding.EncodeToString(salt)
			pl.Salt, pl.NotKept = &s, true
			w.summary.notKeptPayloads++
		default:
			s, d := base64.StdEncoding.EncodeToString(salt), base64.StdEncoding.EncodeToString(data)
			pl.Salt, pl.Data = &s, &d
		}
		w.summary.payloads++
		return writeJSONLine(pf, pl)
	}
	scan := func(rows *sql.Rows) error {
		defer rows.Close()
		for rows.Next() {
			var (
				idx              int64
				id, part, commit string
				salt, data       []byte
				erased, notKept  bool
			)
			if err := rows.Scan(&idx, &id, &part, &commit, &salt, &data, &erased, &notKept); err != nil {
				return err
			}
			if w.why[idx] == notExported {
				continue
			}
			ids[idx] = id
			if err := write(idx, part, commit, salt, data, erased, notKept); err != nil {
				return err
			}
		}
		return rows.Err()
	}
	const cols = `p.entry_idx, e.id, p.part, p.commitment, p.salt, p.data, p.erased_by IS NOT NULL, p.not_kept_size IS NOT NULL
		FROM payloads p JOIN entries e ON e.idx = p.entry_idx`
	if w.scanPayloads() {
		rows, err := w.tx.QueryContext(w.ctx, `SELECT `+cols+` WHERE p.entry_idx < ? ORDER BY p.entry_idx, p.part`, w.size)
		if err == nil {
			err = scan(rows)
		}
		if err != nil {
			return fmt.Errorf("write payloads: %w", err)
		}
	} else {
		stmt, err := w.tx.PrepareContext(w.ctx, `SELECT `+cols+` WHERE p.entry_idx = ? ORDER BY p.part`)
		if err != nil {
			return fmt.Errorf("write payloads: %w", err)
		}
		defer stmt.Close()
		for _, idx := range w.indexes {
			rows, err := stmt.QueryContext(w.ctx, idx)
			if err == nil {
				err = scan(rows)
			}
			if err != nil {
				return fmt.Errorf("write payloads: %w", err)
			}
		}
	}
	return pf.close(w)
}

// readKeys reads the key entries before the checkpoint: every bundle holds
// them all.
func (w *bundleWriter) readKeys() error {
	rows, err := w.tx.QueryContext(w.ctx, `SELECT idx, data FROM entries WHERE kind = 'key' AND idx < ? ORDER BY idx`, w.size)
	if err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r exportRow
		if err := rows.Scan(&r.idx, &r.data); err != nil {
			return fmt.Errorf("read keys: %w", err)
		}
		var e entry.Entry
		var k entry.KeyEvent
		if err := json.Unmarshal(r.data, &e); err != nil {
			return fmt.Errorf("read key entry %d: %w", r.idx, err)
		}
		if err := json.Unmarshal(e.Body, &k); err != nil {
			return fmt.Errorf("read key entry %d: %w", r.idx, err)
		}
		w.keys = append(w.keys, keyRow{ID: k.KeyID, Action: k.Action, Index: e.Index, Previous: k.Previous, Public: k.PublicKey, Time: e.Time})
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read keys: %w", err)
	}
	return nil
}

// writeKeys writes keys.jwks.json: every key the log announces before the
// checkpoint, oldest first.
func (w *bundleWriter) writeKeys() error {
	set := verify.JWKS{Keys: []verify.JWK{}}
	for _, k := range w.keys {
		raw, err := base64.StdEncoding.DecodeString(k.Public)
		if err != nil || len(raw) != ed25519.PublicKeySize {
			return fmt.Errorf("key entry %d: public key is not an Ed25519 key", k.Index)
		}
		set.Keys = append(set.Keys, verify.NewJWK(raw))
	}
	return w.writeWhole(verify.FileKeys, set)
}

// writeWhole writes a small JSON file, indented for people.
func (w *bundleWriter) writeWhole(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return w.writeBytes(name, append(b, '\n'))
}

func (w *bundleWriter) writeBytes(name string, b []byte) error {
	bf, err := w.create(name)
	if err != nil {
		return err
	}
	defer bf.abort()
	if _, err := bf.Write(b); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return bf.close(w)
}

func (w *bundleWriter) writeCheckpoint() error {
	signed, err := entry.SignCheckpoint(entry.Checkpoint{Log: w.l.id, Size: w.size, Hash: w.root}, w.key)
	if err != nil {
		return fmt.Errorf("sign checkpoint: %w", err)
	}
	w.checkpoint = signed
	return w.writeBytes(verify.FileCheckpoint, signed)
}

// writeCosignatures asks the witnesses to cosign the checkpoint, with
// consistency proofs from the export's snapshot, and writes what they
// answer, and the cosignatures the log kept of the same checkpoint from
// witnesses that did not answer, to the cosignatures file: one signature
// line each. No cosignature, no file.
func (w *bundleWriter) writeCosignatures() error {
	kept, err := w.l.cosignaturesTx(w.ctx, w.tx, w.size, w.root)
	if err != nil {
		return err
	}
	lines := map[string]string{} // by witness
	w.witnessed = make([]WitnessAnswer, len(w.opts.Witnesses))
	if len(w.opts.Witnesses) > 0 {
		timeout := w.opts.WitnessTimeout
		if timeout == 0 {
			timeout = 10 * time.Second
		}
		ctx, cancel := context.WithTimeout(w.ctx, timeout)
		defer cancel()
		// The proofs read the export's snapshot, one witness at a time: a
		// transaction is one connection.
		var proving sync.Mutex
		prove := func(old int64) (tlog.TreeProof, error) {
			proving.Lock()
			defer proving.Unlock()
			return tlog.ProveTree(w.size, old, w.hashes)
		}
		var wg sync.WaitGroup
		got := make([]string, len(w.opts.Witnesses))
		for i, c := range w.opts.Witnesses {
			w.witnessed[i].Witness = c.Key()
			wg.Go(func() {
				got[i], _, w.witnessed[i].Err = c.Cosign(ctx, w.checkpoint, w.size, prove)
			})
		}
		wg.Wait()
		for i, a := range w.witnessed {
			if a.Err == nil {
				lines[a.Witness] = got[i]
			} else if k, ok := kept[a.Witness]; ok {
				lines[a.Witness] = k
				w.witnessed[i].Kept = true
			}
		}
	}
	for wk, line := range kept {
		if _, ok := lines[wk]; !ok {
			lines[wk] = line
		}
	}
	if len(lines) == 0 {
		return nil
	}
	var b strings.Builder
	for _, wk := range slices.Sorted(maps.Keys(lines)) {
		b.WriteString(lines[wk])
	}
	return w.writeBytes(verify.FileCosignatures, []byte(b.String()))
}

// logPublicKeys returns the public keys the log announces before the
// checkpoint.
func (w *bundleWriter) logPublicKeys() []ed25519.PublicKey {
	var out []ed25519.PublicKey
	for _, k := range w.keys {
		if raw, err := base64.StdEncoding.DecodeString(k.Public); err == nil && len(raw) == ed25519.PublicKeySize {
			out = append(out, raw)
		}
	}
	return out
}

// writeConsistency writes consistency.json when the export was given an
// earlier checkpoint, after checking that this log extends it.
func (w *bundleWriter) writeConsistency() error {
	if w.opts.Since == nil {
		return nil
	}
	old, kid, err := entry.OpenCheckpoint(w.opts.Since, w.logPublicKeys())
	if err != nil {
		return fmt.Errorf("%w: the earlier checkpoint is not signed by a key of this log: %v", ErrInconsistent, err)
	}
	switch {
	case old.Log != w.l.id:
		return fmt.Errorf("%w: the earlier checkpoint is of log %s, this is log %s", ErrInconsistent, old.Log, w.l.id)
	case old.Size > w.size:
		return fmt.Errorf("%w: the earlier checkpoint has %d entries, the log %d", ErrInconsistent, old.Size, w.size)
	case old.Size == 0:
		return fmt.Errorf("%w: the earlier checkpoint is of an empty log", ErrInconsistent)
	}
	h, err := tlog.TreeHash(old.Size, w.hashes)
	if err != nil {
		return fmt.Errorf("tree hash at %d: %w", old.Size, err)
	}
	if h != old.Hash {
		return fmt.Errorf("%w: the log's first %d entries hash to %s, the earlier checkpoint (signed by %s) says %s",
			ErrInconsistent, old.Size, entry.FormatTreeHash(h), kid, entry.FormatTreeHash(old.Hash))
	}
	var proof tlog.TreeProof
	if old.Size < w.size {
		if proof, err = tlog.ProveTree(w.size, old.Size, w.hashes); err != nil {
			return fmt.Errorf("prove consistency with %d: %w", old.Size, err)
		}
	}
	w.manifest.Since = &verify.TreeHead{Size: old.Size, Hash: entry.FormatTreeHash(old.Hash)}
	return w.writeWhole(verify.FileConsistency, verify.Consistency{
		OldCheckpoint: string(w.opts.Since), OldSize: old.Size, OldHash: entry.FormatTreeHash(old.Hash),
		Proof: verify.FormatHashes(proof),
	})
}

func (w *bundleWriter) writeManifest() error {
	m := &w.manifest
	f := w.opts.Filter
	*m = verify.Manifest{
		Format: verify.Format, Version: verify.ManifestVersion, Log: w.l.id,
		ExportedAt: w.summary.exportedAt.Format(time.RFC3339Nano),
		Generator:  w.generator(),
		Checkpoint: verify.TreeHead{Size: w.size, Hash: entry.FormatTreeHash(w.root)},
		Since:      m.Since,
		Complete:   w.complete,
		Payloads:   !w.opts.NoPayloads,
		Filters: verify.Filters{
			From: formatBound(f.From), To: formatBound(f.To),
			Servers: f.Servers, Decisions: f.Decisions, Statuses: f.Statuses, Kinds: kindStrings(f.Kinds),
		},
		Indexes: verify.FormatIndexes(w.indexes),
		Counts: verify.Counts{Entries: int64(len(w.indexes)), Selected: w.summary.selected,
			Payloads: w.summary.payloads, Erased: w.summary.erasedPayloads},
		Files: w.files,
	}
	data, err := verify.SignManifest(m, w.key)
	if err != nil {
		return err
	}
	return w.writeBytes(verify.FileManifest, data)
}

func (w *bundleWriter) generator() string {
	if w.opts.Generator != "" {
		return w.opts.Generator
	}
	return "gatehouse"
}

func formatBound(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

func kindStrings(ks []entry.Kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, string(k))
	}
	return out
}

// writeArchive writes the files of dir as a gzipped tar archive at out,
// inside a folder named top, whole or not at all ([atomicfile]).
func writeArchive(dir, out, top string) error {
	f, err := atomicfile.Create(out, 0o600)
	if err != nil {
		return err
	}
	defer f.Abort()
	zw := gzip.NewWriter(f)
	tw := tar.NewWriter(zw)
	now := time.Now()
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o700, ModTime: now}); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		if err := addToArchive(tw, filepath.Join(dir, de.Name()), top+"/"+de.Name()); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Commit()
}

func addToArchive(tw *tar.Writer, path, name string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: fi.Size(), ModTime: fi.ModTime()}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// The CSV and the HTML report: views of the bundle for people. They are
// bound by the manifest like every file, but the evidence is entries.jsonl.

// keyRow is one key of the log, for the report.
type keyRow struct {
	ID, Action, Previous, Public, Time string
	Index                              int64
}

// entryRow is one entry, as the CSV and the report show it.
type entryRow struct {
	Index                                     int64
	ID, Kind, Time, Key, Why                  string
	Server, Tool, Capability, Decision, Rule  string
	PolicyHash, Approver, Client, Session     string
	Args, Receipt, Status, Result, Redactions string
	ErrorCode, DurationMS                     string
	Erased, Detail                            string
}

var csvHeader = []string{
	"index", "id", "kind", "time", "key", "included_as",
	"server", "tool", "capability", "decision", "rule", "policy_hash", "approver", "client", "session",
	"args_commitment", "receipt", "status", "error_code", "duration_ms", "result_commitment", "redactions",
	"erased", "detail",
}

// csv returns the row's cells. Text from servers and clients is guarded
// against spreadsheet formulas.
func (r entryRow) csv() []string {
	t := csvText
	return []string{
		strconv.FormatInt(r.Index, 10), r.ID, r.Kind, r.Time, r.Key, r.Why,
		t(r.Server), t(r.Tool), t(r.Capability), r.Decision, t(r.Rule), r.PolicyHash, t(r.Approver), t(r.Client), t(r.Session),
		r.Args, r.Receipt, r.Status, r.ErrorCode, r.DurationMS, r.Result, t(r.Redactions),
		r.Erased, t(r.Detail),
	}
}

// csvText keeps a spreadsheet from reading text as a formula (OWASP's CSV
// injection advice): a cell that starts with = + - @ or a control character
// gets a leading apostrophe.
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r\n", rune(s[0])) {
		return "'" + s
	}
	return s
}

// describe turns an entry into a row, reading its body for what people look
// for.
func (w *bundleWriter) describe(e *entry.Entry) entryRow {
	r := entryRow{Index: e.Index, ID: e.ID, Kind: string(e.Kind), Time: e.Time, Key: e.Key, Why: whyText[w.why[e.Index]]}
	var parts []string
	for _, ep := range w.erased[e.Index] {
		parts = append(parts, fmt.Sprintf("%s by %s", ep.part, ep.byID))
	}
	r.Erased = strings.Join(parts, "; ")
	switch e.Kind {
	case entry.KindReceipt:
		var b entry.Receipt
		if json.Unmarshal(e.Body, &b) == nil {
			r.Server, r.Tool, r.Capability, r.Decision, r.Rule = b.Server, b.Tool, b.Capability, b.Decision, b.Rule
			r.PolicyHash, r.Client, r.Session, r.Args = b.PolicyHash, b.Client.Name, b.Session, b.Args
			if b.Client.Version != "" {
				r.Client += " " + b.Client.Version
			}
			if a := b.Approver; a != nil {
				r.Approver = a.Kind + " " + a.Scope
				if a.Until != "" {
					r.Approver += " until " + a.Until
				}
				if a.Via != "" {
					r.Approver += " (" + a.Via + ")"
				}
			}
			if b.ArgsNotKept != nil {
				r.Detail = "arguments " + b.ArgsNotKept.String()
			}
		}
	case entry.KindOutcome:
		var b entry.Outcome
		if json.Unmarshal(e.Body, &b) == nil {
			r.Receipt, r.Status, r.Result = b.Receipt, b.Status, b.Result
			r.DurationMS = strconv.FormatFloat(b.DurationMS, 'f', -1, 64)
			if b.ErrorCode != 0 {
				r.ErrorCode = strconv.FormatInt(b.ErrorCode, 10)
			}
			var rs []string
			for _, f := range b.Redactions {
				rs = append(rs, fmt.Sprintf("%s x%d (%s)", f.Secret, f.Count, f.Encoding))
			}
			r.Redactions = strings.Join(rs, "; ")
			if b.ResultNotKept != nil {
				r.Detail = "result " + b.ResultNotKept.String()
			}
		}
	case entry.KindKey:
		var b entry.KeyEvent
		if json.Unmarshal(e.Body, &b) == nil {
			r.Detail = fmt.Sprintf("key %s %s", b.KeyID, b.Action)
			if b.Previous != "" {
				r.Detail += " from " + b.Previous
			}
		}
	case entry.KindPolicy:
		var b entry.PolicyEvent
		if json.Unmarshal(e.Body, &b) == nil {
			r.Detail = fmt.Sprintf("policy version %d, %s", b.Version, b.Hash)
		}
	case entry.KindPin:
		var b entry.PinEvent
		if json.Unmarshal(e.Body, &b) == nil {
			r.Server, r.Tool = b.Server, b.Tool
			r.Detail = fmt.Sprintf("tool definition %s", b.NewHash)
			if b.OldHash != "" {
				r.Detail += " (was " + b.OldHash + ")"
			}
		}
	case entry.KindErasure:
		var b entry.ErasureEvent
		if json.Unmarshal(e.Body, &b) == nil {
			var what []string
			for _, x := range b.Erased {
				what = append(what, x.Part+" of "+x.Entry)
			}
			r.Detail = fmt.Sprintf("erased %s: %s", strings.Join(what, ", "), b.Reason)
		}
	}
	return r
}

// reportRows bounds the entries the HTML report lists; the CSV has them all.
const reportRows = 5000

// reportSummary gathers the report's figures while entries are written.
type reportSummary struct {
	exportedAt               time.Time
	selected                 int64
	kinds                    map[string]int64
	decisions, statuses      map[string]int64
	rows                     []entryRow
	omitted                  int64
	erasures                 []entryRow
	payloads, erasedPayloads int64
	notKeptPayloads          int64
}

func newReportSummary() reportSummary {
	return reportSummary{exportedAt: time.Now().UTC(), kinds: map[string]int64{}, decisions: map[string]int64{}, statuses: map[string]int64{}}
}

func (s *reportSummary) add(r entryRow) {
	if r.Why == whyText[whySelected] {
		s.selected++
	}
	s.kinds[r.Kind]++
	if r.Kind == string(entry.KindReceipt) {
		s.decisions[r.Decision]++
	}
	if r.Kind == string(entry.KindOutcome) {
		s.statuses[r.Status]++
	}
	if r.Kind == string(entry.KindErasure) && len(s.erasures) < reportRows {
		s.erasures = append(s.erasures, r)
	}
	if len(s.rows) < reportRows {
		s.rows = append(s.rows, r)
	} else {
		s.omitted++
	}
}

type countRow struct {
	Name  string
	Count int64
}

func countRows(m map[string]int64) []countRow {
	var out []countRow
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, countRow{k, m[k]})
	}
	return out
}

func (w *bundleWriter) writeReport() error {
	f := w.opts.Filter
	s := &w.summary
	data := map[string]any{
		"Log":        w.l.id,
		"ExportedAt": s.exportedAt.Format(time.RFC3339),
		"Generator":  w.generator(),
		"Size":       w.size,
		"TreeHash":   entry.FormatTreeHash(w.root),
		"SignedBy":   entry.KeyID(w.key.Public().(ed25519.PublicKey)),
		"Complete":   w.complete,
		"Entries":    len(w.indexes),
		"Selected":   s.selected,
		"Filters": verify.Filters{From: formatBound(f.From), To: formatBound(f.To), Servers: f.Servers,
			Decisions: f.Decisions, Statuses: f.Statuses, Kinds: kindStrings(f.Kinds)}.String(),
		"Payloads":  !w.opts.NoPayloads,
		"PayloadN":  s.payloads,
		"ErasedN":   s.erasedPayloads,
		"NotKeptN":  s.notKeptPayloads,
		"Since":     w.manifest.Since,
		"Keys":      w.keys,
		"FirstKey":  "",
		"Kinds":     countRows(s.kinds),
		"Decisions": countRows(s.decisions),
		"Statuses":  countRows(s.statuses),
		"Erasures":  s.erasures,
		"Rows":      s.rows,
		"Omitted":   s.omitted,
	}
	if len(w.keys) > 0 {
		data["FirstKey"] = w.keys[0].ID
	}
	bf, err := w.create(verify.FileReport)
	if err != nil {
		return err
	}
	defer bf.abort()
	if err := reportTemplate.Execute(bf, data); err != nil {
		return fmt.Errorf("write %s: %w", verify.FileReport, err)
	}
	return bf.close(w)
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Gatehouse evidence: log {{.Log}}</title>
<style>
body { font: 14px/1.45 system-ui, sans-serif; margin: 2em; color: #1b1b1b; }
h1 { font-size: 1.5em; } h2 { font-size: 1.15em; margin-top: 2em; }
table { border-collapse: collapse; margin: .5em 0; }
th, td { border: 1px solid #ccc; padding: .2em .5em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
code, .mono { font-family: ui-monospace, monospace; font-size: .92em; }
.DENY, .FAILED { color: #a00; } .APPROVAL_REQUIRED, .UNKNOWN { color: #a60; }
.note { color: #555; max-width: 60em; }
</style>
</head>
<body>
<h1>Gatehouse evidence export</h1>
<p class="note">This page is a view of the bundle it sits in, for reading. The evidence is
<code>entries.jsonl</code>, with the proofs, keys and checkpoint beside it; check it with
<code>gatehouse verify{{if .FirstKey}} --pin-key {{.FirstKey}}{{end}} FOLDER</code>, or with a verifier of your own
written from the format's specification (docs/evidence.md in Gatehouse's source).</p>

<table>
<tr><th>Log</th><td class="mono">{{.Log}}</td></tr>
<tr><th>Exported</th><td>{{.ExportedAt}} by {{.Generator}}</td></tr>
<tr><th>Checkpoint</th><td>{{.Size}} entries, tree hash <span class="mono">{{.TreeHash}}</span>, signed by key <span class="mono">{{.SignedBy}}</span></td></tr>
<tr><th>Filters</th><td class="mono">{{.Filters}}</td></tr>
<tr><th>Entries in this bundle</th><td>{{.Entries}}{{if .Complete}} (the whole log){{else}}: {{.Selected}} chosen by the filters, the others so that they verify{{end}}</td></tr>
<tr><th>Payloads</th><td>{{if .Payloads}}{{.PayloadN}} ({{.ErasedN}} erased{{if .NotKeptN}}, {{.NotKeptN}} not kept: over the log's size cap, committed to but not stored{{end}}){{else}}left out: commitments only{{end}}</td></tr>
{{with .Since}}<tr><th>Consistent with</th><td>an earlier checkpoint of {{.Size}} entries, tree hash <span class="mono">{{.Hash}}</span></td></tr>{{end}}
</table>

<h2>Signing keys</h2>
<table>
<tr><th>Key id</th><th>Announced</th><th>Entry</th><th>Public key (base64)</th></tr>
{{range .Keys}}<tr><td class="mono">{{.ID}}</td><td>{{.Action}}{{if .Previous}} from <span class="mono">{{.Previous}}</span>{{end}} at {{.Time}}</td><td>{{.Index}}</td><td class="mono">{{.Public}}</td></tr>
{{end}}</table>

<h2>Counts</h2>
<table>
<tr><th>Kind</th><th>Entries</th></tr>
{{range .Kinds}}<tr><td>{{.Name}}</td><td>{{.Count}}</td></tr>{{end}}
</table>
{{if .Decisions}}<table><tr><th>Decision</th><th>Receipts</th></tr>
{{range .Decisions}}<tr><td class="{{.Name}}">{{.Name}}</td><td>{{.Count}}</td></tr>{{end}}</table>{{end}}
{{if .Statuses}}<table><tr><th>Status</th><th>Outcomes</th></tr>
{{range .Statuses}}<tr><td class="{{.Name}}">{{.Name}}</td><td>{{.Count}}</td></tr>{{end}}</table>{{end}}

{{if .Erasures}}<h2>Erasures</h2>
<p class="note">An erasure deletes the arguments or result of a call, and their salt, and leaves a tombstone.
The entries keep their commitments, so every signature and proof still holds.</p>
<table>
<tr><th>Entry</th><th>Time</th><th>What was erased, and why</th></tr>
{{range .Erasures}}<tr><td><a href="#{{.ID}}">{{.Index}}</a></td><td>{{.Time}}</td><td>{{.Detail}}</td></tr>
{{end}}</table>{{end}}

<h2>Entries</h2>
{{if .Omitted}}<p class="note">The first {{len .Rows}} entries; the other {{.Omitted}} are in entries.csv.</p>{{end}}
<table>
<tr><th>#</th><th>Time</th><th>Kind</th><th>Id</th><th>Capability</th><th>Decision</th><th>Rule</th><th>Client</th><th>Status</th><th>Details</th><th>Included as</th></tr>
{{range .Rows}}<tr id="{{.ID}}"><td>{{.Index}}</td><td>{{.Time}}</td><td>{{.Kind}}</td><td class="mono">{{.ID}}</td><td>{{.Capability}}</td><td class="{{.Decision}}">{{.Decision}}</td><td>{{.Rule}}</td><td>{{.Client}}</td><td class="{{.Status}}">{{.Status}}</td><td>{{if .Receipt}}for <a href="#{{.Receipt}}">{{.Receipt}}</a>, {{.DurationMS}} ms{{if .ErrorCode}}, error {{.ErrorCode}}{{end}}{{if .Redactions}}; redacted: {{.Redactions}}{{end}}{{end}}{{if .Approver}}approved by {{.Approver}}{{end}}{{if and .Detail (or .Receipt .Approver)}}; {{end}}{{.Detail}}{{if .Erased}} <em>erased: {{.Erased}}</em>{{end}}</td><td>{{.Why}}</td></tr>
{{end}}</table>
</body>
</html>
`))
