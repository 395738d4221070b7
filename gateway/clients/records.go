package clients

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"
)

// migrations are the "clients" component's schema steps. Append only.
var migrations = []string{
	// 1: each entry Gatehouse governs, and how to put it back; the servers
	// governing registered, and the secrets it stored for them.
	`CREATE TABLE client_entries (
		file        TEXT NOT NULL, -- the config file governing wrote
		locator     TEXT NOT NULL, -- JSON array: the keys from the file's root to the entry
		client      TEXT NOT NULL,
		scope       TEXT NOT NULL,
		project     TEXT NOT NULL,
		source      TEXT NOT NULL, -- the file the entry came from (a project's .mcp.json), or file
		name        TEXT NOT NULL, -- the entry's name in the client's file
		server      TEXT NOT NULL, -- the Gatehouse server it runs through
		original    BLOB NOT NULL, -- the entry as it was, secret values replaced by vault references
		holes       TEXT NOT NULL, -- JSON: where in original the secret values go back
		indent      TEXT NOT NULL, -- the indentation of the entry's first line
		written     BLOB NOT NULL, -- the entry as governing wrote it
		inserted    TEXT NOT NULL, -- JSON: how to take out an entry governing added; '' when it replaced one
		before_hash TEXT NOT NULL, -- SHA-256 of the file before governing
		file_hash   TEXT NOT NULL, -- SHA-256 of the file after governing
		backup      TEXT NOT NULL, -- the backup taken before writing
		governed_at TEXT NOT NULL,
		PRIMARY KEY (file, locator)
	) STRICT;
	CREATE TABLE client_servers (
		server  TEXT NOT NULL PRIMARY KEY, -- registered by governing
		secrets TEXT NOT NULL              -- JSON array: the secret ids governing stored for it
	) STRICT;
	CREATE TABLE client_files (
		file TEXT NOT NULL PRIMARY KEY, -- a config file governing wrote or read
		seen TEXT NOT NULL              -- JSON array: the locators of the entries it held then
	) STRICT`,
}

// A record is what Gatehouse keeps of one governed entry.
type record struct {
	File       string
	Locator    []string
	Client     ID
	Scope      Scope
	Project    string
	Source     string
	Name       string
	Server     string
	Original   []byte
	Holes      []hole
	Indent     string
	Written    []byte
	Inserted   *insertion
	BeforeHash string
	FileHash   string
	Backup     string
	GovernedAt time.Time

	// While planning: the entry as read, and the environment variables
	// the governed entry keeps because the client expands them.
	src     *source
	keepEnv []kv
}

// A hole is where a secret's value goes back into a record's original
// bytes: the placeholder there is the vault reference, quoted as the value
// was.
type hole struct {
	Offset int    `json:"offset"` // of the placeholder in Original
	Len    int    `json:"len"`    // of the placeholder
	Secret string `json:"secret"` // the secret's id in the keychain
	Quote  string `json:"quote"`  // `"` (JSON, TOML basic string) or `'` (TOML literal string)
	// Raw names a second keychain item that holds the value exactly as the
	// file wrote it (escapes and all), when writing the value again would
	// not give the same bytes.
	Raw string `json:"raw,omitempty"`
}

// An insertion says how to take out an entry that governing added (a
// local-scope entry in front of a project's .mcp.json) rather than replaced.
type insertion struct {
	// Created is how many trailing keys of the locator governing created:
	// 1 for the entry alone, 2 when it also created the object holding it,
	// and so on.
	Created int `json:"created"`
	// Interior is what the object it went into held between its braces,
	// when that object had no members (whitespace, or nothing).
	Interior *string `json:"interior,omitempty"`
}

func recordKey(file string, locator []string) string {
	b, _ := json.Marshal(locator)
	return file + "\x00" + string(b)
}

func (m *Manager) records(ctx context.Context) (map[string]*record, error) {
	rows, err := m.st.DB().QueryContext(ctx, `SELECT file, locator, client, scope, project, source, name, server,
		original, holes, indent, written, inserted, before_hash, file_hash, backup, governed_at FROM client_entries`)
	if err != nil {
		return nil, fmt.Errorf("read governed entries: %w", err)
	}
	defer rows.Close()
	out := map[string]*record{}
	for rows.Next() {
		var (
			r                                    record
			locator, holes, inserted, governedAt string
			client, scope                        string
		)
		if err := rows.Scan(&r.File, &locator, &client, &scope, &r.Project, &r.Source, &r.Name, &r.Server,
			&r.Original, &holes, &r.Indent, &r.Written, &inserted, &r.BeforeHash, &r.FileHash, &r.Backup, &governedAt); err != nil {
			return nil, fmt.Errorf("read governed entries: %w", err)
		}
		r.Client, r.Scope = ID(client), Scope(scope)
		if err := json.Unmarshal([]byte(locator), &r.Locator); err != nil {
			return nil, fmt.Errorf("read governed entry %s in %s: %w", r.Name, r.File, err)
		}
		if err := json.Unmarshal([]byte(holes), &r.Holes); err != nil {
			return nil, fmt.Errorf("read governed entry %s in %s: %w", r.Name, r.File, err)
		}
		if inserted != "" {
			r.Inserted = &insertion{}
			if err := json.Unmarshal([]byte(inserted), r.Inserted); err != nil {
				return nil, fmt.Errorf("read governed entry %s in %s: %w", r.Name, r.File, err)
			}
		}
		r.GovernedAt, _ = time.Parse(time.RFC3339Nano, governedAt)
		out[recordKey(r.File, r.Locator)] = &r
	}
	return out, rows.Err()
}

