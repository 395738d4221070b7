package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/gatehouse-dev/gatehouse/internal/tomltext"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// PlanUndo works out what putting back the governed entries sel selects
// would write: each entry exactly as it was, secret values read back from
// the keychain. An entry changed since it was governed is left alone unless
// sel.Force.
func (m *Manager) PlanUndo(ctx context.Context, sel Selection) (*Plan, error) {
	recs, err := m.records(ctx)
	if err != nil {
		return nil, err
	}
	if len(sel.Clients) > 0 {
		all, _, err := m.scan(ctx, sel.Clients)
		if err != nil {
			return nil, err
		}
		// A client that is gone with nothing governed is not installed;
		// one with governed entries still has files to put back.
		var missing []*scanned
		for _, s := range all {
			if s.client.Installed {
				continue
			}
			governed := false
			for _, r := range recs {
				if r.Client == s.spec.id {
					governed = true
				}
			}
			if !governed {
				missing = append(missing, s)
			}
		}
		if len(missing) > 0 {
			return nil, checkClients(missing, &sel)
		}
	}
	byFile := map[string][]*record{}
	var files []string
	found := map[string]bool{}
	for _, r := range recs {
		if !sel.hasClient(r.Client) || !sel.hasServer(r.Name) {
			continue
		}
		found[r.Name] = true
		if byFile[r.File] == nil {
			files = append(files, r.File)
		}
		byFile[r.File] = append(byFile[r.File], r)
	}
	for _, name := range sel.Servers {
		if !found[name] {
			return nil, fmt.Errorf("%w: no governed entry is called %q in the selected clients", ErrNoEntry, name)
		}
	}
	slices.Sort(files)
	pl := &Plan{Undo: true, Force: sel.Force}
	for _, path := range files {
		rs := byFile[path]
		// Later entries first, so that the removal of one added entry
		// does not move another's place.
		slices.SortFunc(rs, func(a, b *record) int {
			return strings.Compare(recordKey(b.File, b.Locator), recordKey(a.File, a.Locator))
		})
		fp, err := m.planUndoFile(path, rs, sel.Force)
		if err != nil {
			return nil, err
		}
		pl.Files = append(pl.Files, fp)
		for _, ep := range fp.entries {
			pl.Results = append(pl.Results, ep.res)
		}
	}
	return pl, nil
}

