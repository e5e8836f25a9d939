// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crdcontroller looks after CRDs in spaces.
//
// Controller removes the instances of a CRD from the spaces that no longer
// serve it. With CRDs stored once (bound to spaces, spaces.DecorateCRDs):
// every space, when it is deleted, and one space, when that space's delete
// unbinds it; the apiextensions finalizer, which knows nothing of spaces,
// only empties the root space, and would otherwise leave the other
// spaces' instances behind. With CRDs stored per space (NewEverywhere):
// every space's, when a CRD the root space served everywhere is deleted.
//
// StatusController keeps the status of the CRDs of every space but root,
// with CRDs stored per space, as the apiextensions controllers keep the
// root space's: names judged within the space, Established, deletion.
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
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "crd-instances"

// Purger removes stored instances of a resource: in every space, or in
// the spaces keep refuses.
type Purger interface {
	PurgeResource(ctx context.Context, gr schema.GroupResource) (int, error)
	PurgeResourceOutside(ctx context.Context, gr schema.GroupResource, keep func(space string) bool) (int, error)
}

// Controller purges the instances of CRDs where they are no longer served.
type Controller struct {
	queue    workqueue.TypedRateLimitingInterface[schema.GroupResource]
	informer cache.SharedIndexInformer
	purger   Purger
	// everywhereOnly: CRDs are stored per space, and the controller looks
	// after the root space's CRDs served in every space alone (a space's
	// own are StatusController's; the root space's own, the apiextensions
	// finalizer's).
	everywhereOnly bool
	// defines tells, with everywhereOnly, whether a space has a CRD of
	// the name for its own now: its instances are its own.
	defines func(space, name string) bool
}

// New returns a controller over an informer on CRDs as stored, bindings
// included (spaces.ServerView).
func New(informer cache.SharedIndexInformer, purger Purger) (*Controller, error) {
	return newController(informer, purger, false)
}

// NewEverywhere returns a controller over an informer on the root space's
// CRDs, with CRDs stored per space: it purges, in every space, the
// instances of a CRD the root space served everywhere once it is deleted.
// defines tells whether a space has a CRD of a name for its own now: the
// instances there are the space's and stay.
func NewEverywhere(informer cache.SharedIndexInformer, purger Purger, defines func(space, name string) bool) (*Controller, error) {
	c, err := newController(informer, purger, true)
	if c != nil {
		c.defines = defines
	}
	return c, err
}

func newController(informer cache.SharedIndexInformer, purger Purger, everywhereOnly bool) (*Controller, error) {
	c := &Controller{
		everywhereOnly: everywhereOnly,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[schema.GroupResource](),
			workqueue.TypedRateLimitingQueueConfig[schema.GroupResource]{Name: ControllerName}),
		informer: informer,
		purger:   purger,
	}
	enqueue := func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if crd, ok := obj.(*apiextensionsv1.CustomResourceDefinition); ok && (!c.everywhereOnly || spaces.ServedEverywhere(crd.Annotations)) {
			c.queue.Add(groupResource(crd))
		}
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		// Each CRD once at start: instances left behind while the server
		// was down go then.
		AddFunc: enqueue,
		UpdateFunc: func(oldObj, obj any) {
			old, ok1 := oldObj.(*apiextensionsv1.CustomResourceDefinition)
			crd, ok2 := obj.(*apiextensionsv1.CustomResourceDefinition)
			if ok1 && ok2 && (crd.DeletionTimestamp != nil || unbound(old, crd)) {
				enqueue(crd)
			}
		},
		DeleteFunc: enqueue,
	})
	return c, err
}

func groupResource(crd *apiextensionsv1.CustomResourceDefinition) schema.GroupResource {
	return schema.GroupResource{Group: crd.Spec.Group, Resource: crd.Spec.Names.Plural}
}

// unbound tells whether a space stopped serving a CRD.
func unbound(old, crd *apiextensionsv1.CustomResourceDefinition) bool {
	before, now := spaces.CRDBindings(old.Annotations), spaces.CRDBindings(crd.Annotations)
	if now.All() {
		return false
	}
	if before.All() {
		return true
	}
	for _, s := range before.Spaces() {
		if !now.Has(s) {
			return true
		}
	}
	return false
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

// process removes the instances of one CRD's resource from the spaces
// that do not serve it: all of them once it is being deleted.
func (c *Controller) process(ctx context.Context, gr schema.GroupResource) (bool, error) {
	obj, exists, err := c.informer.GetStore().GetByKey(gr.Resource + "." + gr.Group)
	if err != nil {
		return false, err
	}
	crd, _ := obj.(*apiextensionsv1.CustomResourceDefinition)
	if c.everywhereOnly && exists && crd != nil && !spaces.ServedEverywhere(crd.Annotations) {
		// The root space's own CRD of the name now: its instances are the
		// root space's, and the other spaces' are theirs.
		return false, nil
	}
	if !exists || crd == nil || crd.DeletionTimestamp != nil {
		purge := func() (int, error) { return c.purger.PurgeResource(ctx, gr) }
		if c.everywhereOnly {
			name := gr.Resource + "." + gr.Group
			purge = func() (int, error) {
				return c.purger.PurgeResourceOutside(ctx, gr, func(space string) bool { return c.defines(space, name) })
			}
		}
		n, err := purge()
		if err != nil {
			return false, err
		}
		if n > 0 {
			klog.FromContext(ctx).Info("removed instances of deleted CRD", "resource", gr, "count", n)
		}
		return false, nil
	}
	b := spaces.CRDBindings(crd.Annotations)
	if b.All() {
		return false, nil
	}
	n, err := c.purger.PurgeResourceOutside(ctx, gr, b.Has)
	if err != nil {
		return false, err
	}
	if n > 0 {
		klog.FromContext(ctx).Info("removed instances of CRD from spaces that unbound it", "resource", gr, "count", n)
	}
	return false, nil
}
