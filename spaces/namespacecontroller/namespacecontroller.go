// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package namespacecontroller deletes the contents of Terminating
// namespaces in every space, then finalizes them, as Kubernetes' namespace
// controller does in one cluster. It watches namespaces across all spaces
// through the wildcard space.
package namespacecontroller

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs and its queue.
const ControllerName = "namespace"

// Clients gives the controller its view of one space.
type Clients interface {
	Kube(space string) (kubernetes.Interface, error)
	Dynamic(space string) (dynamic.Interface, error)
	Discovery(space string) (discovery.DiscoveryInterface, error)
}

// Controller finalizes deleted namespaces.
type Controller struct {
	queue      workqueue.TypedRateLimitingInterface[string]
	controller cache.Controller
	r          *reconciler
}

// New returns a controller. wildcard lists and watches namespaces of all
// spaces; each space's discovery lists the resources to empty a namespace
// of there: its own CRDs' too, which another space's does not list.
func New(wildcard kubernetes.Interface, clients Clients) *Controller {
	c := &Controller{queue: newQueue()}
	c.controller = spaces.NewNamespaceInformer(wildcard, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	}, spaces.InformerOptions{})
	c.r = &reconciler{
		getNamespace: func(ctx context.Context, space, name string) (*corev1.Namespace, error) {
			client, err := clients.Kube(space)
			if err != nil {
				return nil, err
			}
			return client.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		},
		finalize: func(ctx context.Context, space string, ns *corev1.Namespace) error {
			client, err := clients.Kube(space)
			if err != nil {
				return err
			}
			_, err = client.CoreV1().Namespaces().Finalize(ctx, ns, metav1.UpdateOptions{})
			return err
		},
		resources: func(space string) ([]*metav1.APIResourceList, error) {
			disco, err := clients.Discovery(space)
			if err != nil {
				return nil, err
			}
			lists, err := disco.ServerPreferredNamespacedResources()
			if discovery.IsGroupDiscoveryFailedError(err) {
				// Empty what can be found; the rest is retried.
				return lists, nil
			}
			return lists, err
		},
		dynamic: clients.Dynamic,
	}
	return c
}

func newQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, 10*time.Second),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})
}

func (c *Controller) enqueue(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok || ns.DeletionTimestamp == nil {
		return
	}
	spaces.Enqueue(c.queue, obj)
}

// Run processes namespaces until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	// Not finalized yet (contents still going) is the normal case of an
	// error here: it is logged at V(2) by process, not as an error.
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "finalizing namespace failed, will retry",
		Process: c.process, Quiet: func(error) bool { return true }}.Run(ctx, workers,
		func(ctx context.Context) { go c.controller.RunWithContext(ctx) }, c.controller.HasSynced)
}

// HasSynced reports whether the controller has seen every namespace.
func (c *Controller) HasSynced() bool { return c.controller.HasSynced() }

func (c *Controller) process(ctx context.Context, key string) (bool, error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return false, nil
	}
	logger := klog.FromContext(ctx).WithValues("space", space, "namespace", name)
	if err := c.r.reconcile(klog.NewContext(ctx, logger), space, name); err != nil {
		logger.V(2).Info("namespace not finalized yet, will retry", "reason", err.Error())
		return false, err
	}
	return false, nil
}
