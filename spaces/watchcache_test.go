// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"
)

const uid = "0b6f1c1e-5a8e-4f4e-9d3b-2a1c7e9f0d11"

func TestIsMailboxName(t *testing.T) {
	long := "an-inventory-space-with-a-name-long-enough-to-be-cut"
	for _, name := range []string{MailboxName("inv1", uid), MailboxName(long, uid), MailboxName("", uid), "mb-" + uid} {
		require.True(t, IsMailboxName(name), "%q is a mailbox name", name)
	}
	for _, name := range []string{
		"", "root", "inv1", "wds1", "mb", "mb-", "inv1-mb-", "team-mb-x",
		"inv1-mb-" + uid[:35],                          // too short
		"inv1-mb-" + uid + "0",                         // too long
		"inv1xmb-" + uid,                               // not at a dash
		"inv1-mb-0B6F1C1E-5A8E-4F4E-9D3B-2A1C7E9F0D11", // upper case
		"inv1-mb-0b6f1c1e_5a8e-4f4e-9d3b-2a1c7e9f0d11", // no dash
		"inv1-mb-0b6f1c1eg5a8e-4f4e-9d3b-2a1c7e9f0d1",  // not hex
	} {
		require.False(t, IsMailboxName(name), "%q is not a mailbox name", name)
	}
}

func inSpace(space, ns, name, rv string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}}
	if space != "" {
		cm.Annotations = map[string]string{Annotation: space}
	}
	return cm
}

func TestCacheKeyFunc(t *testing.T) {
	registryKey := func(obj runtime.Object) (string, error) {
		cm := obj.(*corev1.ConfigMap)
		if cm.Namespace == "" {
			return prefix + "/" + cm.Name, nil
		}
		return prefix + "/" + cm.Namespace + "/" + cm.Name, nil
	}
	// The cache keys objects as spaceStorage stores them.
	s := Decorate(&recordingStorage{}, prefix).(*spaceStorage)
	for _, tc := range []struct {
		space, ns, want string
	}{
		{"wds1", "default", prefix + "/wds1/default/cm"},
		{"wds1", "", prefix + "/wds1/cm"},
		{Root, "kube-system", prefix + "/root/kube-system/cm"},
		{"", "default", prefix + "/root/default/cm"},
	} {
		key, err := CacheKeyFunc(prefix+"/", registryKey)(inSpace(tc.space, tc.ns, "cm", ""))
		require.NoError(t, err)
		require.Equal(t, tc.want, key)
		stored, _, err := s.spaceKey(WithSpace(context.Background(), tc.space), registryKeyOf(t, registryKey, tc.ns), false)
		require.NoError(t, err)
		require.Equal(t, stored, key, "the cache key is the stored key")
	}
}

func registryKeyOf(t *testing.T, keyFunc func(runtime.Object) (string, error), ns string) string {
	key, err := keyFunc(inSpace("", ns, "cm", ""))
	require.NoError(t, err)
	return key
}

// watchingStorage serves one fake watch.
type watchingStorage struct {
	recordingStorage
	w *watch.FakeWatcher
}

func (s *watchingStorage) Watch(context.Context, string, storage.ListOptions) (watch.Interface, error) {
	return s.w, nil
}

