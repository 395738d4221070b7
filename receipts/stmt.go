package receipts

import (
	"context"
	"database/sql"
	"sync"
)

// stmts caches prepared statements: the log runs the same few statements
// for every append, and parsing them again each time cost a quarter of an
// append's CPU. database/sql prepares a statement once per connection and
// keeps it.
type stmts struct {
	db *sql.DB
	m  sync.Map // query -> *sql.Stmt
}

func (s *stmts) get(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := s.m.Load(query); ok {
		return st.(*sql.Stmt), nil
	}
	st, err := s.db.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	if prev, loaded := s.m.LoadOrStore(query, st); loaded {
		st.Close()
		return prev.(*sql.Stmt), nil
	}
	return st, nil
}

// exec runs query in tx with a cached statement.
func (s *stmts) exec(ctx context.Context, tx *sql.Tx, query string, args ...any) (sql.Result, error) {
	st, err := s.get(ctx, query)
	if err != nil {
		return nil, err
	}
	return tx.StmtContext(ctx, st).ExecContext(ctx, args...)
}

// query runs query in tx (or, with a nil tx, on the database) with a
// cached statement.
func (s *stmts) query(ctx context.Context, tx *sql.Tx, query string, args ...any) (*sql.Rows, error) {
	st, err := s.get(ctx, query)
	if err != nil {
		return nil, err
	}
	if tx != nil {
		st = tx.StmtContext(ctx, st)
	}
	return st.QueryContext(ctx, args...)
}

// inTx is tx running cached statements, for code that reads one row
// through a QueryRowContext (on every append: it must not parse its query
// each time).
type inTx struct {
	s  *stmts
	tx *sql.Tx
}

func (q inTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := q.s.get(ctx, query)
	if err != nil {
		return q.tx.QueryRowContext(ctx, query, args...) // reports the same error
	}
	return q.tx.StmtContext(ctx, st).QueryRowContext(ctx, args...)
}
