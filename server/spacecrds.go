// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/controllers"
	"github.com/kubestellar/kubestellar/server/builtin"
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

	// definitions is what each CRD cached serves by, for the reads of
	// every space's custom resources of one definition (spaces.WildcardOf),
	// each decided at every event: the identity each CRD serves by, by
	// key, "" while it serves nothing, and the keys of the CRDs that
	// serve each identity.
	definitionsMu sync.RWMutex
	servedBy      map[string]string
	servers       map[string]map[string]bool
	// moved is told of the definitions whose set of spaces changed while
	// their spaces may hold objects (see OnUpdate), with the revision of
	// the change.
	moved func(ids []string, revision string)
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
	c := &spaceCRDCache{specs: customresources.NewSpecs(), servedBy: map[string]string{}, servers: map[string]map[string]bool{}}
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
	c.serve(obj)
	c.each(func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
}

func (c *spaceCRDCache) OnUpdate(old, obj any) {
	c.forget(old)
	before, now := c.serve(obj)
	if before != now && c.moved != nil {
		// A space whose CRD moves to another definition takes its
		// objects along: the reads of either definition across spaces
		// must list again. A CRD whose names were never accepted has no
		// objects, and one that starts serving then joins its
		// definition's reads as its objects come (a mailbox's CRD,
		// made as a fan-out starts): nothing to list again for it.
		var moved []string
		if before != "" {
			moved = append(moved, before)
		}
		if prev, ok := old.(*apiextensionsv1.CustomResourceDefinition); ok && now != "" && prev.Status.AcceptedNames.Plural != "" {
			moved = append(moved, now)
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && len(moved) > 0 {
			c.moved(moved, crd.ResourceVersion)
		}
	}
	c.each(func(h cache.ResourceEventHandler) { h.OnUpdate(old, obj) })
}

func (c *spaceCRDCache) OnDelete(obj any) {
	c.forget(obj)
	c.unserve(obj)
	c.each(func(h cache.ResourceEventHandler) { h.OnDelete(obj) })
}

// servedIdentity is the identity a CRD serves its custom resources by, or
// "" while it serves none: the dispatcher serves a CRD whose names are
// accepted or that is established.
func servedIdentity(crd *apiextensionsv1.CustomResourceDefinition) string {
	if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.NamesAccepted) &&
		!apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
		return ""
	}
	return customresources.Identity(crd)
}

// serve records what a CRD added or updated serves by, and returns what it
// served by before and now.
func (c *spaceCRDCache) serve(obj any) (before, now string) {
	crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
	if !ok {
		return "", ""
	}
	key, err := spaces.KeyFunc(crd)
	if err != nil {
		return "", ""
	}
	now = servedIdentity(crd)
	c.definitionsMu.Lock()
	defer c.definitionsMu.Unlock()
	before = c.servedBy[key]
	if before == now {
		return before, now
	}
	c.drop(key, before)
	c.servedBy[key] = now
	if now != "" {
		if c.servers[now] == nil {
			c.servers[now] = map[string]bool{}
		}
		c.servers[now][key] = true
	}
	return before, now
}

// unserve forgets a CRD deleted.
func (c *spaceCRDCache) unserve(obj any) {
	key, err := spaces.KeyFunc(obj)
	if err != nil {
		return
	}
	c.definitionsMu.Lock()
	defer c.definitionsMu.Unlock()
	c.drop(key, c.servedBy[key])
	delete(c.servedBy, key)
}

// drop forgets that key serves id; c.definitionsMu is held.
func (c *spaceCRDCache) drop(key, id string) {
	if id == "" {
		return
	}
	delete(c.servers[id], key)
	if len(c.servers[id]) == 0 {
		delete(c.servers, id)
	}
}

