// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package status brings what edge clusters report back to the workload
// description spaces. From the status a syncer writes into each mailbox
// copy (and the state of the object's descendants it reports beside it):
//
//   - with a placement that wants the singleton reported state, the WDS
//     object's label kubestellar.io/executing-count says how many clusters
//     run it, and when exactly one destination has it, its .status is that
//     cluster's status;
//   - for clauses naming StatusCollectors, one CombinedStatus per
//     (object, placement) holds each collector's summary across the
//     placement's destinations.
//
// It also validates StatusCollectors (their CEL expressions), reporting
// problems in their Ready condition, and reports on each EdgePlacement
// (condition StatusReturned) the annotations of its copies that do not
// decode and the writes back that the server refuses.
//
// This file is the wiring; status_reconcile.go holds the logic.
package status

import (
	"context"
	"encoding/json"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/statuscel"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queues.
const ControllerName = "status"

// objectKey names a workload object in its WDS.
type objectKey struct {
	wds       string
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// bySource indexes mailbox copies by the WDS object they copy.
const bySource = "source"

func sourceKey(wds, namespace, name string) string { return wds + "|" + namespace + "/" + name }

// Controller returns reported state to the WDS.
type Controller struct {
	clients       *crossspace.Clients
	objects       workqueue.TypedRateLimitingInterface[objectKey]
	collectorsQ   workqueue.TypedRateLimitingInterface[string]
	placementsQ   workqueue.TypedRateLimitingInterface[string]
	syncTargets   *crossspace.Informer
	syncerConfigs *crossspace.Informer
	collectors    *crossspace.Informer
	combined      *crossspace.Informer
	placements    *crossspace.Informer
	compiler      *statuscel.Compiler
	// failures remembers the summaries a cost limit stopped, for the
	// StatusCollectors' Ready conditions.
	failures *summaryFailures
	// writeProblems are, per WDS object, the writes back the server
	// refused at its latest reconcile. They are lost on restart and
	// rebuilt as every object is reconciled again.
	writeProblems *problemIndex[objectKey]
	// copyProblems are the decode problems of the copies that have any,
	// kept by the copies' events; rebuilt on restart as the caches list
	// every copy.
	copyProblems *problemIndex[copyRef]
	r            *reconciler
	// paced spaces a WDS object's looks while its copies report: each
	// look reads every copy of it, one per destination.
	paced *worker.Pacer[objectKey]

	resources *crossspace.SharedDynamic
}

// copyReportSpacing is the least time between two looks at a WDS object:
// 5,000 syncers reporting on copies of one object made a look each, back
// to back, each reading the 5,000 copies and writing the object's
// executing count (whose event was a look too): a fifth of the server's
// CPU during a fan-out of 10 objects to 5,000 live edges. A summary waits
// at most this long for a storm's news; a quiet object's news does not
// wait.
const copyReportSpacing = time.Second

// New returns the controller; resources are the caches of workload objects
// and copies it shares.
func New(clients *crossspace.Clients, resources *crossspace.SharedDynamic, defs crossspace.Definitions) (*Controller, error) {
	comp, err := statuscel.NewCompiler()
	if err != nil {
		return nil, err
	}
	rl := func() workqueue.TypedRateLimiter[objectKey] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[objectKey](50*time.Millisecond, 30*time.Second)
	}
	c := &Controller{
		clients:       clients,
		compiler:      comp,
		failures:      newSummaryFailures(failureCacheSize),
		objects:       workqueue.NewTypedRateLimitingQueueWithConfig(rl(), workqueue.TypedRateLimitingQueueConfig[objectKey]{Name: ControllerName}),
		collectorsQ:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-collectors"}),
		placementsQ:   workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-placements"}),
		writeProblems: newProblemIndex[objectKey](),
		copyProblems:  newProblemIndex[copyRef](),
		paced:         worker.NewPacer[objectKey](copyReportSpacing),
		resources:     resources,
	}
	resources.AddIndexers(cache.Indexers{bySource: indexBySource})
	resources.AddHandler(func(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) {
				c.onEvent(gvr, obj, nil)
				c.onCopyChange(gvr, nil, obj)
			},
			UpdateFunc: func(old, obj any) {
				c.onEvent(gvr, obj, old)
				c.onCopyChange(gvr, old, obj)
			},
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				c.onEvent(gvr, obj, obj)
				c.onCopyChange(gvr, obj, nil)
			},
		}
	})
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, cache.ResourceEventHandlerFuncs{})
	crossspace.IndexSyncTargetsByMailbox(c.syncTargets)
	c.syncerConfigs = clients.Typed(&edgev2alpha1.SyncerConfigList{}, &edgev2alpha1.SyncerConfig{}, crossspace.Enqueue(func(obj any) {
		if cfg, ok := obj.(*edgev2alpha1.SyncerConfig); ok {
			for _, r := range cfg.Spec.Resources {
				c.informerIn(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}, crossspace.SpaceOf(cfg))
			}
		}
	}))
	if defs != nil && defs.PerSpace() {
		// A mailbox's copies of a space's own custom resource are read
		// by its CRD's definition, which the mailbox may serve only a
		// moment after its SyncerConfig names the resource: its CRD's
		// events have them read then.
		if _, err := defs.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    c.readMailboxOf,
			UpdateFunc: func(_, obj any) { c.readMailboxOf(obj) },
		}); err != nil {
			return nil, err
		}
	}
	c.collectors = clients.Typed(&edgev2alpha1.StatusCollectorList{}, &edgev2alpha1.StatusCollector{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.collectorsQ.Add(key)
		}
		c.enqueueAllCopies()
	}))
	c.combined = clients.Typed(&edgev2alpha1.CombinedStatusList{}, &edgev2alpha1.CombinedStatus{}, cache.ResourceEventHandlerFuncs{})
	c.placements = clients.Typed(&edgev2alpha1.EdgePlacementList{}, &edgev2alpha1.EdgePlacement{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.placementsQ.Add(key)
		}
	}))
	c.r = c.newReconciler()
	return c, nil
}

