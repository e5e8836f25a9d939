// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/server/storage"
	"github.com/kubestellar/kubestellar/spaces"
)

// ListerWatcher lists and watches the objects of a built-in resource in a
// space (spaces.Wildcard: in every space) straight from its registry, in
// the server's own process, as unstructured objects: what a dynamic
// client's list and watch return, without the round trip.
//
// The controllers' caches and the dashboard watch every object of the
// resources they place in every space, mailbox copies included: with a
// fan-out of 100,000 copies, encoding each event to JSON in the server and
// decoding it again in each watcher (the framing scan, then the decode)
// was a fifth of the server's CPU, and much of the garbage it collected.
// Here an event costs the conversion of the object the storage decoded.
// A request's checks do not apply: the callers are the server's own, with
// its loopback identity's full rights. Custom resources, and Namespaces,
// are not served here (false): use the API.
func (w *storeWriter) ListerWatcher(gvr schema.GroupVersionResource, space, labelSelector string) (cache.ListerWatcher, bool) {
	return w.ListerWatcherConverting(gvr, space, labelSelector, nil)
}

// ListerWatcherConverting is ListerWatcher, but each object is first
// offered to convert (when set), and made unstructured only when convert
// declines it: a cache that keeps a record of some objects makes it from
// the typed object, without an unstructured one in between. Its lists are
// then lists of objects (metainternalversion.List), each what convert made
// or an unstructured object. convert must only read what it is given.
func (w *storeWriter) ListerWatcherConverting(gvr schema.GroupVersionResource, space, labelSelector string,
	convert func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (cache.ListerWatcher, bool) {
	store, ok := w.stores[gvr]
	if !ok {
		return nil, false
	}
	gvk := w.kinds[gvr]
	in := func(ctx context.Context) context.Context {
		return request.WithNamespace(request.WithUser(spaces.WithSpace(ctx, space), w.user), metav1.NamespaceAll)
	}
	options := func(opts metav1.ListOptions) (*metainternalversion.ListOptions, error) {
		opts.LabelSelector = labelSelector
		var out metainternalversion.ListOptions
		if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, &out, nil); err != nil {
			return nil, err
		}
		return &out, nil
	}
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			o, err := options(opts)
			if err != nil {
				return nil, err
			}
			// The callers' caches list every object of the resource, a
			// page at a time, and never read how many remain.
			list, err := store.List(storage.WithoutRemainingCount(in(ctx)), o)
			if err != nil {
				return nil, err
			}
			if convert != nil {
				return convertedList(list, gvk, convert)
			}
			return unstructuredList(list, gvk)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			if opts.SendInitialEvents != nil {
				// Refused, as the API refuses it (see the return below).
				return nil, apierrors.NewBadRequest("sendInitialEvents: this server does not stream lists")
			}
			opts.Watch = true
			o, err := options(opts)
			if err != nil {
				return nil, err
			}
			events, err := store.Watch(in(ctx), o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(events, func(e watch.Event) (watch.Event, bool) {
				if e.Type == watch.Error {
					return e, true
				}
				obj, err := convertOne(e.Object, gvk, convert)
				if err != nil {
					return watch.Event{Type: watch.Error, Object: &metav1.Status{Status: metav1.StatusFailure, Message: err.Error(), Reason: metav1.StatusReasonInternalError, Code: 500}}, true
				}
				e.Object = obj
				return e, true
			}), nil
		},
	}
	// No streaming lists: the server turns them off (server/config.go),
	// and its storage then ignores SendInitialEvents, so that a watch
	// asking for them would start at the datastore's oldest revision. A
	// reflector lists, then watches, as the API's clients fall back to.
	return cache.ToListWatcherWithWatchListSemantics(lw, noWatchList{}), true
}

// noWatchList says a ListerWatcher does not stream lists (see
// k8s.io/client-go/util/watchlist).
type noWatchList struct{}

func (noWatchList) IsWatchListSemanticsUnSupported() bool { return true }

// toUnstructured converts an object the registry returned to an
// unstructured object of gvk. The object is only read: one from a watch
// cache is the cache's.
func toUnstructured(obj runtime.Object, gvk schema.GroupVersionKind) (*unstructured.Unstructured, error) {
	if co, ok := obj.(runtime.CacheableObject); ok {
		obj = co.GetObject()
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", gvk.Kind, err)
	}
	u := &unstructured.Unstructured{Object: content}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// convertOne returns what convert makes of an object the registry
// returned, or, when convert is nil or declines it, the object as
// unstructured.
func convertOne(obj runtime.Object, gvk schema.GroupVersionKind, convert func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (runtime.Object, error) {
	if convert != nil {
		inner := obj
		if co, ok := obj.(runtime.CacheableObject); ok {
			inner = co.GetObject()
		}
		if out, ok := convert(inner, gvk); ok {
			return out, nil
		}
	}
	return toUnstructured(obj, gvk)
}

// listParts returns the items of a list the registry returned, and its
// metadata.
func listParts(list runtime.Object) ([]runtime.Object, metav1.ListInterface, error) {
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil, nil, err
	}
	lm, err := meta.ListAccessor(list)
	if err != nil {
		return nil, nil, err
	}
	return items, lm, nil
}

// convertedList converts the items of a list the registry returned, as
// convertOne does.
func convertedList(list runtime.Object, gvk schema.GroupVersionKind, convert func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool)) (*metainternalversion.List, error) {
	items, lm, err := listParts(list)
	if err != nil {
		return nil, err
	}
	out := &metainternalversion.List{Items: make([]runtime.Object, 0, len(items))}
	out.ResourceVersion, out.Continue = lm.GetResourceVersion(), lm.GetContinue()
	for _, item := range items {
		obj, err := convertOne(item, gvk, convert)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, obj)
	}
	return out, nil
}

// unstructuredList converts a list the registry returned.
func unstructuredList(list runtime.Object, gvk schema.GroupVersionKind) (*unstructured.UnstructuredList, error) {
	items, lm, err := listParts(list)
	if err != nil {
		return nil, err
	}
	out := &unstructured.UnstructuredList{Object: map[string]any{}, Items: make([]unstructured.Unstructured, 0, len(items))}
	out.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	out.SetResourceVersion(lm.GetResourceVersion())
	out.SetContinue(lm.GetContinue())
	// No remainingItemCount: the list's pages do not count what follows
	// them (storage.WithoutRemainingCount).
	for _, item := range items {
		u, err := toUnstructured(item, gvk)
		if err != nil {
			return nil, err
		}
		out.Items = append(out.Items, *u)
	}
	return out, nil
}
