// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/kubernetes/scheme"
)

func put(key string, rev int64) *clientv3.Event {
	return &clientv3.Event{Type: mvccpb.PUT, Kv: &mvccpb.KeyValue{Key: []byte(key), ModRevision: rev}}
}

// describe renders responses as "events|progress@rev" for comparison.
func describe(rs []clientv3.WatchResponse) string {
	var parts []string
	for _, r := range rs {
		if r.IsProgressNotify() {
			parts = append(parts, "progress@"+itoa(r.Header.Revision))
			continue
		}
		var keys []string
		for _, ev := range r.Events {
			keys = append(keys, string(ev.Kv.Key)+"@"+itoa(ev.Kv.ModRevision))
		}
		parts = append(parts, "["+strings.Join(keys, " ")+"]")
	}
	return strings.Join(parts, " ")
}

func itoa(i int64) string { return strconv.FormatInt(i, 10) }

// A watch that keeps some spaces gets their events, in order, and a
// progress notification at the revision of a left-out event that ends a
// response; responses without events pass as they are.
func TestKeptOnlyLeavesOutSpacesByKey(t *testing.T) {
	mailbox := "inv-mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab"
	keep := func(space string) bool { return !spaces.IsMailboxName(space) }
	prefix := []byte("/registry/core/configmaps/")
	header := func(rev int64) clientv3.WatchResponse {
		r := clientv3.WatchResponse{Header: &etcdserverpb.ResponseHeader{}}
		r.Header.Revision = rev
		return r
	}
	for _, tc := range []struct {
		name   string
		events []*clientv3.Event
		want   string
	}{
		{"all kept", []*clientv3.Event{put("/registry/core/configmaps/wds1/default/a", 5), put("/registry/core/configmaps/root/a", 6)},
			"[/registry/core/configmaps/wds1/default/a@5 /registry/core/configmaps/root/a@6]"},
		{"left out last", []*clientv3.Event{put("/registry/core/configmaps/wds1/default/a", 5), put("/registry/core/configmaps/"+mailbox+"/default/a", 6)},
			"[/registry/core/configmaps/wds1/default/a@5] progress@6"},
		{"left out first", []*clientv3.Event{put("/registry/core/configmaps/"+mailbox+"/default/a", 5), put("/registry/core/configmaps/wds1/default/a", 6)},
			"[/registry/core/configmaps/wds1/default/a@6]"},
		{"all left out", []*clientv3.Event{put("/registry/core/configmaps/"+mailbox+"/default/a", 5), put("/registry/core/configmaps/"+mailbox+"/default/b", 7)},
			"progress@7"},
		{"a key of another shape is kept", []*clientv3.Event{put("/registry/core/configmaps/"+mailbox, 5), put("/elsewhere/"+mailbox+"/x", 6)},
			"[/registry/core/configmaps/" + mailbox + "@5 /elsewhere/" + mailbox + "/x@6]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := header(9)
			resp.Events = tc.events
			require.Equal(t, tc.want, describe(keptOnly(resp, prefix, keep)))
		})
	}
	// Progress markers are never kept, with or without spaces to keep:
	// one that ends a response is a progress notification at its revision.
	for _, k := range []func(string) bool{keep, nil} {
		resp := header(9)
		resp.Events = []*clientv3.Event{put("/registry/core/configmaps/wds1/default/a", 5), put(progressMarkerKey, 6)}
		require.Equal(t, "[/registry/core/configmaps/wds1/default/a@5] progress@6", describe(keptOnly(resp, prefix, k)))
		resp.Events = []*clientv3.Event{put(progressMarkerKey, 6), put("/registry/core/configmaps/wds1/default/a", 7)}
		require.Equal(t, "[/registry/core/configmaps/wds1/default/a@7]", describe(keptOnly(resp, prefix, k)))
	}
	created := header(3)
	created.Created = true
	require.Equal(t, []clientv3.WatchResponse{created}, keptOnly(created, prefix, keep), "a watch's creation passes")
	progress := header(4)
	require.Equal(t, []clientv3.WatchResponse{progress}, keptOnly(progress, prefix, keep), "a progress notification passes")
}

