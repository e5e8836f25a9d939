// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
)

// Enqueue adds obj's key (KeyFunc) to q; an object that has none is
// reported, not queued.
func Enqueue(q interface{ Add(string) }, obj any) {
	key, err := KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	q.Add(key)
}

// KeyFunc keys an object by space, namespace and name
// ("space|namespace/name", or "space|name" for cluster-scoped objects), from
// its kubestellar.io/space annotation. Use it wherever objects of several
// spaces share a cache or a queue.
func KeyFunc(obj any) (string, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, nil
	}
	if k, ok := obj.(Keyed); ok {
		return k.CacheKey(), nil
	}
	if s, ok := obj.(Spaced); ok {
		return Key(s.Space(), s.GetNamespace(), s.GetName()), nil
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	space := accessor.GetAnnotations()[Annotation]
	if space == "" {
		return "", fmt.Errorf("object %s/%s carries no %s annotation", accessor.GetNamespace(), accessor.GetName(), Annotation)
	}
	return Key(space, accessor.GetNamespace(), accessor.GetName()), nil
}

// Spaced is a cached record that knows its space without its annotations
// (which a metav1.Object builds as a new map at each call, as an
// unstructured object does).
type Spaced interface {
	metav1.Object
	Space() string
}

// Keyed is a cached record that keeps its key (what Key makes of its
// space, namespace and name), so that the cache's key and the record's
// are one string.
type Keyed interface {
	CacheKey() string
}

// Key builds the key KeyFunc returns.
func Key(space, namespace, name string) string {
	if namespace == "" {
		return space + "|" + name
	}
	return space + "|" + namespace + "/" + name
}

// SplitKey splits a key made by Key.
func SplitKey(key string) (space, namespace, name string, err error) {
	space, rest, ok := strings.Cut(key, "|")
	if !ok {
		return "", "", "", fmt.Errorf("key %q has no space", key)
	}
	namespace, name, ok = strings.Cut(rest, "/")
	if !ok {
		return space, "", namespace, nil
	}
	return space, namespace, name, nil
}

// NewInformer returns an informer over a list/watch across spaces (a client
// for the wildcard space), whose cache is keyed by KeyFunc. client-go's
// shared informers key by namespace and name only, so two spaces' objects
// of the same name would overwrite each other there.
func NewInformer(lw cache.ListerWatcher, objType runtime.Object, resync time.Duration, handler cache.ResourceEventHandler) (cache.Indexer, cache.Controller) {
	return NewInformerWithOptions(lw, objType, handler, InformerOptions{Resync: resync})
}

// InformerOptions tune NewInformerWithOptions.
type InformerOptions struct {
	// Resync is how often the handler is handed every cached object
	// again (as an update to itself); 0 never.
	Resync time.Duration
	// Transform, when set, is applied to each object (after managedFields
	// are dropped) before it is cached and handed to the handler.
	Transform cache.TransformFunc
	// NoResync, when set, leaves out of each resync the cached objects it
	// is true for. A resync queues every object it hands on at once: with
	// a fleet's mailbox copies cached, a million of them.
	NoResync func(obj any) bool
}

// NewInformerWithOptions is NewInformer with options.
func NewInformerWithOptions(lw cache.ListerWatcher, objType runtime.Object, handler cache.ResourceEventHandler,
	opts InformerOptions) (cache.Indexer, cache.Controller) {
	indexer := cache.NewIndexer(KeyFunc, cache.Indexers{})
	transformer := dropManagedFields
	if transform := opts.Transform; transform != nil {
		transformer = func(obj any) (any, error) {
			obj, err := dropManagedFields(obj)
			if err != nil {
				return nil, err
			}
			return transform(obj)
		}
	}
	var known cache.KeyListerGetter = indexer
	var view *resyncView
	if opts.NoResync != nil {
		view = &resyncView{Indexer: indexer, skip: opts.NoResync}
		known = view
	}
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KeyFunction: KeyFunc, KnownObjects: known, EmitDeltaTypeReplaced: true,
		Transformer: transformer})
	var queue cache.Queue = fifo
	if view != nil {
		queue = &resyncFiltering{DeltaFIFO: fifo, view: view}
	}
	cfg := &cache.Config{
		Queue:            queue,
		ListerWatcher:    lw,
		ObjectType:       objType,
		FullResyncPeriod: opts.Resync,
		Process: func(obj any, isInInitialList bool) error {
			deltas, ok := obj.(cache.Deltas)
			if !ok {
				return errors.New("informer queue gave no deltas")
			}
			for _, d := range deltas {
				if d.Type == cache.Deleted {
					if err := indexer.Delete(d.Object); err != nil {
						return err
					}
					handler.OnDelete(d.Object)
					continue
				}
				old, exists, err := indexer.Get(d.Object)
				if err != nil {
					return err
				}
				if exists {
					if err := indexer.Update(d.Object); err != nil {
						return err
					}
					handler.OnUpdate(old, d.Object)
					continue
				}
				if err := indexer.Add(d.Object); err != nil {
					return err
				}
				handler.OnAdd(d.Object, isInInitialList)
			}
			return nil
		},
	}
	return indexer, cache.New(cfg)
}

