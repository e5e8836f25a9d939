// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/endpoint"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestSQLitePath(t *testing.T) {
	tests := []struct{ endpoint, want string }{
		{DefaultEndpoint("/data"), "/data/db/state.db"},
		{"sqlite://rel/state.db", "rel/state.db"},
		{"sqlite://file:/x/state.db?cache=shared", ""},
		{"sqlite://:memory:", ""},
		{"sqlite://", ""},
		{"postgres://u:p@h/db", ""},
		{"litestream:///data/state.db", ""},
	}
	for _, tc := range tests {
		require.Equal(t, tc.want, sqlitePath(tc.endpoint), tc.endpoint)
	}
}

// startSQLite starts the default datastore in a fresh directory.
func startSQLite(t *testing.T, ctx context.Context) (*Datastore, *clientv3.Client) {
	t.Helper()
	ds := startSQLiteIn(ctx, t, t.TempDir())
	cli, err := ds.Client(ctx, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { cli.Close() })
	return ds, cli
}

// churn writes n keys of size bytes under prefix, with 8 writers, and
// deletes them again when del is set.
func churn(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string, n, size int, del bool) {
	t.Helper()
	value := strings.Repeat("x", size)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += 8 {
				// Creates and deletes as the API server writes them.
				key := fmt.Sprintf("%s/%06d", prefix, i)
				resp, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).
					Then(clientv3.OpPut(key, value)).Commit()
				if err == nil && !resp.Succeeded {
					err = fmt.Errorf("%s exists", key)
				}
				if err == nil && del {
					resp, err = cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", resp.Header.Revision)).
						Then(clientv3.OpDelete(key)).Else(clientv3.OpGet(key)).Commit()
					if err == nil && !resp.Succeeded {
						err = fmt.Errorf("%s changed before its deletion", key)
					}
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

// TestWALTruncatedWhenOverLimit: while a reader holds an old snapshot,
// SQLite's own checkpoints cannot restart the log, which grows past the
// limit; once the reader is gone, the maintainer's check truncates it.
func TestWALTruncatedWhenOverLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	const limit = 4 << 20
	ds.maintainer.walLimit = limit

	reader, err := openSQLite(ds.maintainer.file.path)
	require.NoError(t, err)
	defer reader.Close()
	tx, err := reader.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	require.NoError(t, err)
	var rows int
	require.NoError(t, tx.QueryRowContext(ctx, "SELECT count(*) FROM kine").Scan(&rows))

	churn(t, ctx, cli, "/churn", 600, 8<<10, true)
	grown, err := ds.FileSizes()
	require.NoError(t, err)
	require.Greater(t, grown.WAL, int64(limit), "the log did not grow past the limit while a reader held a snapshot: the test proves nothing")

	// The check leaves the log alone while the reader is there...
	require.NoError(t, ds.maintainer.checkWAL(ctx))
	require.NoError(t, tx.Rollback())
	// ...and truncates it once the reader has gone.
	require.NoError(t, ds.maintainer.checkWAL(ctx))
	after, err := ds.FileSizes()
	require.NoError(t, err)
	require.LessOrEqual(t, after.WAL, int64(limit), "the log is still %d bytes (was %d)", after.WAL, grown.WAL)

	// Writes go on after the truncation.
	churn(t, ctx, cli, "/after", 10, 100, false)
	resp, err := cli.Get(ctx, "/after/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.EqualValues(t, 10, resp.Count)
}

// TestCompactReclaimsSpace: compaction drops the history, and the pages it
// frees go back to the file system; the log is truncated.
func TestCompactReclaimsSpace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)

	churn(t, ctx, cli, "/churn", 1500, 8<<10, true)
	// Keep DefaultCompactMinRetain revisions of small keys on top, so that
	// compaction may drop every big one.
	churn(t, ctx, cli, "/small", DefaultCompactMinRetain+10, 10, false)
	before, err := ds.FileSizes()
	require.NoError(t, err)
	require.Greater(t, before.DB+before.WAL, int64(12<<20), "the churn wrote too little to measure anything")

	first, err := cli.Get(ctx, "/small/000000")
	require.NoError(t, err)
	require.NoError(t, ds.Compact(ctx))
	_, err = cli.Get(ctx, "/churn/000000", clientv3.WithRev(first.Kvs[0].ModRevision-100))
	require.ErrorIs(t, err, rpctypes.ErrCompacted, "history before the last %d revisions is still there", DefaultCompactMinRetain)
	// The watch caches learn the compaction where kube-apiserver's
	// compactor records it, once per round.
	requirePublished(t, ctx, cli, first.Header.Revision-DefaultCompactMinRetain)
	churn(t, ctx, cli, "/more", 20, 10, false)
	current, err := cli.Get(ctx, "/more/000000")
	require.NoError(t, err)
	require.NoError(t, ds.Compact(ctx))
	requirePublished(t, ctx, cli, current.Header.Revision-DefaultCompactMinRetain)

	after, err := ds.FileSizes()
	require.NoError(t, err)
	t.Logf("before compaction: db %d, wal %d; after: db %d, wal %d", before.DB, before.WAL, after.DB, after.WAL)
	require.Less(t, after.DB, int64(4<<20), "compaction left the database at %d bytes", after.DB)
	require.Zero(t, after.WAL)
}

