// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package placement is the placement translator: for each destination of
// each EdgePlacement it writes the selected workload objects, stripped of
// what must not travel and customized for the destination, into the
// destination's mailbox space, keeps the mailbox's SyncerConfig, and removes
// copies no longer selected.
//
// The unit of work is one mailbox: its desired contents are computed from
// every placement that targets it, so overlapping placements are additive
// and never make two copies. Where placements disagree on a copy (two
// WDSes, or two customizations), decide (conflict.go) keeps one by a rule
// that never flips a copy between owners, and the losers say so in their
// Conflicted condition. The mailbox reconcile is mailboxReconciler
// (placement_reconcile.go), whose steps are tested against stubs.
package placement

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queues.
const ControllerName = "placement-translator"

// FieldManager writes mailbox copies.
const FieldManager = "kubestellar-placement-translator"

// Controller translates placements into mailbox contents.
type Controller struct {
	clients   *crossspace.Clients
	mailboxes workqueue.TypedRateLimitingInterface[string] // SyncTarget keys
	statuses  workqueue.TypedRateLimitingInterface[string] // EdgePlacement keys
	rollouts  workqueue.TypedRateLimitingInterface[string] // EdgePlacement keys
	rolls     *rolloutTracker
	// own are the translator's updates of copies whose events are yet
	// to come.
	own *ownWrites
	// snaps are the last completed revisions of Progressive placements,
	// for destinations that join mid-rollout.
	snaps *snapshots
	// health runs the placements' spec.rollout.healthCheck.cel.
	health      *statuscel.Compiler
	placements  *crossspace.Informer
	slices      *crossspace.Informer
	syncTargets *crossspace.Informer
	// syncerConfigs are those of every mailbox, read instead of fetched.
	syncerConfigs *crossspace.Informer
	locations     *crossspace.Informer
	customizers   *crossspace.Informer
	// spaceObjects are the Spaces: a WDS's spec.inventorySpaces bounds
	// where its placements' copies may go.
	spaceObjects *crossspace.Informer
	crds         crossspace.Definitions
	resolver     *resolver
	mailbox      *mailboxReconciler

	// writer, when set, writes copies of the resources it serves in the
	// server's own process (see StoreWriter).
	writer StoreWriter

	mu        sync.Mutex
	resources *crossspace.SharedDynamic
	// problems[placement][mailbox] are what kept copies from being written.
	problems map[string]map[string][]problem
	// dependencies[placement][mailbox] are what Follow placed there.
	dependencies map[string]map[string][]edgev2alpha1.DependencyReference
	// moved are the mailboxes whose CRD changed lately, and when
	// (recentlyMoved); with CRDs per space.
	moved sync.Map
}