// resyncView is what a DeltaFIFO knows of the cache: all of it, but while
// resyncing, when it lists only the objects to hand on again. The queue
// lists the cache's keys for two things: a resync, and a relist's Replace,
// which must see every key to tell which objects were deleted meanwhile.
// resyncFiltering keeps the two apart.
type resyncView struct {
	cache.Indexer
	skip func(obj any) bool
	// resyncing is set by resyncFiltering.Resync, under its mutex.
	resyncing bool
}

func (v *resyncView) ListKeys() []string {
	keys := v.Indexer.ListKeys()
	if !v.resyncing {
		return keys
	}
	kept := keys[:0]
	for _, k := range keys {
		if obj, ok, err := v.GetByKey(k); err == nil && ok && !v.skip(obj) {
			kept = append(kept, k)
		}
	}
	return kept
}

// resyncFiltering is a DeltaFIFO whose resyncs leave out what its
// resyncView skips.
type resyncFiltering struct {
	*cache.DeltaFIFO
	// mu keeps a resync's filtered listing from a relist's Replace.
	mu   sync.Mutex
	view *resyncView
}

func (q *resyncFiltering) Resync() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.view.resyncing = true
	defer func() { q.view.resyncing = false }()
	return q.DeltaFIFO.Resync()
}

func (q *resyncFiltering) Replace(list []any, rv string) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.DeltaFIFO.Replace(list, rv)
}

// DropManagedFields is a cache.TransformFunc that removes what no
// controller reads and what is often half of an object's size, before the
// object is cached.
func DropManagedFields(obj any) (any, error) { return dropManagedFields(obj) }

func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// KeepOnly returns a cache.TransformFunc for a cache of unstructured
// objects whose readers read a few fields: of each object it keeps its
// identity (apiVersion, kind, name, namespace, UID, resourceVersion,
// generation, deletionTimestamp and its space annotation, which KeyFunc
// reads) and the fields at the paths given, and drops the rest. A custom
// resource decoded from JSON is a tree of maps, several kilobytes each
// even for a small object; a cache of every SyncTarget or Space of a
// fleet that reads a name, a UID and a phase need not hold them whole.
// Objects that are not unstructured pass as they are.
func KeepOnly(paths ...[]string) cache.TransformFunc {
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		kept := map[string]any{}
		for _, k := range []string{"apiVersion", "kind"} {
			if v, ok := u.Object[k]; ok {
				kept[k] = v
			}
		}
		md := map[string]any{}
		if src, ok := u.Object["metadata"].(map[string]any); ok {
			for _, k := range []string{"name", "namespace", "uid", "resourceVersion", "generation", "deletionTimestamp"} {
				if v, ok := src[k]; ok {
					md[k] = v
				}
			}
			if ann, ok := src["annotations"].(map[string]any); ok {
				if space, ok := ann[Annotation]; ok {
					md["annotations"] = map[string]any{Annotation: space}
				}
			}
		}
		kept["metadata"] = md
		for _, path := range paths {
			if v, found, err := unstructured.NestedFieldNoCopy(u.Object, path...); err == nil && found {
				setNoCopy(kept, v, path)
			}
		}
		return &unstructured.Unstructured{Object: kept}, nil
	}
}

// setNoCopy sets obj's field at path to v, making the maps on the way:
// the object the value comes from is the decoder's and is dropped, so
// nothing else holds v.
func setNoCopy(obj map[string]any, v any, path []string) {
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}
