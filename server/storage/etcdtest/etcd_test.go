// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package etcdtest tests the API server's storage on an etcd cluster
// started by the test harness. It is a package of its own: the harness
// imports the server, and so the storage package, whose own tests would
// otherwise build (and fail with) the whole server.
package etcdtest

import (
	"context"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	genericfeatures "k8s.io/apiserver/pkg/features"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	etcdfeature "k8s.io/apiserver/pkg/storage/feature"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
	"github.com/kubestellar/kubestellar/test/harness"
)

// startEtcdDatastore is the datastore of the server started with
// --datastore-endpoint e (and its TLS files), stopped when the test ends.
func startEtcdDatastore(ctx context.Context, t *testing.T, e *harness.Etcd) *storage.Datastore {
	t.Helper()
	ds, err := storage.Start(ctx, storage.Config{Endpoint: e.Endpoint, CAFile: e.CAFile, CertFile: e.CertFile, KeyFile: e.KeyFile, DataDir: t.TempDir()})
	require.NoError(t, err)
	t.Cleanup(ds.Stop)
	require.NoError(t, ds.WaitReady(ctx, e.Endpoint))
	return ds
}

// configMapStorage is the API server's storage of ConfigMaps on ds, built
// as the server builds a resource's (storage.RESTOptionsGetter), without
// spaces or a watch cache in front, compacting etcd every interval unless
// it is zero (then as the server does), destroyed when the test ends.
func configMapStorage(t *testing.T, ds *storage.Datastore, interval time.Duration) apiserverstorage.Interface {
	t.Helper()
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	codec := codecs.CodecForVersions(codecs.LegacyCodec(corev1.SchemeGroupVersion), codecs.UniversalDeserializer(), corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)
	getter := storage.RESTOptionsGetter{Datastore: ds, Codec: func(schema.GroupResource) (runtime.Codec, error) { return codec, nil }}
	opts, err := getter.GetRESTOptions(corev1.Resource("configmaps"), nil)
	require.NoError(t, err)
	if interval != 0 {
		opts.StorageConfig.CompactionInterval = interval
	}
	prefix := opts.ResourcePrefix
	s, destroy, err := opts.Decorator(opts.StorageConfig, prefix, func(obj runtime.Object) (string, error) { return apiserverstorage.NamespaceKeyFunc(prefix, obj) },
		func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} },
		apiserverstorage.DefaultNamespaceScopedAttr, nil, nil)
	require.NoError(t, err)
	t.Cleanup(destroy)
	return s
}

// rangeReads decides how the API server's storage reads a range: as one of
// etcd 3.7's range streams, or a page at a time. The storage asks the
// process's feature support checker, which a test before may have told
// that streams are not implemented (kine in-process answers so), for ten
// minutes.
type rangeReads struct {
	etcdfeature.FeatureSupportChecker
	streams bool
	// unimplemented is set when the storage found streams not implemented
	// and read pages instead.
	unimplemented atomic.Bool
}

func (r *rangeReads) Supports(feature apiserverstorage.Feature) bool {
	if feature == apiserverstorage.RangeStream {
		return r.streams
	}
	return r.FeatureSupportChecker.Supports(feature)
}

func (r *rangeReads) MarkUnsupported(feature apiserverstorage.Feature) {
	if feature == apiserverstorage.RangeStream {
		r.unimplemented.Store(true)
		return
	}
	r.FeatureSupportChecker.MarkUnsupported(feature)
}

// readRanges makes the storage read ranges as streams or as pages until the
// test ends.
func readRanges(t *testing.T, streams bool) *rangeReads {
	t.Helper()
	if streams {
		require.True(t, utilfeature.DefaultFeatureGate.Enabled(genericfeatures.EtcdRangeStream), "the storage reads ranges as streams only with EtcdRangeStream on")
	}
	previous := etcdfeature.DefaultFeatureSupportChecker
	r := &rangeReads{FeatureSupportChecker: previous, streams: streams}
	etcdfeature.DefaultFeatureSupportChecker = r
	t.Cleanup(func() { etcdfeature.DefaultFeatureSupportChecker = previous })
	return r
}

