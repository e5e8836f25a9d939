// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package scheduler maps each EdgePlacement to its destinations: the
// SyncTargets selected by the Locations its selectors match. It keeps a
// SinglePlacementSlice of the same name beside each EdgePlacement, and
// reacts to changes of placements, Locations and SyncTargets (labels,
// appearing, disappearing, becoming unschedulable).
//
// scheduler_controller.go is the wiring (caches, queue, event handlers);
// the reconcile is reconciler (scheduler_reconcile.go), whose steps are
// tested against stubs.
package scheduler

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "scheduler"

// Controller schedules EdgePlacements.
type Controller struct {
	clients     *crossspace.Clients
	queue       workqueue.TypedRateLimitingInterface[string]
	placements  *crossspace.Informer
	locations   *crossspace.Informer
	syncTargets *crossspace.Informer
	slices      *crossspace.Informer
	spaces      *crossspace.Informer
	r           *reconciler
}

// New returns the controller.
func New(clients *crossspace.Clients) *Controller {
	c := &Controller{clients: clients, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	c.placements = clients.Typed(&edgev2alpha1.EdgePlacementList{}, &edgev2alpha1.EdgePlacement{}, crossspace.EnqueueSpec(c.enqueuePlacement, nil))
	// Only what scheduling reads matters: labels, spec, existence — not
	// status, which syncers update all the time.
	everything := cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.enqueueAll() },
		DeleteFunc: func(any) { c.enqueueAll() },
		UpdateFunc: func(old, obj any) {
			if schedulingChanged(old, obj) {
				c.enqueueAll()
			}
		},
	}
	c.locations = clients.Typed(&edgev2alpha1.LocationList{}, &edgev2alpha1.Location{}, everything)
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, everything)
	crossspace.IndexSyncTargetsByLabel(c.syncTargets)
	c.slices = clients.Typed(&edgev2alpha1.SinglePlacementSliceList{}, &edgev2alpha1.SinglePlacementSlice{}, crossspace.EnqueueSpec(c.enqueuePlacement, nil))
	// Which inventory spaces a WDS may select, and which spaces are of
	// which type (mailbox spaces come and go with SyncTargets: ignored).
	c.spaces = clients.Typed(&tenancyv1alpha1.SpaceList{}, &tenancyv1alpha1.Space{}, crossspace.Enqueue(func(obj any) {
		if sp, ok := obj.(*tenancyv1alpha1.Space); ok && sp.Spec.Type != tenancyv1alpha1.SpaceTypeMailbox {
			c.enqueueAll()
		}
	}))
	c.r = c.newReconciler()
	return c
}

// newReconciler binds the reconciler to the controller's caches and clients.
func (c *Controller) newReconciler() *reconciler {
	return &reconciler{
		placement: func(space, name string) (*edgev2alpha1.EdgePlacement, bool) {
			return crossspace.Get[*edgev2alpha1.EdgePlacement](c.placements, space, "", name)
		},
		slice: func(space, name string) (*edgev2alpha1.SinglePlacementSlice, bool) {
			return crossspace.Get[*edgev2alpha1.SinglePlacementSlice](c.slices, space, "", name)
		},
		space: func(name, typ string) (*tenancyv1alpha1.Space, bool) {
			return crossspace.SpaceOfType(c.spaces, name, typ)
		},
		locations: func(space string) []*edgev2alpha1.Location {
			return crossspace.InSpace[*edgev2alpha1.Location](c.locations, space)
		},
		syncTargets: c.candidates,
		createSlice: func(ctx context.Context, slice *edgev2alpha1.SinglePlacementSlice) error {
			return c.clients.Client.Create(ctx, slice)
		},
		updateSlice: func(ctx context.Context, slice *edgev2alpha1.SinglePlacementSlice) error {
			return c.clients.Client.Update(ctx, slice)
		},
		deleteSlice: func(ctx context.Context, name string) error {
			return c.clients.Client.Delete(ctx, &edgev2alpha1.SinglePlacementSlice{ObjectMeta: metav1.ObjectMeta{Name: name}})
		},
		updateStatus: func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error {
			return c.clients.Client.Status().Update(ctx, ep)
		},
	}
}

// enqueuePlacement enqueues a placement, or the placement of a slice (which
// has the same name and space).
func (c *Controller) enqueuePlacement(obj any) {
	key, err := spaces.KeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

func (c *Controller) enqueueAll() {
	for _, key := range c.placements.ListKeys() {
		c.queue.Add(key)
	}
}

// Run schedules until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	crossspace.Run(ctx, c.placements, c.locations, c.syncTargets, c.slices, c.spaces)
	if !crossspace.WaitForSync(ctx, c.placements, c.locations, c.syncTargets, c.slices, c.spaces) {
		return
	}
	logger.Info("started controller")
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "scheduling failed, will retry", Quiet: worker.Conflicts,
		Process: func(ctx context.Context, key string) (bool, error) { return false, c.r.reconcile(ctx, key) }}.Start(ctx, workers)
	<-ctx.Done()
}

// candidates returns the SyncTargets of a space that may match a selector
// (crossspace.SyncTargetCandidates).
func (c *Controller) candidates(space string, selector *metav1.LabelSelector) []*edgev2alpha1.SyncTarget {
	return crossspace.SyncTargetCandidates(c.syncTargets, space, selector)
}

// schedulingChanged reports whether an update of a Location or SyncTarget
// can change any placement's destinations.
func schedulingChanged(old, obj any) bool {
	switch o := obj.(type) {
	case *edgev2alpha1.SyncTarget:
		p, ok := old.(*edgev2alpha1.SyncTarget)
		return !ok || !apiequality.Semantic.DeepEqual(p.Labels, o.Labels) || p.Spec.Unschedulable != o.Spec.Unschedulable ||
			(p.DeletionTimestamp == nil) != (o.DeletionTimestamp == nil)
	case *edgev2alpha1.Location:
		p, ok := old.(*edgev2alpha1.Location)
		return !ok || !apiequality.Semantic.DeepEqual(p.Labels, o.Labels) || !apiequality.Semantic.DeepEqual(p.Spec, o.Spec)
	}
	return true
}