// newReconciler binds the reconciler to the caches and clients.
func (c *Controller) newReconciler() *reconciler {
	dyn := func(key objectKey) dynamic.ResourceInterface {
		return c.clients.Dynamic.Resource(key.gvr).Namespace(key.namespace)
	}
	return &reconciler{
		object: func(key objectKey) (*unstructured.Unstructured, bool, bool) {
			inf := c.informerIn(key.gvr, key.wds)
			if inf == nil {
				return nil, false, true
			}
			if !inf.HasSynced() {
				return nil, false, false
			}
			obj, ok := crossspace.Get[*unstructured.Unstructured](inf, key.wds, key.namespace, key.name)
			return obj, ok, true
		},
		copiesOf: func(key objectKey) []placedCopy {
			// A copy's mailbox serves the WDS's definition: the same cache.
			inf := c.informerIn(key.gvr, key.wds)
			if inf == nil {
				return nil
			}
			// The records, not expanded: a reconcile reads the status and
			// a few annotations of every copy (one per SyncTarget).
			return c.placedCopies(key.gvr, crossspace.ByIndexRecords(inf, bySource, sourceKey(key.wds, key.namespace, key.name)))
		},
		combinedIn: func(wds string) []*edgev2alpha1.CombinedStatus {
			return crossspace.InSpace[*edgev2alpha1.CombinedStatus](c.combined, wds)
		},
		summaries:          c.summaries,
		setSummaryFailures: c.setSummaryFailures,
		setWriteProblems: func(key objectKey, problems []problem) {
			for _, ep := range c.writeProblems.set(key, key.wds, problems) {
				c.placementsQ.Add(ep)
			}
		},
		patchExecutingCount: func(ctx context.Context, key objectKey, value *string) error {
			patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]any{edgev2alpha1.ExecutingCountLabel: value}}})
			if err != nil {
				return err
			}
			_, err = dyn(key).Patch(ctx, key.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager})
			return err
		},
		applyStatus: func(ctx context.Context, key objectKey, obj *unstructured.Unstructured, status map[string]any) error {
			cfg := applyConfiguration(obj)
			cfg.Object["status"] = status
			_, err := dyn(key).ApplyStatus(ctx, key.name, cfg, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			return err
		},
		live: func(ctx context.Context, key objectKey) (*unstructured.Unstructured, error) {
			return dyn(key).Get(ctx, key.name, metav1.GetOptions{})
		},
		removeStatus: func(ctx context.Context, key objectKey, obj *unstructured.Unstructured) error {
			// A server before this one wrote the status with updates: make
			// those fields the apply's, so that releasing them removes them.
			patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(FieldManager), FieldManager, csaupgrade.Subresource("status"))
			if err != nil {
				return err
			}
			if patch != nil {
				if _, err := dyn(key).Patch(ctx, key.name, types.JSONPatchType, patch, metav1.PatchOptions{}); err != nil {
					return err
				}
			}
			_, err = dyn(key).ApplyStatus(ctx, key.name, applyConfiguration(obj), metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
			return err
		},
		createCombined: func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return c.clients.Client.Create(ctx, cs)
		},
		updateCombined: func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return c.clients.Client.Update(ctx, cs)
		},
		deleteCombined: func(ctx context.Context, cs *edgev2alpha1.CombinedStatus) error {
			return c.clients.Client.Delete(ctx, cs)
		},
		placement: func(wds, name string) (*edgev2alpha1.EdgePlacement, bool) {
			return crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, wds, "", name)
		},
		copyProblemsOf:  c.copyProblems.of,
		writeProblemsOf: c.writeProblems.of,
		updatePlacementStatus: func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error {
			return c.clients.Client.Status().Update(ctx, ep)
		},
		collector: func(wds, name string) (*edgev2alpha1.StatusCollector, bool) {
			return crossspace.Get[*edgev2alpha1.StatusCollector](c.collectors, wds, "", name)
		},
		collectorCondition: c.collectorCondition,
		updateCollectorStatus: func(ctx context.Context, sc *edgev2alpha1.StatusCollector) error {
			return c.clients.Client.Status().Update(ctx, sc)
		},
	}
}

