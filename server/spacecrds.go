// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"slices"
	"sync"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/server/customresources"
	"github.com/kubestellar/kubestellar/spaces"
)

// spaceCRDCache is the cache of every space's CRDs, with CRDs stored per
// space (--crds-per-space): keyed by space and name (spaces.KeyFunc),
// indexed by name (crdsByName) and by the spaces that serve each
// (crdsBySpace). What custom resources are served by, what a space's
// discovery and quota read, and what the status of its CRDs is made from.
type spaceCRDCache struct {
	indexer    cache.Indexer
	controller cache.Controller

	specs *customresources.Specs

	mu       sync.RWMutex
	handlers []*crdHandler
}

// crdHandler is a handler added, and its registration: handed every
// cached CRD as it is added, it has synced once the cache has.
type crdHandler struct {
	cache.ResourceEventHandler
	of *spaceCRDCache
}

func (h *crdHandler) HasSynced() bool                     { return h.of.controller.HasSynced() }
func (h *crdHandler) HasSyncedChecker() cache.DoneChecker { return h.of.controller.HasSyncedChecker() }

func newSpaceCRDCache(loopback *rest.Config) (*spaceCRDCache, error) {
	client, err := apiextensionsclient.NewForConfig(spaces.ScopedConfig(loopback))
	if err != nil {
		return nil, err
	}
	crds := client.ApiextensionsV1().CustomResourceDefinitions()
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return crds.List(wildcard(ctx), opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return crds.Watch(wildcard(ctx), opts)
		},
	}
	// 1,000 spaces with the same CRD hold its spec once.
	c := &spaceCRDCache{specs: customresources.NewSpecs()}
	c.indexer, c.controller = spaces.NewInformerWithOptions(lw, &apiextensionsv1.CustomResourceDefinition{}, c, spaces.InformerOptions{
		Transform: func(obj any) (any, error) {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				return c.specs.Intern(crd), nil
			}
			return obj, nil
		}})
	if err := c.indexer.AddIndexers(cache.Indexers{crdsByName: crdName, crdsBySpace: crdSpaces}); err != nil {
		return nil, err
	}
	return c, nil
}

// run runs the cache until ctx is done, and waits until it has synced.
func (c *spaceCRDCache) run(ctx context.Context) error {
	go c.controller.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), c.controller.HasSynced) {
		return errors.New("the cache of every space's CRDs did not sync")
	}
	return nil
}

// HasSynced tells whether the cache has synced.
func (c *spaceCRDCache) HasSynced() bool { return c.controller.HasSynced() }

// GetIndexer returns the cache.
func (c *spaceCRDCache) GetIndexer() cache.Indexer { return c.indexer }

// AddIndexers adds indexes, to a cache filled or not.
func (c *spaceCRDCache) AddIndexers(indexers cache.Indexers) error {
	return c.indexer.AddIndexers(indexers)
}

// AddEventHandler adds a handler, which is handed the cached CRDs first,
// as added: a handler added after the cache has run sees them all too.
// An event in between may reach it twice.
func (c *spaceCRDCache) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	added := &crdHandler{ResourceEventHandler: h, of: c}
	c.handlers = append(c.handlers, added)
	for _, obj := range c.indexer.List() {
		h.OnAdd(obj, true)
	}
	return added, nil
}

// RemoveEventHandler removes a handler AddEventHandler added.
func (c *spaceCRDCache) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.handlers = slices.DeleteFunc(c.handlers, func(h *crdHandler) bool { return cache.ResourceEventHandlerRegistration(h) == reg })
}

// forTerm returns a view of the cache whose handlers RemoveAll removes:
// a leader's controllers are made anew for each term.
func (c *spaceCRDCache) forTerm() *termCRDCache { return &termCRDCache{spaceCRDCache: c} }

type termCRDCache struct {
	*spaceCRDCache
	added []cache.ResourceEventHandlerRegistration
}

func (t *termCRDCache) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg, err := t.spaceCRDCache.AddEventHandler(h)
	t.added = append(t.added, reg)
	return reg, err
}

// RemoveAll removes the handlers added through the view.
func (t *termCRDCache) RemoveAll() {
	for _, reg := range t.added {
		t.RemoveEventHandler(reg)
	}
}

func (c *spaceCRDCache) each(f func(cache.ResourceEventHandler)) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, h := range c.handlers {
		f(h)
	}
}

func (c *spaceCRDCache) OnAdd(obj any, initial bool) {
	c.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
}

func (c *spaceCRDCache) OnUpdate(old, obj any) {
	c.forget(old)
	c.each(func(h cache.ResourceEventHandler) { h.OnUpdate(old, obj) })
}

func (c *spaceCRDCache) OnDelete(obj any) {
	c.forget(obj)
	c.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// forget lets go of the spec of a CRD that left the cache.
func (c *spaceCRDCache) forget(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
		c.specs.Forget(crd)
	}
}