func TestCacheSourceLeavesOutMailboxes(t *testing.T) {
	mailbox := MailboxName("inv1", uid)
	raw := &watchingStorage{w: watch.NewFakeWithChanSize(8, false)}
	raw.listed = []corev1.ConfigMap{
		*inSpace("wds1", "default", "a", "10"),
		*inSpace(mailbox, "default", "a", "11"),
		*inSpace(Root, "default", "b", "12"),
		*inSpace("", "default", "legacy", "13"),
	}
	src := CacheSource(raw, func() runtime.Object { return &corev1.ConfigMap{} })

	list := &corev1.ConfigMapList{}
	require.NoError(t, src.GetList(context.Background(), prefix, storage.ListOptions{Recursive: true}, list))
	var got []string
	for _, cm := range list.Items {
		got = append(got, cm.Annotations[Annotation]+"/"+cm.Name)
	}
	require.Equal(t, []string{"wds1/a", "root/b", "/legacy"}, got)

	w, err := src.Watch(context.Background(), prefix, storage.ListOptions{Recursive: true})
	require.NoError(t, err)
	defer w.Stop()
	raw.w.Add(inSpace("wds1", "default", "a", "20"))
	raw.w.Modify(inSpace(mailbox, "default", "a", "21"))
	raw.w.Delete(inSpace(mailbox, "default", "a", "22"))
	raw.w.Action(watch.Bookmark, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "23"}})
	raw.w.Modify(inSpace("wds1", "default", "a", "24"))
	want := []struct {
		typ   watch.EventType
		space string
		rv    string
	}{
		{watch.Added, "wds1", "20"},
		// A mailbox's events move the cache's resource version on, and
		// carry nothing of the object.
		{watch.Bookmark, "", "21"},
		{watch.Bookmark, "", "22"},
		{watch.Bookmark, "", "23"},
		{watch.Modified, "wds1", "24"},
	}
	for _, e := range want {
		ev := <-w.ResultChan()
		cm := ev.Object.(*corev1.ConfigMap)
		require.Equal(t, e.typ, ev.Type)
		require.Equal(t, e.rv, cm.ResourceVersion)
		require.Equal(t, e.space, cm.Annotations[Annotation])
		if e.typ == watch.Bookmark {
			require.Empty(t, cm.Name)
		}
	}
}

func TestDecorateCachedServesMailboxesAndWildcardFromTheDatastore(t *testing.T) {
	mailbox := MailboxName("inv1", uid)
	cache, raw := &recordingStorage{}, &recordingStorage{}
	// The cache has left a mailbox's object out: it serves no wildcard.
	source := CacheSource(&recordingStorage{listed: []corev1.ConfigMap{*inSpace(mailbox, "default", "a", "1")}},
		func() runtime.Object { return &corev1.ConfigMap{} })
	require.NoError(t, source.GetList(context.Background(), prefix, storage.ListOptions{Recursive: true}, &corev1.ConfigMapList{}))
	require.False(t, source.Whole())
	s := DecorateCached(cache, raw, source, prefix)
	ctx := func(space string) context.Context { return WithSpace(context.Background(), space) }
	cm := &corev1.ConfigMap{}

	for _, space := range []string{"wds1", Root, mailbox} {
		require.NoError(t, s.Create(ctx(space), prefix+"/default/a", cm.DeepCopy(), cm.DeepCopy(), 0))
		require.NoError(t, s.Get(ctx(space), prefix+"/default/a", storage.GetOptions{}, cm.DeepCopy()))
		require.NoError(t, s.GetList(ctx(space), prefix+"/default", storage.ListOptions{Recursive: true}, &corev1.ConfigMapList{}))
		_, err := s.Watch(ctx(space), prefix+"/default", storage.ListOptions{Recursive: true})
		require.NoError(t, err)
		require.NoError(t, s.GuaranteedUpdate(ctx(space), prefix+"/default/a", cm.DeepCopy(), false, nil,
			func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) { return in, nil, nil }, nil))
		require.NoError(t, s.Delete(ctx(space), prefix+"/default/a", cm.DeepCopy(), nil, nil, nil, storage.DeleteOptions{}))
	}
	require.NoError(t, s.GetList(ctx(Wildcard), prefix, storage.ListOptions{Recursive: true}, &corev1.ConfigMapList{}))
	_, err := s.Watch(ctx(Wildcard), prefix, storage.ListOptions{Recursive: true})
	require.NoError(t, err)

	verbs := []string{"Create", "Get", "GetList", "Watch", "GuaranteedUpdate", "Delete"}
	var wantCache, wantRaw []call
	for _, space := range []string{"wds1", Root} {
		for _, v := range verbs {
			key := prefix + "/" + space + "/default/a"
			if v == "GetList" || v == "Watch" {
				key = prefix + "/" + space + "/default"
			}
			wantCache = append(wantCache, call{v, key})
		}
	}
	for _, v := range verbs {
		key := prefix + "/" + mailbox + "/default/a"
		if v == "GetList" || v == "Watch" {
			key = prefix + "/" + mailbox + "/default"
		}
		wantRaw = append(wantRaw, call{v, key})
	}
	wantRaw = append(wantRaw, call{"GetList", prefix}, call{"Watch", prefix})
	require.Equal(t, wantCache, cache.calls, "spaces are served from the cache")
	require.Equal(t, wantRaw, raw.calls, "mailboxes and the wildcard are served from the datastore")
}

