package proof

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/receipts/verify"
)

// evidenceLab makes a lab with a short history: an allowed call with its
// outcome, a denied one, another allowed one; and exports it.
func (t *T) evidenceLab(ctx context.Context) (*Lab, *Evidence, error) {
	l, err := t.stdLab(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := l.history(ctx, "first"); err != nil {
		return nil, nil, err
	}
	ev, err := l.Export(ctx)
	if err != nil {
		return nil, nil, err
	}
	if !ev.Verified {
		return nil, nil, fmt.Errorf("the untouched export does not verify: %s", strings.Join(ev.Failed(), ", "))
	}
	return l, ev, nil
}

// history makes three calls through a proxy: allowed, denied, allowed.
func (l *Lab) history(ctx context.Context, tag string) error {
	s, err := l.Connect(ctx, serverName)
	if err != nil {
		return err
	}
	for _, c := range []struct{ tool, arg string }{{"read_file", "path"}, {"delete_file", "path"}, {"echo", "message"}} {
		if _, err := s.CallTool(ctx, c.tool, map[string]any{c.arg: "/eval/" + tag + "/" + c.tool}); err != nil {
			return err
		}
	}
	return s.Close()
}

// copyBundle copies a bundle folder to a new folder beside it.
func copyBundle(src, name string) (string, error) {
	dst := filepath.Join(filepath.Dir(src), name)
	if err := os.Mkdir(dst, 0o700); err != nil {
		return "", err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			return "", err
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err == nil {
			_, err = io.Copy(out, in)
			out.Close()
		}
		in.Close()
		if err != nil {
			return "", err
		}
	}
	return dst, nil
}

// editLines rewrites the lines of a bundle file.
func editLines(dir, file string, edit func(lines [][]byte) [][]byte) error {
	path := filepath.Join(dir, file)
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var lines [][]byte
	for line := range bytes.Lines(data) {
		lines = append(lines, bytes.TrimSuffix(line, []byte("\n")))
	}
	lines = edit(lines)
	var out bytes.Buffer
	for _, l := range lines {
		out.Write(l)
		out.WriteByte('\n')
	}
	return os.WriteFile(path, out.Bytes(), 0o600)
}

// tamperCase edits a copy of a clean bundle and expects verification to
// fail, with check among the failures.
func tamperCase(name, claim, check string, tamper func(ev *Evidence, dir string) error) Case {
	return Case{
		Family: EvidenceTampering, Name: name, Claim: claim,
		Run: func(ctx context.Context, t *T) error {
			l, ev, err := t.evidenceLab(ctx)
			if err != nil {
				return err
			}
			dir, err := copyBundle(ev.Dir, "tampered")
			if err != nil {
				return err
			}
			if err := tamper(ev, dir); err != nil {
				return fmt.Errorf("tamper: %w", err)
			}
			return expectCaught(ctx, l, dir, check)
		},
	}
}

// expectCaught verifies dir (with verify's extra flags) and fails unless
// verification fails on check.
func expectCaught(ctx context.Context, l *Lab, dir, check string, extra ...string) error {
	got, err := l.Verify(ctx, dir, extra...)
	if err != nil {
		return err
	}
	if got.Verified {
		return errors.New("gatehouse verify passed the tampered bundle")
	}
	if failed := got.Failed(); !slices.Contains(failed, check) {
		return fmt.Errorf("verification failed on %s, but not on %q", strings.Join(failed, ", "), check)
	}
	return nil
}

func evidenceCases() []Case {
	const (
		edit     = "an edited, deleted, reordered or inserted entry fails verification"
		unlisted = "a file in a bundle that its signed manifest does not list fails verification, whatever its name or case"
	)
	return []Case{
		tamperCase("bundle: a denial edited into an allow", edit, verify.CheckSignatures, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FileEntries, func(lines [][]byte) [][]byte {
				for i, l := range lines {
					lines[i] = bytes.Replace(l, []byte(`"decision":"DENY"`), []byte(`"decision":"ALLOW"`), 1)
				}
				return lines
			})
		}),
		tamperCase("bundle: an entry deleted", edit, verify.CheckOrder, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FileEntries, func(lines [][]byte) [][]byte {
				return slices.Delete(lines, 3, 4)
			})
		}),
		tamperCase("bundle: two entries swapped", edit, verify.CheckOrder, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FileEntries, func(lines [][]byte) [][]byte {
				lines[2], lines[3] = lines[3], lines[2]
				return lines
			})
		}),
		tamperCase("bundle: an entry inserted", edit, verify.CheckSignatures, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FileEntries, func(lines [][]byte) [][]byte {
				// A copy of the denial, made an allow, given the next index.
				for _, l := range lines {
					if bytes.Contains(l, []byte(`"decision":"DENY"`)) {
						forged := bytes.Replace(l, []byte(`"decision":"DENY"`), []byte(`"decision":"ALLOW"`), 1)
						forged = bytes.Replace(forged, []byte(`"index":`), []byte(fmt.Sprintf(`"index":%d,"x":`, len(lines))), 1)
						return append(lines, forged)
					}
				}
				return lines
			})
		}),
		tamperCase("bundle: the last entries cut off", "a bundle cut short fails verification", verify.CheckInclusion, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FileEntries, func(lines [][]byte) [][]byte { return lines[:len(lines)-2] })
		}),
		tamperCase("bundle: arguments changed", "arguments or results changed after the fact fail verification", verify.CheckPayloads, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FilePayloads, func(lines [][]byte) [][]byte {
				for i, l := range lines {
					if bytes.Contains(l, []byte(`"part":"args"`)) {
						// Another value, validly encoded.
						lines[i] = bytes.Replace(l, []byte(`"data":"`), []byte(`"data":"e30K`), 1)
						break
					}
				}
				return lines
			})
		}),
		tamperCase("bundle: a payload replaced by a forged erasure", "a payload removed without an erasure entry fails verification", verify.CheckPayloads, func(ev *Evidence, dir string) error {
			return editLines(dir, verify.FilePayloads, func(lines [][]byte) [][]byte {
				for i, l := range lines {
					if bytes.Contains(l, []byte(`"part":"args"`)) {
						if j := bytes.Index(l, []byte(`,"salt"`)); j > 0 {
							lines[i] = append(append([]byte(nil), l[:j]...), []byte(`,"erased_by":"e-aaaaaaaaaaaaaaaaaaa"}`)...)
						}
						break
					}
				}
				return lines
			})
		}),
		tamperCase("bundle: public key swapped", "a bundle whose keys were swapped fails verification", verify.CheckKeyChain, func(ev *Evidence, dir string) error {
			other := verify.NewJWK(make([]byte, 32))
			return os.WriteFile(filepath.Join(dir, verify.FileKeys), []byte(mustJSON(verify.JWKS{Keys: []verify.JWK{other}})+"\n"), 0o600)
		}),
		tamperCase("bundle: manifest counts changed", "a manifest changed after signing fails verification", verify.CheckManifest, func(ev *Evidence, dir string) error {
			path := filepath.Join(dir, verify.FileManifest)
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			b = bytes.Replace(b, []byte(`"complete":true`), []byte(`"complete":false`), 1)
			return os.WriteFile(path, b, 0o600)
		}),
		tamperCase("bundle: a hidden file added", unlisted, verify.CheckManifest, func(ev *Evidence, dir string) error {
			return os.WriteFile(filepath.Join(dir, ".notes"), []byte("every call was allowed\n"), 0o600)
		}),
		tamperCase("bundle: Report.html beside report.html", unlisted, verify.CheckManifest, func(ev *Evidence, dir string) error {
			return writeFalseReport(dir, filepath.Join(dir, "Report.html"))
		}),
		tamperCase("bundle: a sub-folder with another report", unlisted, verify.CheckManifest, func(ev *Evidence, dir string) error {
			if err := os.Mkdir(filepath.Join(dir, "fixed"), 0o700); err != nil {
				return err
			}
			return writeFalseReport(dir, filepath.Join(dir, "fixed", verify.FileReport))
		}),
		archiveCase("archive: an extra member", func(tw *tar.Writer, top string) error {
			return addMember(tw, top+"/Report.html", []byte("<p>every call was allowed</p>"))
		}),
		archiveCase("archive: a member twice", func(tw *tar.Writer, top string) error {
			return addMember(tw, top+"/"+verify.FileReport, []byte("<p>every call was allowed</p>"))
		}),
		archiveCase("archive: a link", func(tw *tar.Writer, top string) error {
			return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeSymlink, Name: top + "/keys.pem", Linkname: "/etc/passwd"})
		}),
		{
			Family: EvidenceTampering, Name: "a log re-signed with another key",
			Claim: "a self-consistent log written under another key fails verification pinned to the log's first key",
			Run: func(ctx context.Context, t *T) error {
				_, ev, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				// The forger makes the same calls in a home of their own:
				// a log as good as the real one, under their key.
				forger, forged, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				if forged.Report.FirstKey == ev.Report.FirstKey {
					return errors.New("two homes share a signing key")
				}
				return expectCaught(ctx, forger, forged.Dir, verify.CheckKeyChain, "--pin-key", ev.Report.FirstKey)
			},
		},
		{
			Family: EvidenceTampering, Name: "a proxy holding a key rotated away",
			Claim: "a key retired by a rotation signs nothing after it: a running proxy signs on with the new key, and the log verifies",
			Run: func(ctx context.Context, t *T) error {
				l, _, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				// A proxy opens the log with the current key; the key is
				// rotated while it runs; it gets another call.
				s, err := l.Connect(ctx, serverName)
				if err != nil {
					return err
				}
				if _, err := s.CallTool(ctx, "echo", map[string]any{"message": "before"}); err != nil {
					s.Close()
					return err
				}
				if err := l.Must(ctx, "keys", "rotate"); err != nil {
					s.Close()
					return err
				}
				res, err := s.CallTool(ctx, "echo", map[string]any{"message": "after"})
				s.Close()
				if err != nil {
					return err
				}
				if res.IsError {
					return fmt.Errorf("the proxy refused the call after the rotation: %s", res.Text)
				}
				ev, err := l.Export(ctx)
				if err != nil {
					return err
				}
				if !ev.Verified {
					return fmt.Errorf("the log does not verify after the rotation: %s", strings.Join(ev.Failed(), ", "))
				}
				rotation, after := int64(-1), 0
				var retired string
				for _, e := range ev.Entries {
					switch {
					case e.Kind == "key" && e.Index > 0:
						rotation, retired = e.Index, e.Key
					case rotation >= 0 && e.Key == retired:
						return fmt.Errorf("entry %d (%s) was signed by key %s, which the rotation at entry %d retired", e.Index, e.ID, retired, rotation)
					case rotation >= 0 && e.Kind == "receipt":
						after++
					}
				}
				switch {
				case rotation < 0:
					return errors.New("the log holds no rotation")
				case after == 0:
					return errors.New("the call after the rotation has no receipt")
				}
				return nil
			},
		},
		{
			Family: EvidenceTampering, Name: "database: a denial edited into an allow",
			Claim: "an entry edited in the database fails verification of the next export",
			Run: func(ctx context.Context, t *T) error {
				l, _, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				l.NoAudit = true
				if err := l.sql(ctx, `UPDATE entries SET data = CAST(replace(CAST(data AS TEXT), '"decision":"DENY"', '"decision":"ALLOW"') AS BLOB), decision = 'ALLOW' WHERE decision = 'DENY'`); err != nil {
					return err
				}
				return l.exportCaught(ctx, "edited", verify.CheckSignatures)
			},
		},
		{
			Family: EvidenceTampering, Name: "database: the newest entries deleted",
			Claim: "a log cut short in the database fails against the checkpoint of an earlier export",
			Run: func(ctx context.Context, t *T) error {
				l, ev, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				l.NoAudit = true
				if err := l.sql(ctx, `DELETE FROM entries WHERE idx >= (SELECT max(idx) - 1 FROM entries)`); err != nil {
					return err
				}
				// The log goes on from there, as if nothing had been.
				if err := l.history(ctx, "after"); err != nil {
					return err
				}
				return l.sinceCaught(ctx, ev)
			},
		},
		{
			Family: EvidenceTampering, Name: "database: an older copy restored",
			Claim: "a database rolled back to an earlier copy fails against the checkpoint of a later export",
			Run: func(ctx context.Context, t *T) error {
				l, _, err := t.evidenceLab(ctx)
				if err != nil {
					return err
				}
				l.NoAudit = true
				saved := filepath.Join(l.Dir, "saved.db")
				if err := l.sql(ctx, `VACUUM INTO '`+saved+`'`); err != nil {
					return err
				}
				if err := l.history(ctx, "later"); err != nil {
					return err
				}
				later, err := l.Export(ctx)
				if err != nil {
					return err
				}
				db := filepath.Join(l.Home, store.DatabaseFile)
				for _, suffix := range []string{"-wal", "-shm"} {
					os.Remove(db + suffix)
				}
				if err := os.Rename(saved, db); err != nil {
					return err
				}
				return l.sinceCaught(ctx, later)
			},
		},
	}
}