// The watch cache's source, on the in-process datastore, never decodes a
// mailbox's object: a value in a mailbox that no codec could read (were it
// decoded, the watch would end in an error) reaches the cache as a bookmark
// at its revision, between the decoded objects of other spaces, and the
// source knows it has left something out.
func TestCacheSourceNeverDecodesMailboxes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())
	store := configMapStorage(t, ds)
	source := spaces.CacheSource(store, func() runtime.Object { return &corev1.ConfigMap{} }).ByKey("/core/configmaps")

	first := &corev1.ConfigMap{}
	require.NoError(t, store.Create(ctx, "/core/configmaps/wds1/default/first", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first", Namespace: "default"}}, first, 0))
	pred := apiserverstorage.Everything
	pred.AllowWatchBookmarks = true
	w, err := source.Watch(ctx, "/core/configmaps", apiserverstorage.ListOptions{ResourceVersion: first.ResourceVersion, Recursive: true, Predicate: pred})
	require.NoError(t, err)
	defer w.Stop()

	mailbox := "inv-mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab"
	put, err := ds.local.Put(ctx, KeyPrefix+"/core/configmaps/"+mailbox+"/default/copy", "not an object any codec reads")
	require.NoError(t, err)
	require.NoError(t, store.Create(ctx, "/core/configmaps/wds1/default/second", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second", Namespace: "default"}}, nil, 0))
	require.NoError(t, store.Create(ctx, "/core/configmaps/"+mailbox+"/default/third", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "third", Namespace: "default"}}, nil, 0))
	last, err := ds.local.Get(ctx, KeyPrefix+"/core/configmaps/"+mailbox+"/default/third")
	require.NoError(t, err)

	var seen []string
	for {
		var ev watch.Event
		select {
		case ev = <-w.ResultChan():
		case <-ctx.Done():
			t.Fatalf("no bookmark at the last mailbox write's revision; seen: %v", seen)
		}
		require.NotEqual(t, watch.Error, ev.Type, "the watch decoded a mailbox's value: %+v", ev.Object)
		obj, err := meta.Accessor(ev.Object)
		require.NoError(t, err)
		switch ev.Type {
		case watch.Bookmark:
			seen = append(seen, "bookmark@"+obj.GetResourceVersion())
		default:
			seen = append(seen, string(ev.Type)+" "+obj.GetName()+"@"+obj.GetResourceVersion())
		}
		if ev.Type == watch.Bookmark && obj.GetResourceVersion() == itoa(last.Kvs[0].ModRevision) {
			break
		}
	}
	require.Contains(t, seen, "ADDED second@"+itoa(put.Header.Revision+1), "the other space's object arrives, decoded")
	for _, s := range seen {
		require.NotContains(t, s, "third", "the mailbox's object never arrives")
	}
	require.False(t, source.Whole(), "the source knows it left a mailbox's objects out")

	// The cache's list, a page at a time, as its reflector lists.
	var names []string
	opts := apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}
	opts.Predicate.Limit = 1
	for {
		list := &corev1.ConfigMapList{}
		require.NoError(t, source.GetList(ctx, "/core/configmaps", opts, list), "the list decoded a mailbox's value")
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		if list.Continue == "" {
			break
		}
		opts.Predicate.Continue = list.Continue
	}
	require.Equal(t, []string{"first", "second"}, names)

	// A tenant's namespace may be named like a mailbox: a list or watch of
	// one space (as the cache's delegator passes on) is not narrowed by
	// key, whose first segment is then the namespace.
	lookalike := "mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab"
	inWDS := &corev1.ConfigMap{}
	require.NoError(t, store.Create(ctx, "/core/configmaps/wds1/"+lookalike+"/cm", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: lookalike,
		Annotations: map[string]string{spaces.Annotation: "wds1"}}}, inWDS, 0))
	list := &corev1.ConfigMapList{}
	require.NoError(t, source.GetList(ctx, "/core/configmaps/wds1", apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}, list))
	require.Len(t, list.Items, 3, "a space's list has its namespace named like a mailbox")
	rv, err := strconv.ParseInt(inWDS.ResourceVersion, 10, 64)
	require.NoError(t, err)
	w2, err := source.Watch(ctx, "/core/configmaps/wds1", apiserverstorage.ListOptions{ResourceVersion: itoa(rv - 1), Recursive: true, Predicate: pred})
	require.NoError(t, err)
	defer w2.Stop()
	select {
	case ev := <-w2.ResultChan():
		require.Equal(t, watch.Added, ev.Type, "%+v", ev.Object)
		require.Equal(t, lookalike, ev.Object.(*corev1.ConfigMap).Namespace)
	case <-ctx.Done():
		t.Fatal("a space's watch left out its namespace named like a mailbox")
	}

	// A watch of the whole resource that starts with its current objects
	// (as the cache's reflector streams its list) reads them narrowed.
	w3, err := source.Watch(ctx, "/core/configmaps", apiserverstorage.ListOptions{ResourceVersion: "0", Recursive: true, Predicate: pred})
	require.NoError(t, err)
	defer w3.Stop()
	var initial []string
	for len(initial) < 3 {
		select {
		case ev := <-w3.ResultChan():
			require.NotEqual(t, watch.Error, ev.Type, "the watch's initial list decoded a mailbox's value: %+v", ev.Object)
			if ev.Type == watch.Added {
				initial = append(initial, ev.Object.(*corev1.ConfigMap).Name)
			}
		case <-ctx.Done():
			t.Fatalf("the watch's initial list ended early: %v", initial)
		}
	}
	sort.Strings(initial)
	require.Equal(t, []string{"cm", "first", "second"}, initial)

	// The whole resource's list is narrowed; what it keeps is right.
	list = &corev1.ConfigMapList{}
	require.NoError(t, source.GetList(ctx, "/core/configmaps", apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}, list))
	require.Len(t, list.Items, 3)
}