// StoreWriter writes objects of some resources straight to the server's
// storage, in the server's own process: what an HTTP write does past
// authentication (the space's and the object's admission, the registry's
// defaults and validation) without the request's encoding, filters and
// field manager. The space is the one of the context (spaces.WithSpace).
// Errors are the API's (apierrors), as an HTTP write would return them.
type StoreWriter interface {
	// Writes reports whether objects of gvr are written in-process.
	Writes(gvr schema.GroupVersionResource) bool
	Create(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error
	Update(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error
}

// WriteInProcess makes the translator write the copies of the resources
// that w serves through w rather than through the API. Call it before Run.
func (c *Controller) WriteInProcess(w StoreWriter) { c.writer = w }

// New returns the controller. crds say which CRD defines a custom resource
// in each space; resources are the caches of workload objects and copies
// it shares.
func New(clients *crossspace.Clients, crds crossspace.Definitions, resources *crossspace.SharedDynamic) (*Controller, error) {
	registerMetrics()
	health, err := statuscel.NewCompiler()
	if err != nil {
		return nil, fmt.Errorf("building the rollouts' health checks: %w", err)
	}
	rl := func() workqueue.TypedRateLimiter[string] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, 30*time.Second)
	}
	c := &Controller{
		clients:      clients,
		mailboxes:    workqueue.NewTypedRateLimitingQueueWithConfig(rl(), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName}),
		statuses:     workqueue.NewTypedRateLimitingQueueWithConfig(rl(), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-status"}),
		rollouts:     workqueue.NewTypedRateLimitingQueueWithConfig(rl(), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-rollout"}),
		rolls:        newRolloutTracker(),
		own:          newOwnWrites(),
		snaps:        newSnapshots(clients.Client),
		health:       health,
		crds:         crds,
		resolver:     &resolver{disco: clients.Discovery, defs: crds},
		resources:    resources,
		problems:     map[string]map[string][]problem{},
		dependencies: map[string]map[string][]edgev2alpha1.DependencyReference{},
	}
	resources.AddIndexers(cache.Indexers{byWorkloadNamespace: indexByWorkloadNamespace})
	resources.AddHandler(func(gvr schema.GroupVersionResource) cache.ResourceEventHandler { return c.resourceEvents(gvr) })
	statusOf := func(obj any) {
		if m, ok := obj.(*edgev2alpha1.EdgePlacement); ok {
			c.statuses.Add(spaces.Key(crossspace.SpaceOf(m), "", m.Name))
		}
	}
	// A change of a placement's status alone (most often this controller's
	// own write) makes no copy: its status is looked at again, should
	// another writer have changed it, and no mailbox is (reconciling every
	// mailbox of the space at each of a rollout's writes cost a
	// Progressive placement about as much again as its copies).
	c.placements = clients.Typed(&edgev2alpha1.EdgePlacementList{}, &edgev2alpha1.EdgePlacement{}, crossspace.EnqueueSpec(func(obj any) {
		if m, ok := obj.(*edgev2alpha1.EdgePlacement); ok {
			c.enqueueSpace(crossspace.SpaceOf(m))
		}
		statusOf(obj)
	}, statusOf))
	c.slices = clients.Typed(&edgev2alpha1.SinglePlacementSliceList{}, &edgev2alpha1.SinglePlacementSlice{}, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueDestinations,
		UpdateFunc: func(old, obj any) { c.enqueueDestinations(old); c.enqueueDestinations(obj) },
		DeleteFunc: func(obj any) { c.enqueueDestinations(obj) },
	})
	crossspace.IndexSlicesByDestination(c.slices)
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.enqueueSyncTarget(obj, true) },
		UpdateFunc: func(old, obj any) {
			if mailboxRelevant(old, obj) {
				c.enqueueSyncTarget(obj, rolloutRelevant(old, obj))
			} else if rolloutRelevant(old, obj) {
				c.enqueueRollouts(obj)
			}
			c.reportsChanged(old, obj)
		},
		DeleteFunc: func(obj any) { c.enqueueSyncTarget(obj, true) },
	})
	crossspace.IndexSyncTargetsByMailbox(c.syncTargets)
	c.syncerConfigs = clients.Typed(&edgev2alpha1.SyncerConfigList{}, &edgev2alpha1.SyncerConfig{}, cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, obj any) { c.syncerConfigChanged(old, obj) },
	})
	crossspace.IndexSyncTargetsByLabel(c.syncTargets)
	c.locations = clients.Typed(&edgev2alpha1.LocationList{}, &edgev2alpha1.Location{}, cache.ResourceEventHandlerFuncs{
		AddFunc: c.enqueueLocated,
		UpdateFunc: func(old, obj any) {
			c.enqueueLocated(old)
			c.enqueueLocated(obj)
		},
		DeleteFunc: c.enqueueLocated,
	})
	c.customizers = clients.Typed(&edgev2alpha1.CustomizerList{}, &edgev2alpha1.Customizer{}, crossspace.Enqueue(func(obj any) {
		if m, ok := obj.(*edgev2alpha1.Customizer); ok {
			c.enqueueSourceChange(crossspace.SpaceOf(m))
		}
	}))
	// A mailbox made: its SyncTarget's copies may go in (a SyncTarget is
	// stored naming its mailbox, before the space is made). A WDS's
	// inventory spaces change: its slices' destinations are judged again
	// (one the WDS no longer names, or names only now).
	c.spaceObjects = clients.Typed(&tenancyv1alpha1.SpaceList{}, &tenancyv1alpha1.Space{}, cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if sp, ok := obj.(*tenancyv1alpha1.Space); ok && sp.Spec.Type == tenancyv1alpha1.SpaceTypeMailbox &&
				sp.Labels[edgev2alpha1.MailboxSyncTargetNameLabel] != "" {
				c.mailboxes.Add(spaces.Key(sp.Labels[edgev2alpha1.MailboxSyncTargetSpaceLabel], "", sp.Labels[edgev2alpha1.MailboxSyncTargetNameLabel]))
			}
		},
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*tenancyv1alpha1.Space)
			n, ok2 := obj.(*tenancyv1alpha1.Space)
			if ok1 && ok2 && !slices.Equal(o.Spec.InventorySpaces, n.Spec.InventorySpaces) {
				c.enqueueSpace(n.Name)
			}
		},
	})
	_, _ = crds.AddEventHandler(crossspace.Enqueue(c.enqueueCRD))
	c.mailbox = c.newMailboxReconciler()
	return c, nil
}