// writeFalseReport writes, at path, the bundle's report with every denial
// made an allow.
func writeFalseReport(dir, path string) error {
	b, err := os.ReadFile(filepath.Join(dir, verify.FileReport))
	if err != nil {
		return err
	}
	return os.WriteFile(path, bytes.ReplaceAll(b, []byte("DENY"), []byte("ALLOW")), 0o600)
}

// archiveCase writes a clean bundle as a .tar.gz, as gatehouse export
// does, with members added by extra, and expects the manifest check to
// fail.
func archiveCase(name string, extra func(tw *tar.Writer, top string) error) Case {
	return Case{
		Family: EvidenceTampering, Name: name,
		Claim: "a member of a bundle's archive that is not a file its signed manifest lists fails verification",
		Run: func(ctx context.Context, t *T) error {
			l, ev, err := t.evidenceLab(ctx)
			if err != nil {
				return err
			}
			out := filepath.Join(l.Dir, "tampered.tar.gz")
			if err := writeArchive(ev.Dir, out, "tampered", extra); err != nil {
				return fmt.Errorf("tamper: %w", err)
			}
			return expectCaught(ctx, l, out, verify.CheckManifest)
		},
	}
}

// writeArchive writes the files of dir as a gzipped tar archive in folder
// top, then what extra adds.
func writeArchive(dir, out, top string, extra func(tw *tar.Writer, top string) error) error {
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: top + "/", Mode: 0o700}); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, de := range des {
		data, err := os.ReadFile(filepath.Join(dir, de.Name()))
		if err != nil {
			return err
		}
		if err := addMember(tw, top+"/"+de.Name(), data); err != nil {
			return err
		}
	}
	if err := extra(tw, top); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o600)
}