// fakeRange is a KV whose Get serves keys from a sorted slice, as etcd
// does a range read, counting the keys from the read's start.
type fakeRange struct {
	clientv3.KV
	keys []string
}

func (f *fakeRange) Get(_ context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	op := clientv3.OpGet(key, opts...)
	end := string(op.RangeBytes())
	resp := &clientv3.GetResponse{Header: &etcdserverpb.ResponseHeader{Revision: 42}}
	for _, k := range f.keys {
		if k < key || (end != "" && k >= end) || (end == "" && k != key) {
			continue
		}
		resp.Count++
		if op.Limit() == 0 || int64(len(resp.Kvs)) < op.Limit() {
			resp.Kvs = append(resp.Kvs, &mvccpb.KeyValue{Key: []byte(k)})
		}
	}
	resp.More = int64(len(resp.Kvs)) < resp.Count
	return resp, nil
}

// A kept-spaces range read pages as the API server's storage pages it,
// whether it goes on by More (a watch's initial list) or by Count (a
// list): every kept key once, in order, none of the others, whatever the
// limit and however the left-out keys fall across the datastore's pages.
func TestKeptSpacesRangePages(t *testing.T) {
	mailbox := func(i int) string { return fmt.Sprintf("inv-mb-%08d-1f2a-4b5c-8d9e-0123456789ab", i) }
	prefix := "/registry/core/configmaps/"
	end := clientv3.GetPrefixRangeEnd(prefix)
	var keys, want []string
	for i := range 3 * keptPage {
		keys = append(keys, prefix+mailbox(i)+"/default/copy")
	}
	for _, space := range []string{"root", "wds1", "wds2"} {
		for i := range 7 {
			k := fmt.Sprintf("%s%s/default/o%d", prefix, space, i)
			keys = append(keys, k)
			want = append(want, k)
		}
	}
	keys = append(keys, prefix+"zz-mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab/default/last", "/registry/core/configmaps0", "/registry/core/other")
	sort.Strings(keys)
	sort.Strings(want)
	keep := func(space string) bool { return !spaces.IsMailboxName(space) }
	ctx := spaces.WithKeptSpaces(context.Background(), keep)
	k := keptSpacesKV{&fakeRange{keys: keys}}

	for _, limit := range []int64{0, 1, 5, 7, 21, 22, 2 * keptPage} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			var got []string
			start := prefix
			for pages := 0; ; pages++ {
				require.Less(t, pages, 100, "the range never ends")
				resp, err := k.Get(ctx, start, clientv3.WithRange(end), clientv3.WithLimit(limit))
				require.NoError(t, err)
				require.EqualValues(t, 42, resp.Header.Revision)
				if limit > 0 {
					require.LessOrEqual(t, int64(len(resp.Kvs)), limit)
				}
				require.Equal(t, resp.More, int64(len(resp.Kvs)) < resp.Count, "More and Count agree")
				for _, kv := range resp.Kvs {
					got = append(got, string(kv.Key))
				}
				if !resp.More {
					break
				}
				require.NotEmpty(t, resp.Kvs, "more is said to follow an empty page")
				start = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
			require.Equal(t, want, got)
		})
	}

	resp, err := k.Get(context.Background(), prefix, clientv3.WithRange(end), clientv3.WithLimit(5))
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 5, "without kept spaces in its context, a read is the datastore's")
	require.Equal(t, keys[:5], []string{string(resp.Kvs[0].Key), string(resp.Kvs[1].Key), string(resp.Kvs[2].Key), string(resp.Kvs[3].Key), string(resp.Kvs[4].Key)})
	one, err := k.Get(ctx, keys[0])
	require.NoError(t, err)
	require.Len(t, one.Kvs, 1, "a read of one key is the datastore's")

	// Kept as of the read's revision: asked once, with the revision, and
	// what it says is kept, not what WithKeptSpaces says.
	var asked []int64
	at := spaces.WithKeptSpacesAt(ctx, func(_ context.Context, revision int64) (func(string) bool, error) {
		asked = append(asked, revision)
		return func(space string) bool { return space == "wds2" }, nil
	})
	resp, err = k.Get(at, prefix, clientv3.WithRange(end))
	require.NoError(t, err)
	require.Equal(t, []int64{42}, asked)
	require.Len(t, resp.Kvs, 7)
	for _, kv := range resp.Kvs {
		require.Contains(t, string(kv.Key), "/wds2/")
	}
	failing := spaces.WithKeptSpacesAt(ctx, func(context.Context, int64) (func(string) bool, error) {
		return nil, errors.New("not caught up")
	})
	_, err = k.Get(failing, prefix, clientv3.WithRange(end))
	require.ErrorContains(t, err, "not caught up", "a read that cannot say what it keeps fails")
}

