// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/apis/example"
	examplev1 "k8s.io/apiserver/pkg/apis/example/v1"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"

	"github.com/kubestellar/kubestellar/test/harness/databases"
)

// exampleScheme holds the example Pods of kube-apiserver's storage tests.
var exampleScheme = func() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	metav1.AddToGroupVersion(s, metav1.SchemeGroupVersion)
	utilruntime.Must(example.AddToScheme(s))
	utilruntime.Must(examplev1.AddToScheme(s))
	return s
}()

// podStore is the storage of example Pods on a fresh SQLite datastore, as
// rawStorage makes it, with its datastore.
// It keeps one revision when compacted, so that a test's compaction reaches
// its last writes.
func podStore(t *testing.T) (context.Context, apiserverstorage.Interface, *Datastore) {
	t.Helper()
	return podStoreOn(t, "")
}

// podStoreOn is podStore on a kine endpoint ("": SQLite).
func podStoreOn(t *testing.T, endpoint string) (context.Context, apiserverstorage.Interface, *Datastore) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	ds, err := Start(ctx, Config{Endpoint: endpoint, DataDir: t.TempDir(), CompactMinRetain: 1})
	require.NoError(t, err)
	t.Cleanup(ds.Stop)
	require.NoError(t, ds.WaitReady(ctx, ""))
	codec := apitesting.TestCodec(serializer.NewCodecFactory(exampleScheme), examplev1.SchemeGroupVersion)
	cfg := storagebackend.NewDefaultConfig(KeyPrefix, codec)
	cfg.Transport = ds.Transport()
	cfg.CompactionInterval = 0
	store, destroy, err := ds.rawStorage(cfg.ForResource(schema.GroupResource{Resource: "pods"}),
		func() k8sruntime.Object { return &example.Pod{} }, func() k8sruntime.Object { return &example.PodList{} }, "/pods")
	require.NoError(t, err)
	t.Cleanup(destroy)
	return ctx, store, ds
}

// The watches served from the demultiplexer pass kube-apiserver's own
// conformance tests of its etcd3 storage's watches: initial events,
// resource versions, filtering, bookmarks, errors, compaction.
func TestDirectWatchesConform(t *testing.T) {
	for name, run := range watchConformance {
		t.Run(name, func(t *testing.T) {
			ctx, store, _ := podStore(t)
			run(ctx, t, store)
		})
	}
}

// On PostgreSQL too, where kine polls the database for what other
// servers wrote: each test on a database of its own.
func TestDirectWatchesConformOnPostgres(t *testing.T) {
	if testing.Short() {
		t.Skip("starts PostgreSQL")
	}
	pg := databases.StartPostgres(t)
	i := 0
	for name, run := range watchConformance {
		t.Run(name, func(t *testing.T) {
			i++
			dsn, err := pg.CreateDatabase(fmt.Sprintf("conform%d", i))
			require.NoError(t, err)
			ctx, store, _ := podStoreOn(t, dsn)
			w, err := store.Watch(ctx, "/pods/", apiserverstorage.ListOptions{ResourceVersion: "1", Recursive: true, Predicate: apiserverstorage.Everything})
			require.NoError(t, err)
			require.IsType(t, &directWatch{}, w, "served from the demultiplexer")
			w.Stop()
			run(ctx, t, store)
		})
	}
}

