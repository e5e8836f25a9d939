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
	// As kine's lists (generic.ListFmt): the current and compact revisions
	// on every row, and one row of NULLs when the range is empty.
	sqliteListFmt = `
		WITH
		page AS (SELECT %s FROM kine AS kv
			WHERE kv.name >= ? AND kv.name < ? %s
			AND kv.id = (SELECT MAX(mkv.id) FROM kine AS mkv WHERE mkv.name = kv.name %s)
			AND (kv.deleted = 0 OR ?)
			ORDER BY kv.name ASC %%s),
		ckv AS (SELECT * FROM (%s) AS current_rev, (%s) AS compact_rev),
		fkv AS (SELECT * FROM page UNION ALL SELECT %s WHERE NOT EXISTS (SELECT * FROM page))
		SELECT * FROM ckv, fkv ORDER BY name ASC`
	sqliteAtRevision = "AND kv.id <= ?"
	sqliteNewestAt   = "AND mkv.id <= ?"
)

var (
	sqliteListCurrentSQL     = sqliteList(kinegeneric.Columns, "", "")
	sqliteListCurrentValSQL  = sqliteList(kinegeneric.WithVal, "", "")
	sqliteListRevisionSQL    = sqliteList(kinegeneric.Columns, sqliteAtRevision, sqliteNewestAt)
	sqliteListRevisionValSQL = sqliteList(kinegeneric.WithVal, sqliteAtRevision, sqliteNewestAt)
)

// sqliteList is a range query; its text keeps a %s for the page's limit
// (query).
func sqliteList(columns, atRevision, newestAt string) string {
	return fmt.Sprintf(sqliteListFmt, columns, atRevision, newestAt, kinegeneric.CurrentRevSQL, kinegeneric.CompactRevSQL, kinegeneric.Nulls(columns))
}

// ListCurrent implements server.Dialect: a range (end set) as above, a key
// as kine reads it.
func (d *sqliteDialect) ListCurrent(ctx context.Context, key, end string, limit int64, includeDeleted, keysOnly bool) (*sql.Rows, error) {
	if end == "" {
		return d.Dialect.ListCurrent(ctx, key, end, limit, includeDeleted, keysOnly)
	}
	q, name := sqliteListCurrentValSQL, "ListCurrentVal"
	if keysOnly {
		q, name = sqliteListCurrentSQL, "ListCurrent"
	}
	return d.query(ctx, q, name, limit, key, end, includeDeleted)
}

// List implements server.Dialect: a range (end set) at a revision as
// above, a key as kine reads it.
func (d *sqliteDialect) List(ctx context.Context, key, end string, limit, revision int64, includeDeleted, keysOnly bool) (*sql.Rows, error) {
	if end == "" {
		return d.Dialect.List(ctx, key, end, limit, revision, includeDeleted, keysOnly)
	}
	q, name := sqliteListRevisionValSQL, "GetRevisionAfterVal"
	if keysOnly {
		q, name = sqliteListRevisionSQL, "GetRevisionAfter"
	}
	return d.query(ctx, q, name, limit, key, end, revision, revision, includeDeleted)
}

// query runs a range query, limited when limit is positive, with kine's
// SQL metrics.
func (d *sqliteDialect) query(ctx context.Context, text string, name string, limit int64, args ...any) (rows *sql.Rows, err error) {
	page := ""
	if limit > 0 {
		page = fmt.Sprintf("LIMIT %d", limit)
	}
	q := query.New(fmt.Sprintf(text, page), "?", false, name)
	start := time.Now()
	defer func() { metrics.ObserveSQL(start, d.errCode(err), 0, q.Fill(args)) }()
	return d.g.DB.QueryContext(ctx, q.Query, args...)
}