// TestCompactCatchesUpWithKine: compaction to the database's revision
// succeeds, and is published exactly, while kine's in-memory revision lags
// the database's (concurrent writes leave it behind), and with the probe
// key written by an earlier round (a plain put of it then writes nothing).
func TestCompactCatchesUpWithKine(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds, cli := startSQLite(t, ctx)
	_, err := cli.Put(ctx, revisionProbeKey, "an earlier round")
	require.NoError(t, err)
	churn(t, ctx, cli, "/first", DefaultCompactMinRetain+100, 10, false)
	// kine's revision lags when a write's compare-and-swap of it loses to
	// another's; a few rounds of concurrent writes make that all but
	// certain, and the test checks the outcome either way.
	lagging := false
	for round := 0; round < 30 && !lagging; round++ {
		churn(t, ctx, cli, fmt.Sprintf("/lag%02d", round), 64, 10, false)
		inMemory, err := cli.Get(ctx, "/no-such-key")
		require.NoError(t, err)
		inSQL, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		require.NoError(t, err)
		lagging = inMemory.Header.Revision < inSQL.Header.Revision
	}
	t.Logf("kine's in-memory revision lagging the database's: %v", lagging)
	current, err := cli.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	began := time.Now()
	require.NoError(t, ds.Compact(ctx))
	t.Logf("compacted in %s", time.Since(began))
	requirePublished(t, ctx, cli, current.Header.Revision-DefaultCompactMinRetain)
}

// requirePublished checks the compacted revision recorded for the watch
// caches: at least want, and, with no other writer, exactly the revision
// the datastore compacted to (served, unlike the one before it).
func requirePublished(t *testing.T, ctx context.Context, cli *clientv3.Client, want int64) {
	t.Helper()
	got, err := cli.Get(ctx, compactRevKey)
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1, "no compaction recorded in %s", compactRevKey)
	published, err := strconv.ParseInt(string(got.Kvs[0].Value), 10, 64)
	require.NoError(t, err)
	require.GreaterOrEqual(t, published, want, "compaction stopped short")
	_, err = cli.Get(ctx, "/small/000000", clientv3.WithRev(published))
	require.NoError(t, err, "the recorded revision %d is compacted", published)
	_, err = cli.Get(ctx, "/small/000000", clientv3.WithRev(published-1))
	require.ErrorIs(t, err, rpctypes.ErrCompacted, "the datastore was compacted to less than the recorded revision %d", published)
}