// enqueueCRD enqueues the mailboxes a CRD's change may concern. Bound to
// spaces, any: a CRD's bindings name the spaces it concerns, and a change
// of them is rare. With CRDs per space, a CRD concerns its space alone: a
// WDS's, the mailboxes of its placements' destinations; a mailbox's (a
// copy the translator made, served as it is accepted), that mailbox. Every
// mailbox for each CRD event would be, in a fan-out to N destinations
// (each mailbox's CRD made, then accepted), N × N reconciles.
func (c *Controller) enqueueCRD(obj any) {
	if !c.crds.PerSpace() {
		c.enqueueAll()
		return
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		c.enqueueAll()
		return
	}
	space := crossspace.SpaceOf(m)
	if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
		c.moved.Store(space, time.Now())
		c.mailboxes.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
		return
	}
	if space == spaces.Root && spaces.ServedEverywhere(m.GetAnnotations()) {
		c.enqueueAll()
		return
	}
	c.enqueueSourceChange(space)
}

// movedFor is how long after a mailbox's CRD changed its copies coming
// into a cache are news: the time the caches of the definitions it moved
// between take to list it again.
const movedFor = time.Minute

// recentlyMoved tells whether obj is in a mailbox whose CRD changed in the
// last movedFor. Such a change may move its copies from the cache of one
// definition to another's, which lists them again: the mailbox must be
// looked at once they are there, and their coming is all there is to say
// so (a relist's objects arrive as creations).
func (c *Controller) recentlyMoved(obj any) bool {
	m, ok := metaOf(obj)
	if !ok {
		return false
	}
	at, ok := c.moved.Load(crossspace.SpaceOf(m))
	if !ok {
		return false
	}
	if time.Since(at.(time.Time)) > movedFor {
		c.moved.Delete(crossspace.SpaceOf(m))
		return false
	}
	return true
}

// enqueueLocated enqueues the mailboxes of the SyncTargets a Location
// selects: a destination names a SyncTarget with a Location that selects
// it, and its mailbox's copies take parameters from both. (A SyncTarget
// the Location no longer selects is in the old Location of an update; its
// destination changes with the scheduler's slice.) Every SyncTarget of the
// Location's space was enqueued before: with 10,000 SyncTargets and a
// Location each, each resync of the Locations (every 10 minutes) made a
// hundred million keys, and make bench's fan-out to them allocated 18 GB
// there, an eighth of all the server allocated.
func (c *Controller) enqueueLocated(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	loc, ok := obj.(*edgev2alpha1.Location)
	if !ok {
		return
	}
	for _, st := range crossspace.LocatedSyncTargets(c.syncTargets, loc) {
		c.mailboxes.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
	}
}

// mailboxWriters bounds the copies one mailbox's reconcile writes at once.
// With the translator's workers, it bounds the translator's writes in
// flight (workers × mailboxWriters): enough to keep the server busy rather
// than waiting on each write's round trip, few enough that the writes of
// a large fan-out queue in the translator and not in the server, where
// they would delay everyone else's requests.
const mailboxWriters = 8