// watchConformance are kube-apiserver's tests of its etcd3 watches that
// the direct watches pass.
var watchConformance = map[string]func(context.Context, *testing.T, apiserverstorage.Interface){
	"Watch":                   storagetesting.RunTestWatch,
	"ClusterScopedWatch":      storagetesting.RunTestClusterScopedWatch,
	"NamespaceScopedWatch":    storagetesting.RunTestNamespaceScopedWatch,
	"DeleteTriggerWatch":      storagetesting.RunTestDeleteTriggerWatch,
	"WatchFromNonZero":        storagetesting.RunTestWatchFromNonZero,
	"DelayedWatchDelivery":    storagetesting.RunTestDelayedWatchDelivery,
	"WatchContextCancel":      storagetesting.RunTestWatchContextCancel,
	"WatcherTimeout":          storagetesting.RunTestWatcherTimeout,
	"DeleteEventHasLatestRV":  storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV,
	"InitializationSignal":    storagetesting.RunTestWatchInitializationSignal,
	"InitialEventsCompatible": storagetesting.RunSendInitialEventsBackwardCompatibility,
	"WatchSemantics":          storagetesting.RunWatchSemantics,
	"InitialEventsExtended":   storagetesting.RunWatchSemanticInitialEventsExtended,
	"WatchListMatchSingle":    storagetesting.RunWatchListMatchSingle,
	"NoBookmarksUnasked": func(ctx context.Context, t *testing.T, s apiserverstorage.Interface) {
		storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, false)
	},
	// Up to the compaction: kine keeps at least the last revision,
	// which the test compacts to (TestDirectWatchFromCompacted).
	"WatchFromZero": func(ctx context.Context, t *testing.T, s apiserverstorage.Interface) {
		storagetesting.RunTestWatchFromZero(ctx, t, s, nil)
	},
}

// A watch of the storage on SQLite is served from the demultiplexer, by
// one goroutine: 200 watches add fewer than 400 goroutines, where through
// the etcd client each took five.
func TestDirectWatchesTakeOneGoroutine(t *testing.T) {
	ctx, store, _ := podStore(t)
	const watches = 200
	before := runtime.NumGoroutine()
	for i := range watches {
		w, err := store.Watch(ctx, fmt.Sprintf("/pods/ns-%d/", i), apiserverstorage.ListOptions{ResourceVersion: "1", Recursive: true, Predicate: apiserverstorage.Everything})
		require.NoError(t, err)
		require.IsType(t, &directWatch{}, w, "served from the demultiplexer")
		defer w.Stop()
	}
	// Each watch has read its history by the time its first event comes.
	pod := &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns-0"}}
	require.NoError(t, store.Create(ctx, "/pods/ns-0/p", pod, nil, 0))
	added := runtime.NumGoroutine() - before
	require.Less(t, added, 2*watches, "goroutines per watch")
	t.Logf("%d watches added %d goroutines", watches, added)

	// A watch the watch cache makes (progress notifications) still goes
	// through the etcd client.
	w, err := store.Watch(ctx, "/pods/", apiserverstorage.ListOptions{ResourceVersion: "1", Recursive: true, Predicate: apiserverstorage.Everything, ProgressNotify: true})
	require.NoError(t, err)
	defer w.Stop()
	require.NotEqual(t, fmt.Sprintf("%T", &directWatch{}), fmt.Sprintf("%T", w))
	select {
	case ev := <-w.ResultChan():
		for ev.Type == watch.Bookmark {
			ev = <-w.ResultChan()
		}
		require.Equal(t, watch.Added, ev.Type)
	case <-time.After(30 * time.Second):
		t.Fatal("no event on the etcd client's watch")
	}
}

// A watch from a revision compacted away ends at once with 410 Gone
// (Expired), so that its client lists again.
func TestDirectWatchFromCompacted(t *testing.T) {
	ctx, store, ds := podStore(t)
	created := &example.Pod{}
	require.NoError(t, store.Create(ctx, "/pods/ns/p", &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}, created, 0))
	for i := range 3 {
		require.NoError(t, store.Create(ctx, fmt.Sprintf("/pods/ns/q%d", i), &example.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("q%d", i), Namespace: "ns"}}, nil, 0))
	}
	require.NoError(t, ds.Compact(ctx))

	w, err := store.Watch(ctx, "/pods/ns/", apiserverstorage.ListOptions{ResourceVersion: created.ResourceVersion, Recursive: true, Predicate: apiserverstorage.Everything})
	require.NoError(t, err)
	defer w.Stop()
	require.IsType(t, &directWatch{}, w)
	select {
	case ev, ok := <-w.ResultChan():
		require.True(t, ok, "the watch ends with an error, not silently")
		require.Equal(t, watch.Error, ev.Type, "%#v", ev.Object)
		status, ok := ev.Object.(*metav1.Status)
		require.True(t, ok)
		require.Equal(t, metav1.StatusReasonExpired, status.Reason)
		require.EqualValues(t, 410, status.Code)
	case <-time.After(30 * time.Second):
		t.Fatal("no event")
	}
	_, open := <-w.ResultChan()
	require.False(t, open, "the watch ends after its error")
}