func putRecord(ctx context.Context, tx *sql.Tx, r *record) error {
	locator, _ := json.Marshal(r.Locator)
	holes, _ := json.Marshal(nonNilHoles(r.Holes))
	var inserted []byte
	if r.Inserted != nil {
		inserted, _ = json.Marshal(r.Inserted)
	}
	_, err := tx.ExecContext(ctx, `INSERT INTO client_entries (file, locator, client, scope, project, source, name, server,
		original, holes, indent, written, inserted, before_hash, file_hash, backup, governed_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (file, locator) DO UPDATE SET client = excluded.client, scope = excluded.scope,
			project = excluded.project, source = excluded.source, name = excluded.name, server = excluded.server,
			original = excluded.original, holes = excluded.holes, indent = excluded.indent, written = excluded.written,
			inserted = excluded.inserted, before_hash = excluded.before_hash, file_hash = excluded.file_hash,
			backup = excluded.backup, governed_at = excluded.governed_at`,
		r.File, string(locator), string(r.Client), string(r.Scope), r.Project, r.Source, r.Name, r.Server,
		r.Original, string(holes), r.Indent, r.Written, string(inserted), r.BeforeHash, r.FileHash, r.Backup,
		r.GovernedAt.UTC().Format(time.RFC3339Nano))
	if err != nil {
		return fmt.Errorf("record governed entry %s in %s: %w", r.Name, r.File, err)
	}
	return nil
}

func nonNilHoles(h []hole) []hole {
	if h == nil {
		return []hole{}
	}
	return h
}

func deleteRecord(ctx context.Context, tx *sql.Tx, file string, locator []string) error {
	b, _ := json.Marshal(locator)
	if _, err := tx.ExecContext(ctx, `DELETE FROM client_entries WHERE file = ? AND locator = ?`, file, string(b)); err != nil {
		return fmt.Errorf("forget governed entry in %s: %w", file, err)
	}
	return nil
}

// imported returns the servers governing registered, and the secrets it
// stored for each.
func (m *Manager) imported(ctx context.Context) (map[string][]string, error) {
	rows, err := m.st.DB().QueryContext(ctx, `SELECT server, secrets FROM client_servers`)
	if err != nil {
		return nil, fmt.Errorf("read imported servers: %w", err)
	}
	defer rows.Close()
	out := map[string][]string{}
	for rows.Next() {
		var name, secrets string
		if err := rows.Scan(&name, &secrets); err != nil {
			return nil, fmt.Errorf("read imported servers: %w", err)
		}
		var ids []string
		if err := json.Unmarshal([]byte(secrets), &ids); err != nil {
			return nil, fmt.Errorf("read imported server %s: %w", name, err)
		}
		out[name] = ids
	}
	return out, rows.Err()
}

func putImported(ctx context.Context, tx *sql.Tx, server string, secrets []string) error {
	if secrets == nil {
		secrets = []string{}
	}
	b, _ := json.Marshal(secrets)
	if _, err := tx.ExecContext(ctx, `INSERT INTO client_servers (server, secrets) VALUES (?, ?)
		ON CONFLICT (server) DO UPDATE SET secrets = excluded.secrets`, server, string(b)); err != nil {
		return fmt.Errorf("record imported server %s: %w", server, err)
	}
	return nil
}

func deleteImported(ctx context.Context, tx *sql.Tx, server string) error {
	if _, err := tx.ExecContext(ctx, `DELETE FROM client_servers WHERE server = ?`, server); err != nil {
		return fmt.Errorf("forget imported server %s: %w", server, err)
	}
	return nil
}

// seen returns, for each file governing last looked at, the locators of the
// entries it held then: an entry not among them was added since.
func (m *Manager) seen(ctx context.Context) (map[string]map[string]bool, error) {
	rows, err := m.st.DB().QueryContext(ctx, `SELECT file, seen FROM client_files`)
	if err != nil {
		return nil, fmt.Errorf("read governed files: %w", err)
	}
	defer rows.Close()
	out := map[string]map[string]bool{}
	for rows.Next() {
		var file, seen string
		if err := rows.Scan(&file, &seen); err != nil {
			return nil, fmt.Errorf("read governed files: %w", err)
		}
		var locs [][]string
		if err := json.Unmarshal([]byte(seen), &locs); err != nil {
			return nil, fmt.Errorf("read governed file %s: %w", file, err)
		}
		set := map[string]bool{}
		for _, l := range locs {
			set[recordKey(file, l)] = true
		}
		out[file] = set
	}
	return out, rows.Err()
}

func putSeen(ctx context.Context, tx *sql.Tx, file string, locators [][]string) error {
	if locators == nil {
		locators = [][]string{}
	}
	b, _ := json.Marshal(locators)
	if _, err := tx.ExecContext(ctx, `INSERT INTO client_files (file, seen) VALUES (?, ?)
		ON CONFLICT (file) DO UPDATE SET seen = excluded.seen`, file, string(b)); err != nil {
		return fmt.Errorf("record governed file %s: %w", file, err)
	}
	return nil
}

// forgetSeen forgets the files no governed entry is in or came from.
func forgetSeen(ctx context.Context, db *sql.DB) error {
	if _, err := db.ExecContext(ctx, `DELETE FROM client_files WHERE file NOT IN (SELECT file FROM client_entries)
		AND file NOT IN (SELECT source FROM client_entries)`); err != nil {
		return fmt.Errorf("forget governed files: %w", err)
	}
	return nil
}