// newMailboxReconciler binds the mailbox reconciler to the controller's
// caches and clients.
func (c *Controller) newMailboxReconciler() *mailboxReconciler {
	access := newAccessChecker(c.clients.Client)
	return &mailboxReconciler{
		writers: mailboxWriters,
		memo:    newCopyMemo(),
		syncTarget: func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
			return crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, space, "", name)
		},
		mailboxMade: func(name string) bool {
			sp, ok := crossspace.Get[*tenancyv1alpha1.Space](c.spaceObjects, spaces.Root, "", name)
			return ok && sp.DeletionTimestamp == nil
		},
		slicesFor: func(inventory, syncTarget string) []*edgev2alpha1.SinglePlacementSlice {
			return crossspace.SlicesTo(c.slices, inventory, syncTarget)
		},
		placement: func(space, name string) (*edgev2alpha1.EdgePlacement, bool) {
			return crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, space, "", name)
		},
		inventories: func(wds string) []string {
			sp, ok := crossspace.SpaceOfType(c.spaceObjects, wds, tenancyv1alpha1.SpaceTypeWDS)
			if !ok {
				return nil
			}
			return sp.Spec.InventorySpaces
		},
		location: func(space, name string) (*edgev2alpha1.Location, bool) {
			return crossspace.Get[*edgev2alpha1.Location](c.locations, space, "", name)
		},
		// A WDS's namespaces, for the placements' namespace selectors, from
		// the shared cache of namespaces the mailboxes' copies are read
		// from too (Run waits for it): a typed cache of its own held every
		// namespace of every space again (at 10,000 SyncTargets, 50,000 of
		// them), and its events reach the translator there as any workload
		// object's do (resourceEvents).
		namespace: func(space, name string) (metav1.Object, bool) {
			return crossspace.Get[*unstructured.Unstructured](c.informerFor(namespaceResource.GroupVersionResource), space, "", name)
		},
		customizer: func(space, namespace, name string) (*edgev2alpha1.Customizer, bool) {
			return crossspace.Get[*edgev2alpha1.Customizer](c.customizers, space, namespace, name)
		},
		crdsIn:   c.crds.CRDsIn,
		crdIn:    c.crds.CRD,
		perSpace: c.crds.PerSpace(),
		crdServed: func(space, name string) bool {
			_, ok := c.crds.ReadBy(space, name)
			return ok
		},
		crdServing:    c.crds.ReadBy,
		migrateStored: c.migrateStored,
		resolve:       c.resolver.resolve,
		object: func(gvr schema.GroupVersionResource, space, namespace, name string) (*unstructured.Unstructured, bool, bool) {
			inf := c.informerIn(gvr, space)
			if inf == nil {
				return nil, false, true
			}
			if !inf.HasSynced() {
				return nil, false, false
			}
			obj, ok := crossspace.Get[*unstructured.Unstructured](inf, space, namespace, name)
			return obj, ok, true
		},
		objects: func(gvr schema.GroupVersionResource, space string) ([]*unstructured.Unstructured, bool) {
			inf := c.informerIn(gvr, space)
			if inf == nil {
				return nil, true
			}
			if !inf.HasSynced() {
				return nil, false
			}
			return crossspace.InSpace[*unstructured.Unstructured](inf, space), true
		},
		objectsIn: func(gvr schema.GroupVersionResource, space, namespace string) ([]*unstructured.Unstructured, bool) {
			inf := c.informerIn(gvr, space)
			if inf == nil {
				return nil, true
			}
			if !inf.HasSynced() {
				return nil, false
			}
			if objs, ok := crossspace.Indexed[*unstructured.Unstructured](inf, byWorkloadNamespace, spaces.Key(space, namespace, "")); ok {
				return objs, true
			}
			return inNamespace(crossspace.InSpace[*unstructured.Unstructured](inf, space), namespace), true
		},
		records: func(gvr schema.GroupVersionResource, space string) ([]metav1.Object, bool) {
			inf := c.informerIn(c.servedVersion(gvr, space), space)
			if inf == nil {
				return nil, true
			}
			if !inf.HasSynced() {
				return nil, false
			}
			return crossspace.InSpaceRecords(inf, space), true
		},
		syncerConfig: func(mailbox string) (*edgev2alpha1.SyncerConfig, bool) {
			return crossspace.Get[*edgev2alpha1.SyncerConfig](c.syncerConfigs, mailbox, "", edgev2alpha1.SyncerConfigName)
		},
		create: func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			if c.writer != nil && c.writer.Writes(gvr) {
				return c.writer.Create(ctx, gvr, obj)
			}
			_, err := c.clients.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Create(ctx, obj, metav1.CreateOptions{FieldManager: FieldManager})
			return err
		},
		update: func(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) error {
			space := spaces.SpaceOrRoot(ctx)
			c.own.writing(gvr, space, obj.GetNamespace(), obj.GetName(), obj.GetAnnotations()[ContentHashAnnotation])
			var err error
			if c.writer != nil && c.writer.Writes(gvr) {
				err = c.writer.Update(ctx, gvr, obj)
			} else {
				_, err = c.clients.Dynamic.Resource(gvr).Namespace(obj.GetNamespace()).Update(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
			}
			if err != nil {
				c.own.forget(gvr, space, obj.GetNamespace(), obj.GetName())
			}
			return err
		},
		delete: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) error {
			return c.clients.Dynamic.Resource(gvr).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
		},
		get: func(ctx context.Context, gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
			return c.clients.Dynamic.Resource(gvr).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		},
		mayRead:         access.mayRead,
		mayUpsync:       access.mayUpsync,
		emptyNamespaces: newEmptyNamespaces(namespaceGrace),
		full:            newFullInventories(),
		now:             time.Now,
		requeueAfter:    c.mailboxes.AddAfter,
		createSyncerConfig: func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error {
			return c.clients.Client.Create(ctx, cfg)
		},
		updateSyncerConfig: func(ctx context.Context, cfg *edgev2alpha1.SyncerConfig) error {
			return c.clients.Client.Update(ctx, cfg)
		},
		getSyncerConfig: func(ctx context.Context) (*edgev2alpha1.SyncerConfig, error) {
			cfg := &edgev2alpha1.SyncerConfig{}
			return cfg, c.clients.Client.Get(ctx, client.ObjectKey{Name: edgev2alpha1.SyncerConfigName}, cfg)
		},
		recordProblems: c.recordProblems,
		admits:         c.rolls.admits,
		completed:      c.completedSnapshot,
	}
}

