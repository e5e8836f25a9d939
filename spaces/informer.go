package spaces

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// KeyFunc keys an object by space, namespace and name
// ("space|namespace/name", or "space|name" for cluster-scoped objects), from
// its kubestellar.io/space annotation. Use it wherever objects of several
// spaces share a cache or a queue.
func KeyFunc(obj any) (string, error) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return d.Key, nil
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
	return NewTransformingInformer(lw, objType, resync, handler, nil)
}

// NewTransformingInformer is NewInformer with a transform applied to each
// object (after managedFields are dropped) before it is cached and handed
// to the handler; nil applies none.
func NewTransformingInformer(lw cache.ListerWatcher, objType runtime.Object, resync time.Duration, handler cache.ResourceEventHandler,
	transform cache.TransformFunc) (cache.Indexer, cache.Controller) {
	indexer := cache.NewIndexer(KeyFunc, cache.Indexers{})
	transformer := dropManagedFields
	if transform != nil {
		transformer = func(obj any) (any, error) {
			obj, err := dropManagedFields(obj)
			if err != nil {
				return nil, err
			}
			return transform(obj)
		}
	}
	fifo := cache.NewDeltaFIFOWithOptions(cache.DeltaFIFOOptions{KeyFunction: KeyFunc, KnownObjects: indexer, EmitDeltaTypeReplaced: true,
		Transformer: transformer})
	cfg := &cache.Config{
		Queue:            fifo,
		ListerWatcher:    lw,
		ObjectType:       objType,
		FullResyncPeriod: resync,
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

// dropManagedFields removes what no controller reads and what is often half
// of an object's size, before the object is cached.
func dropManagedFields(obj any) (any, error) {
	if accessor, err := meta.Accessor(obj); err == nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}