// countingStorage counts the lists and watches that reach a storage.
type countingStorage struct {
	apiserverstorage.Interface
	lists, watches atomic.Int32
}

func (c *countingStorage) GetList(ctx context.Context, key string, opts apiserverstorage.ListOptions, listObj runtime.Object) error {
	c.lists.Add(1)
	return c.Interface.GetList(ctx, key, opts, listObj)
}

func (c *countingStorage) Watch(ctx context.Context, key string, opts apiserverstorage.ListOptions) (watch.Interface, error) {
	c.watches.Add(1)
	return c.Interface.Watch(ctx, key, opts)
}

// On the in-process datastore a resource's watch cache fills from a store
// of its own (whose size estimates then see only what the cache keeps),
// and the mailboxes are served from the resource's.
func TestWatchCacheFillsFromItsOwnStore(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds := startSQLiteIn(ctx, t, t.TempDir())
	require.NotNil(t, ds.sourceStorage(), "the in-process datastore gives each cache a store of its own")
	stores := map[string]*countingStorage{}
	counting := func(name string) rawStorageFunc {
		return func(config *storagebackend.ConfigForResource, newFunc, newListFunc func() runtime.Object, resourcePrefix string) (apiserverstorage.Interface, factory.DestroyFunc, error) {
			s, destroy, err := ds.rawStorage(config, newFunc, newListFunc, resourcePrefix)
			if err != nil {
				return nil, nil, err
			}
			stores[name] = &countingStorage{Interface: s}
			return stores[name], destroy, nil
		}
	}
	codecs := serializer.NewCodecFactory(scheme.Scheme)
	codec := codecs.CodecForVersions(codecs.LegacyCodec(corev1.SchemeGroupVersion), codecs.UniversalDeserializer(), corev1.SchemeGroupVersion, corev1.SchemeGroupVersion)
	cfg := storagebackend.NewDefaultConfig(KeyPrefix, codec).ForResource(corev1.Resource("configmaps"))
	const prefix = "/core/configmaps"
	decorate := decorator(counting("resource"), counting("cache"), &ds.caches, nil, corev1.Resource("configmaps"), true, true, nil)
	store, destroy, err := decorate(cfg, prefix, func(obj runtime.Object) (string, error) { return apiserverstorage.NamespaceKeyFunc(prefix, obj) },
		func() runtime.Object { return &corev1.ConfigMap{} }, func() runtime.Object { return &corev1.ConfigMapList{} },
		apiserverstorage.DefaultNamespaceScopedAttr, nil, nil)
	require.NoError(t, err)
	t.Cleanup(destroy)

	own, resource := stores["cache"], stores["resource"]
	require.Eventually(t, func() bool { return own.watches.Load() > 0 }, 30*time.Second, 10*time.Millisecond,
		"the cache watches its own store (its reflector's list is the watch's initial events)")
	require.Zero(t, resource.lists.Load()+resource.watches.Load(), "the cache read the resource's store")

	mailbox := "inv-mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab"
	list := &corev1.ConfigMapList{}
	require.NoError(t, store.GetList(spaces.WithSpace(ctx, mailbox), prefix+"/default", apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}, list))
	require.EqualValues(t, 1, resource.lists.Load(), "a mailbox's list is the resource store's")
}

