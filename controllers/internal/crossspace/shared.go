// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"context"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
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
	// defs, when set, say which custom resources are read one definition
	// at a time (ForIn), into byDefinition.
	defs         Definitions
	byDefinition map[definitionKey]*definitionCache
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
// it, as a Copy record: its metadata and its status. The caches' readers
// (Get, InSpace, List, ByIndex) see the record as the unstructured object
// it stands for (Expand); the handlers and the indexes added here see the
// record itself, a metav1.Object, and must not assume an unstructured
// object (Label, Annotation, SpaceOf and StatusOf read either). What it was
// made from is in the WDS, and whether it still matches is its content
// hash (an annotation). With every object placed on every SyncTarget, the
// copies are most of what is cached, and their bodies most of that.
// Objects elsewhere, and those of a mailbox the translator did not make
// (upsynced ones), are cached whole; so is a copy while isMailbox does not
// know its space yet. Call it before the first For: each cache takes the
// rule when it is made.
func (s *SharedDynamic) TrimCopies(isMailbox func(space string) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.isMailbox = isMailbox
}

// trimmer returns the caches' transform for TrimCopies (nil when unset):
// a copy in a mailbox becomes its Copy record.
func trimmer(isMailbox func(space string) bool) cache.TransformFunc {
	if isMailbox == nil {
		return nil
	}
	return func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok || Label(u, edgev2alpha1.PlacementCopyLabel) != "true" || !isMailbox(SpaceOf(u)) {
			return obj, nil
		}
		return newCopy(u), nil
	}
}

// typedTrimmer is trimmer for the objects a LocalReader holds typed: a
// copy in a mailbox becomes its Copy record, made from the typed object
// (typedCopy), and anything else is declined (made unstructured, then
// given to trimmer). nil when TrimCopies is unset.
func typedTrimmer(isMailbox func(space string) bool) func(runtime.Object, schema.GroupVersionKind) (runtime.Object, bool) {
	if isMailbox == nil {
		return nil
	}
	return func(obj runtime.Object, gvk schema.GroupVersionKind) (runtime.Object, bool) {
		m, err := meta.Accessor(obj)
		if err != nil || m.GetLabels()[edgev2alpha1.PlacementCopyLabel] != "true" || !isMailbox(m.GetAnnotations()[spaces.Annotation]) {
			return nil, false
		}
		c, ok := typedCopy(obj, gvk)
		if !ok {
			return nil, false
		}
		return c, true
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
	for _, c := range s.byDefinition {
		s.runDefinition(c)
	}
}

// ReadByDefinition has ForIn read the custom resources that spaces define
// each as their own one definition at a time, as defs say; call it before
// the first ForIn. A cache of a definition no space serves any more is
// stopped at the next CRD event.
func (s *SharedDynamic) ReadByDefinition(defs Definitions) error {
	s.mu.Lock()
	s.defs, s.byDefinition = defs, map[definitionKey]*definitionCache{}
	s.mu.Unlock()
	_, err := defs.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, _ any) { s.retire() },
		DeleteFunc: func(any) { s.retire() },
	})
	return err
}

// ForIn returns the cache that holds a space's objects of a resource: the
// cache of every space's (For) but for a custom resource the space defines
// as its own, with CRDs per space (ReadByDefinition), whose cache is that
// of its definition's, made on first use. nil when the space serves no
// such custom resource (it has none of its objects).
func (s *SharedDynamic) ForIn(gvr schema.GroupVersionResource, space string) *Informer {
	s.mu.Lock()
	defs := s.defs
	s.mu.Unlock()
	if defs == nil || gvr.Group == "" {
		return s.For(gvr)
	}
	id, ok := defs.ReadBy(space, CustomResourceName(gvr.GroupResource()))
	switch {
	case !ok:
		return nil
	case id == "":
		return s.For(gvr)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := definitionKey{gvr: gvr, id: id}
	if c, ok := s.byDefinition[k]; ok {
		return c.Informer
	}
	c := &definitionCache{Informer: s.newCache(gvr, spaces.WildcardOf(id))}
	s.byDefinition[k] = c
	if s.ctx != nil {
		s.runDefinition(c)
	}
	return c.Informer
}

// runDefinition runs a definition's cache until it is retired; s.mu is
// held, and s.ctx set.
func (s *SharedDynamic) runDefinition(c *definitionCache) {
	ctx, stop := context.WithCancel(s.ctx)
	c.stop = stop
	go c.RunWithContext(ctx)
}

// retire stops the caches of the definitions no space serves any more:
// reading one would be refused from now on.
func (s *SharedDynamic) retire() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, c := range s.byDefinition {
		if !s.defs.Serves(k.id) {
			if c.stop != nil {
				c.stop()
			}
			delete(s.byDefinition, k)
		}
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
	inf := s.newCache(gvr, spaces.Wildcard)
	s.byGVR[gvr] = inf
	if s.ctx != nil {
		go inf.RunWithContext(s.ctx)
	}
	return inf
}

// newCache makes a cache of a resource read across spaces through the
// space named wildcard (spaces.Wildcard, or the wildcard of a definition),
// with the controllers' handlers and indexes; s.mu is held.
func (s *SharedDynamic) newCache(gvr schema.GroupVersionResource, wildcard string) *Informer {
	var fanout []cache.ResourceEventHandler
	for _, h := range s.handlers {
		fanout = append(fanout, h(gvr))
	}
	// The handlers and indexes see a Copy as the record it is (a
	// metav1.Object, whose labels, annotations and status Label,
	// Annotation and StatusOf read in place): a copy's event expanded for
	// them was a new unstructured object per event and index, garbage at
	// once, a twentieth of what the server allocated in a fan-out.
	inf := s.clients.dynamicInformer(gvr, wildcard, "", cache.ResourceEventHandlerFuncs{
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
	}, trimmer(s.isMailbox), typedTrimmer(s.isMailbox))
	if len(s.indexers) > 0 {
		if err := inf.AddIndexers(s.indexers); err != nil {
			panic(err) // only fails once objects are cached
		}
	}
	if s.isMailbox != nil {
		inf.Indexer = expanding{inf.Indexer}
	}
	return inf
}

// Each calls fn for every cache created so far: a resource read one
// definition at a time has a cache per definition.
func (s *SharedDynamic) Each(fn func(gvr schema.GroupVersionResource, inf *Informer)) {
	type entry struct {
		gvr schema.GroupVersionResource
		inf *Informer
	}
	s.mu.Lock()
	all := make([]entry, 0, len(s.byGVR)+len(s.byDefinition))
	for gvr, inf := range s.byGVR {
		all = append(all, entry{gvr, inf})
	}
	for k, c := range s.byDefinition {
		all = append(all, entry{k.gvr, c.Informer})
	}
	s.mu.Unlock()
	for _, e := range all {
		fn(e.gvr, e.inf)
	}
}

// IsKubestellars tells whether a label or annotation key is in one of
// kubestellar's domains (kubestellar.io and its subdomains).
func IsKubestellars(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "kubestellar.io" || strings.HasSuffix(prefix, ".kubestellar.io"))
}