// appendingStorage appends its items to a list, as the datastore's
// storage does.
type appendingStorage struct{ recordingStorage }

func (s *appendingStorage) GetList(_ context.Context, key string, _ storage.ListOptions, listObj runtime.Object) error {
	s.record("GetList", key)
	list := listObj.(*corev1.ConfigMapList)
	list.Items = append(list.Items, s.listed...)
	list.ResourceVersion = s.listRV
	return nil
}

// listingStorage lists its items, or fails, after running during.
type listingStorage struct {
	recordingStorage
	during func()
	err    error
	mu     sync.Mutex
	ready  error
	// askedEarly, when set, is closed at the first readiness check that
	// answers not ready.
	askedEarly chan struct{}
}

func (s *listingStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if s.during != nil {
		s.during()
	}
	if s.err != nil {
		s.record("GetList", key)
		return s.err
	}
	return s.recordingStorage.GetList(ctx, key, opts, listObj)
}

func (s *listingStorage) ReadinessCheck() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ready != nil && s.askedEarly != nil {
		close(s.askedEarly)
		s.askedEarly = nil
	}
	return s.ready
}

func (s *listingStorage) readyNow() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ready = nil
}

// TestWildcardListsFromAWholeCache: a list across all spaces comes from a
// ready cache as long as no mailbox object has ever passed its source,
// checked before and after the list; from the datastore otherwise, with
// none of the cache's items left in it.
func TestWildcardListsFromAWholeCache(t *testing.T) {
	mailbox := MailboxName("inv1", uid)
	inCache := []corev1.ConfigMap{*inSpace("inv1", "", "edge1", "5"), *inSpace("inv2", "", "edge2", "6")}
	inDatastore := []corev1.ConfigMap{*inSpace("inv1", "", "edge1", "5"), *inSpace(mailbox, "", "copy", "7")}
	wildcard := WithSpace(context.Background(), Wildcard)
	newFunc := func() runtime.Object { return &corev1.ConfigMap{} }
	// watched passes objs through a watch of source, as the cache's
	// events do.
	watched := func(source *Source, objs ...runtime.Object) {
		raw := &watchingStorage{w: watch.NewFakeWithChanSize(len(objs), false)}
		source.Interface = raw
		w, err := source.Watch(context.Background(), prefix, storage.ListOptions{Recursive: true})
		require.NoError(t, err)
		defer w.Stop()
		for _, obj := range objs {
			raw.w.Add(obj)
			<-w.ResultChan()
		}
	}
	listIn := func(ctx context.Context, t *testing.T, cache *listingStorage, source *Source) (*corev1.ConfigMapList, *appendingStorage) {
		raw := &appendingStorage{recordingStorage{listed: inDatastore, listRV: "7"}}
		s := DecorateCached(cache, raw, source, prefix)
		got := &corev1.ConfigMapList{}
		require.NoError(t, s.GetList(ctx, prefix, storage.ListOptions{Recursive: true}, got))
		return got, raw
	}
	list := func(t *testing.T, cache *listingStorage, source *Source) (*corev1.ConfigMapList, *appendingStorage) {
		return listIn(wildcard, t, cache, source)
	}
	names := func(list *corev1.ConfigMapList) []string {
		var names []string
		for _, cm := range list.Items {
			names = append(names, cm.Name)
		}
		return names
	}

	t.Run("whole", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		watched(source, inSpace("inv1", "", "edge1", "5"), inSpace(Root, "", "other", "6"))
		cache := &listingStorage{recordingStorage: recordingStorage{listed: inCache, listRV: "6"}}
		got, raw := list(t, cache, source)
		require.Equal(t, []string{"edge1", "edge2"}, names(got))
		require.Equal(t, []call{{"GetList", prefix}}, cache.calls)
		require.Empty(t, raw.calls)
	})
	t.Run("a mailbox object watched", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		watched(source, inSpace("inv1", "", "edge1", "5"), inSpace(mailbox, "", "copy", "7"))
		require.False(t, source.Whole())
		cache := &listingStorage{recordingStorage: recordingStorage{listed: inCache, listRV: "6"}}
		got, raw := list(t, cache, source)
		require.Equal(t, []string{"edge1", "copy"}, names(got))
		require.Empty(t, cache.calls)
		require.Equal(t, []call{{"GetList", prefix}}, raw.calls)
	})
	t.Run("a mailbox object while the cache lists", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		cache := &listingStorage{recordingStorage: recordingStorage{listed: inCache, listRV: "7"},
			during: func() { watched(source, inSpace(mailbox, "", "copy", "7")) }}
		got, raw := list(t, cache, source)
		require.Equal(t, []string{"edge1", "copy"}, names(got), "the cache's items are dropped")
		require.Equal(t, "7", got.ResourceVersion)
		require.Equal(t, []call{{"GetList", prefix}}, raw.calls)
	})
	t.Run("cache filling", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		askedEarly := make(chan struct{})
		cache := &listingStorage{recordingStorage: recordingStorage{listed: inCache}, ready: errors.New("initializing"), askedEarly: askedEarly}
		// The cache is ready once the list has found it not ready.
		go func() {
			<-askedEarly
			cache.readyNow()
		}()
		got, raw := list(t, cache, source)
		require.Equal(t, []string{"edge1", "edge2"}, names(got), "the list waited for the cache")
		require.Empty(t, raw.calls)
	})
	t.Run("cache not ready in time", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		cache := &listingStorage{recordingStorage: recordingStorage{listed: inCache}, ready: errors.New("initializing")}
		ctx, cancel := context.WithTimeout(wildcard, 100*time.Millisecond)
		defer cancel()
		got, raw := listIn(ctx, t, cache, source)
		require.Equal(t, []string{"edge1", "copy"}, names(got))
		require.Empty(t, cache.calls)
		require.Equal(t, []call{{"GetList", prefix}}, raw.calls)
	})
	t.Run("cache fails", func(t *testing.T) {
		source := CacheSource(&recordingStorage{}, newFunc)
		cache := &listingStorage{err: errors.New("too large resource version")}
		got, raw := list(t, cache, source)
		require.Equal(t, []string{"edge1", "copy"}, names(got))
		require.Equal(t, []call{{"GetList", prefix}}, raw.calls)
	})
}

