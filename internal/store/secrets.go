package store

import (
	"context"
	"fmt"
	"time"
)

// A SecretID names a secret kept in the OS keychain for this home folder.
// The store keeps only ids and times, never values.
type SecretID struct {
	ID        string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// NoteSecret records that the keychain holds secret id (set or replaced now).
func (st *Store) NoteSecret(ctx context.Context, id string) error {
	now := time.Now().UTC().Format(time.RFC3339Nano)
	_, err := st.db.ExecContext(ctx, `INSERT INTO secrets (id, created_at, updated_at) VALUES (?, ?, ?)
		ON CONFLICT (id) DO UPDATE SET updated_at = excluded.updated_at`, id, now, now)
	if err != nil {
		return fmt.Errorf("record secret %s: %w", id, err)
	}
	return nil
}

// ForgetSecret removes secret id from the index.
func (st *Store) ForgetSecret(ctx context.Context, id string) error {
	if _, err := st.db.ExecContext(ctx, `DELETE FROM secrets WHERE id = ?`, id); err != nil {
		return fmt.Errorf("forget secret %s: %w", id, err)
	}
	return nil
}

// SecretIDs returns the ids of the secrets held for this home, by id.
func (st *Store) SecretIDs(ctx context.Context) ([]SecretID, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT id, created_at, updated_at FROM secrets ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("list secrets: %w", err)
	}
	defer rows.Close()
	var out []SecretID
	for rows.Next() {
		var s SecretID
		var c, u string
		if err := rows.Scan(&s.ID, &c, &u); err != nil {
			return nil, fmt.Errorf("list secrets: %w", err)
		}
		s.CreatedAt, _ = time.Parse(time.RFC3339Nano, c)
		s.UpdatedAt, _ = time.Parse(time.RFC3339Nano, u)
		out = append(out, s)
	}
	return out, rows.Err()
}
