// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/k3s-io/kine/pkg/drivers"
	"github.com/k3s-io/kine/pkg/server"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/kubernetes/scheme"
)

// The API server's storage reaches kine in-process: creates, gets and
// watches work with kine's socket gone, the storage is known to answer
// watch progress requests (which the watch cache's consistent reads
// need), and a progress request reaches a watch.
func TestStorageReachesKineInProcess(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	ds := startSQLiteIn(ctx, t, dir)
	require.NotNil(t, ds.local, "kine on SQLite is reached in-process")
	store := configMapStorage(t, ds)

	// No socket: whatever works now does not go through it.
	require.NoError(t, os.Remove(filepath.Join(dir, "kine.sock")))

	key := "/core/configmaps/default/one"
	created := &corev1.ConfigMap{}
	require.NoError(t, store.Create(ctx, key, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "one", Namespace: "default"}, Data: map[string]string{"a": "1"}}, created, 0))
	got := &corev1.ConfigMap{}
	require.NoError(t, store.Get(ctx, key, apiserverstorage.GetOptions{}, got))
	require.Equal(t, map[string]string{"a": "1"}, got.Data)

	pred := apiserverstorage.Everything
	pred.AllowWatchBookmarks = true
	w, err := store.Watch(ctx, "/core/configmaps/default/", apiserverstorage.ListOptions{
		ResourceVersion: created.ResourceVersion, Recursive: true, Predicate: pred, ProgressNotify: true})
	require.NoError(t, err)
	defer w.Stop()
	require.NoError(t, store.Create(ctx, "/core/configmaps/default/two", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "two", Namespace: "default"}}, nil, 0))
	// The watch asked for progress notifications: a bookmark may come
	// first (kine reports progress on its own, and the storage's check of
	// the feature sends a request), and says nothing about the create.
	for added := false; !added; {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				continue
			}
			require.Equal(t, watch.Added, ev.Type, "%+v", ev.Object)
			require.Equal(t, "two", ev.Object.(*corev1.ConfigMap).Name, "the watch from the first create's revision sees the second")
			added = true
		case <-ctx.Done():
			t.Fatal("no watch event")
		}
	}

	require.Eventually(t, func() bool {
		return etcdfeature.DefaultFeatureSupportChecker.Supports(apiserverstorage.RequestWatchProgress)
	},
		10*time.Second, 10*time.Millisecond, "the in-process client is checked for watch progress requests")
	require.NoError(t, store.RequestWatchProgress(ctx))
	for {
		select {
		case ev := <-w.ResultChan():
			if ev.Type == watch.Bookmark {
				return
			}
		case <-ctx.Done():
			t.Fatal("the progress request reached no watch")
		}
	}
}

// Watches started and stopped on the in-process client while events flow
// never wedge its stream: the etcd client sends a request (a create, a
// cancel) from the goroutine that also takes responses in, and kine
// answers a request before it reads the next, so with nothing between
// them each would wait for the other.
func TestInProcessWatchesNeverWedge(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())

	writeCtx, stopWriting := context.WithCancel(ctx)
	defer stopWriting()
	go func() {
		for i := 0; writeCtx.Err() == nil; i++ {
			_, _ = ds.local.Put(writeCtx, fmt.Sprintf("/wedge/key-%d", i%50), strconv.Itoa(i))
		}
	}()
	const watchers, rounds = 32, 40
	var wg sync.WaitGroup
	var done atomic.Int64
	for range watchers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				wctx, stop := context.WithCancel(ctx)
				ch := ds.local.Watch(wctx, "/wedge/", clientv3.WithPrefix(), clientv3.WithProgressNotify())
				select {
				case <-ch:
				case <-ctx.Done():
				}
				stop()
				done.Add(1)
			}
		}()
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(60 * time.Second):
		t.Fatalf("the in-process watch stream wedged: %d of %d watches started and stopped in a minute", done.Load(), watchers*rounds)
	}
}

// startSQLiteIn starts kine over SQLite in dir, ready, and stops it when
// the test ends.
func startSQLiteIn(ctx context.Context, t *testing.T, dir string) *Datastore {
	t.Helper()
	ds, err := Start(ctx, Config{DataDir: dir})
	require.NoError(t, err)
	t.Cleanup(ds.Stop)
	require.NoError(t, ds.WaitReady(ctx, ""))
	return ds
}

