package store

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
)

// A Witness is a witness the home's evidence log submits its checkpoints
// to: a name of the user's choosing, the witness's submission URL, and its
// verifier key (name+hash+base64), which package entry reads.
type Witness struct {
	Name string `json:"-"`
	URL  string `json:"url"`
	Key  string `json:"key"`
}

// witnessPrefix is the settings key prefix of a witness: "witness/NAME".
const witnessPrefix = "witness/"

// Witnesses returns the configured witnesses, by name. A value another
// version wrote that this one cannot read is left out.
func (st *Store) Witnesses(ctx context.Context) ([]Witness, error) {
	rows, err := st.db.QueryContext(ctx, `SELECT key, value FROM settings WHERE key >= ? AND key < ? ORDER BY key`,
		witnessPrefix, witnessPrefix[:len(witnessPrefix)-1]+"0")
	if err != nil {
		return nil, fmt.Errorf("read witnesses: %w", err)
	}
	defer rows.Close()
	var out []Witness
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, fmt.Errorf("read witnesses: %w", err)
		}
		var w Witness
		if json.Unmarshal([]byte(v), &w) != nil || w.URL == "" || w.Key == "" {
			continue
		}
		w.Name = strings.TrimPrefix(k, witnessPrefix)
		out = append(out, w)
	}
	return out, rows.Err()
}

// AddWitness adds a witness; a name already used is refused with
// [ErrExists]. The URL must be http or https.
func (st *Store) AddWitness(ctx context.Context, w Witness) error {
	if w.Name == "" || strings.ContainsAny(w.Name, "/ \t\n") {
		return fmt.Errorf("add witness: %q is not a name (no spaces or slashes)", w.Name)
	}
	u, err := url.Parse(w.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("add witness: %q is not an http or https URL", w.URL)
	}
	b, _ := json.Marshal(w)
	res, err := st.db.ExecContext(ctx, `INSERT OR IGNORE INTO settings (key, value, updated_at) VALUES (?, ?, datetime('now'))`,
		witnessPrefix+w.Name, string(b))
	if err != nil {
		return fmt.Errorf("add witness: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("add witness %s: %w", w.Name, ErrExists)
	}
	return nil
}

// RemoveWitness removes the witness named name, or fails with
// [ErrNotFound].
func (st *Store) RemoveWitness(ctx context.Context, name string) error {
	res, err := st.db.ExecContext(ctx, `DELETE FROM settings WHERE key = ?`, witnessPrefix+name)
	if err != nil {
		return fmt.Errorf("remove witness: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("remove witness %s: %w", name, ErrNotFound)
	}
	return nil
}