// TestUpgradeTurnsOnIncrementalVacuum: a database made by an earlier
// version (kine's defaults: no auto-vacuum) is converted once, its data
// intact.
func TestUpgradeTurnsOnIncrementalVacuum(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "db"), 0o700))

	// The earlier version: kine on the same endpoint, nothing else.
	kineCtx, stopKine := context.WithCancel(ctx)
	wg := &sync.WaitGroup{}
	etcdCfg, err := endpoint.Listen(kineCtx, endpoint.Config{
		Listener: "unix://" + filepath.Join(dir, "kine.sock"), Endpoint: DefaultEndpoint(dir), WaitGroup: wg,
		NotifyInterval: 5 * time.Second, CompactInterval: 5 * time.Minute, CompactTimeout: 5 * time.Second,
		CompactMinRetain: 1000, CompactBatchSize: 1000, PollBatchSize: 500,
	})
	require.NoError(t, err)
	old, err := clientv3.New(clientv3.Config{Endpoints: etcdCfg.Endpoints, DialTimeout: 5 * time.Second})
	require.NoError(t, err)
	_, err = old.Put(ctx, "/kept", "from before")
	require.NoError(t, err)
	old.Close()
	stopKine()
	wg.Wait()
	// kine's startup leaves a query unread, whose statement (with mattn's
	// statement cache) keeps a read transaction open until the garbage
	// collector finalizes it; an upgrade is a new process, this test is not.
	runtime.GC()
	require.Equal(t, int64(0), autoVacuum(t, ctx, filepath.Join(dir, "db", "state.db")))

	ds, err := Start(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	defer ds.Stop()
	require.NoError(t, ds.WaitReady(ctx, ""))
	cli, err := ds.Client(ctx, 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	resp, err := cli.Get(ctx, "/kept")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	require.Equal(t, "from before", string(resp.Kvs[0].Value))
	require.Equal(t, int64(autoVacuumIncremental), autoVacuum(t, ctx, ds.maintainer.file.path))
}

func autoVacuum(t *testing.T, ctx context.Context, path string) int64 {
	t.Helper()
	f, err := openSQLite(path)
	require.NoError(t, err)
	defer f.Close()
	conn, err := f.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	mode, err := pragmaInt(ctx, conn, "auto_vacuum")
	require.NoError(t, err)
	return mode
}

// TestSQLiteFilesAreTheOwners: the database and its journals are 0600,
// made so or narrowed from a release that left them 0644.
func TestSQLiteFilesAreTheOwners(t *testing.T) {
	dir := t.TempDir()
	fresh := filepath.Join(dir, "fresh.db")
	require.NoError(t, prepareSQLite(t.Context(), fresh))
	old := filepath.Join(dir, "old.db")
	require.NoError(t, os.WriteFile(old, nil, 0o644))
	require.NoError(t, os.WriteFile(old+"-wal", nil, 0o644))
	require.NoError(t, prepareSQLite(t.Context(), old))
	for _, p := range []string{fresh, old, old + "-wal"} {
		info, err := os.Stat(p)
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), info.Mode().Perm(), p)
	}
}

// TestKineLeavesTheFileToTheMaintainer: kine neither rewrites the file at
// start (its VACUUM would empty the free list, here the space a dropped
// table left) nor checkpoints after compacting (the endpoint turns both
// off, for any sqlite:// endpoint the maintainer looks after).
func TestKineLeavesTheFileToTheMaintainer(t *testing.T) {
	require.Equal(t, "sqlite://x.db?_kine_disable_compact_wal_checkpoint=true&_kine_disable_startup_vacuum=true", maintainedByUs("sqlite://x.db"))
	require.Equal(t, "sqlite://x.db?_kine_disable_startup_vacuum=false&_kine_disable_compact_wal_checkpoint=true",
		maintainedByUs("sqlite://x.db?_kine_disable_startup_vacuum=false"))
	require.Equal(t, DefaultEndpoint("/d")+"&_kine_disable_compact_wal_checkpoint=true&_kine_disable_startup_vacuum=true", maintainedByUs(DefaultEndpoint("/d")))

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	ds, err := Start(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	require.NoError(t, ds.WaitReady(ctx, ""))
	path := ds.maintainer.file.path
	ds.Stop()
	runtime.GC() // see TestUpgradeTurnsOnIncrementalVacuum

	f, err := openSQLite(path)
	require.NoError(t, err)
	_, err = f.db.ExecContext(ctx, "CREATE TABLE filler (v BLOB)")
	require.NoError(t, err)
	for range 64 {
		_, err = f.db.ExecContext(ctx, "INSERT INTO filler VALUES (zeroblob(16384))")
		require.NoError(t, err)
	}
	_, err = f.db.ExecContext(ctx, "DROP TABLE filler")
	require.NoError(t, err)
	free := freePages(t, ctx, f)
	require.Greater(t, free, int64(64), "the dropped table's pages are free")
	require.NoError(t, f.Close())

	ds = startSQLiteIn(ctx, t, dir)
	require.Equal(t, free, freePages(t, ctx, ds.maintainer.file), "the start left the file as it was")
}

func freePages(t *testing.T, ctx context.Context, f *sqliteFile) int64 {
	t.Helper()
	conn, err := f.db.Conn(ctx)
	require.NoError(t, err)
	defer conn.Close()
	free, err := pragmaInt(ctx, conn, "freelist_count")
	require.NoError(t, err)
	return free
}