// applyConfiguration is the part of an object every apply names.
func applyConfiguration(obj *unstructured.Unstructured) *unstructured.Unstructured {
	cfg := &unstructured.Unstructured{Object: map[string]any{}}
	cfg.SetAPIVersion(obj.GetAPIVersion())
	cfg.SetKind(obj.GetKind())
	cfg.SetName(obj.GetName())
	cfg.SetNamespace(obj.GetNamespace())
	return cfg
}

// placedCopies keeps the cached copies that are in a SyncTarget's
// mailbox, sorted by mailbox.
func (c *Controller) placedCopies(gvr schema.GroupVersionResource, records []metav1.Object) []placedCopy {
	var out []placedCopy
	for _, obj := range records {
		space := crossspace.SpaceOf(obj)
		if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, space); ok {
			out = append(out, placedCopy{gvr: gvr, mailbox: space, syncTarget: st.Name, obj: obj})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].mailbox < out[j].mailbox })
	return out
}

// readMailboxOf has the copies read of the resources the SyncerConfig of
// a CRD's space (a mailbox's) names.
func (c *Controller) readMailboxOf(obj any) {
	m, ok := obj.(metav1.Object)
	if !ok || c.syncerConfigs == nil {
		return
	}
	space := crossspace.SpaceOf(m)
	cfg, ok := crossspace.Get[*edgev2alpha1.SyncerConfig](c.syncerConfigs, space, "", edgev2alpha1.SyncerConfigName)
	if !ok {
		return
	}
	for _, r := range cfg.Spec.Resources {
		c.informerIn(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}, space)
	}
}

// informerIn returns the cache that holds a space's objects of a resource
// (crossspace.SharedDynamic.ForIn); nil when the space serves no such
// custom resource.
func (c *Controller) informerIn(gvr schema.GroupVersionResource, space string) *crossspace.Informer {
	return c.resources.ForIn(gvr, space)
}

// indexBySource indexes mailbox copies by the WDS object they copy.
func indexBySource(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok || crossspace.Label(m, edgev2alpha1.PlacementCopyLabel) != "true" {
		return nil, nil
	}
	src := crossspace.Annotation(m, edgev2alpha1.SourceSpaceAnnotation)
	if src == "" {
		return nil, nil
	}
	return []string{sourceKey(src, m.GetNamespace(), m.GetName())}, nil
}

// onEvent enqueues the WDS object an event concerns. A copy that carries
// no reported status, no singleton request and no status collectors (nor
// did before) cannot change anything this controller writes. The objects
// are as the shared cache's handlers get them: a copy in a mailbox is its
// record (crossspace.Copy).
func (c *Controller) onEvent(gvr schema.GroupVersionResource, obj, old any) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	wds := crossspace.SpaceOf(m)
	if crossspace.Label(m, edgev2alpha1.PlacementCopyLabel) == "true" {
		prev, _ := old.(metav1.Object)
		if !relevant(m) && (prev == nil || !relevant(prev)) {
			return
		}
		wds = crossspace.Annotation(m, edgev2alpha1.SourceSpaceAnnotation)
		if wds == "" {
			return
		}
	}
	// Paced, the object's own events too: each look writes the object's
	// executing count as its copies report, and that write's event would
	// be a look of its own.
	c.paced.Add(c.objects, objectKey{wds: wds, gvr: gvr, namespace: m.GetNamespace(), name: m.GetName()})
}

