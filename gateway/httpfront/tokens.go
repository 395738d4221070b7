package httpfront

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"database/sql"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/gatehouse-dev/gatehouse/receipts"
)

// TokenPrefix starts every access token, so that a token pasted where it
// does not belong is easy to recognise (and for secret scanners to find).
const TokenPrefix = "ghs_"

// tokenMigrations are the tables of the access tokens. Append only.
var tokenMigrations = []string{
	`CREATE TABLE serve_tokens (
		client     TEXT NOT NULL,
		hash       TEXT NOT NULL UNIQUE,
		hint       TEXT NOT NULL,
		created_at INTEGER NOT NULL,
		revoked_at INTEGER
	);
	CREATE UNIQUE INDEX serve_tokens_live ON serve_tokens (client) WHERE revoked_at IS NULL;`,
	// The servers a token reaches: a JSON array of names, or NULL for all.
	`ALTER TABLE serve_tokens ADD COLUMN servers TEXT;`,
}

// A Keeper keeps each client's token in the OS keychain (*vault.Vault is
// one).
type Keeper interface {
	SetClientToken(client, token string) error
	DeleteClientToken(client string) error
}

// Tokens are the clients' access tokens. The database holds each token's
// SHA-256 hash, for lookup, and never the token; the keychain holds the
// token.
type Tokens struct {
	db     *sql.DB
	keeper Keeper
}

// ErrTokenExists is returned by [Tokens.Add] for a client that already has
// a live token.
var ErrTokenExists = errors.New("the client already has a token")

// ErrNoToken is returned by [Tokens.Revoke] for a client without a live
// token.
var ErrNoToken = errors.New("no live token")

// OpenTokens opens the tokens' table in db, creating it when needed.
// keeper may be nil for a reader that only authenticates.
func OpenTokens(ctx context.Context, db receipts.Migrator, keeper Keeper) (*Tokens, error) {
	if err := db.Migrate(ctx, "serve", tokenMigrations); err != nil {
		return nil, fmt.Errorf("open tokens: %w", err)
	}
	return &Tokens{db: db.DB(), keeper: keeper}, nil
}

// A TokenInfo describes one token, without the token.
type TokenInfo struct {
	Client  string
	Hint    string   // the token's first characters, to tell tokens apart
	Servers []string // the servers it reaches; nil: every one
	Created time.Time
	Revoked time.Time // zero while it is live
}

// Reach says which servers a token reaches: "all" or their names.
func Reach(servers []string) string {
	if servers == nil {
		return "all"
	}
	return strings.Join(servers, ",")
}

// Add makes a new token for client, keeps it in the keychain and returns
// it: it is shown once, and only its hash stays in the database. It MUST
// NOT be logged. With servers, the token reaches only those servers'
// endpoints; without, every registered server's.
func (t *Tokens) Add(ctx context.Context, client string, servers ...string) (string, error) {
	var scope any // NULL: every server
	if len(servers) > 0 {
		names := slices.Clone(servers)
		slices.Sort(names)
		b, err := json.Marshal(slices.Compact(names))
		if err != nil {
			return "", fmt.Errorf("add token: %w", err)
		}
		scope = string(b)
	}
	var b [32]byte
	rand.Read(b[:])
	token := TokenPrefix + base64.RawURLEncoding.EncodeToString(b[:])
	tx, err := t.db.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("add token: %w", err)
	}
	defer tx.Rollback()
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM serve_tokens WHERE client = ? AND revoked_at IS NULL`, client).Scan(&n); err != nil {
		return "", fmt.Errorf("add token: %w", err)
	}
	if n > 0 {
		return "", fmt.Errorf("token for %s: %w", client, ErrTokenExists)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO serve_tokens (client, hash, hint, created_at, servers) VALUES (?, ?, ?, ?, ?)`,
		client, tokenHash(token), token[:len(TokenPrefix)+4], time.Now().UnixMilli(), scope); err != nil {
		return "", fmt.Errorf("add token: %w", err)
	}
	// The keychain first: a token the database knows but the keychain
	// lost could still be used; one the keychain holds alone cannot.
	if err := t.keeper.SetClientToken(client, token); err != nil {
		return "", err
	}
	if err := tx.Commit(); err != nil {
		t.keeper.DeleteClientToken(client)
		return "", fmt.Errorf("add token: %w", err)
	}
	return token, nil
}

