// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package upsync copies objects that syncers report from their edge
// clusters (into their mailboxes, labelled edge.kubestellar.io/upsynced)
// into the WDS of every placement targeting that cluster whose upsync
// clauses select them, keeps them in step, and removes them when they go
// at the edge or stop being selected. An object the server refuses to
// write shows on the EdgePlacements whose clauses select it (condition
// Upsynced).
//
// This file is the wiring; upsync_reconcile.go holds the logic.
package upsync

import (
	"context"
	"maps"
	"reflect"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "upsync"

// Controller upsyncs.
type Controller struct {
	clients       *crossspace.Clients
	queue         workqueue.TypedRateLimitingInterface[string] // SyncTarget keys
	placementsQ   workqueue.TypedRateLimitingInterface[string] // EdgePlacement keys
	placements    *crossspace.Informer
	slices        *crossspace.Informer
	syncTargets   *crossspace.Informer
	syncerConfigs *crossspace.Informer

	// defs, with CRDs per space, say which definition each space's custom
	// resources are read by: one cache per resource and definition.
	defs crossspace.Definitions

	// mu guards ctx and resources: workers add caches (informerFor) while
	// others list them (knownResources).
	mu        sync.Mutex
	ctx       context.Context
	resources map[cacheKey]*upsyncCache

	problems *problems
	r        *reconciler
}

// cacheKey names a cache of upsynced objects: of a resource, read through
// the wildcard (id "") or by a definition's.
type cacheKey struct {
	gvr schema.GroupVersionResource
	id  string
}

// upsyncCache is a cache of upsynced objects, and what stops it.
type upsyncCache struct {
	*crossspace.Informer
	stop context.CancelFunc
}

// New returns the controller. defs, with CRDs per space (nil otherwise),
// say which CRD defines a custom resource in each space.
func New(clients *crossspace.Clients, defs crossspace.Definitions) *Controller {
	c := &Controller{clients: clients, defs: defs, resources: map[cacheKey]*upsyncCache{},
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName}),
		placementsQ: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-placements"}),
		problems: &problems{bySyncTarget: map[string][]problem{}},
	}
	// A placement or slice concerns the SyncTargets its slice names (a
	// placement and its slice share a name), before and after a change:
	// not every SyncTarget, which made each change cost as much as the
	// fleet.
	placementStatus := func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.placementsQ.Add(key)
		}
	}
	// A change of the status alone changes no destination's upsync.
	placementChanged := crossspace.EnqueueSpec(func(obj any) {
		placementStatus(obj)
		if ep, ok := obj.(*edgev2alpha1.EdgePlacement); ok {
			for _, st := range c.r.destinationsOf(crossspace.SpaceOf(ep), ep.Name) {
				c.queue.Add(st)
			}
		}
	}, placementStatus)
	sliceChanged := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		slice, ok := obj.(*edgev2alpha1.SinglePlacementSlice)
		if !ok {
			return
		}
		if key, err := spaces.KeyFunc(slice); err == nil {
			c.placementsQ.Add(key)
		}
		for _, d := range slice.Destinations {
			c.queue.Add(spaces.Key(d.Space, "", d.SyncTargetName))
		}
	}
	c.placements = clients.Typed(&edgev2alpha1.EdgePlacementList{}, &edgev2alpha1.EdgePlacement{}, placementChanged)
	c.slices = clients.Typed(&edgev2alpha1.SinglePlacementSliceList{}, &edgev2alpha1.SinglePlacementSlice{}, cache.ResourceEventHandlerFuncs{
		AddFunc:    sliceChanged,
		UpdateFunc: func(old, obj any) { sliceChanged(old); sliceChanged(obj) },
		DeleteFunc: sliceChanged,
	})
	crossspace.IndexSlicesByDestination(c.slices)
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}))
	crossspace.IndexSyncTargetsByMailbox(c.syncTargets)
	// A SyncerConfig concerns its mailbox's SyncTarget only.
	c.syncerConfigs = clients.Typed(&edgev2alpha1.SyncerConfigList{}, &edgev2alpha1.SyncerConfig{}, crossspace.Enqueue(func(obj any) {
		if cfg, ok := obj.(*edgev2alpha1.SyncerConfig); ok {
			c.enqueueMailbox(crossspace.SpaceOf(cfg))
		}
	}))
	if defs != nil && defs.PerSpace() {
		// A mailbox serves its WDS's CRD a moment after the SyncTarget's
		// placements say to upsync its resource: what its syncer upsyncs
		// is read once it does.
		crdChanged := func(obj any) {
			if m, ok := obj.(metav1.Object); ok {
				c.enqueueMailbox(crossspace.SpaceOf(m))
			}
		}
		_, _ = defs.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    crdChanged,
			UpdateFunc: func(_, obj any) { c.retire(); crdChanged(obj) },
			DeleteFunc: func(any) { c.retire() },
		})
	}
	c.r = c.newReconciler()
	return c
}

