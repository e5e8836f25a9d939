// Package crdcontroller removes the instances of a deleted CRD from every
// space. CRDs are global, but their instances are stored per space; the
// apiextensions finalizer, which knows nothing of spaces, only empties the
// root space, and would otherwise leave the other spaces' instances behind.
package crdcontroller

import (
	"context"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "crd-instances"

// Controller purges the instances of CRDs being deleted.
type Controller struct {
	queue    workqueue.TypedRateLimitingInterface[schema.GroupResource]
	informer cache.SharedIndexInformer
	purge    func(ctx context.Context, gr schema.GroupResource) (int, error)
}

// New returns a controller over a CRD informer.
func New(informer cache.SharedIndexInformer, purge func(ctx context.Context, gr schema.GroupResource) (int, error)) (*Controller, error) {
	c := &Controller{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[schema.GroupResource](),
			workqueue.TypedRateLimitingQueueConfig[schema.GroupResource]{Name: ControllerName}),
		informer: informer,
		purge:    purge,
	}
	enqueue := func(obj any, deleted bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition)
		if !ok || (crd.DeletionTimestamp == nil && !deleted) {
			return
		}
		c.queue.Add(schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural})
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { enqueue(obj, false) },
		DeleteFunc: func(obj any) { enqueue(obj, true) },
	})
	return c, err
}

// Run processes CRDs until ctx is done.
func (c *Controller) Run(ctx context.Context) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	if !cache.WaitForCacheSync(ctx.Done(), c.informer.HasSynced) {
		return
	}
	worker.Loop[schema.GroupResource]{Name: ControllerName, Queue: c.queue, Failure: "removing instances of deleted CRD failed, will retry",
		Process: c.process}.Start(ctx, 1)
	<-ctx.Done()
}

// process removes the instances of one deleted CRD's resource from every space.
func (c *Controller) process(ctx context.Context, gr schema.GroupResource) (bool, error) {
	n, err := c.purge(ctx, gr)
	if err != nil {
		return false, err
	}
	if n > 0 {
		klog.FromContext(ctx).Info("removed instances of deleted CRD", "resource", gr, "count", n)
	}
	return false, nil
}
