package storage

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kubestellar/kubestellar/spaces"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/kubernetes"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	apiserverstorage "k8s.io/apiserver/pkg/storage"
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
		r := clientv3.WatchResponse{}
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

	// The whole resource's list is narrowed; what it keeps is right.
	list = &corev1.ConfigMapList{}
	require.NoError(t, source.GetList(ctx, "/core/configmaps", apiserverstorage.ListOptions{Recursive: true, Predicate: apiserverstorage.Everything}, list))
	require.Len(t, list.Items, 3)
}

// fakeRange is a kubernetes.Interface whose List serves keys from a
// sorted slice, as etcd does, counting the keys from the page's start.
type fakeRange struct {
	kubernetes.Interface
	keys  []string
	reads int
}

func (f *fakeRange) List(_ context.Context, prefix string, opts kubernetes.ListOptions) (kubernetes.ListResponse, error) {
	f.reads++
	start := prefix
	if opts.Continue != "" {
		start = opts.Continue
	}
	var resp kubernetes.ListResponse
	resp.Revision = 42
	for _, k := range f.keys {
		if k < start || !strings.HasPrefix(k, prefix) {
			continue
		}
		resp.Count++
		if opts.Limit == 0 || int64(len(resp.Kvs)) < opts.Limit {
			resp.Kvs = append(resp.Kvs, &mvccpb.KeyValue{Key: []byte(k)})
		}
	}
	return resp, nil
}

// A kept-spaces list pages as the API server's storage pages it: every
// kept key once, in order, none of the others, whatever the limit and
// however the left-out keys fall across the datastore's pages.
func TestKeptSpacesListPages(t *testing.T) {
	mailbox := func(i int) string { return fmt.Sprintf("inv-mb-%08d-1f2a-4b5c-8d9e-0123456789ab", i) }
	prefix := "/registry/core/configmaps/"
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
	keys = append(keys, prefix+"zz-mb-0b4c2d3e-1f2a-4b5c-8d9e-0123456789ab/default/last")
	sort.Strings(keys)
	sort.Strings(want)
	keep := func(space string) bool { return !spaces.IsMailboxName(space) }
	ctx := spaces.WithKeptSpaces(context.Background(), keep)

	for _, limit := range []int64{0, 1, 5, 7, 21, 22, 2 * keptPage} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			f := &fakeRange{keys: keys}
			k := keptSpacesKubernetes{f}
			var got []string
			opts := kubernetes.ListOptions{Limit: limit}
			for pages := 0; ; pages++ {
				require.Less(t, pages, 100, "the list never ends")
				resp, err := k.List(ctx, prefix, opts)
				require.NoError(t, err)
				require.EqualValues(t, 42, resp.Revision)
				if limit > 0 {
					require.LessOrEqual(t, int64(len(resp.Kvs)), limit)
				}
				for _, kv := range resp.Kvs {
					got = append(got, string(kv.Key))
				}
				if int64(len(resp.Kvs)) >= resp.Count {
					break
				}
				require.NotEmpty(t, resp.Kvs, "more is said to follow an empty page")
				opts.Continue = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
			}
			require.Equal(t, want, got)
		})
	}

	f := &fakeRange{keys: keys}
	resp, err := keptSpacesKubernetes{f}.List(context.Background(), prefix, kubernetes.ListOptions{Limit: 5})
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 5, "without kept spaces in its context, a list is the datastore's")
	require.Equal(t, keys[:5], []string{string(resp.Kvs[0].Key), string(resp.Kvs[1].Key), string(resp.Kvs[2].Key), string(resp.Kvs[3].Key), string(resp.Kvs[4].Key)})
}