// onCopyChange records the decode problems of a copy (obj; nil when it
// went) and enqueues the placements they concern when they changed. A
// copy whose annotations decode, before and after, costs a lookup: the
// placements' StatusReturned is not reconciled for every copy written.
func (c *Controller) onCopyChange(gvr schema.GroupVersionResource, old, obj any) {
	prev, _ := old.(metav1.Object)
	cur, _ := obj.(metav1.Object)
	m := cur
	if m == nil {
		m = prev
	}
	if m == nil {
		return
	}
	ref := copyRef{gvr: gvr, space: crossspace.SpaceOf(m), namespace: m.GetNamespace(), name: m.GetName()}
	var wds string
	var problems []problem
	if cur != nil && crossspace.Label(cur, edgev2alpha1.PlacementCopyLabel) == "true" {
		cp := placedCopy{gvr: gvr, mailbox: ref.space, obj: cur}
		if st, ok := crossspace.SyncTargetOfMailbox(c.syncTargets, ref.space); ok {
			cp.syncTarget = st.Name
		}
		wds, problems = crossspace.Annotation(cur, edgev2alpha1.SourceSpaceAnnotation), decodeProblems(cp)
	}
	for _, key := range c.copyProblems.set(ref, wds, problems) {
		c.placementsQ.Add(key)
	}
}

// copyRef names a copy in a mailbox.
type copyRef struct {
	gvr                    schema.GroupVersionResource
	space, namespace, name string
}

func (c *Controller) enqueueAllCopies() {
	c.resources.Each(func(gvr schema.GroupVersionResource, inf *crossspace.Informer) {
		for _, obj := range inf.List() {
			c.onEvent(gvr, obj, obj)
		}
	})
}

// Run returns status until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.objects.ShutDown()
	defer c.collectorsQ.ShutDown()
	defer c.placementsQ.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	all := []*crossspace.Informer{c.syncTargets, c.syncerConfigs, c.collectors, c.combined, c.placements}
	crossspace.Run(ctx, all...)
	if !crossspace.WaitForSync(ctx, all...) {
		return
	}
	for _, cfg := range crossspace.List[*edgev2alpha1.SyncerConfig](c.syncerConfigs) {
		for _, r := range cfg.Spec.Resources {
			c.informerIn(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}, crossspace.SpaceOf(cfg))
		}
	}
	logger.Info("started controller")
	worker.Loop[objectKey]{Name: ControllerName, Queue: c.objects, Failure: "returning status failed, will retry",
		Process: func(ctx context.Context, key objectKey) (bool, error) {
			c.paced.Looked(key)
			return c.r.reconcile(ctx, key)
		}, Quiet: worker.Conflicts}.Start(ctx, workers)
	worker.Loop[string]{Name: ControllerName + "-collectors", Queue: c.collectorsQ, Failure: "validating StatusCollector failed, will retry",
		Quiet: worker.Conflicts, Process: func(ctx context.Context, key string) (bool, error) {
			return false, c.r.validateCollector(ctx, key)
		}}.Start(ctx, 1)
	worker.Loop[string]{Name: ControllerName + "-placements", Queue: c.placementsQ, Failure: "reporting on EdgePlacement failed, will retry",
		Quiet: worker.Conflicts, Process: func(ctx context.Context, key string) (bool, error) {
			return false, c.r.reconcilePlacement(ctx, key)
		}}.Start(ctx, 1)
	<-ctx.Done()
}

// relevant reports whether a copy carries anything status return reads.
func relevant(m metav1.Object) bool {
	if status, ok := crossspace.StatusOf(m).(map[string]any); ok && len(status) > 0 {
		return true
	}
	return crossspace.Annotation(m, edgev2alpha1.WantSingletonAnnotation) != "" || crossspace.Annotation(m, edgev2alpha1.StatusCollectorsAnnotation) != "" ||
		crossspace.Annotation(m, edgev2alpha1.AssociatedStateAnnotation) != ""
}