// enqueueDestinations enqueues the mailboxes of a slice's destinations.
func (c *Controller) enqueueDestinations(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	slice, ok := obj.(*edgev2alpha1.SinglePlacementSlice)
	if !ok {
		return
	}
	for _, d := range slice.Destinations {
		c.mailboxes.Add(spaces.Key(d.Space, "", d.SyncTargetName))
	}
	c.statuses.Add(spaces.Key(crossspace.SpaceOf(slice), "", slice.Name))
	c.rollouts.Add(spaces.Key(crossspace.SpaceOf(slice), "", slice.Name))
}

// enqueueSyncTarget enqueues a SyncTarget's mailbox and, when what a
// rollout reads of it changed (rollout), the placements that target it.
func (c *Controller) enqueueSyncTarget(obj any, rollout bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	key, err := spaces.KeyFunc(obj)
	if err != nil {
		return
	}
	c.mailboxes.Add(key)
	if rollout {
		c.enqueueRollouts(obj)
	}
}

// enqueueRollouts enqueues the rollouts of the placements that target a
// SyncTarget.
func (c *Controller) enqueueRollouts(obj any) {
	st, ok := obj.(*edgev2alpha1.SyncTarget)
	if !ok {
		return
	}
	for _, slice := range crossspace.SlicesTo(c.slices, crossspace.SpaceOf(st), st.Name) {
		c.rollouts.Add(spaces.Key(crossspace.SpaceOf(slice), "", slice.Name))
	}
}

// mailboxRelevant reports whether an update of a SyncTarget may change
// what its mailbox holds: anything but what its syncer reports with its
// heartbeat (counts, problems, drift, its version, its rollout reports,
// the time) and the server's conditions but SyncerConnected. A fleet's
// heartbeats that say something new (a placement's copies applied) would
// otherwise have the translator look at each mailbox again for nothing.
func mailboxRelevant(old, obj any) bool {
	a, okA := old.(*edgev2alpha1.SyncTarget)
	b, okB := obj.(*edgev2alpha1.SyncTarget)
	if !okA || !okB {
		return true
	}
	// Shallow copies of the metadata, to leave out what every write
	// changes; nothing of the cached objects is written.
	am, bm := a.ObjectMeta, b.ObjectMeta
	am.ResourceVersion, am.ManagedFields = "", nil
	bm.ResourceVersion, bm.ManagedFields = "", nil
	as, bs := &a.Status, &b.Status
	connected := func(st *edgev2alpha1.SyncTarget) bool {
		return meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
	}
	return as.MailboxSpace != bs.MailboxSpace || as.ReportsRollouts != bs.ReportsRollouts ||
		connected(a) != connected(b) ||
		!apiequality.Semantic.DeepEqual(as.Hold, bs.Hold) ||
		!apiequality.Semantic.DeepEqual(as.UpdateWindow, bs.UpdateWindow) ||
		!apiequality.Semantic.DeepEqual(a.Spec, b.Spec) ||
		!apiequality.Semantic.DeepEqual(am, bm)
}

// rolloutRelevant reports whether an update of a SyncTarget changed what
// a rollout reads of it: its labels (its wave), whether its syncer is
// connected, its hold or its update window. Heartbeats change none of it.
func rolloutRelevant(old, obj any) bool {
	a, okA := old.(*edgev2alpha1.SyncTarget)
	b, okB := obj.(*edgev2alpha1.SyncTarget)
	if !okA || !okB {
		return true
	}
	connected := func(st *edgev2alpha1.SyncTarget) bool {
		return meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetSyncerConnected)
	}
	return !maps.Equal(a.Labels, b.Labels) || connected(a) != connected(b) ||
		edgeWaiting(a) != edgeWaiting(b)
}

// enqueueSpace enqueues the mailboxes that placements of a space target.
func (c *Controller) enqueueSpace(space string) {
	for _, slice := range crossspace.InSpace[*edgev2alpha1.SinglePlacementSlice](c.slices, space) {
		c.enqueueDestinations(slice)
	}
}

// enqueueSourceChange enqueues what a change of a WDS's objects (or of
// a Customizer, or of a CRD it defines) concerns: the mailboxes its
// placements target, but for a Progressive placement its rollout alone.
// The change is a new revision that no destination is admitted to yet:
// each mailbox would be reconciled only to keep what it has, and with a
// thousand destinations those reconciles were most of what a change of a
// Progressive placement cost beyond All's. The rollout looks at the new
// revision and enqueues the mailboxes it admits, wave by wave (rollout.go).
// A mailbox that an All placement of the space also targets is enqueued
// for that one, and reconciles the Progressive one's copies as they are.
// What such a mailbox records of the placement (its problems, its
// dependencies) is then of the revision it holds, until it takes the new.
func (c *Controller) enqueueSourceChange(space string) { c.enqueueChangeOf(space, nil) }

