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
// problems in their Ready condition.
package status

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/placement"
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
	syncTargets   *crossspace.Informer
	syncerConfigs *crossspace.Informer
	collectors    *crossspace.Informer
	combined      *crossspace.Informer
	compiler      *compiler

	resources *crossspace.SharedDynamic
}

// New returns the controller; resources are the caches of workload objects
// and copies it shares.
func New(clients *crossspace.Clients, resources *crossspace.SharedDynamic) (*Controller, error) {
	comp, err := newCompiler()
	if err != nil {
		return nil, err
	}
	rl := func() workqueue.TypedRateLimiter[objectKey] {
		return workqueue.NewTypedItemExponentialFailureRateLimiter[objectKey](50*time.Millisecond, 30*time.Second)
	}
	c := &Controller{
		clients:     clients,
		compiler:    comp,
		objects:     workqueue.NewTypedRateLimitingQueueWithConfig(rl(), workqueue.TypedRateLimitingQueueConfig[objectKey]{Name: ControllerName}),
		collectorsQ: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName + "-collectors"}),
		resources:   resources,
	}
	resources.AddIndexers(cache.Indexers{bySource: indexBySource})
	resources.AddHandler(func(gvr schema.GroupVersionResource) cache.ResourceEventHandler {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.onEvent(gvr, obj, nil) },
			UpdateFunc: func(old, obj any) { c.onEvent(gvr, obj, old) },
			DeleteFunc: func(obj any) {
				if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
					obj = d.Obj
				}
				c.onEvent(gvr, obj, obj)
			},
		}
	})
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, cache.ResourceEventHandlerFuncs{})
	crossspace.IndexSyncTargetsByMailbox(c.syncTargets)
	c.syncerConfigs = clients.Typed(&edgev2alpha1.SyncerConfigList{}, &edgev2alpha1.SyncerConfig{}, crossspace.Enqueue(func(obj any) {
		if cfg, ok := obj.(*edgev2alpha1.SyncerConfig); ok {
			for _, r := range cfg.Spec.Resources {
				c.informerFor(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
			}
		}
	}))
	c.collectors = clients.Typed(&edgev2alpha1.StatusCollectorList{}, &edgev2alpha1.StatusCollector{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.collectorsQ.Add(key)
		}
		c.enqueueAllCopies()
	}))
	c.combined = clients.Typed(&edgev2alpha1.CombinedStatusList{}, &edgev2alpha1.CombinedStatus{}, cache.ResourceEventHandlerFuncs{})
	return c, nil
}

// informerFor returns the cache of a resource across all spaces.
func (c *Controller) informerFor(gvr schema.GroupVersionResource) *crossspace.Informer {
	return c.resources.For(gvr)
}

// indexBySource indexes mailbox copies by the WDS object they copy.
func indexBySource(obj any) ([]string, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok || u.GetLabels()[placement.ManagedLabel] != "true" {
		return nil, nil
	}
	src := u.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation]
	if src == "" {
		return nil, nil
	}
	return []string{sourceKey(src, u.GetNamespace(), u.GetName())}, nil
}

// onEvent enqueues the WDS object an event concerns. A copy that carries
// no reported status, no singleton request and no status collectors (nor
// did before) cannot change anything this controller writes.
func (c *Controller) onEvent(gvr schema.GroupVersionResource, obj, old any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	wds := crossspace.SpaceOf(u)
	if u.GetLabels()[placement.ManagedLabel] == "true" {
		prev, _ := old.(*unstructured.Unstructured)
		if !relevant(u) && (prev == nil || !relevant(prev)) {
			return
		}
		wds = u.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation]
		if wds == "" {
			return
		}
	}
	c.objects.Add(objectKey{wds: wds, gvr: gvr, namespace: u.GetNamespace(), name: u.GetName()})
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
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	all := []*crossspace.Informer{c.syncTargets, c.syncerConfigs, c.collectors, c.combined}
	crossspace.Run(ctx, all...)
	if !crossspace.WaitForSync(ctx, all...) {
		return
	}
	for _, cfg := range crossspace.List[*edgev2alpha1.SyncerConfig](c.syncerConfigs) {
		for _, r := range cfg.Spec.Resources {
			c.informerFor(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
		}
	}
	logger.Info("started controller")
	worker.Loop[objectKey]{Name: ControllerName, Queue: c.objects, Failure: "returning status failed, will retry",
		Process: c.reconcile, Quiet: worker.Conflicts}.Start(ctx, workers)
	worker.Loop[string]{Name: ControllerName + "-collectors", Queue: c.collectorsQ, Failure: "validating StatusCollector failed, will retry",
		Quiet: worker.Conflicts, Process: func(ctx context.Context, key string) (bool, error) {
			return false, c.validateCollector(ctx, key)
		}}.Start(ctx, 1)
	<-ctx.Done()
}

// relevant reports whether a copy carries anything status return reads.
func relevant(u *unstructured.Unstructured) bool {
	if status, ok := u.Object["status"].(map[string]any); ok && len(status) > 0 {
		return true
	}
	annotations := u.GetAnnotations()
	return annotations[edgev2alpha1.WantSingletonAnnotation] != "" || annotations[edgev2alpha1.StatusCollectorsAnnotation] != "" ||
		annotations[edgev2alpha1.AssociatedStateAnnotation] != ""
}