// streamRemote is the client side of an etcd KV server whose range streams
// send chunks, then fail with err when it is set.
type streamRemote struct {
	etcdserverpb.KVClient
	chunks []*etcdserverpb.RangeResponse
	err    error
}

func (r *streamRemote) RangeStream(context.Context, *etcdserverpb.RangeRequest, ...grpc.CallOption) (etcdserverpb.KV_RangeStreamClient, error) {
	return &chunkStream{chunks: r.chunks, err: r.err}, nil
}

type chunkStream struct {
	grpc.ClientStream
	chunks []*etcdserverpb.RangeResponse
	err    error
}

func (s *chunkStream) Recv() (*etcdserverpb.RangeStreamResponse, error) {
	if len(s.chunks) == 0 {
		if s.err != nil {
			return nil, s.err
		}
		return nil, io.EOF
	}
	c := s.chunks[0]
	s.chunks = s.chunks[1:]
	return &etcdserverpb.RangeStreamResponse{RangeResponse: c}, nil
}

// chunk is a range stream's chunk of keys, with a header at rev unless it
// is zero.
func chunk(rev int64, keys ...string) *etcdserverpb.RangeResponse {
	c := &etcdserverpb.RangeResponse{}
	if rev != 0 {
		c.Header = &etcdserverpb.ResponseHeader{Revision: rev}
	}
	for _, k := range keys {
		c.Kvs = append(c.Kvs, &mvccpb.KeyValue{Key: []byte(k)})
	}
	return c
}

// describeStream renders a stream's chunks as "[keys]@rev" ("@-" without a
// header), and its error.
func describeStream(t *testing.T, stream clientv3.GetStreamChan) string {
	t.Helper()
	var parts []string
	for r := range stream {
		if r.Err() != nil {
			parts = append(parts, "error: "+r.Err().Error())
			continue
		}
		var keys []string
		for _, kv := range r.Kvs {
			keys = append(keys, string(kv.Key))
		}
		rev := "-"
		if r.Header != nil {
			rev = itoa(r.Header.Revision)
		}
		parts = append(parts, "["+strings.Join(keys, " ")+"]@"+rev)
	}
	return strings.Join(parts, " ")
}