func addMember(tw *tar.Writer, name string, data []byte) error {
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o600, Size: int64(len(data))}); err != nil {
		return err
	}
	_, err := tw.Write(data)
	return err
}

// sql runs a statement on the lab's database, as anyone with the file can.
func (l *Lab) sql(ctx context.Context, stmt string) error {
	st, err := store.Open(ctx, l.Home, nil)
	if err != nil {
		return err
	}
	defer st.Close()
	if _, err := st.DB().ExecContext(ctx, stmt); err != nil {
		return fmt.Errorf("%s: %w", stmt, err)
	}
	return nil
}

// exportCaught exports the log to a new bundle and expects verification to
// fail on check (or the export itself to refuse).
func (l *Lab) exportCaught(ctx context.Context, name, check string) error {
	dir := filepath.Join(l.Dir, name)
	if _, stderr, err := l.Gatehouse(ctx, "", "export", "--out", dir); err != nil {
		if strings.Contains(stderr, "gatehouse:") {
			return nil // the export refused the damaged log, and said so
		}
		return err
	}
	return expectCaught(ctx, l, dir, check)
}

// sinceCaught checks that the log no longer extends the checkpoint of an
// earlier export: exporting against it fails, or the bundle fails
// verification against it.
func (l *Lab) sinceCaught(ctx context.Context, earlier *Evidence) error {
	cp := filepath.Join(earlier.Dir, verify.FileCheckpoint)
	dir := filepath.Join(l.Dir, "since")
	_, stderr, err := l.Gatehouse(ctx, "", "export", "--out", dir, "--since-checkpoint", cp)
	if err != nil {
		if strings.Contains(stderr, "does not extend") || strings.Contains(stderr, "consisten") {
			return nil
		}
		return fmt.Errorf("export --since-checkpoint failed, but not saying the log does not extend the checkpoint: %w", err)
	}
	// Exported without the proof: the verifier, given the checkpoint, must
	// refuse it.
	return expectCaught(ctx, l, dir, verify.CheckConsistency, "--since-checkpoint", cp)
}
