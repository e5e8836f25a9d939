// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func namespaceIn(space, name string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1"}}
	if space != "" {
		ns.Annotations = map[string]string{Annotation: space}
	}
	return ns
}

func TestKeyFunc(t *testing.T) {
	tests := []struct {
		desc    string
		obj     any
		want    string
		wantErr string
	}{
		{desc: "cluster-scoped", obj: namespaceIn("foo", "a"), want: "foo|a"},
		{desc: "namespaced", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns", Annotations: map[string]string{Annotation: "foo"}}}, want: "foo|ns/cm"},
		{desc: "wildcard-free root", obj: namespaceIn(Root, "default"), want: "root|default"},
		{desc: "tombstone", obj: cache.DeletedFinalStateUnknown{Key: "foo|ns/cm", Obj: &corev1.ConfigMap{}}, want: "foo|ns/cm"},
		{desc: "missing annotation", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns"}}, wantErr: "object ns/cm carries no kubestellar.io/space annotation"},
		{desc: "empty annotation", obj: &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Annotations: map[string]string{Annotation: ""}}}, wantErr: "carries no kubestellar.io/space annotation"},
		{desc: "not an object", obj: "just a string", wantErr: "object does not implement the Object interfaces"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			key, err := KeyFunc(tc.obj)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, key)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, key)
		})
	}
}

func TestKeyRoundTrip(t *testing.T) {
	tests := []struct {
		space, namespace, name string
		key                    string
	}{
		{space: "foo", namespace: "ns", name: "a", key: "foo|ns/a"},
		{space: "foo", namespace: "", name: "a", key: "foo|a"},
		{space: Root, namespace: "kube-system", name: "x.y", key: "root|kube-system/x.y"},
		{space: "foo", namespace: "", name: "system:admin", key: "foo|system:admin"},
	}
	for _, tc := range tests {
		t.Run(tc.key, func(t *testing.T) {
			require.Equal(t, tc.key, Key(tc.space, tc.namespace, tc.name))
			space, namespace, name, err := SplitKey(tc.key)
			require.NoError(t, err)
			require.Equal(t, []string{tc.space, tc.namespace, tc.name}, []string{space, namespace, name})
		})
	}
}

func TestSplitKeyErrors(t *testing.T) {
	for _, key := range []string{"", "ns/name", "name"} {
		t.Run(key, func(t *testing.T) {
			_, _, _, err := SplitKey(key)
			require.ErrorContains(t, err, "has no space")
		})
	}
}

// unsupportedWatchList makes the reflector list, then watch, as it does for
// test list-watchers (see watchlist.DoesClientNotSupportWatchListSemantics).
type unsupportedWatchList struct{ cache.ListerWatcher }

func (unsupportedWatchList) IsWatchListSemanticsUnSupported() bool { return true }

type event struct {
	kind     string
	key      string
	oldLabel string
	newLabel string
}

type recordingHandler struct{ events chan event }

func label(obj any) string {
	if ns, ok := obj.(*corev1.Namespace); ok {
		return ns.Labels["v"]
	}
	return ""
}

func mustKey(obj any) string {
	key, err := KeyFunc(obj)
	if err != nil {
		return fmt.Sprintf("error: %v", err)
	}
	return key
}

// next returns the next event, failing t after 5 s without one.
func (h recordingHandler) next(t *testing.T) event {
	t.Helper()
	select {
	case e := <-h.events:
		return e
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for an informer event")
		return event{}
	}
}

func (h recordingHandler) OnAdd(obj any, _ bool) {
	h.events <- event{kind: "add", key: mustKey(obj), newLabel: label(obj)}
}
func (h recordingHandler) OnUpdate(old, obj any) {
	h.events <- event{kind: "update", key: mustKey(obj), oldLabel: label(old), newLabel: label(obj)}
}
func (h recordingHandler) OnDelete(obj any) {
	h.events <- event{kind: "delete", key: mustKey(obj)}
}

// TestNewInformer checks that objects of the same name in two spaces are
// kept apart in the informer's cache and events.
func TestNewInformer(t *testing.T) {
	fw := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			a1, a2 := namespaceIn("s1", "a"), namespaceIn("s2", "a")
			a1.Labels = map[string]string{"v": "1"}
			a2.Labels = map[string]string{"v": "1"}
			return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: []corev1.Namespace{*a1, *a2}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil },
	}
	h := recordingHandler{events: make(chan event, 10)}
	indexer, controller := NewInformer(unsupportedWatchList{lw}, &corev1.Namespace{}, 0, h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go controller.RunWithContext(ctx)

	next := func() event { return h.next(t) }

	initial := map[string]event{}
	for range 2 {
		e := next()
		initial[e.key] = e
	}
	require.Equal(t, map[string]event{
		"s1|a": {kind: "add", key: "s1|a", newLabel: "1"},
		"s2|a": {kind: "add", key: "s2|a", newLabel: "1"},
	}, initial)
	require.ElementsMatch(t, []string{"s1|a", "s2|a"}, indexer.ListKeys())

	changed := namespaceIn("s1", "a")
	changed.ResourceVersion = "2"
	changed.Labels = map[string]string{"v": "2"}
	fw.Modify(changed)
	require.Equal(t, event{kind: "update", key: "s1|a", oldLabel: "1", newLabel: "2"}, next())
	obj, exists, err := indexer.GetByKey("s2|a")
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, "1", label(obj), "the object of the other space is untouched")

	fw.Add(namespaceIn("s3", "a"))
	require.Equal(t, event{kind: "add", key: "s3|a"}, next())

	fw.Delete(namespaceIn("s2", "a"))
	require.Equal(t, event{kind: "delete", key: "s2|a"}, next())
	require.ElementsMatch(t, []string{"s1|a", "s3|a"}, indexer.ListKeys())
	obj, exists, err = indexer.GetByKey("s1|a")
	require.NoError(t, err)
	require.True(t, exists)
	require.Equal(t, "2", label(obj))
}

