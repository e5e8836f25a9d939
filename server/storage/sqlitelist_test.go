// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/drivers/sqlite"
	"github.com/k3s-io/kine/pkg/util"

	"github.com/sirupsen/logrus"
	"github.com/stretchr/testify/require"
)

// TestSQLiteListsAgreeWithKine: a range read a page at a time returns,
// row for row and in the same order, what kine's query returns, over keys
// created, updated, deleted and created again, at the current revision and
// at past ones, with and without deletions, values and a limit.
//
// The same for every query whose revisions are read as scalars
// (scalarRevisions): kine's own dialect on the same database answers the
// same rows, for single keys and the watches' reads of what came after a
// revision too.
func TestSQLiteListsAgreeWithKine(t *testing.T) {
	dir := t.TempDir()
	b := sqliteParts(t, dir)
	t.Cleanup(b.stop)
	ctx, backend, dialect := b.ctx, b.backend, b.dialect
	require.NoError(t, backend.Start(ctx))
	// kine's dialect as kine builds it, its queries not rewritten.
	var kineWG sync.WaitGroup
	kineCtx, stopKine := context.WithCancel(ctx)
	defer func() { stopKine(); kineWG.Wait() }()
	cfg := &drivers.Config{Endpoint: DefaultEndpoint(dir)}
	cfg.Scheme, cfg.DataSourceName = util.SchemeAndAddress(cfg.Endpoint)
	_, kine, err := sqlite.NewVariant(kineCtx, &kineWG, "sqlite3", cfg)
	require.NoError(t, err)
	kineQueries, ours := revisionJoins(kine), revisionJoins(dialect.g)
	for i := range kineQueries {
		require.Contains(t, (*kineQueries[i]).Query, "FROM ckv, fkv", (*kineQueries[i]).Name)
		require.NotContains(t, (*ours[i]).Query, "ckv", "the server's %s is rewritten", (*ours[i]).Name)
	}

	rnd := rand.New(rand.NewPCG(1, 2))
	revs := map[string]int64{} // live keys' revisions
	var history []int64
	for i := range 600 {
		key := fmt.Sprintf("/registry/things/space-%d/%03d", rnd.IntN(4), rnd.IntN(60))
		value := []byte(fmt.Sprint("v", i))
		var rev int64
		var err error
		if old, ok := revs[key]; ok {
			if rnd.IntN(3) == 0 {
				rev, _, _, err = backend.Delete(ctx, key, old)
				delete(revs, key)
			} else {
				rev, _, _, err = backend.Update(ctx, key, value, old, 0)
				revs[key] = rev
			}
		} else {
			rev, err = backend.Create(ctx, key, value, 0)
			revs[key] = rev
		}
		require.NoError(t, err, key)
		history = append(history, rev)
	}

	rowsOf := func(rows *sql.Rows, err error) [][]string {
		t.Helper()
		require.NoError(t, err)
		defer rows.Close()
		cols, err := rows.Columns()
		require.NoError(t, err)
		var out [][]string
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			require.NoError(t, rows.Scan(ptrs...))
			row := make([]string, len(vals))
			for i, v := range vals {
				if b, ok := v.([]byte); ok {
					v = string(b)
				}
				row[i] = fmt.Sprint(v)
			}
			out = append(out, row)
		}
		require.NoError(t, rows.Err())
		return out
	}

	ranges := [][2]string{
		{"/registry/things/", "/registry/things0"},
		{"/registry/things/space-1/", "/registry/things/space-10"},
		{"/registry/things/space-2/030", "/registry/things/space-3/"},
		{"/registry/nothing/", "/registry/nothing0"},
	}
	revisions := []int64{history[len(history)-1], history[10], history[300], history[450]}
	compared := 0
	for _, r := range ranges {
		for _, limit := range []int64{0, 1, 7, 51} {
			for _, includeDeleted := range []bool{false, true} {
				for _, keysOnly := range []bool{false, true} {
					name := fmt.Sprintf("%s limit %d deleted %v keysOnly %v", r[0], limit, includeDeleted, keysOnly)
					want := rowsOf(kine.ListCurrent(ctx, r[0], r[1], limit, includeDeleted, keysOnly))
					got := rowsOf(dialect.ListCurrent(ctx, r[0], r[1], limit, includeDeleted, keysOnly))
					require.Equal(t, want, got, "current: "+name)
					compared += len(want)
					for _, rev := range revisions {
						want := rowsOf(kine.List(ctx, r[0], r[1], limit, rev, includeDeleted, keysOnly))
						got := rowsOf(dialect.List(ctx, r[0], r[1], limit, rev, includeDeleted, keysOnly))
						require.Equal(t, want, got, fmt.Sprintf("at %d: %s", rev, name))
						compared += len(want)
					}
				}
			}
		}
	}
	require.Greater(t, compared, 1000, "the ranges hold rows")

	// A single key is read as kine reads it.
	for key := range revs {
		want := rowsOf(kine.ListCurrent(ctx, key, "", 0, false, false))
		got := rowsOf(dialect.ListCurrent(ctx, key, "", 0, false, false))
		require.Equal(t, want, got, key)
		require.Len(t, got, 1, key)
		break
	}

	// Single keys, current and at a revision, live, deleted and missing.
	keys := []string{"/registry/things/space-0/000", "/registry/things/missing"}
	for key := range revs {
		keys = append(keys, key)
		if len(keys) == 6 {
			break
		}
	}
	for _, key := range keys {
		for _, includeDeleted := range []bool{false, true} {
			for _, keysOnly := range []bool{false, true} {
				name := fmt.Sprintf("%s deleted %v keysOnly %v", key, includeDeleted, keysOnly)
				want := rowsOf(kine.ListCurrent(ctx, key, "", 0, includeDeleted, keysOnly))
				require.Equal(t, want, rowsOf(dialect.ListCurrent(ctx, key, "", 0, includeDeleted, keysOnly)), name)
				for _, rev := range revisions {
					want := rowsOf(kine.List(ctx, key, "", 0, rev, includeDeleted, keysOnly))
					require.Equal(t, want, rowsOf(dialect.List(ctx, key, "", 0, rev, includeDeleted, keysOnly)), fmt.Sprintf("at %d: %s", rev, name))
				}
			}
		}
	}
	// What came after a revision: everything, a range, a key; and the
	// poll's prepared statement.
	for _, r := range append(ranges, [2]string{"", ""}, [2]string{keys[2], ""}) {
		for _, rev := range append(revisions, 0, history[len(history)-1]+5) {
			for _, limit := range []int64{0, 7} {
				want := rowsOf(kine.After(ctx, r[0], r[1], rev, limit))
				require.Equal(t, want, rowsOf(dialect.After(ctx, r[0], r[1], rev, limit)), "after %d: [%q, %q) limit %d", rev, r[0], r[1], limit)
			}
		}
	}
	for _, rev := range []int64{0, history[300], history[len(history)-1]} {
		kineStmt, err := kine.PrepareAfter(ctx, 500)
		require.NoError(t, err)
		ourStmt, err := dialect.PrepareAfter(ctx, 500)
		require.NoError(t, err)
		want := rowsOf(kine.QueryAfter(ctx, kineStmt, rev))
		require.Equal(t, want, rowsOf(dialect.QueryAfter(ctx, ourStmt, rev)), "poll after %d", rev)
		require.NoError(t, kineStmt.Close())
		require.NoError(t, ourStmt.Close())
	}

	// Through kine's backend: a paged read of everything finds every live
	// key once, in order.
	var seen []string
	start := "/registry/things/"
	for {
		_, kvs, err := backend.List(ctx, start, "/registry/things0", 10, 0, false)
		require.NoError(t, err)
		if len(kvs) == 0 {
			break
		}
		for _, kv := range kvs {
			seen = append(seen, kv.Key)
		}
		start = kvs[len(kvs)-1].Key + "\x00"
	}
	require.Len(t, seen, len(revs))
	require.IsIncreasing(t, seen)
}