// TestCacheWithMailboxes: a resource cached with its mailbox objects
// (Namespaces) keeps them in the cache's list and watch, stays whole, and
// a Get in a mailbox space is read from the cache; a list or watch in a
// mailbox (its syncer's), and the wildcard's watch, go to the datastore,
// which a fan-out does not put behind.
func TestCacheWithMailboxes(t *testing.T) {
	mailbox := MailboxName("inv1", uid)
	raw := &watchingStorage{w: watch.NewFakeWithChanSize(8, false)}
	raw.listed = []corev1.ConfigMap{*inSpace("wds1", "", "a", "10"), *inSpace(mailbox, "", "b", "11")}
	source := CacheSource(raw, func() runtime.Object { return &corev1.ConfigMap{} }).WithMailboxes()

	list := &corev1.ConfigMapList{}
	require.NoError(t, source.GetList(context.Background(), prefix, storage.ListOptions{Recursive: true}, list))
	require.Len(t, list.Items, 2, "the mailbox's object is in the cache's list")
	w, err := source.Watch(context.Background(), prefix, storage.ListOptions{Recursive: true})
	require.NoError(t, err)
	defer w.Stop()
	raw.w.Add(inSpace(mailbox, "", "c", "12"))
	ev := <-w.ResultChan()
	require.Equal(t, watch.Added, ev.Type, "the mailbox's event is the cache's, not a bookmark")
	require.Equal(t, "c", ev.Object.(*corev1.ConfigMap).Name)
	require.True(t, source.Whole())

	cache, datastore := &recordingStorage{}, &recordingStorage{}
	s := DecorateCached(cache, datastore, source, prefix)
	require.NoError(t, s.Get(WithSpace(context.Background(), mailbox), prefix+"/b", storage.GetOptions{}, &corev1.ConfigMap{}))
	_, err = s.Watch(WithSpace(context.Background(), Wildcard), prefix, storage.ListOptions{Recursive: true})
	require.NoError(t, err)
	inMailbox := genericapirequest.WithUser(WithSpace(context.Background(), mailbox), &user.DefaultInfo{Name: "syncer"})
	require.NoError(t, s.GetList(inMailbox, prefix, storage.ListOptions{Recursive: true, ResourceVersion: "0"}, &corev1.ConfigMapList{}))
	_, err = s.Watch(inMailbox, prefix, storage.ListOptions{Recursive: true, ResourceVersion: "12"})
	require.NoError(t, err)
	require.Equal(t, []call{{"Get", prefix + "/" + mailbox + "/b"}}, cache.calls)
	require.Equal(t, []call{{"Watch", prefix}, {"GetList", prefix + "/" + mailbox}, {"Watch", prefix + "/" + mailbox}}, datastore.calls)
	// In any other space, lists and watches are the cache's.
	inWDS := genericapirequest.WithUser(WithSpace(context.Background(), "wds1"), &user.DefaultInfo{Name: "alice"})
	require.NoError(t, s.GetList(inWDS, prefix, storage.ListOptions{Recursive: true, ResourceVersion: "0"}, &corev1.ConfigMapList{}))
	require.Equal(t, []call{{"Get", prefix + "/" + mailbox + "/b"}, {"GetList", prefix + "/wds1"}}, cache.calls)
}