// newReconciler binds the reconciler to the caches and clients.
func (c *Controller) newReconciler() *reconciler {
	return &reconciler{
		syncTarget: func(inv, name string) (*edgev2alpha1.SyncTarget, bool) {
			return crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, inv, "", name)
		},
		targetsOf:      c.targetsOf,
		knownResources: c.knownResources,
		resourceOf: func(mailbox, group, resource string) (schema.GroupVersionResource, bool) {
			// The mailbox serves a copy of its WDS's CRD, with CRDs per
			// space; the root space's discovery has the rest.
			if gvr, ok := crossspace.ResourceIn(c.defs, mailbox, group, resource); ok {
				return gvr, true
			}
			mapped, err := c.clients.Client.RESTMapper().ResourcesFor(schema.GroupVersionResource{Group: group, Resource: resource})
			if err != nil || len(mapped) == 0 {
				return schema.GroupVersionResource{}, false
			}
			return mapped[0], true
		},
		synced: func(gvr schema.GroupVersionResource, spaces ...string) bool {
			for _, space := range spaces {
				if inf := c.informerFor(gvr, space); inf != nil && !inf.HasSynced() {
					return false
				}
			}
			return true
		},
		inMailbox: func(gvr schema.GroupVersionResource, mailbox string) []*unstructured.Unstructured {
			inf := c.informerFor(gvr, mailbox)
			if inf == nil {
				return nil
			}
			return crossspace.InSpace[*unstructured.Unstructured](inf, mailbox)
		},
		copiedFrom: func(gvr schema.GroupVersionResource, from string) []*unstructured.Unstructured {
			var out []*unstructured.Unstructured
			for _, inf := range c.cachesOf(gvr) {
				for _, item := range inf.List() {
					u, ok := item.(*unstructured.Unstructured)
					if ok && u.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation] == from && u.GetLabels()[UpsyncedLabel] == "true" {
						out = append(out, u)
					}
				}
			}
			return out
		},
		current: func(gvr schema.GroupVersionResource, wds, namespace, name string) *unstructured.Unstructured {
			inf := c.informerFor(gvr, wds)
			if inf == nil {
				return nil
			}
			obj, ok := crossspace.Get[*unstructured.Unstructured](inf, wds, namespace, name)
			if !ok {
				return nil
			}
			return obj
		},
		ensureNamespace: func(ctx context.Context, namespace string) error {
			err := c.clients.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}})
			if apierrors.IsAlreadyExists(err) {
				return nil
			}
			return err
		},
		apply: func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			_, err := c.clients.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			return err
		},
		delete: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error {
			return c.clients.Dynamic.Resource(gvr).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		},
		setProblems: func(syncTarget string, targets []target, found []problem) {
			for _, key := range c.problems.set(syncTarget, targets, found) {
				c.placementsQ.Add(key)
			}
		},
		placement: func(wds, name string) (*edgev2alpha1.EdgePlacement, bool) {
			return crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", name)
		},
		destinationsOf: func(wds, name string) []string {
			slice, ok := crossspace.Get[*edgev2alpha1.SinglePlacementSlice](c.slices, wds, "", name)
			if !ok {
				return nil
			}
			out := make([]string, 0, len(slice.Destinations))
			for _, d := range slice.Destinations {
				out = append(out, spaces.Key(d.Space, "", d.SyncTargetName))
			}
			return out
		},
		problemsOf: c.problems.of,
		updatePlacementStatus: func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error {
			return c.clients.Client.Status().Update(ctx, ep)
		},
	}
}

// targetsOf returns the placements that target a SyncTarget and have
// upsync clauses.
func (c *Controller) targetsOf(inv, syncTarget string) []target {
	var out []target
	for _, slice := range crossspace.SlicesTo(c.slices, inv, syncTarget) {
		wds := crossspace.SpaceOf(slice)
		ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", slice.Name)
		if ok && len(ep.Spec.Upsync) > 0 {
			out = append(out, target{wds: wds, placement: ep.Name, clauses: ep.Spec.Upsync})
		}
	}
	return out
}

// enqueueMailbox enqueues the SyncTarget of a mailbox.
func (c *Controller) enqueueMailbox(space string) {
	if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
		c.queue.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
	}
}