// BenchmarkStorageWatches holds N idle watches of the API server's storage
// on SQLite (one per mailbox, as a fleet's syncers hold them), served
// straight from the demultiplexer (direct) or through the etcd client
// (etcd-client, as before directWatches), and times a create's arrival at
// one more watch. It reports what each idle watch costs: goroutines, and
// bytes of heap and stack.
//
//	go test -run '^$' -bench StorageWatches -benchtime 200x ./server/storage
func BenchmarkStorageWatches(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, direct := range []bool{false, true} {
			name := "etcd-client"
			if direct {
				name = "direct"
			}
			b.Run(fmt.Sprintf("watches=%d/%s", n, name), func(b *testing.B) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				ds, err := Start(ctx, Config{DataDir: b.TempDir()})
				require.NoError(b, err)
				defer ds.Stop()
				require.NoError(b, ds.WaitReady(ctx, ""))
				if !direct {
					ds.demux = nil // rawStorage then leaves every watch to the etcd client
				}
				store := configMapStorageB(b, ds)
				created := &corev1.ConfigMap{}
				require.NoError(b, store.Create(ctx, "/core/configmaps/wds/default/first", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "default"}}, created, 0))

				before, goroutines := heapAndStacks(), runtime.NumGoroutine()
				var watches []watch.Interface
				for i := range n {
					w, err := store.Watch(ctx, fmt.Sprintf("/core/configmaps/mailbox-%05d/", i),
						apiserverstorage.ListOptions{ResourceVersion: created.ResourceVersion, Recursive: true, Predicate: apiserverstorage.Everything})
					require.NoError(b, err)
					watches = append(watches, w)
				}
				target, err := store.Watch(ctx, "/core/configmaps/wds/", apiserverstorage.ListOptions{ResourceVersion: created.ResourceVersion, Recursive: true, Predicate: apiserverstorage.Everything})
				require.NoError(b, err)
				// Every watch has started once the target sees a create.
				require.NoError(b, store.Create(ctx, "/core/configmaps/wds/default/second", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: "default"}}, nil, 0))
				<-target.ResultChan()
				perWatch := float64(runtime.NumGoroutine()-goroutines) / float64(n)
				bytesPerWatch := float64(heapAndStacks()-before) / float64(n)

				b.ResetTimer()
				for i := range b.N {
					name := fmt.Sprintf("cm-%d", i)
					if err := store.Create(ctx, "/core/configmaps/wds/default/"+name, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, nil, 0); err != nil {
						b.Fatal(err)
					}
					for ev := range target.ResultChan() {
						if cm, ok := ev.Object.(*corev1.ConfigMap); ok && cm.Name == name {
							break
						}
					}
				}
				b.StopTimer()
				// After the loop: ResetTimer drops the metrics reported
				// before it.
				b.ReportMetric(perWatch, "goroutines/watch")
				b.ReportMetric(bytesPerWatch, "B/watch")
				target.Stop()
				for _, w := range watches {
					w.Stop()
				}
			})
		}
	}
}

// heapAndStacks is the heap in use and the goroutines' stacks, after a
// collection.
func heapAndStacks() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// configMapStorageB is configMapStorage for a benchmark.
func configMapStorageB(b *testing.B, ds *Datastore) apiserverstorage.Interface {
	b.Helper()
	store, destroy, err := ds.rawStorage(configMapConfig(ds), func() k8sruntime.Object { return &corev1.ConfigMap{} },
		func() k8sruntime.Object { return &corev1.ConfigMapList{} }, "/core/configmaps")
	require.NoError(b, err)
	b.Cleanup(destroy)
	return store
}
