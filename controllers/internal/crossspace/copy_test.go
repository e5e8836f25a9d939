// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// localLW serves one ListerWatcher for every resource, as the server's
// in-process reader does.
type localLW struct{ lw cache.ListerWatcher }

// listThenWatch is a ListerWatcher that cannot stream lists, as the
// server's in-process reader.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (l localLW) ListerWatcher(schema.GroupVersionResource, string, string) (cache.ListerWatcher, bool) {
	return l.lw, true
}

// TestSharedDynamicExpandsCopies: a shared cache keeps the copies in
// mailboxes as Copy records; its readers (Get, InSpace, List, ByIndex)
// see each as the unstructured object it stands for, and its handlers and
// the indexes controllers add see the record itself (a metav1.Object that
// Label, Annotation and StatusOf read), expanded for nobody.
func TestSharedDynamicExpandsCopies(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cm := func(space, name string, copyLabel bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": map[string]any{"big": "body"}}}
		u.SetName(name)
		u.SetNamespace("ns")
		u.SetResourceVersion("5")
		if copyLabel {
			u.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
			u.Object["status"] = map[string]any{"phase": "reported"}
		}
		u.SetAnnotations(map[string]string{spaces.Annotation: space, edgev2alpha1.SourceSpaceAnnotation: "wds"})
		return u
	}
	watcher := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*cm("mb", "a", true), *cm("wds", "a", false)}}
			list.SetResourceVersion("5")
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watcher, nil },
	}
	shared := (&Clients{Local: localLW{listThenWatch{lw}}}).NewSharedDynamic()
	shared.TrimCopies(func(space string) bool { return space == "mb" })

	var mu sync.Mutex
	var notExpanded, notRecords []string
	check := func(what string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if _, ok := obj.(*unstructured.Unstructured); !ok {
			mu.Lock()
			defer mu.Unlock()
			notExpanded = append(notExpanded, what)
		}
	}
	// checkRecord: what a handler or an index gets of a copy in the
	// mailbox is its record; of anything else, the object.
	checkRecord := func(what string, obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := obj.(metav1.Object)
		if !ok {
			mu.Lock()
			defer mu.Unlock()
			notRecords = append(notRecords, fmt.Sprintf("%s: a %T", what, obj))
			return
		}
		_, isRecord := obj.(*Copy)
		if isRecord != (SpaceOf(m) == "mb") {
			mu.Lock()
			defer mu.Unlock()
			notRecords = append(notRecords, fmt.Sprintf("%s: a %T in space %s", what, obj, SpaceOf(m)))
		}
	}
	seen := map[string]int{}
	shared.AddIndexers(cache.Indexers{"source": func(obj any) ([]string, error) {
		m, ok := obj.(metav1.Object)
		if !ok {
			return nil, nil
		}
		checkRecord("index", obj)
		return []string{Annotation(m, edgev2alpha1.SourceSpaceAnnotation)}, nil
	}})
	shared.AddHandler(func(schema.GroupVersionResource) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { checkRecord("add", obj); mu.Lock(); seen["add"]++; mu.Unlock() },
			UpdateFunc: func(old, obj any) {
				checkRecord("update old", old)
				checkRecord("update", obj)
				mu.Lock()
				seen["update"]++
				mu.Unlock()
			},
			DeleteFunc: func(obj any) { checkRecord("delete", obj); mu.Lock(); seen["delete"]++; mu.Unlock() },
		}
	})
	inf := shared.For(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"})
	shared.Start(ctx)
	require.True(t, WaitForSync(ctx, inf))

	watcher.Add(cm("mb", "b", true))
	updated := cm("mb", "a", true)
	updated.SetResourceVersion("6")
	watcher.Modify(updated)
	watcher.Delete(cm("mb", "b", true))
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		return seen["add"] == 3 && seen["update"] == 1 && seen["delete"] == 1
	}, 10*time.Second, 10*time.Millisecond, "the handlers are told of every event")

	raw, ok, err := inf.Indexer.(expanding).Indexer.GetByKey(spaces.Key("mb", "ns", "a"))
	require.NoError(t, err)
	require.True(t, ok)
	require.IsType(t, &Copy{}, raw, "the cache holds the record")

	got, ok := Get[*unstructured.Unstructured](inf, "mb", "ns", "a")
	require.True(t, ok)
	require.Equal(t, "6", got.GetResourceVersion())
	require.NotContains(t, got.Object, "data")
	require.Len(t, InSpace[*unstructured.Unstructured](inf, "mb"), 1)
	require.Len(t, List[*unstructured.Unstructured](inf), 2)
	bySource, err := inf.ByIndex("source", "wds")
	require.NoError(t, err)
	require.Len(t, bySource, 2)
	for _, obj := range append(bySource, inf.List()...) {
		check("read", obj)
	}
	whole, ok := Get[*unstructured.Unstructured](inf, "wds", "ns", "a")
	require.True(t, ok)
	require.Contains(t, whole.Object, "data", "an object outside the mailboxes is cached whole")

	// InSpaceRecords gives the records themselves, for readers of a few
	// fields (Label, Annotation, StatusOf), which read them in place.
	records := InSpaceRecords(inf, "mb")
	require.Len(t, records, 1)
	rec, ok := records[0].(*Copy)
	require.True(t, ok, "a %T", records[0])
	require.Equal(t, "true", Label(rec, edgev2alpha1.PlacementCopyLabel))
	require.Equal(t, "wds", Annotation(rec, edgev2alpha1.SourceSpaceAnnotation))
	require.Equal(t, map[string]any{"phase": "reported"}, StatusOf(rec))
	require.Equal(t, map[string]any{"phase": "reported"}, StatusOf(got))
	// ByIndexRecords: an index's objects as the cache holds them, the
	// copy in the mailbox as its record and the object outside as it is.
	indexed := ByIndexRecords(inf, "source", "wds")
	require.Len(t, indexed, 2)
	var indexedCopies []*Copy
	for _, obj := range indexed {
		if c, ok := obj.(*Copy); ok {
			indexedCopies = append(indexedCopies, c)
		} else {
			require.Same(t, whole, obj, "an object outside the mailboxes as it is cached")
		}
	}
	require.Len(t, indexedCopies, 1)
	require.Equal(t, "mb", SpaceOf(indexedCopies[0]))
	require.Equal(t, map[string]any{"phase": "reported"}, StatusOf(indexedCopies[0]))
	wdsRecords := InSpaceRecords(inf, "wds")
	require.Len(t, wdsRecords, 1)
	require.Same(t, whole, wdsRecords[0], "an object outside the mailboxes as it is cached")
	mu.Lock()
	defer mu.Unlock()
	require.Empty(t, notExpanded, "what saw a record instead of an object")
	require.Empty(t, notRecords, "what saw a copy in a mailbox other than as its record")
}
