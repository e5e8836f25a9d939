// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
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
// paging through a million copies took seconds a page, and a restart's
// lists never ended. The queries below
// walk the range in key order on kine's (name, prev_revision) index and
// keep a row when no newer one of its key is at or below the revision (a
// correlated lookup on the (name) index), so that SQLite stops at the
// limit. They return what kine's return, row for row, in the same order
// (TestSQLiteListsAgreeWithKine).
const (
	// As kine's lists (generic.ListFmt): the current and compact revisions
	// on every row (read as scalars: scalarRevisions), and one row of NULLs
	// when the range is empty.
	sqliteListFmt = `
		WITH
		page AS (SELECT %s FROM kine AS kv
			WHERE kv.name >= ? AND kv.name < ? %s
			AND kv.id = (SELECT MAX(mkv.id) FROM kine AS mkv WHERE mkv.name = kv.name %s)
			AND (kv.deleted = 0 OR ?)
			ORDER BY kv.name ASC %%s),
		fkv AS (SELECT * FROM page UNION ALL SELECT %s WHERE NOT EXISTS (SELECT * FROM page))
		SELECT (%s) AS current_rev, (%s) AS compact_rev, fkv.* FROM fkv ORDER BY name ASC`
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
	return fmt.Sprintf(sqliteListFmt, columns, atRevision, newestAt, kinegeneric.Nulls(columns), kinegeneric.CurrentRevSQL, kinegeneric.CompactRevSQL)
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

// scalarRevisions rewrites one of kine's queries that joins its rows with
// the current and compact revisions (WITH ckv AS (SELECT * FROM
// (current) AS current_rev, (compact) AS compact_rev) ... SELECT * FROM
// ckv, fkv) to read them as scalar subqueries beside the rows instead,
// which answers the same rows in the same order. SQLite runs the join's
// form in time that grows with the table: kine's poll for new events,
// made after every write, costs an order of magnitude more than
// rewritten on a table of tens of thousands of rows, and took a large
// share of the server's CPU while one client created ConfigMaps (make
// bench's one-client creates/s fell with kine v0.17, which brought this
// form). A query of another shape is returned as it is.
func scalarRevisions(q *query.Named) *query.Named {
	current, compact := query.Strip(kinegeneric.CurrentRevSQL), query.Strip(kinegeneric.CompactRevSQL)
	join := fmt.Sprintf("ckv AS (SELECT * FROM (%s) AS current_rev, (%s) AS compact_rev),", current, compact)
	const rows = "SELECT * FROM ckv, fkv"
	if q == nil || !strings.Contains(q.Query, join) || !strings.Contains(q.Query, rows) {
		return q
	}
	text := strings.Replace(q.Query, join, "", 1)
	text = strings.Replace(text, rows, fmt.Sprintf("SELECT (%s) AS current_rev, (%s) AS compact_rev, fkv.* FROM fkv", current, compact), 1)
	return &query.Named{Name: q.Name, Query: query.Strip(text)}
}

// withScalarRevisions rewrites every query of g that joins its rows with
// the revisions (scalarRevisions).
func withScalarRevisions(g *kinegeneric.Generic) {
	for _, q := range revisionJoins(g) {
		*q = scalarRevisions(*q)
	}
}

// revisionJoins are g's queries that kine writes joined with the
// revisions.
func revisionJoins(g *kinegeneric.Generic) []**query.Named {
	return []**query.Named{
		&g.AllCurrentSQL, &g.AllCurrentValSQL, &g.ListCurrentSQL, &g.ListCurrentValSQL,
		&g.ListRevisionStartSQL, &g.ListRevisionStartValSQL, &g.GetRevisionAfterSQL, &g.GetRevisionAfterValSQL,
		&g.GetSingleSQL, &g.GetSingleValSQL, &g.AfterOldValSQL, &g.AfterAllOldValSQL, &g.AfterSingleOldValSQL,
	}
}