// On an etcd cluster, as on kine in-process (see storage's
// TestCacheSourceNeverDecodesMailboxes), a list or watch of a whole
// resource that keeps some spaces (spaces.WithKeptSpaces) gets their
// objects alone and decodes nothing of the others: the space left out
// holds a value that no codec reads (a list or watch that decoded it would
// fail), beside an object that would be read. Ranges are read both ways
// the storage reads them from etcd 3.7: as streams and as pages.
func TestEtcdKeptSpacesNeverDecodesOthers(t *testing.T) {
	e := harness.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ds := startEtcdDatastore(ctx, t, e)
	store := configMapStorage(t, ds, 0)
	cli, err := ds.Client(ctx, 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()

	const resource = "/core/configmaps"
	create := func(space, name string) {
		t.Helper()
		require.NoError(t, store.Create(ctx, resource+"/"+space+"/default/"+name, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, nil, 0))
	}
	// unreadable writes, in the space left out, a value no codec reads,
	// and returns its revision.
	unreadable := func(name string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, storage.KeyPrefix+resource+"/other/default/"+name, "not an object any codec reads")
		require.NoError(t, err)
		return resp.Header.Revision
	}
	create("wds1", "first")
	create("other", "readable")
	unreadable("unreadable")
	create("wds1", "second")
	kept := []string{"first", "second"}
	keep := spaces.WithKeptSpaces(ctx, func(space string) bool { return space == "wds1" })
	everything := apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}

	// list returns the names a kept-spaces list returns, read limit at a
	// time (all at once when zero).
	list := func(t *testing.T, limit int64) []string {
		t.Helper()
		var names []string
		opts := everything
		opts.Predicate.Limit = limit
		for pages := 0; ; pages++ {
			require.Less(t, pages, 100, "the list never ends")
			l := &corev1.ConfigMapList{}
			require.NoError(t, store.GetList(keep, resource, opts, l), "the list decoded the value no codec reads")
			for _, cm := range l.Items {
				names = append(names, cm.Name)
			}
			if l.Continue == "" {
				return names
			}
			opts.Predicate.Continue = l.Continue
		}
	}

	for _, streams := range []bool{true, false} {
		mode := map[bool]string{true: "streams", false: "pages"}[streams]
		t.Run(mode, func(t *testing.T) {
			reads := readRanges(t, streams)
			require.Error(t, store.GetList(ctx, resource, everything, &corev1.ConfigMapList{}), "a list of every space decodes the value no codec reads")
			require.Equal(t, kept, list(t, 0))
			require.Equal(t, kept, list(t, 1))

			pred := apiserverstorage.Everything
			pred.AllowWatchBookmarks = true
			fromNow := apiserverstorage.ListOptions{ResourceVersion: "0", Recursive: true, Predicate: pred}
			whole, err := store.Watch(ctx, resource, fromNow)
			require.NoError(t, err)
			defer whole.Stop()
			failed := false
			for ev := range whole.ResultChan() {
				if failed = ev.Type == watch.Error; failed {
					break
				}
			}
			require.True(t, failed, "a watch of every space decodes the value no codec reads")

			// A watch that starts with the objects there are (as the watch
			// cache's reflector lists), then the events after them.
			w, err := store.Watch(keep, resource, fromNow)
			require.NoError(t, err)
			defer w.Stop()
			next := func() watch.Event {
				t.Helper()
				select {
				case ev, ok := <-w.ResultChan():
					require.True(t, ok, "the watch ended")
					require.NotEqual(t, watch.Error, ev.Type, "the watch decoded the value no codec reads: %+v", ev.Object)
					return ev
				case <-ctx.Done():
					t.Fatal("the watch went quiet")
					return watch.Event{}
				}
			}
			var initial []string
			for len(initial) < len(kept) {
				ev := next()
				require.Equal(t, watch.Added, ev.Type, "%+v", ev.Object)
				initial = append(initial, ev.Object.(*corev1.ConfigMap).Name)
			}
			require.Equal(t, kept, initial)

			third := "third-" + mode
			unreadable("unreadable-" + mode)
			create("wds1", third)
			last := unreadable("unreadable-last-" + mode)
			var events []string
			for {
				ev := next()
				obj, err := meta.Accessor(ev.Object)
				require.NoError(t, err)
				if ev.Type == watch.Bookmark {
					if obj.GetResourceVersion() == strconv.FormatInt(last, 10) {
						break // the left-out write that ends the batch
					}
					continue
				}
				events = append(events, string(ev.Type)+" "+obj.GetName())
			}
			require.Equal(t, []string{"ADDED " + third}, events)
			kept = append(kept, third)
			sort.Strings(kept)
			require.False(t, reads.unimplemented.Load(), "etcd answered that range streams are not implemented")
		})
	}
}

// On an etcd cluster the API server compacts etcd's history, as
// kube-apiserver does (kine compacts its own): the storages on one client
// share its compactor, which runs as often as the shortest interval asked
// for, and each sees what it compacted.
func TestEtcdCompacted(t *testing.T) {
	e := harness.StartEtcd(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	ds := startEtcdDatastore(ctx, t, e)
	slow := configMapStorage(t, ds, time.Hour)
	fast := configMapStorage(t, ds, 100*time.Millisecond)
	require.NoError(t, fast.Create(ctx, "/core/configmaps/wds1/default/a", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "default"}}, nil, 0))
	require.Eventually(t, func() bool { return slow.CompactRevision() > 0 }, 30*time.Second, 50*time.Millisecond,
		"the compactor of the shortest interval compacts, for every storage on the client")
	cli, err := ds.Client(ctx, 5*time.Second)
	require.NoError(t, err)
	defer cli.Close()
	_, err = cli.Get(ctx, "/registry/core/configmaps/wds1/default/a", clientv3.WithRev(1))
	require.ErrorIs(t, err, rpctypes.ErrCompacted, "etcd's history is compacted")
}