// enqueueObjectChange is enqueueSourceChange for a change of one object
// of a WDS, of resource gvr in namespace: a placement that cannot select
// it is left out. With one WDS holding many placements (one per
// application, or a rollout's beside the others), a change of one
// application's object reconciled every mailbox of every placement:
// the canary wave's mailboxes queued behind a thousand reconciles that
// found nothing to do.
func (c *Controller) enqueueObjectChange(space string, gvr schema.GroupVersionResource, namespace string) {
	if gvr.Group == "" && gvr.Resource == "namespaces" {
		// A namespace's labels select what is in it (namespaceSelectors),
		// and a namespace goes with what is placed from it.
		c.enqueueSourceChange(space)
		return
	}
	c.enqueueChangeOf(space, func(ep *edgev2alpha1.EdgePlacement) bool { return maySelect(ep, gvr.GroupResource(), namespace) })
}

// maySelect reports whether a placement may place an object of a
// resource in a namespace ("": cluster-scoped), by its clauses' groups,
// resources and namespaces: what they say of names and labels is not
// looked at (an update may move an object in or out of them). A
// placement that follows dependencies may place anything its workloads
// reference.
func maySelect(ep *edgev2alpha1.EdgePlacement, gr schema.GroupResource, namespace string) bool {
	if ep.Spec.Dependencies == edgev2alpha1.DependenciesFollow {
		return true
	}
	for _, cl := range ep.Spec.Downsync {
		if cl.APIGroup != nil && *cl.APIGroup != "*" && *cl.APIGroup != gr.Group {
			continue
		}
		if !slices.Contains(cl.Resources, "*") && !slices.Contains(cl.Resources, gr.Resource) {
			continue
		}
		anyNamespace := len(cl.Namespaces) == 0 || slices.Contains(cl.Namespaces, "*")
		if namespace == "" {
			if anyNamespace && len(cl.NamespaceSelectors) == 0 {
				return true
			}
			continue
		}
		if anyNamespace || len(cl.NamespaceSelectors) > 0 || slices.Contains(cl.Namespaces, namespace) {
			return true
		}
	}
	return false
}

// enqueueChangeOf is enqueueSourceChange for the placements of space
// that concerns says a change concerns (nil: every one).
func (c *Controller) enqueueChangeOf(space string, concerns func(*edgev2alpha1.EdgePlacement) bool) {
	for _, slice := range crossspace.InSpace[*edgev2alpha1.SinglePlacementSlice](c.slices, space) {
		ep, ok := crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, space, "", slice.Name)
		if ok && concerns != nil && ep.DeletionTimestamp == nil && !concerns(ep) {
			continue
		}
		if !ok || !ep.Spec.Progressive() || ep.DeletionTimestamp != nil {
			c.enqueueDestinations(slice)
			continue
		}
		key := spaces.Key(space, "", slice.Name)
		c.statuses.Add(key)
		c.rollouts.Add(key)
	}
}

func (c *Controller) enqueueAll() {
	for _, slice := range crossspace.List[*edgev2alpha1.SinglePlacementSlice](c.slices) {
		c.enqueueDestinations(slice)
	}
}

// resourceEvents routes events of workload objects and mailbox copies of
// a resource to the mailboxes they concern. Of a copy, only a deletion or
// a change of what the translator writes matters: its own creations and
// updates and the status syncers write would only make the mailbox be
// looked at again for nothing.
func (c *Controller) resourceEvents(gvr schema.GroupVersionResource) cache.ResourceEventHandlerFuncs {
	route := func(obj any, changed bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		m, ok := metaOf(obj)
		if !ok {
			return
		}
		if crossspace.Annotation(m, edgev2alpha1.RevisionAnnotation) != "" {
			// A copy of a Progressive placement: its syncer's word on it
			// moves the rollout on, which reads that mailbox again, at
			// most every reportSpacing with the news meanwhile.
			placement := spaces.Key(crossspace.Annotation(m, edgev2alpha1.SourceSpaceAnnotation), "",
				crossspace.Annotation(m, edgev2alpha1.SourcePlacementAnnotation))
			c.rolls.touch(placement, crossspace.SpaceOf(m))
			c.rolls.paced.Add(c.rollouts, placement)
		}
		if !changed {
			return
		}
		space := crossspace.SpaceOf(m)
		if crossspace.Label(m, edgev2alpha1.PlacementCopyLabel) != "true" {
			c.enqueueObjectChange(space, gvr, m.GetNamespace())
			return
		}
		if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
			c.mailboxes.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
		}
	}
	return cache.ResourceEventHandlerFuncs{
		// A copy's creation is the translator's own doing; a workload
		// object's is news, and so is a copy's coming into a cache that
		// lists its mailbox again (the mailbox's CRD moved to the cache's
		// definition: recentlyMoved).
		AddFunc:    func(obj any) { route(obj, !isCopy(obj) || c.recentlyMoved(obj)) },
		DeleteFunc: func(obj any) { route(obj, true) },
		UpdateFunc: func(old, obj any) {
			if isCopy(obj) {
				changed := contentChanged(old, obj)
				if m, ok := metaOf(obj); changed && ok && c.own.take(gvr, m) {
					changed = false
				}
				route(obj, changed)
			} else {
				route(obj, sourceChanged(old, obj))
			}
		},
	}
}