// informerFor returns the cache of upsynced objects (in mailboxes and
// WDSes) of a resource that holds a space's, starting it on first use:
// with CRDs per space, a custom resource a space defines as its own is
// read by its definition; nil when the space serves no such resource.
func (c *Controller) informerFor(gvr schema.GroupVersionResource, space string) *crossspace.Informer {
	id := ""
	if c.defs != nil && c.defs.PerSpace() && gvr.Group != "" {
		var ok bool
		if id, ok = c.defs.ReadBy(space, crossspace.CustomResourceName(gvr.GroupResource())); !ok {
			return nil
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := cacheKey{gvr: gvr, id: id}
	if uc, ok := c.resources[k]; ok {
		return uc.Informer
	}
	wildcard := spaces.Wildcard
	if id != "" {
		wildcard = spaces.WildcardOf(id)
	}
	inf := c.clients.DynamicInformerIn(gvr, wildcard, UpsyncedLabel+"=true", crossspace.Enqueue(func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		if from := u.GetAnnotations()[edgev2alpha1.UpsyncedFromAnnotation]; from != "" {
			// A WDS copy changed or went: its source's mailbox decides.
			if key, ok := fromOf(from); ok {
				c.queue.Add(key)
			}
			return
		}
		c.enqueueMailbox(crossspace.SpaceOf(u))
	}))
	ctx, stop := context.WithCancel(c.ctx)
	c.resources[k] = &upsyncCache{Informer: inf, stop: stop}
	go inf.RunWithContext(ctx)
	return inf
}

// cachesOf returns every cache of upsynced objects of a resource: one per
// definition it is read by.
func (c *Controller) cachesOf(gvr schema.GroupVersionResource) []*crossspace.Informer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*crossspace.Informer
	for k, uc := range c.resources {
		if k.gvr == gvr {
			out = append(out, uc.Informer)
		}
	}
	return out
}

// retire stops the caches of the definitions no space serves any more.
func (c *Controller) retire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, uc := range c.resources {
		if k.id != "" && !c.defs.Serves(k.id) {
			uc.stop()
			delete(c.resources, k)
		}
	}
}

// knownResources returns the resources whose upsynced objects are cached.
func (c *Controller) knownResources() []schema.GroupVersionResource {
	c.mu.Lock()
	defer c.mu.Unlock()
	seen := map[schema.GroupVersionResource]bool{}
	out := make([]schema.GroupVersionResource, 0, len(c.resources))
	for k := range c.resources {
		if !seen[k.gvr] {
			seen[k.gvr] = true
			out = append(out, k.gvr)
		}
	}
	return out
}

// Run upsyncs until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	defer c.placementsQ.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	c.mu.Lock()
	c.ctx = ctx
	c.mu.Unlock()
	all := []*crossspace.Informer{c.placements, c.slices, c.syncTargets, c.syncerConfigs}
	crossspace.Run(ctx, all...)
	if !crossspace.WaitForSync(ctx, all...) {
		return
	}
	logger.Info("started controller")
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "upsync failed, will retry",
		Process: c.r.reconcile, Quiet: worker.Conflicts}.Start(ctx, workers)
	worker.Loop[string]{Name: ControllerName + "-placements", Queue: c.placementsQ, Failure: "reporting on EdgePlacement failed, will retry",
		Process: c.r.reconcilePlacement, Quiet: worker.Conflicts}.Start(ctx, 1)
	<-ctx.Done()
}

// problems remembers, per SyncTarget, the problems of its latest complete
// reconcile, and which SyncTargets were reconciled since the controller
// started.
type problems struct {
	mu           sync.Mutex
	bySyncTarget map[string][]problem // every SyncTarget reconciled, with or without problems
	targets      map[string][]string  // SyncTarget -> keys of the placements targeting it
}

// set records a SyncTarget's problems and returns the keys of the
// placements to look at again: those whose problems changed, and on the
// first reconcile every placement that targets it.
func (p *problems) set(syncTarget string, targets []target, found []problem) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.targets == nil {
		p.targets = map[string][]string{}
	}
	keys := map[string]bool{}
	old, seen := p.bySyncTarget[syncTarget]
	if !seen || !reflect.DeepEqual(old, found) {
		for _, x := range append(append([]problem{}, old...), found...) {
			for _, ep := range x.placements {
				keys[spaces.Key(x.wds, "", ep)] = true
			}
		}
	}
	var now []string
	for _, t := range targets {
		key := spaces.Key(t.wds, "", t.placement)
		now = append(now, key)
		if !seen || !slices.Contains(p.targets[syncTarget], key) {
			keys[key] = true // primed, or newly targeting
		}
	}
	p.bySyncTarget[syncTarget], p.targets[syncTarget] = found, now
	return slices.Sorted(maps.Keys(keys))
}

// of returns a SyncTarget's problems, and whether it was reconciled since
// the controller started.
func (p *problems) of(syncTarget string) ([]problem, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	found, ok := p.bySyncTarget[syncTarget]
	return found, ok
}
