package clients

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/gatehouse-dev/gatehouse/internal/store"
	"github.com/gatehouse-dev/gatehouse/vault"
)

// Apply carries out a plan, each file on its own: a file that cannot be
// written (read-only, changed while Gatehouse wrote it, Claude Desktop
// running) is left exactly as it was, with nothing registered or stored for
// it, and the other files are still done. The plan's results say what became
// of each entry; the error joins those of the files that failed.
func (m *Manager) Apply(ctx context.Context, pl *Plan) error {
	var errs []error
	for _, fp := range pl.Files {
		var err error
		if pl.Undo {
			err = m.applyUndo(ctx, fp, pl.Force)
		} else {
			err = m.applyGovern(ctx, fp, pl.Force)
		}
		if err != nil {
			for _, ep := range fp.entries {
				if ep.res.Skipped == "" && ep.res.Err == nil {
					ep.res.Err = err
				}
			}
			errs = append(errs, err)
		}
	}
	if err := m.cleanup(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func active(fp *FilePlan) []*entryPlan {
	var out []*entryPlan
	for _, ep := range fp.entries {
		if ep.res.Skipped == "" && ep.res.Err == nil && !ep.drop {
			out = append(out, ep)
		}
	}
	return out
}

// checkRunning refuses to write Claude Desktop's file while it runs.
func (m *Manager) checkRunning(fp *FilePlan, force bool) error {
	if fp.Client != ClaudeDesktop || force {
		return nil
	}
	running, _, err := m.env.running(ClaudeDesktop)
	if err != nil {
		return fmt.Errorf("cannot tell whether Claude Desktop is running (%v): quit it, then run this again with --force", err)
	}
	if running {
		return fmt.Errorf("quit Claude Desktop first: it %w, keeps its config in memory and writes it back, which would undo this change (quit it from its menu, not by closing its window)", ErrRunning)
	}
	return nil
}

func (m *Manager) applyGovern(ctx context.Context, fp *FilePlan, force bool) (err error) {
	eps := active(fp)
	if len(eps) == 0 || bytes.Equal(fp.old, fp.new) {
		return nil
	}
	if err := m.checkRunning(fp, force); err != nil {
		return err
	}
	if err := writable(fp.Path); err != nil {
		return err
	}
	// What is done here is undone if the file cannot be written.
	var rollback []func()
	defer func() {
		if err != nil {
			for i := len(rollback) - 1; i >= 0; i-- {
				rollback[i]()
			}
		}
	}()
	for _, ep := range eps {
		for _, s := range ep.secrets {
			prev, gerr := m.kc.Secret(s.id)
			had := gerr == nil
			if gerr != nil && !errors.Is(gerr, vault.ErrNotFound) {
				return fmt.Errorf("govern %s: %w", ep.res.Name, gerr)
			}
			if !had || prev != s.value {
				if err := m.kc.SetSecret(s.id, s.value); err != nil {
					return fmt.Errorf("govern %s: %w", ep.res.Name, err)
				}
				id := s.id
				rollback = append(rollback, func() {
					if had {
						m.kc.SetSecret(id, prev)
					} else {
						m.kc.DeleteSecret(id)
						m.st.ForgetSecret(context.WithoutCancel(ctx), id)
					}
				})
			}
			if err := m.st.NoteSecret(ctx, s.id); err != nil {
				return err
			}
		}
		if ep.reg == nil {
			continue
		}
		reg := *ep.reg
		if ep.regOld == nil {
			if err := m.st.AddServer(ctx, reg); err != nil {
				return fmt.Errorf("govern %s: %w", ep.res.Name, err)
			}
			rollback = append(rollback, func() { m.st.RemoveServer(context.WithoutCancel(ctx), reg.Name) })
		} else {
			if err := m.st.UpdateServer(ctx, reg); err != nil {
				return fmt.Errorf("govern %s: %w", ep.res.Name, err)
			}
			old := *ep.regOld
			rollback = append(rollback, func() { m.st.UpdateServer(context.WithoutCancel(ctx), old) })
		}
	}
	backup, err := m.backup(fp.Client, fp.Path, fp.redacted)
	if err != nil {
		return err
	}
	prevImported, err := m.imported(ctx)
	if err != nil {
		return err
	}
	tx, err := m.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("govern %s: %w", fp.Path, err)
	}
	defer tx.Rollback()
	for _, ep := range eps {
		ep.rec.Backup = backup
		if err := putRecord(ctx, tx, ep.rec); err != nil {
			return err
		}
		if ep.reg != nil {
			ids := ep.imported
			if ep.regOld != nil {
				ids = append(slices.Clone(prevImported[ep.reg.Name]), ids...)
				slices.Sort(ids)
				ids = slices.Compact(ids)
			}
			if err := putImported(ctx, tx, ep.reg.Name, ids); err != nil {
				return err
			}
		}
	}
	for file, locs := range fp.seen {
		if err := putSeen(ctx, tx, file, locs); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("govern %s: %w", fp.Path, err)
	}
	rollback = append(rollback, func() {
		ctx := context.WithoutCancel(ctx)
		tx, err := m.st.DB().BeginTx(ctx, nil)
		if err != nil {
			return
		}
		defer tx.Rollback()
		for _, ep := range eps {
			deleteRecord(ctx, tx, ep.rec.File, ep.rec.Locator)
			if ep.reg != nil && ep.regOld == nil {
				deleteImported(ctx, tx, ep.reg.Name)
			}
		}
		tx.Commit()
	})
	if err := m.replaceFile(fp.Path, fp.old, fp.new); err != nil {
		return err
	}
	for _, ep := range eps {
		ep.res.Done = true
	}
	return nil
}

func (m *Manager) applyUndo(ctx context.Context, fp *FilePlan, force bool) error {
	eps := active(fp)
	if len(eps) > 0 && !bytes.Equal(fp.old, fp.new) {
		if err := m.checkRunning(fp, force); err != nil {
			return err
		}
		if err := writable(fp.Path); err != nil {
			return err
		}
		if _, err := m.backup(fp.Client, fp.Path, maskValues(fp.old, fp.unmoved)); err != nil {
			return err
		}
		if err := m.replaceFile(fp.Path, fp.old, fp.new); err != nil {
			return err
		}
	}
	tx, err := m.st.DB().BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("undo %s: %w", fp.Path, err)
	}
	defer tx.Rollback()
	for _, ep := range fp.entries {
		if ep.drop || slices.Contains(eps, ep) {
			if err := deleteRecord(ctx, tx, ep.rec.File, ep.rec.Locator); err != nil {
				return err
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("undo %s: %w", fp.Path, err)
	}
	for _, ep := range fp.entries {
		if !ep.drop && !slices.Contains(eps, ep) {
			continue
		}
		// The exact spelling of a secret kept for this entry alone.
		for _, h := range ep.rec.Holes {
			if h.Raw == "" {
				continue
			}
			if err := m.kc.DeleteSecret(h.Raw); err == nil || errors.Is(err, vault.ErrNotFound) {
				m.st.ForgetSecret(ctx, h.Raw)
			}
		}
	}
	for _, ep := range eps {
		ep.res.Done = true
	}
	return nil
}

// cleanup removes the servers governing registered that no governed entry
// runs through any more, and the secrets it stored for them.
func (m *Manager) cleanup(ctx context.Context) error {
	recs, err := m.records(ctx)
	if err != nil {
		return err
	}
	imported, err := m.imported(ctx)
	if err != nil {
		return err
	}
	used := map[string]bool{}
	for _, r := range recs {
		used[r.Server] = true
	}
	var errs []error
	if err := forgetSeen(ctx, m.st.DB()); err != nil {
		errs = append(errs, err)
	}
	for name, ids := range imported {
		if used[name] {
			continue
		}
		if err := m.st.RemoveServer(ctx, name); err != nil && !errors.Is(err, store.ErrNotFound) {
			errs = append(errs, err)
			continue
		}
		// A sign-in made for a server governing registered goes with it.
		if g, ok := m.kc.(signIns); ok {
			if err := g.DeleteOAuthGrant(name); err != nil && !errors.Is(err, vault.ErrNotFound) {
				errs = append(errs, fmt.Errorf("the sign-in to %s stays in the keychain: %w", name, err))
			}
		}
		for _, id := range ids {
			if err := m.kc.DeleteSecret(id); err != nil && !errors.Is(err, vault.ErrNotFound) {
				errs = append(errs, fmt.Errorf("secret %s stays in the keychain: %w", id, err))
				continue
			}
			m.st.ForgetSecret(ctx, id)
		}
		tx, err := m.st.DB().BeginTx(ctx, nil)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if err := deleteImported(ctx, tx, name); err == nil {
			tx.Commit()
		}
		tx.Rollback()
	}
	return errors.Join(errs...)
}
