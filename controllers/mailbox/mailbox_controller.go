// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package mailbox keeps one mailbox space per SyncTarget: the space the
// placement translator writes what goes to that edge cluster into, and its
// syncer reads from. The mailbox is created with the SyncTarget, recorded
// in its status, and deleted with it (a finalizer holds the SyncTarget until
// the mailbox is gone). It also turns a SyncTarget's Heartbeat condition
// False when its syncer stops heartbeating.
//
// mailbox_controller.go is the wiring (cache, queue, event handlers); the
// reconcile is reconciler (mailbox_reconcile.go), whose steps are tested
// against stubs.
package mailbox

import (
	"context"
	"time"

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
const ControllerName = "mailbox"

// Controller keeps mailboxes.
type Controller struct {
	clients     *crossspace.Clients
	queue       workqueue.TypedRateLimitingInterface[string]
	syncTargets *crossspace.Informer
	// spaces is the shared cache of Spaces (run with the workload
	// controllers' caches): a mailbox deleted by hand is made again.
	spaces *crossspace.Informer
	r      *reconciler
}

// New returns the controller.
func New(clients *crossspace.Clients) *Controller {
	c := &Controller{clients: clients, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.DefaultTypedControllerRateLimiter[string](), workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	c.syncTargets = clients.Typed(&edgev2alpha1.SyncTargetList{}, &edgev2alpha1.SyncTarget{}, crossspace.Enqueue(func(obj any) {
		if key, err := spaces.KeyFunc(obj); err == nil {
			c.queue.Add(key)
		}
	}))
	c.spaces = clients.Typed(&tenancyv1alpha1.SpaceList{}, &tenancyv1alpha1.Space{}, cache.ResourceEventHandlerFuncs{
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if sp, ok := obj.(*tenancyv1alpha1.Space); ok && sp.Spec.Type == SpaceType && sp.Labels[LabelSyncTargetName] != "" {
				c.queue.Add(spaces.Key(sp.Labels[LabelSyncTargetSpace], "", sp.Labels[LabelSyncTargetName]))
			}
		},
	})
	c.r = c.newReconciler()
	return c
}

// newReconciler binds the reconciler to the controller's cache, clients,
// clock and queue.
func (c *Controller) newReconciler() *reconciler {
	return &reconciler{
		syncTarget: func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
			return crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, space, "", name)
		},
		updateSyncTarget: func(ctx context.Context, st *edgev2alpha1.SyncTarget) error {
			return c.clients.Client.Update(ctx, st)
		},
		updateSyncTargetStatus: func(ctx context.Context, st *edgev2alpha1.SyncTarget) error {
			return c.clients.Client.Status().Update(ctx, st)
		},
		cachedSpace: func(name string) (*tenancyv1alpha1.Space, bool) {
			sp, ok := crossspace.Get[*tenancyv1alpha1.Space](c.spaces, spaces.Root, "", name)
			return sp, ok && sp.DeletionTimestamp == nil
		},
		getSpace: func(ctx context.Context, name string) (*tenancyv1alpha1.Space, error) {
			sp := &tenancyv1alpha1.Space{}
			if err := c.clients.Client.Get(ctx, clientKey(name), sp); err != nil {
				return nil, err
			}
			return sp, nil
		},
		createSpace: func(ctx context.Context, sp *tenancyv1alpha1.Space) error {
			return c.clients.Client.Create(ctx, sp)
		},
		deleteSpace: func(ctx context.Context, name string) error {
			return c.clients.Client.Delete(ctx, &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: name}})
		},
		now:          time.Now,
		requeueAfter: c.queue.AddAfter,
	}
}

// Run keeps mailboxes until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	crossspace.Run(ctx, c.syncTargets)
	if !crossspace.WaitForSync(ctx, c.syncTargets, c.spaces) {
		return
	}
	logger.Info("started controller")
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "keeping mailbox failed, will retry", Quiet: worker.Conflicts,
		Process: c.r.reconcile}.Start(ctx, workers)
	<-ctx.Done()
}