func (m *Manager) planUndoFile(path string, rs []*record, force bool) (*FilePlan, error) {
	id := rs[0].Client
	sp := specs[id]
	fp := &FilePlan{Client: id, Path: path}
	for _, r := range rs {
		res := &Result{Client: r.Client, File: r.Source, Scope: r.Scope, Project: r.Project, Name: r.Name, Server: r.Server}
		fp.entries = append(fp.entries, &entryPlan{res: res, rec: r})
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		for _, ep := range fp.entries {
			ep.drop, ep.res.Skipped = true, "the file is gone; nothing to put back"
		}
		return fp, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	fp.old = data
	hash := sum(data)
	changedSince := false
	var masks []string
	// Entries governing replaced go back together, found in one parse;
	// entries it added come out one at a time, each found in the file as
	// the last left it. Every edit is also kept in the original file's
	// offsets, for the diff.
	var replaced, added []*entryPlan
	for _, ep := range fp.entries {
		if ep.rec.FileHash != hash {
			changedSince = true
		}
		if ep.rec.Inserted == nil {
			replaced = append(replaced, ep)
		} else {
			added = append(added, ep)
		}
	}
	var edits []edit // in data's offsets
	p, err := parseFile(sp, path, data)
	if err != nil {
		return nil, err
	}
	// The backup taken before undoing masks what looks like a secret in the
	// file's entries, as governing's does.
	switch {
	case p.format == formatTOML:
		fp.unmoved = unmovedSecrets([]*group{{sources: p.tomlEntries()}})
	case p.format == formatYAML:
		srcs, err := p.yamlEntries()
		if err != nil {
			return nil, err
		}
		fp.unmoved = unmovedSecrets([]*group{{sources: srcs}})
	case p.json != nil:
		fp.unmoved = unmovedSecrets(m.jsonGroups(sp, &scannedFile{path: path, data: data, parsed: p}))
	}
	for _, ep := range replaced {
		r := ep.rec
		src, err := locate(p, r.Locator)
		if err != nil {
			return nil, err
		}
		if !m.undoable(p, src, ep, force) {
			continue
		}
		orig, err := m.restore(r)
		if err != nil {
			ep.res.Skipped, ep.res.Err = err.Error(), err
			continue
		}
		for _, h := range r.Holes {
			v, _ := m.kc.Secret(h.Secret)
			masks = append(masks, v, jsonQuote(v), tomltext.Quote(v))
		}
		if n := len(r.Holes); n > 0 {
			// Undo is the one step that writes a secret into a file: say so
			// before it is taken.
			ids := make([]string, 0, n)
			for _, h := range r.Holes {
				ids = append(ids, h.Secret)
			}
			ep.res.note("puts %d secret value(s) back into %s in plain text, from the keychain (%s): anyone who can read the file can read them", n, path, strings.Join(ids, ", "))
		}
		switch p.format {
		case formatTOML:
		case formatYAML:
			// The entry is whole lines: its first is indented too.
			orig = reindent(append([]byte("\n"), orig...), r.Indent, lineIndent(data, src.span[0]))[1:]
		default:
			orig = reindent(orig, r.Indent, lineIndent(data, src.keyAt))
		}
		edits = append(edits, edit{start: src.span[0], end: src.span[1], text: orig})
	}
	cur, err := applyEdits(data, edits)
	if err != nil {
		return nil, err
	}
	for _, ep := range added {
		p, err := parseFile(sp, path, cur)
		if err != nil {
			return nil, err
		}
		src, err := locate(p, ep.rec.Locator)
		if err != nil {
			return nil, err
		}
		if !m.undoable(p, src, ep, force) {
			continue
		}
		ed, err := removeInserted(p, ep.rec)
		if err != nil {
			return nil, err
		}
		if cur, err = applyEdits(cur, []edit{ed}); err != nil {
			return nil, err
		}
		old := edit{start: toOld(edits, ed.start), end: toOld(edits, ed.end), text: ed.text}
		edits = append(edits, old)
	}
	fp.new = cur
	if bytes.Equal(fp.old, fp.new) {
		return fp, nil
	}
	if _, err := parseFile(sp, path, fp.new); err != nil {
		return nil, fmt.Errorf("undo %s: the restored file would not parse (%v); nothing written", path, err)
	}
	if check, err := applyEdits(fp.old, edits); err != nil || !bytes.Equal(check, fp.new) {
		edits = []edit{wholeChange(fp.old, fp.new)}
	}
	fp.Diff = unifiedDiff(path, fp.old, fp.new, edits, masks)
	exact := false
	newHash := sum(fp.new)
	for _, ep := range fp.entries {
		if newHash == ep.rec.BeforeHash {
			exact = true
		}
	}
	for _, ep := range fp.entries {
		switch {
		case ep.drop || ep.res.Skipped != "":
		case exact:
			ep.res.note("the file is byte for byte as it was before governing")
		case changedSince:
			ep.res.note("the file changed since governing; the entry is put back and the rest kept")
		}
	}
	return fp, nil
}

// undoable reports whether the governed entry src (nil: gone) can be put
// back; when not, the result says why.
func (m *Manager) undoable(p *parsed, src *source, ep *entryPlan, force bool) bool {
	r := ep.rec
	if src == nil {
		ep.drop, ep.res.Skipped = true, "no longer in the file (removed since governing); nothing to put back"
		return false
	}
	if sameEntry(p, src, r.Written) || force {
		return true
	}
	if r.Inserted == nil {
		if orig, err := m.restore(r); err == nil && sameEntry(p, src, orig) {
			ep.drop, ep.res.Skipped = true, "already back as it was"
			return false
		}
	}
	ep.res.Skipped = "changed since governing; undo --force puts the original back over the change"
	return false
}

// toOld maps an offset in a file edited by edits (in the original's
// offsets) back to the original.
func toOld(edits []edit, x int) int {
	sorted := slices.Clone(edits)
	slices.SortFunc(sorted, func(a, b edit) int { return a.start - b.start })
	shift := 0
	for _, e := range sorted {
		newStart := e.start + shift
		if x <= newStart {
			break
		}
		shift += len(e.text) - (e.end - e.start)
	}
	return x - shift
}

// wholeChange is one edit from the first byte old and new differ at to the
// last.
func wholeChange(old, new []byte) edit {
	i := 0
	for i < len(old) && i < len(new) && old[i] == new[i] {
		i++
	}
	j := 0
	for j < len(old)-i && j < len(new)-i && old[len(old)-1-j] == new[len(new)-1-j] {
		j++
	}
	return edit{start: i, end: len(old) - j, text: new[i : len(new)-j]}
}

// restore rebuilds a record's original entry, secret values read from the
// keychain.
func (m *Manager) restore(r *record) ([]byte, error) {
	out := slices.Clone(r.Original)
	holes := slices.Clone(r.Holes)
	slices.SortFunc(holes, func(a, b hole) int { return b.Offset - a.Offset })
	for _, h := range holes {
		if h.Offset < 0 || h.Offset+h.Len > len(out) {
			return nil, fmt.Errorf("undo %s: damaged record", r.Name)
		}
		var text string
		if h.Raw != "" {
			v, err := m.kc.Secret(h.Raw)
			if err != nil {
				return nil, secretErr(r, h.Raw, err)
			}
			text = v
		} else {
			v, err := m.kc.Secret(h.Secret)
			if err != nil {
				return nil, secretErr(r, h.Secret, err)
			}
			text = encodeValue(v, h.Quote)
		}
		out = append(out[:h.Offset], append([]byte(text), out[h.Offset+h.Len:]...)...)
	}
	return out, nil
}

func secretErr(r *record, id string, err error) error {
	if errors.Is(err, vault.ErrNotFound) {
		return fmt.Errorf("cannot put %s back: its secret %s is no longer in the keychain (store it again with: gatehouse secret set %s)", r.Name, id, id)
	}
	return fmt.Errorf("cannot put %s back: read secret %s: %w", r.Name, id, err)
}

// removeInserted returns the edit that takes out an entry governing added,
// and the objects it created for it once they hold nothing else.
func removeInserted(p *parsed, r *record) (edit, error) {
	loc := r.Locator
	created := max(r.Inserted.Created, 1)
	// Climb while the object holding the member would be left empty and
	// governing created it.
	level := len(loc) // remove loc[level-1] from the object at loc[:level-1]
	for k := 1; k < created; k++ {
		obj, err := p.object(loc[:level-1])
		if err != nil || obj == nil || len(obj.members) != 1 {
			break
		}
		level--
	}
	obj, err := p.object(loc[:level-1])
	if err != nil {
		return edit{}, err
	}
	if obj == nil {
		return edit{}, fmt.Errorf("undo %s: %s moved", r.Name, strings.Join(loc[:level-1], "."))
	}
	for i, mb := range obj.members {
		if mb.key == loc[level-1] {
			var interior *string
			if level == len(loc)-created+1 {
				interior = r.Inserted.Interior
			}
			return removeMember(obj, i, interior), nil
		}
	}
	return edit{}, fmt.Errorf("undo %s: not found", r.Name)
}
