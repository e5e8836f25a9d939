// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package spacecontroller runs the life of Space objects: it initializes a
// new space (its default namespaces), marks it Ready, and when the Space is
// deleted removes everything stored in it before letting the Space go.
package spacecontroller

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/internal/worker"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "space"

// Controller reconciles Spaces.
type Controller struct {
	queue    workqueue.TypedRateLimitingInterface[string]
	informer cache.SharedIndexInformer
	r        *reconciler
}

// New returns a controller for the Spaces informer watches (in the root
// space). rootClient writes Spaces; spaceClient returns a client for the
// inside of a space; purge deletes everything stored in a space.
func New(informer cache.SharedIndexInformer, rootClient dynamic.Interface,
	spaceClient func(space string) (kubernetes.Interface, error), purge func(ctx context.Context, space string) (int, error)) (*Controller, error) {
	c := &Controller{
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName}),
		informer: informer,
	}
	c.r = &reconciler{
		updateSpace: func(ctx context.Context, s *tenancyv1alpha1.Space) error {
			_, err := rootClient.Resource(tenancyv1alpha1.SpacesGVR).Update(ctx, toUnstructured(s), updateOptions)
			return err
		},
		updateStatus: func(ctx context.Context, s *tenancyv1alpha1.Space) error {
			_, err := rootClient.Resource(tenancyv1alpha1.SpacesGVR).UpdateStatus(ctx, toUnstructured(s), updateOptions)
			return err
		},
		ensureNamespace: func(ctx context.Context, space, namespace string) error {
			client, err := spaceClient(space)
			if err != nil {
				return err
			}
			return ensureNamespace(ctx, client, namespace)
		},
		ensureOwner: func(ctx context.Context, space, owner string) error {
			client, err := spaceClient(space)
			if err != nil {
				return err
			}
			return ensureOwnerBinding(ctx, client, owner)
		},
		purge: purge,
	}
	_, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	return c, err
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil {
		utilruntime.HandleError(err)
		return
	}
	c.queue.Add(key)
}

// Run processes Spaces until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "reconciling space failed, will retry",
		Process: func(ctx context.Context, key string) (bool, error) {
			return false, c.process(klog.NewContext(ctx, klog.FromContext(ctx).WithValues("space", key)), key)
		}}.Run(ctx, workers, nil, c.informer.HasSynced)
}

func (c *Controller) process(ctx context.Context, key string) error {
	obj, exists, err := c.informer.GetIndexer().GetByKey(key)
	if err != nil || !exists {
		return err
	}
	space := &tenancyv1alpha1.Space{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.(*unstructured.Unstructured).Object, space); err != nil {
		return fmt.Errorf("decoding space: %w", err)
	}
	err = c.r.reconcile(ctx, space)
	if apierrors.IsConflict(err) {
		// The informer will deliver the newer object.
		return nil
	}
	return err
}
