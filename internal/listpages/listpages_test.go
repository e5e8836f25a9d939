// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package listpages

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/watchlist"
)

type noWatchList struct{ *cache.ListWatch }

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// TestMap: each item of each page is what fn made of it, in order; an
// error of fn fails the list; typed lists and watches pass as they are;
// whether lists may be streamed is the inner ListerWatcher's.
func TestMap(t *testing.T) {
	ctx := context.Background()
	var page runtime.Object
	watched := watch.NewFake()
	inner := &cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return page, nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watched, nil },
	}
	item := func(name string) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"data": map[string]any{"big": "body"}}}
		u.SetName(name)
		return u
	}
	rename := func(u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		if u.GetName() == "bad" {
			return nil, errors.New("no")
		}
		out := &unstructured.Unstructured{}
		out.SetName(u.GetName() + "-slim")
		return out, nil
	}
	lw := cache.ToListerWatcherWithContext(Map(inner, rename))

	page = &unstructured.UnstructuredList{Items: []unstructured.Unstructured{item("a"), item("b")}}
	got, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	items := got.(*unstructured.UnstructuredList).Items
	require.Len(t, items, 2)
	for i, name := range []string{"a-slim", "b-slim"} {
		require.Equal(t, name, items[i].GetName())
		require.NotContains(t, items[i].Object, "data")
	}

	page = &unstructured.UnstructuredList{Items: []unstructured.Unstructured{item("a"), item("bad")}}
	_, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	require.EqualError(t, err, "no")

	typed := &corev1.ConfigMapList{Items: []corev1.ConfigMap{{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}}
	page = typed
	got, err = lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Same(t, typed, got)

	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Same(t, watched, w)

	require.False(t, watchlist.DoesClientNotSupportWatchListSemantics(Map(inner, rename)))
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(Map(noWatchList{inner}, rename)))
}

// TestMapObjects: each page comes back as a list of what fn made of its
// items, keeping the page's resource version and place in the list, and
// a reflector reads it as it reads any list.
func TestMapObjects(t *testing.T) {
	ctx := context.Background()
	page := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{{Object: map[string]any{"data": "a"}}, {Object: map[string]any{"data": "b"}}}}
	page.Items[0].SetName("a")
	page.Items[1].SetName("bad")
	page.SetResourceVersion("9")
	page.SetContinue("more")
	inner := &cache.ListWatch{
		ListWithContextFunc:  func(context.Context, metav1.ListOptions) (runtime.Object, error) { return page.DeepCopy(), nil },
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watch.NewFake(), nil },
	}
	toConfigMap := func(u *unstructured.Unstructured) (runtime.Object, error) {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: u.GetName() + "-record"}}, nil
	}
	got, err := cache.ToListerWatcherWithContext(MapObjects(inner, toConfigMap)).ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	lm, err := meta.ListAccessor(got)
	require.NoError(t, err)
	require.Equal(t, "9", lm.GetResourceVersion())
	require.Equal(t, "more", lm.GetContinue())
	items, err := meta.ExtractListWithAlloc(got)
	require.NoError(t, err)
	require.Len(t, items, 2)
	require.Equal(t, "a-record", items[0].(*corev1.ConfigMap).Name)
	require.Equal(t, "bad-record", items[1].(*corev1.ConfigMap).Name)

	_, err = cache.ToListerWatcherWithContext(MapObjects(inner, func(u *unstructured.Unstructured) (runtime.Object, error) {
		if u.GetName() == "bad" {
			return nil, errors.New("no")
		}
		return u, nil
	})).ListWithContext(ctx, metav1.ListOptions{})
	require.EqualError(t, err, "no")
	require.True(t, watchlist.DoesClientNotSupportWatchListSemantics(MapObjects(noWatchList{inner}, toConfigMap)))
}
