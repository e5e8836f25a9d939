package crossspace

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
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
	inf := s.clients.DynamicInformer(gvr, "", cache.ResourceEventHandlerFuncs{
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
	})
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