// servedIn returns the identity the CRD of a space and name serves by,
// "" when it serves none or the cache has none. A CRD cached but not yet
// handed to OnAdd (the cache is filled first) is asked itself: the
// dispatcher may have served its first objects already.
//
// A CRD this server's cache has not seen serves nothing here: with
// several servers, another may have served a space's first objects of a
// CRD just made before this one's cache has it (a window of the cache's
// delay), and a read by definition here leaves them out.
func (c *spaceCRDCache) servedIn(space, name string) string {
	key := spaces.Key(space, "", name)
	c.definitionsMu.RLock()
	id, ok := c.servedBy[key]
	c.definitionsMu.RUnlock()
	if ok {
		return id
	}
	obj, ok, err := c.indexer.GetByKey(key)
	if crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition); err == nil && ok && crd != nil {
		return servedIdentity(crd)
	}
	return ""
}

// caughtUp tells whether the cache holds every space's CRD of a name as
// the datastore has it at revision, given the revision of the last change
// of each as of then (changed, by space): none older, none the datastore
// had deleted by then. One newer is the cache being ahead, which a move
// reports (moved).
func (c *spaceCRDCache) caughtUp(name string, changed map[string]int64, revision int64) bool {
	for space, at := range changed {
		obj, ok, err := c.indexer.GetByKey(spaces.Key(space, "", name))
		if err != nil || !ok {
			return false
		}
		if rv, err := resourceVersionOf(obj); err != nil || rv < at {
			return false
		}
	}
	objs, _ := c.indexer.ByIndex(crdsByName, name)
	for _, obj := range objs {
		m, ok := obj.(metav1.Object)
		if !ok {
			continue
		}
		if _, ok := changed[crossspaceSpaceOf(m)]; ok {
			continue
		}
		if rv, err := resourceVersionOf(obj); err == nil && rv <= revision {
			return false // gone by then, and the cache has not heard
		}
	}
	return true
}

func resourceVersionOf(obj any) (int64, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return 0, err
	}
	return strconv.ParseInt(m.GetResourceVersion(), 10, 64)
}

// crossspaceSpaceOf is the space of a cached CRD.
func crossspaceSpaceOf(m metav1.Object) string {
	if space := m.GetAnnotations()[spaces.Annotation]; space != "" {
		return space
	}
	return spaces.Root
}

// servingOne returns the key of a CRD that serves the definition id, if
// any does.
func (c *spaceCRDCache) servingOne(id string) (string, bool) {
	c.definitionsMu.RLock()
	defer c.definitionsMu.RUnlock()
	for key := range c.servers[id] {
		return key, true
	}
	return "", false
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

// controllerDefinitions are the controllers.Definitions of CRDs per space,
// for the workload-management controllers of a leader's term: every
// space's CRDs from the cache, without a second copy of them.
type controllerDefinitions struct{ *termCRDCache }

var _ controllers.Definitions = controllerDefinitions{}

func (d controllerDefinitions) PerSpace() bool { return true }

func (d controllerDefinitions) CRDsIn(space string) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, key := range []string{space, allSpaces} {
		objs, _ := d.indexer.ByIndex(crdsBySpace, key)
		for _, obj := range objs {
			if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok {
				out = append(out, crd)
			}
		}
	}
	return out
}

func (d controllerDefinitions) get(space, name string) *apiextensionsv1.CustomResourceDefinition {
	obj, ok, err := d.indexer.GetByKey(spaces.Key(space, "", name))
	if err != nil || !ok {
		return nil
	}
	crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	return crd
}

// everywhere returns the root's CRD of name if it is served in every
// space.
func (d controllerDefinitions) everywhere(name string) *apiextensionsv1.CustomResourceDefinition {
	if crd := d.get(spaces.Root, name); crd != nil && spaces.ServedEverywhere(crd.Annotations) {
		return crd
	}
	return nil
}

func (d controllerDefinitions) CRD(space, name string) (*apiextensionsv1.CustomResourceDefinition, bool) {
	if crd := d.everywhere(name); crd != nil {
		return crd, true
	}
	crd := d.get(space, name)
	return crd, crd != nil
}

func (d controllerDefinitions) ReadBy(space, name string) (string, bool) {
	if _, group, _ := strings.Cut(name, "."); builtin.IsBuiltInGroup(group) || d.everywhere(name) != nil {
		return "", true
	}
	id := d.servedIn(space, name)
	return id, id != ""
}

func (d controllerDefinitions) Serves(id string) bool {
	_, ok := d.servingOne(id)
	return ok
}
