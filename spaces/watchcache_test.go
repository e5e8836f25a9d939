package spaces

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
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
	s := DecorateCached(cache, raw, prefix)
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