// TestServersOwnListsWhileTheCacheFills: while a space's cache fills, a
// list the server makes on the storage itself (no user in its context:
// the CRD finalizer's) reads the datastore; an API request's goes to the
// cache, which tells the client to retry.
func TestServersOwnListsWhileTheCacheFills(t *testing.T) {
	newFunc := func() runtime.Object { return &corev1.ConfigMap{} }
	for _, tc := range []struct {
		name      string
		ctx       context.Context
		ready     error
		fromCache bool
	}{
		{"the server's own, cache filling", WithSpace(context.Background(), "wds1"), errors.New("initializing"), false},
		{"the server's own, cache ready", WithSpace(context.Background(), "wds1"), nil, true},
		{"a client's, cache filling", genericapirequest.WithUser(WithSpace(context.Background(), "wds1"), &user.DefaultInfo{Name: "alice"}), errors.New("initializing"), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cache := &listingStorage{ready: tc.ready}
			raw := &recordingStorage{}
			s := DecorateCached(cache, raw, CacheSource(&recordingStorage{}, newFunc), prefix)
			require.NoError(t, s.GetList(tc.ctx, prefix+"/default", storage.ListOptions{Recursive: true}, &corev1.ConfigMapList{}))
			want := []call{{"GetList", prefix + "/wds1/default"}}
			if tc.fromCache {
				require.Equal(t, want, cache.calls)
				require.Empty(t, raw.calls)
			} else {
				require.Empty(t, cache.calls)
				require.Equal(t, want, raw.calls)
			}
		})
	}
}