// A kept-spaces range stream (etcd 3.7's, which the API server's storage
// lists with, and reads a watch's initial list with) hands on the keys of
// the spaces kept alone; no chunk without keys is followed by another (the
// storage takes that for an error), and the range's header, on the last
// chunk in etcd, or the first header when there are several, is handed on.
// With a limit, the stream is Get's page, in one chunk.
func TestKeptSpacesRangeStream(t *testing.T) {
	mailbox := func(i int) string { return fmt.Sprintf("inv-mb-%08d-1f2a-4b5c-8d9e-0123456789ab", i) }
	prefix := "/registry/core/configmaps/"
	mb := func(i int) string { return prefix + mailbox(i) + "/default/copy" }
	keep := func(space string) bool { return !spaces.IsMailboxName(space) }
	ctx := spaces.WithKeptSpaces(context.Background(), keep)
	for _, tc := range []struct {
		name   string
		chunks []*etcdserverpb.RangeResponse
		err    error
		want   string
	}{
		{"as etcd sends it", []*etcdserverpb.RangeResponse{
			chunk(0, mb(1), prefix+"wds1/default/a"), chunk(0, mb(2), mb(3)), chunk(0, prefix+"wds2/default/b", mb(4)), chunk(42, mb(5))},
			nil, "[" + prefix + "wds1/default/a]@- [" + prefix + "wds2/default/b]@- []@42"},
		{"every key left out", []*etcdserverpb.RangeResponse{chunk(0, mb(1)), chunk(0, mb(2)), chunk(42, mb(3))},
			nil, "[]@42"},
		{"a header on every chunk", []*etcdserverpb.RangeResponse{chunk(40, mb(1)), chunk(41, prefix+"wds1/default/a"), chunk(41, prefix+"wds1/default/b")},
			nil, "[" + prefix + "wds1/default/a]@40 [" + prefix + "wds1/default/b]@41"},
		{"an error", []*etcdserverpb.RangeResponse{chunk(0, prefix+"wds1/default/a"), chunk(0, mb(1))},
			errors.New("boom"), "[" + prefix + "wds1/default/a]@- error: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := keptSpacesKV{clientv3.NewKVFromKVClient(&streamRemote{chunks: tc.chunks, err: tc.err}, nil)}
			stream, err := k.GetStream(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)))
			require.NoError(t, err)
			require.Equal(t, tc.want, describeStream(t, stream))
		})
	}

	k := keptSpacesKV{clientv3.NewKVFromKVClient(&streamRemote{chunks: []*etcdserverpb.RangeResponse{chunk(0, mb(1)), chunk(42, prefix+"wds1/default/a")}}, nil)}
	stream, err := k.GetStream(context.Background(), prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)))
	require.NoError(t, err)
	require.Equal(t, "["+mb(1)+"]@- ["+prefix+"wds1/default/a]@42", describeStream(t, stream), "without kept spaces in its context, a stream is the datastore's")

	pages := keptSpacesKV{&fakeRange{keys: []string{mb(1), prefix + "wds1/default/a", mb(2), prefix + "wds1/default/b", prefix + "wds1/default/c"}}}
	stream, err = pages.GetStream(ctx, prefix, clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(2))
	require.NoError(t, err)
	var got []clientv3.RangeStreamResponse
	for r := range stream {
		got = append(got, r)
	}
	require.Len(t, got, 1, "a limited stream is one page")
	require.Equal(t, []string{prefix + "wds1/default/a", prefix + "wds1/default/b"}, []string{string(got[0].Kvs[0].Key), string(got[0].Kvs[1].Key)})
	require.True(t, got[0].More)
	require.EqualValues(t, 42, got[0].Header.Revision)
}
