package storage

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	kinegeneric "github.com/k3s-io/kine/pkg/drivers/generic"
	"github.com/k3s-io/kine/pkg/metrics"
	"github.com/k3s-io/kine/pkg/query"
)

// A range of keys at a revision is the newest row of each key in the
// range at or below the revision, unless that row is a deletion. kine
// finds those rows with a subquery that groups the whole range by key,
// which SQLite materializes, and then sorts by key, so that a page of a
// range (a LIMIT) costs as much as the rest of the range from its start:
// reading the 1,000,000 copies of 10,000 mailboxes, 500 at a time, took
// 5–6 s a page, and a restart's lists never ended. The queries below
// walk the range in key order on kine's (name, prev_revision) index and
// keep a row when no newer one of its key is at or below the revision (a
// correlated lookup on the (name) index), so that SQLite stops at the
// limit. They return what kine's return, row for row, in the same order
// (TestSQLiteListsAgreeWithKine).
const (
	sqliteListFmt = `
		SELECT current_rev, compact_rev, %s
		FROM (%s) AS current, (%s) AS compact, kine AS kv
		WHERE kv.name >= ? AND kv.name < ? %s
		AND kv.id = (SELECT MAX(mkv.id) FROM kine AS mkv WHERE mkv.name = kv.name %s)
		AND (kv.deleted = 0 OR ?)
		ORDER BY kv.name ASC`
	sqliteAtRevision = "AND kv.id <= ?"
	sqliteNewestAt   = "AND mkv.id <= ?"
)

var (
	sqliteListCurrentSQL     = sqliteList("ListCurrent", kinegeneric.Columns, "", "")
	sqliteListCurrentValSQL  = sqliteList("ListCurrentVal", kinegeneric.WithVal, "", "")
	sqliteListRevisionSQL    = sqliteList("GetRevisionAfter", kinegeneric.Columns, sqliteAtRevision, sqliteNewestAt)
	sqliteListRevisionValSQL = sqliteList("GetRevisionAfterVal", kinegeneric.WithVal, sqliteAtRevision, sqliteNewestAt)
)

func sqliteList(name, columns, atRevision, newestAt string) *query.Named {
	return query.New(fmt.Sprintf(sqliteListFmt, columns, kinegeneric.CurrentRevSQL, kinegeneric.CompactRevSQL, atRevision, newestAt), "?", false, name)
}

// ListCurrent implements server.Dialect: a range (end set) as above, a key
// as kine reads it.
func (d *sqliteDialect) ListCurrent(ctx context.Context, key, end string, limit int64, includeDeleted, keysOnly bool) (*sql.Rows, error) {
	if end == "" {
		return d.Dialect.ListCurrent(ctx, key, end, limit, includeDeleted, keysOnly)
	}
	q := sqliteListCurrentValSQL
	if keysOnly {
		q = sqliteListCurrentSQL
	}
	return d.query(ctx, q, limit, key, end, includeDeleted)
}

// List implements server.Dialect: a range (end set) at a revision as
// above, a key as kine reads it.
func (d *sqliteDialect) List(ctx context.Context, key, end string, limit, revision int64, includeDeleted, keysOnly bool) (*sql.Rows, error) {
	if end == "" {
		return d.Dialect.List(ctx, key, end, limit, revision, includeDeleted, keysOnly)
	}
	q := sqliteListRevisionValSQL
	if keysOnly {
		q = sqliteListRevisionSQL
	}
	return d.query(ctx, q, limit, key, end, revision, revision, includeDeleted)
}

// query runs a range query, limited when limit is positive, with kine's
// SQL metrics.
func (d *sqliteDialect) query(ctx context.Context, q *query.Named, limit int64, args ...any) (rows *sql.Rows, err error) {
	if limit > 0 {
		q = q.Appendf("LIMIT %d", limit)
	}
	start := time.Now()
	defer func() { metrics.ObserveSQL(start, d.errCode(err), 0, q.Fill(args)) }()
	return d.g.DB.QueryContext(ctx, q.Query, args...)
}