// configMapConfig is the storage configuration of ConfigMaps on ds, as
// RESTOptionsGetter makes it.
func configMapConfig(ds *Datastore) *storagebackend.ConfigForResource {
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	codec := codecs.CodecForVersions(codecs.LegacyCodec(corev1.SchemeGroupVersion), codecs.UniversalDeserializer(), corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)
	cfg := storagebackend.NewDefaultConfig(KeyPrefix, codec)
	cfg.Transport = ds.Transport()
	if ds.Compacts() {
		cfg.CompactionInterval = 0
	}
	return cfg.ForResource(corev1.Resource("configmaps"))
}

// configMapStorage is the API server's storage of ConfigMaps on ds, under
// resource prefix /core/configmaps, destroyed when the test ends.
func configMapStorage(t *testing.T, ds *Datastore) apiserverstorage.Interface {
	t.Helper()
	cfg := configMapConfig(ds)
	store, destroy, err := ds.rawStorage(cfg, func() runtime.Object { return &corev1.ConfigMap{} },
		func() runtime.Object { return &corev1.ConfigMapList{} }, "/core/configmaps")
	require.NoError(t, err)
	t.Cleanup(destroy)
	return store
}

// TestSQLiteWritesTakeTurns: kine's SQLite backend serializes its writes
// in the process (newSQLiteBackend), and concurrent creates and updates,
// from more writers than SQLite has locks for, all land, each once.
func TestSQLiteWritesTakeTurns(t *testing.T) {
	ctx, backend, dialect := sqliteBackend(t)
	require.True(t, dialect.g.LockWrites, "writes take turns in the process")
	require.NoError(t, backend.Start(ctx))

	const writers, each = 16, 25
	var failed atomic.Value
	var writing sync.WaitGroup
	for w := range writers {
		writing.Go(func() {
			for i := range each {
				key := fmt.Sprintf("/registry/test/w%02d-%02d", w, i)
				rev, err := backend.Create(ctx, key, []byte("v1"), 0)
				if err == nil {
					_, _, _, err = backend.Update(ctx, key, []byte("v2"), rev, 0)
				}
				if err != nil {
					failed.Store(fmt.Errorf("%s: %w", key, err))
					return
				}
			}
		})
	}
	writing.Wait()
	if err, _ := failed.Load().(error); err != nil {
		t.Fatal(err)
	}
	_, kvs, err := backend.List(ctx, "/registry/test/", "/registry/test0", 0, 0, false)
	require.NoError(t, err)
	require.Len(t, kvs, writers*each)
	for _, kv := range kvs {
		require.Equal(t, "v2", string(kv.Value), kv.Key)
	}
}

// sqliteBackend is kine's SQLite backend as the server builds it
// (newSQLiteBackend), on a fresh data directory, not yet started, and the
// context it lives in: both end with the test, within two minutes.
func sqliteBackend(tb testing.TB) (context.Context, server.Backend, *sqliteDialect) {
	ctx, backend, inserts, stop := sqliteBackendIn(tb, tb.TempDir())
	tb.Cleanup(stop)
	return ctx, backend, inserts
}

// sqliteBackendIn is sqliteBackend on the data directory dir, and the
// function that stops it (once it returns, the database is closed).
func sqliteBackendIn(tb testing.TB, dir string) (context.Context, server.Backend, *sqliteDialect, func()) {
	b := sqliteParts(tb, dir)
	return b.ctx, b.backend, b.dialect, b.stop
}

// sqliteBackendParts is kine's SQLite backend as the server builds it
// (newSQLiteBackend), not yet started, with the parts behind it.
type sqliteBackendParts struct {
	ctx     context.Context
	backend server.Backend
	dialect *sqliteDialect
	demux   *demuxLog
	// stop stops the backend; once it returns, the database is closed.
	stop func()
}

func sqliteParts(tb testing.TB, dir string) sqliteBackendParts {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	wg := &sync.WaitGroup{}
	stop := func() {
		cancel()
		wg.Wait()
	}
	require.NoError(tb, os.MkdirAll(filepath.Join(dir, "db"), 0o700))
	endpoint := DefaultEndpoint(dir)
	require.NoError(tb, prepareSQLite(ctx, sqlitePath(endpoint)))
	backend, dialect, demux, err := newSQLiteBackend(ctx, wg, &drivers.Config{Endpoint: endpoint, PollBatchSize: 500, CompactBatchSize: 1000, PollInterval: time.Second,
		CompactTimeout: 5 * time.Second})
	if err != nil {
		stop()
	}
	require.NoError(tb, err)
	return sqliteBackendParts{ctx: ctx, backend: backend, dialect: dialect, demux: demux, stop: stop}
}