// syncerConfigChanged follows what a mailbox's SyncerConfig says of its
// Progressive placements: a syncer that comes to report rollouts has its
// mailbox written again (its copies no longer carry their revision), and
// a record or a report that changes moves those placements' rollouts on,
// which read that mailbox again.
func (c *Controller) syncerConfigChanged(old, obj any) {
	a, okA := old.(*edgev2alpha1.SyncerConfig)
	b, okB := obj.(*edgev2alpha1.SyncerConfig)
	if !okA || !okB {
		return
	}
	mailbox := crossspace.SpaceOf(b)
	if a.Status.ReportsRollouts != b.Status.ReportsRollouts {
		if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, mailbox); ok {
			c.mailboxes.Add(spaces.Key(crossspace.SpaceOf(st), "", st.Name))
		}
	}
	changed := map[string]bool{}
	if !apiequality.Semantic.DeepEqual(a.Spec.Rollouts, b.Spec.Rollouts) || !apiequality.Semantic.DeepEqual(a.Status.Rollouts, b.Status.Rollouts) ||
		a.Status.ReportsRollouts != b.Status.ReportsRollouts {
		for _, cfg := range []*edgev2alpha1.SyncerConfig{a, b} {
			for _, r := range cfg.Spec.Rollouts {
				changed[r.Placement] = true
			}
			for _, r := range cfg.Status.Rollouts {
				changed[r.Placement] = true
			}
		}
	}
	c.touchRollouts(mailbox, changed)
}

// reportsChanged follows the rollout reports a syncer writes in its
// SyncTarget's status with its heartbeat: the placements a changed report
// speaks of move on, and read that mailbox again.
func (c *Controller) reportsChanged(old, obj any) {
	a, okA := old.(*edgev2alpha1.SyncTarget)
	b, okB := obj.(*edgev2alpha1.SyncTarget)
	if !okA || !okB || a.Status.ReportsRollouts == b.Status.ReportsRollouts && apiequality.Semantic.DeepEqual(a.Status.Rollouts, b.Status.Rollouts) {
		return
	}
	mailbox := b.Status.MailboxSpace
	if mailbox == "" {
		return
	}
	changed := map[string]bool{}
	for _, st := range []*edgev2alpha1.SyncTarget{a, b} {
		for _, r := range st.Status.Rollouts {
			changed[r.Placement] = true
		}
	}
	if a.Status.ReportsRollouts != b.Status.ReportsRollouts {
		// Where the reports are read changes: every rollout of the
		// mailbox looks again.
		if cfg, ok := crossspace.Get[*edgev2alpha1.SyncerConfig](c.syncerConfigs, mailbox, "", edgev2alpha1.SyncerConfigName); ok {
			for _, r := range cfg.Spec.Rollouts {
				changed[r.Placement] = true
			}
		}
	}
	c.touchRollouts(mailbox, changed)
}

// touchRollouts moves on the rollouts of the placements named (WDS/NAME,
// as records and reports name them), which read the mailbox again.
func (c *Controller) touchRollouts(mailbox string, placements map[string]bool) {
	for placement := range placements {
		wds, name, ok := strings.Cut(placement, "/")
		if !ok {
			continue
		}
		key := spaces.Key(wds, "", name)
		c.rolls.touch(key, mailbox)
		c.rolls.paced.Add(c.rollouts, key)
	}
}

func isCopy(obj any) bool {
	m, ok := metaOf(obj)
	return ok && crossspace.Label(m, edgev2alpha1.PlacementCopyLabel) == "true"
}

// sourceChanged reports whether an update of a workload object changed
// anything a copy is made or selected from: a change of its status alone
// (the singleton status the status controller writes back) changes no
// copy.
func sourceChanged(old, obj any) bool {
	a, okA := old.(*unstructured.Unstructured)
	b, okB := obj.(*unstructured.Unstructured)
	if !okA || !okB {
		return true
	}
	clean := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "status")
		for _, f := range []string{"resourceVersion", "managedFields"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		return c.Object
	}
	return !apiequality.Semantic.DeepEqual(clean(a), clean(b))
}