// TestInformerNoResync checks that a resync leaves out the objects
// NoResync skips and hands on the others, and that a relist still sees
// every cached object: one the relist lacks is deleted, skipped or not.
func TestInformerNoResync(t *testing.T) {
	var mu sync.Mutex
	listed := []corev1.Namespace{*namespaceIn("s1", "kept"), *namespaceIn("s1", "skipped"), *namespaceIn("s2", "skipped")}
	watches := make(chan *watch.FakeWatcher, 4)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			mu.Lock()
			defer mu.Unlock()
			return &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}, Items: slices.Clone(listed)}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) {
			fw := watch.NewFake()
			watches <- fw
			return fw, nil
		},
	}
	h := recordingHandler{events: make(chan event, 100)}
	_, controller := NewInformerWithOptions(unsupportedWatchList{lw}, &corev1.Namespace{}, h, InformerOptions{
		Resync:   20 * time.Millisecond,
		NoResync: func(obj any) bool { return obj.(*corev1.Namespace).Name == "skipped" },
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go controller.RunWithContext(ctx)

	next := func() event { return h.next(t) }
	// Resyncs come every 20 ms: in ten of them, only the kept object.
	adds, resyncs := 0, 0
	for adds < 3 || resyncs < 10 {
		switch e := next(); e.kind {
		case "add":
			adds++
		case "update":
			require.Equal(t, event{kind: "update", key: "s1|kept"}, e)
			resyncs++
		default:
			t.Fatalf("unexpected %v", e)
		}
	}

	// A relist that lacks one skipped object deletes it.
	mu.Lock()
	listed = listed[:2]
	mu.Unlock()
	(<-watches).Error(&metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired})
	deadline := time.Now().Add(5 * time.Second)
	deleted := false
	for !deleted {
		require.True(t, time.Now().Before(deadline), "the relist did not delete the object it lacks")
		e := next()
		switch e.kind {
		case "delete":
			require.Equal(t, "s2|skipped", e.key)
			deleted = true
		case "update":
			// The relist's Replace, and resyncs of the kept object.
			require.Contains(t, []string{"s1|kept", "s1|skipped"}, e.key)
		default:
			t.Fatalf("unexpected %v", e)
		}
	}
}

// TestKeepOnly: the cache keeps an object's identity and the fields named,
// and KeyFunc still keys it by space.
func TestKeepOnly(t *testing.T) {
	var in map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
		"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
		"metadata": {"name": "edge1", "uid": "u1", "resourceVersion": "7", "generation": 2,
			"labels": {"env": "prod"}, "annotations": {"kubestellar.io/space": "inv", "note": "x"},
			"finalizers": ["f"], "deletionTimestamp": "2026-11-28T10:00:00Z"},
		"spec": {"cell": "a"},
		"status": {"mailboxSpace": "mb", "syncerVersion": "v1", "conditions": [{"type": "Ready", "status": "True"}]}
	}`), &in))
	got, err := KeepOnly([]string{"status", "mailboxSpace"}, []string{"status", "conditions"}, []string{"spec", "absent"})(&unstructured.Unstructured{Object: in})
	require.NoError(t, err)
	u := got.(*unstructured.Unstructured)
	var want map[string]any
	require.NoError(t, json.Unmarshal([]byte(`{
		"apiVersion": "edge.kubestellar.io/v2alpha1", "kind": "SyncTarget",
		"metadata": {"name": "edge1", "uid": "u1", "resourceVersion": "7", "generation": 2,
			"annotations": {"kubestellar.io/space": "inv"}, "deletionTimestamp": "2026-11-28T10:00:00Z"},
		"status": {"mailboxSpace": "mb", "conditions": [{"type": "Ready", "status": "True"}]}
	}`), &want))
	require.Equal(t, want, u.Object)
	key, err := KeyFunc(u)
	require.NoError(t, err)
	require.Equal(t, "inv|edge1", key)

	// Typed objects pass as they are.
	ns := namespaceIn("inv", "ns1")
	same, err := KeepOnly([]string{"spec"})(ns)
	require.NoError(t, err)
	require.Same(t, ns, same)
}
