package crossspace

import (
	"context"
	"strings"
	"sync"
	"unique"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// SharedDynamic is one cache per resource across all spaces, shared by the
// controllers that need the same resources (workload objects and their
// mailbox copies), so that each object is held in memory once.
type SharedDynamic struct {
	clients  *Clients
	mu       sync.Mutex
	ctx      context.Context
	indexers cache.Indexers
	handlers []func(gvr schema.GroupVersionResource) cache.ResourceEventHandler
	byGVR    map[schema.GroupVersionResource]*Informer
	// isMailbox, when set, says which spaces are mailboxes: the placement
	// translator's copies there are cached trimmed (see TrimCopies).
	isMailbox func(space string) bool
}

// NewSharedDynamic returns an empty set of shared caches.
func (c *Clients) NewSharedDynamic() *SharedDynamic {
	return &SharedDynamic{clients: c, indexers: cache.Indexers{}, byGVR: map[schema.GroupVersionResource]*Informer{}}
}

// AddIndexers adds indexes to every cache; call it before Start.
func (s *SharedDynamic) AddIndexers(indexers cache.Indexers) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, fn := range indexers {
		s.indexers[name] = fn
	}
}

// AddHandler registers, for every cache, the event handler a controller
// wants for it; call it before Start.
func (s *SharedDynamic) AddHandler(handler func(gvr schema.GroupVersionResource) cache.ResourceEventHandler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers = append(s.handlers, handler)
}

// TrimCopies makes the caches hold, of each copy the placement translator
// made in a mailbox (a space isMailbox says is one, and an object labelled
// edgev2alpha1.PlacementCopyLabel there), only what the controllers read of
// it: its metadata and its status. What it was made from is in the WDS,
// and whether it still matches is its content hash (an annotation). With
// every object placed on every SyncTarget, the copies are most of what is
// cached, and their bodies most of that. Objects elsewhere, and those of a
// mailbox the translator did not make (upsynced ones), are cached whole;
// so is a copy while isMailbox does not know its space yet. Call it before
// the first For: each cache takes the rule when it is made.
func (s *SharedDynamic) TrimCopies(isMailbox func(space string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isMailbox = isMailbox
}

// trimmer returns the caches' transform for TrimCopies (nil when unset).
func trimmer(isMailbox func(space string) bool) cache.TransformFunc {
	if isMailbox == nil {
		return nil
	}
	// Nearly every copy keeps one label, the copy label: they share one map
	// of it (a cached object is read-only).
	onlyCopyLabel := map[string]any{edgev2alpha1.PlacementCopyLabel: "true"}
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || u.GetLabels()[edgev2alpha1.PlacementCopyLabel] != "true" || !isMailbox(SpaceOf(u)) {
			return obj, nil
		}
		return trimCopy(u, onlyCopyLabel), nil
	}
}

// Start lets caches run from now on, until ctx is done.
func (s *SharedDynamic) Start(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ctx = ctx
	for _, inf := range s.byGVR {
		go inf.RunWithContext(ctx)
	}
}

// For returns the cache of a resource, creating it (and running it, once
// started) on first use.
func (s *SharedDynamic) For(gvr schema.GroupVersionResource) *Informer {
	s.mu.Lock()
	defer s.mu.Unlock()
	if inf, ok := s.byGVR[gvr]; ok {
		return inf
	}
	var fanout []cache.ResourceEventHandler
	for _, h := range s.handlers {
		fanout = append(fanout, h(gvr))
	}
	inf := s.clients.dynamicInformer(gvr, "", cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			for _, h := range fanout {
				h.OnAdd(obj, false)
			}
		},
		UpdateFunc: func(old, obj any) {
			for _, h := range fanout {
				h.OnUpdate(old, obj)
			}
		},
		DeleteFunc: func(obj any) {
			for _, h := range fanout {
				h.OnDelete(obj)
			}
		},
	}, trimmer(s.isMailbox))
	if len(s.indexers) > 0 {
		if err := inf.AddIndexers(s.indexers); err != nil {
			panic(err) // only fails once objects are cached
		}
	}
	s.byGVR[gvr] = inf
	if s.ctx != nil {
		go inf.RunWithContext(s.ctx)
	}
	return inf
}

// Each calls fn for every cache created so far.
func (s *SharedDynamic) Each(fn func(gvr schema.GroupVersionResource, inf *Informer)) {
	s.mu.Lock()
	all := make(map[schema.GroupVersionResource]*Informer, len(s.byGVR))
	for gvr, inf := range s.byGVR {
		all[gvr] = inf
	}
	s.mu.Unlock()
	for gvr, inf := range all {
		fn(gvr, inf)
	}
}

// trimCopy returns a copy's apiVersion, kind, status and the metadata the
// controllers read: its identity, resource version, deletion and
// kubestellar's own labels and annotations (not those it carries from its
// source, such as a last-applied configuration). Labels that are the copy
// label alone are onlyCopyLabel, one map shared by the copies.
func trimCopy(u *unstructured.Unstructured, onlyCopyLabel map[string]any) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: make(map[string]any, 4)}
	for _, k := range []string{"apiVersion", "kind"} {
		if v, ok := u.Object[k]; ok {
			out.Object[k] = intern(v)
		}
	}
	if v, ok := u.Object["status"]; ok {
		out.Object["status"] = v
	}
	md, ok := u.Object["metadata"].(map[string]any)
	if !ok {
		return out
	}
	trimmed := make(map[string]any, 8)
	for _, k := range []string{"name", "namespace"} {
		if v, ok := md[k]; ok {
			trimmed[k] = intern(v)
		}
	}
	for _, k := range []string{"uid", "resourceVersion", "generation", "deletionTimestamp"} {
		if v, ok := md[k]; ok {
			trimmed[k] = v
		}
	}
	for _, k := range []string{"labels", "annotations"} {
		if m, ok := md[k].(map[string]any); ok {
			ours := make(map[string]any, len(m))
			for key, v := range m {
				if isKubestellars(key) {
					ours[unique.Make(key).Value()] = intern(v)
				}
			}
			if k == "labels" && len(ours) == 1 && ours[edgev2alpha1.PlacementCopyLabel] == "true" {
				trimmed[k] = onlyCopyLabel
				continue
			}
			trimmed[k] = ours
		}
	}
	out.Object["metadata"] = trimmed
	return out
}

// internMax is the longest string value intern shares.
const internMax = 256

// intern returns a string value as the copy of it unique.Make keeps, other
// values as they are. Most of what is kept of a copy repeats across
// mailboxes: the names of the objects placed, their namespace, kind and
// source, the placements and the content hash are the same in every
// mailbox a placement reaches. Decoded, each copy would hold its own.
// unique holds its copy weakly, by the handle this drops, so a garbage
// collection forgets it: the copies decoded between two collections share
// one (a placement's copies are made, and a restart lists them, in far
// fewer collections than copies), not the whole cache. In make bench's
// fan-out this cut the live heap by 14 %. What is interned is the string
// as a value of an interface (boxed): a string put in a map[string]any is
// boxed, 16 bytes of its own per value, unless the box is shared too.
func intern(v any) any {
	if s, ok := v.(string); ok && len(s) <= internMax {
		return unique.Make(boxed{v}).Value().v
	}
	return v
}

// boxed holds a string in an interface value, for intern.
type boxed struct{ v any }

// isKubestellars tells whether a label or annotation key is in one of
// kubestellar's domains (kubestellar.io and its subdomains).
func isKubestellars(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "kubestellar.io" || strings.HasSuffix(prefix, ".kubestellar.io"))
}
