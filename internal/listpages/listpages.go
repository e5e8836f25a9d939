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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// Map returns lw with each item of its lists' pages replaced by what fn
// returns for it. Watches, and whether lists may be streamed, are lw's.
// Lists of other than unstructured objects are returned as they are.
func Map(lw cache.ListerWatcher, fn func(*unstructured.Unstructured) (*unstructured.Unstructured, error)) cache.ListerWatcher {
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
			for i := range list.Items {
				out, err := fn(&list.Items[i])
				if err != nil {
					return nil, err
				}
				list.Items[i] = *out
			}
			return list, nil
		},
		WatchFuncWithContext: inner.WatchWithContext,
	}, lw)
}