// contentChanged reports whether an update of a copy changed more than its
// status and bookkeeping metadata.
func contentChanged(old, obj any) bool {
	if a, ok := old.(*crossspace.Copy); ok {
		if b, ok := obj.(*crossspace.Copy); ok {
			return !a.SameBut(b, edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.AppliedAnnotation)
		}
	}
	old, obj = crossspace.Expand(old), crossspace.Expand(obj)
	a, okA := old.(*unstructured.Unstructured)
	b, okB := obj.(*unstructured.Unstructured)
	if !okA || !okB {
		return true
	}
	clean := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy()
		unstructured.RemoveNestedField(c.Object, "status")
		for _, f := range []string{"resourceVersion", "managedFields", "generation"} {
			unstructured.RemoveNestedField(c.Object, "metadata", f)
		}
		annotations := c.GetAnnotations()
		delete(annotations, edgev2alpha1.AssociatedStateAnnotation)
		delete(annotations, edgev2alpha1.AppliedAnnotation)
		c.SetAnnotations(annotations)
		return c.Object
	}
	return !apiequality.Semantic.DeepEqual(clean(a), clean(b))
}

// informerFor returns the cache of a resource across all spaces.
func (c *Controller) informerFor(gvr schema.GroupVersionResource) *crossspace.Informer {
	return c.resources.For(gvr)
}

// informerIn returns the cache that holds a space's objects of a resource
// (crossspace.SharedDynamic.ForIn); nil when the space serves no such
// custom resource.
// servedVersion returns gvr, or, when the space's CRD of the resource does
// not serve gvr's version, gvr in a version it does serve: a mailbox's
// copies are read (their records: metadata and status) while its CRD is
// behind its WDS's, which may prefer a version the mailbox's has not
// got yet; the translator brings the mailbox's CRD up to it.
func (c *Controller) servedVersion(gvr schema.GroupVersionResource, space string) schema.GroupVersionResource {
	if c.crds == nil || !c.crds.PerSpace() || gvr.Group == "" {
		return gvr
	}
	crd, ok := c.crds.CRD(space, crossspace.CustomResourceName(gvr.GroupResource()))
	if !ok {
		return gvr
	}
	fallback := ""
	for _, v := range crd.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Name == gvr.Version {
			return gvr
		}
		if fallback == "" || v.Storage {
			fallback = v.Name
		}
	}
	if fallback == "" {
		return gvr
	}
	return gvr.GroupResource().WithVersion(fallback)
}

func (c *Controller) informerIn(gvr schema.GroupVersionResource, space string) *crossspace.Informer {
	return c.resources.ForIn(gvr, space)
}

// Run translates until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.mailboxes.ShutDown()
	defer c.statuses.ShutDown()
	defer c.rollouts.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	all := []*crossspace.Informer{c.placements, c.slices, c.syncTargets, c.syncerConfigs, c.locations, c.customizers}
	crossspace.Run(ctx, all...)
	// The shared cache of namespaces runs with the others of its kind
	// (SharedDynamic.Start); asked for here, once every controller has
	// added its handlers.
	namespaces := c.informerFor(namespaceResource.GroupVersionResource)
	if !crossspace.WaitForSync(ctx, append(all, namespaces, c.spaceObjects)...) || !cache.WaitForCacheSync(ctx.Done(), c.crds.HasSynced) {
		return
	}
	logger.Info("started controller")
	go c.sweepSnapshots(ctx)
	worker.Loop[string]{Name: ControllerName, Queue: c.mailboxes, Failure: "translating placements into mailbox failed, will retry",
		Process: c.mailbox.reconcile,
		Quiet:   func(err error) bool { return worker.Conflicts(err) || errors.Is(err, errRetryLater) }}.Start(ctx, workers)
	worker.Loop[string]{Name: ControllerName + "-status", Queue: c.statuses, Failure: "updating placement status failed, will retry",
		Quiet: worker.Conflicts, Process: func(ctx context.Context, key string) (bool, error) {
			err := c.updatePlacementStatus(ctx, key)
			if apierrors.IsNotFound(err) {
				return false, nil // the placement is gone
			}
			return false, err
		}}.Start(ctx, 1)
	worker.Loop[string]{Name: ControllerName + "-rollout", Queue: c.rollouts, Failure: "moving a rollout on failed, will retry",
		Process: c.reconcileRollout}.Start(ctx, 1)
	<-ctx.Done()
}
