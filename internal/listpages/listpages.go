// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package listpages changes the items of each page a ListerWatcher's
// lists return, before a reflector gathers them.
//
// A reflector gathers every page of a list before its store sees any:
// a cache that keeps a little of each object (the trimmed copies of
// mailboxes, the dashboard's records) still held every object whole
// while a restart listed them all. Reducing each page as it arrives
// bounds that to one page.
package listpages

import (
	"context"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Map returns lw with each item of its lists' pages replaced by what fn
// returns for it. Watches, and whether lists may be streamed, are lw's.
// Lists of other than unstructured objects are returned as they are.
func Map(lw cache.ListerWatcher, fn func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) cache.ListerWatcher {
	return mapPages(lw, func(list *unstructured.UnstructuredList) (runtime.Object, error) {
		for i := range list.Items {
			out, err := fn(&list.Items[i])
			if err != nil {
				return nil, err
			}
			list.Items[i] = *out
		}
		return list, nil
	})
}

// MapObjects is Map for a fn whose results may be objects of any type
// (a cache's own records): each page comes back as a list of
// runtime.Objects (metainternalversion.List), which a reflector reads as
// it reads any list, with the page's resource version and continue token.
func MapObjects(lw cache.ListerWatcher, fn func(*unstructured.Unstructured) (runtime.Object, error)) cache.ListerWatcher {
	return mapPages(lw, func(list *unstructured.UnstructuredList) (runtime.Object, error) {
		out := &metainternalversion.List{Items: make([]runtime.Object, 0, len(list.Items))}
		out.ResourceVersion, out.Continue, out.RemainingItemCount = list.GetResourceVersion(), list.GetContinue(), list.GetRemainingItemCount()
		for i := range list.Items {
			item := list.Items[i] // its own, not a pointer into the page
			obj, err := fn(&item)
			if err != nil {
				return nil, err
			}
			out.Items = append(out.Items, obj)
		}
		return out, nil
	})
}

// mapPages returns lw with each page of unstructured objects its lists
// return replaced by what page makes of it.
func mapPages(lw cache.ListerWatcher, page func(*unstructured.UnstructuredList) (runtime.Object, error)) cache.ListerWatcher {
	inner := cache.ToListerWatcherWithContext(lw)
	return cache.ToListWatcherWithWatchListSemantics(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			obj, err := inner.ListWithContext(ctx, opts)
			if err != nil {
				return nil, err
			}
			list, ok := obj.(*unstructured.UnstructuredList)
			if !ok {
				return obj, nil
			}
			return page(list)
		},
		WatchFuncWithContext: inner.WatchWithContext,
	}, lw)
}