// BenchmarkSQLiteListPage: one page of 500 from the middle of a range of
// 100,000 keys (1 KB values, a tenth updated once), kine's query against
// the range read a page at a time.
func BenchmarkSQLiteListPage(b *testing.B) {
	logrus.SetLevel(logrus.WarnLevel)
	ctx, backend, dialect := sqliteBackend(b)
	require.NoError(b, backend.Start(ctx))
	_, err := dialect.g.DB.ExecContext(ctx, `
		WITH RECURSIVE c(x) AS (SELECT 0 UNION ALL SELECT x+1 FROM c WHERE x < 99999)
		INSERT INTO kine(name, created, deleted, create_revision, prev_revision, lease, value)
		SELECT printf('/registry/core/configmaps/mailbox-%05d/fan/obj-%03d', x / 100, x % 100), 1, 0, 0, 0, 0, randomblob(1000) FROM c`)
	require.NoError(b, err)
	_, err = dialect.g.DB.ExecContext(ctx, `
		INSERT INTO kine(name, created, deleted, create_revision, prev_revision, lease, value)
		SELECT name, 0, 0, id, id, 0, randomblob(1000) FROM kine WHERE id % 10 = 0 AND name LIKE '/registry/%'`)
	require.NoError(b, err)
	start, end := "/registry/core/configmaps/mailbox-00500/", "/registry/core/configmaps0"
	for _, tc := range []struct {
		name string
		list func() (*sql.Rows, error)
	}{
		{"kine", func() (*sql.Rows, error) { return dialect.g.List(ctx, start, end, 501, 1<<40, false, false) }},
		{"page", func() (*sql.Rows, error) { return dialect.List(ctx, start, end, 501, 1<<40, false, false) }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				rows, err := tc.list()
				require.NoError(b, err)
				n := 0
				for rows.Next() {
					n++
				}
				require.NoError(b, rows.Close())
				require.Equal(b, 501, n)
			}
		})
	}
}