// Revoke ends client's live token at once: the next request that presents
// it is refused.
func (t *Tokens) Revoke(ctx context.Context, client string) error {
	res, err := t.db.ExecContext(ctx, `UPDATE serve_tokens SET revoked_at = ? WHERE client = ? AND revoked_at IS NULL`,
		time.Now().UnixMilli(), client)
	if err != nil {
		return fmt.Errorf("revoke token: %w", err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("token for %s: %w", client, ErrNoToken)
	}
	if t.keeper != nil {
		t.keeper.DeleteClientToken(client) // already useless: only its hash was ever checked
	}
	return nil
}

// List returns every token, live and revoked, oldest first.
func (t *Tokens) List(ctx context.Context) ([]TokenInfo, error) {
	rows, err := t.db.QueryContext(ctx, `SELECT client, hint, created_at, revoked_at, servers FROM serve_tokens ORDER BY created_at, rowid`)
	if err != nil {
		return nil, fmt.Errorf("list tokens: %w", err)
	}
	defer rows.Close()
	var out []TokenInfo
	for rows.Next() {
		var (
			ti      TokenInfo
			created int64
			revoked sql.NullInt64
			scope   sql.NullString
		)
		if err := rows.Scan(&ti.Client, &ti.Hint, &created, &revoked, &scope); err != nil {
			return nil, fmt.Errorf("list tokens: %w", err)
		}
		if ti.Servers, err = parseScope(scope); err != nil {
			return nil, fmt.Errorf("list tokens: %s: %w", ti.Client, err)
		}
		ti.Created = time.UnixMilli(created)
		if revoked.Valid {
			ti.Revoked = time.UnixMilli(revoked.Int64)
		}
		out = append(out, ti)
	}
	return out, rows.Err()
}

// Authenticate returns the client whose live token this is, with the
// servers the token reaches. Every live token's hash is compared with the
// presented one's in constant time, and the table is read anew on each
// call, so that a revocation holds from the next request on. A scope that
// cannot be read is an error, never every server.
func (t *Tokens) Authenticate(ctx context.Context, token string) (Client, bool, error) {
	if !strings.HasPrefix(token, TokenPrefix) {
		return Client{}, false, nil
	}
	want := tokenHash(token)
	rows, err := t.db.QueryContext(ctx, `SELECT client, hash, servers FROM serve_tokens WHERE revoked_at IS NULL`)
	if err != nil {
		return Client{}, false, fmt.Errorf("authenticate: %w", err)
	}
	defer rows.Close()
	var (
		client Client
		scope  sql.NullString
		found  bool
	)
	for rows.Next() {
		var (
			c, h string
			s    sql.NullString
		)
		if err := rows.Scan(&c, &h, &s); err != nil {
			return Client{}, false, fmt.Errorf("authenticate: %w", err)
		}
		if subtle.ConstantTimeCompare([]byte(h), []byte(want)) == 1 {
			client.Name, scope, found = c, s, true
		}
	}
	if err := rows.Err(); err != nil {
		return Client{}, false, fmt.Errorf("authenticate: %w", err)
	}
	if !found {
		return Client{}, false, nil
	}
	if client.Servers, err = parseScope(scope); err != nil {
		return Client{}, false, fmt.Errorf("authenticate %s: %w", client.Name, err)
	}
	return client, true, nil
}

// parseScope reads a token's servers column: NULL is every server, else a
// non-empty JSON array of names.
func parseScope(s sql.NullString) ([]string, error) {
	if !s.Valid {
		return nil, nil
	}
	var names []string
	if err := json.Unmarshal([]byte(s.String), &names); err != nil || len(names) == 0 {
		return nil, fmt.Errorf("the token's servers %q are unreadable", s.String)
	}
	return names, nil
}

func tokenHash(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}
