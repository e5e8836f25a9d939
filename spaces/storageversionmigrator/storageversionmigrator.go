// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package storageversionmigrator works off the StorageVersionMigrations of
// every space, as kube-controller-manager's storage-version-migrator does
// in a cluster: each object of the named resource, in the migration's own
// space, is written again unchanged (an apply that names only the object
// and its resourceVersion), so that the datastore holds it encoded in the
// version the space's storage uses now, after a CRD's storage version
// changed. The migration's status says Running, then Succeeded, or Failed
// with the reason (a resource the space does not serve, one that cannot be
// written).
//
// It watches the migrations across all spaces through the wildcard space;
// mailboxes, which hold copies for an edge, have none worked off.
package storageversionmigrator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	svmv1 "k8s.io/api/storagemigration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/kubestellar/kubestellar/internal/worker"
	"github.com/kubestellar/kubestellar/spaces"
)

// ControllerName names the controller in logs, in its queue and as the
// field manager of its writes (Kubernetes' own name).
const ControllerName = "storage-version-migrator-controller"

// page is how many objects one list of a migration returns.
const page = 500

// Clients gives clients of one space (or of the wildcard space).
type Clients interface {
	Kube(space string) (kubernetes.Interface, error)
	Dynamic(space string) (dynamic.Interface, error)
	Metadata(space string) (metadata.Interface, error)
	Discovery(space string) (discovery.DiscoveryInterface, error)
}

// Controller works off the migrations of every space but mailboxes.
type Controller struct {
	clients    Clients
	queue      workqueue.TypedRateLimitingInterface[string]
	migrations cache.Indexer
	controller cache.Controller
}

// New returns a controller.
func New(clients Clients) (*Controller, error) {
	wildcard, err := clients.Kube(spaces.Wildcard)
	if err != nil {
		return nil, err
	}
	c := &Controller{clients: clients, queue: workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](100*time.Millisecond, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName})}
	migrations := wildcard.StoragemigrationV1().StorageVersionMigrations()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return migrations.List(ctx, o)
		},
		WatchFuncWithContext: migrations.Watch,
	}
	c.migrations, c.controller = spaces.NewInformer(lw, &svmv1.StorageVersionMigration{}, 0, cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
	})
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	m, ok := obj.(*svmv1.StorageVersionMigration)
	if !ok || finished(m) || spaces.IsMailboxName(m.Annotations[spaces.Annotation]) {
		return
	}
	spaces.Enqueue(c.queue, obj)
}

// Run works off migrations until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "migrating a resource's storage failed, will retry",
		Process: c.process}.Run(ctx, workers, func(ctx context.Context) { go c.controller.RunWithContext(ctx) }, c.controller.HasSynced)
}

func (c *Controller) process(ctx context.Context, key string) (bool, error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		utilruntime.HandleError(err)
		return false, nil
	}
	obj, exists, err := c.migrations.GetByKey(key)
	if err != nil || !exists {
		return false, err
	}
	m, ok := obj.(*svmv1.StorageVersionMigration)
	if !ok || finished(m) {
		return false, nil
	}
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("space", space, "migration", name))
	return false, c.migrate(ctx, space, m.DeepCopy())
}

// migrate writes again every object of m's resource in space, and says so
// in m's status.
func (c *Controller) migrate(ctx context.Context, space string, m *svmv1.StorageVersionMigration) error {
	kube, err := c.clients.Kube(space)
	if err != nil {
		return err
	}
	if !meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationRunning)) {
		meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionTrue,
			Reason: "Started", Message: "writing every object of the resource again"})
		if m, err = kube.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, m, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	gr := schema.GroupResource{Group: m.Spec.Resource.Group, Resource: m.Spec.Resource.Resource}
	rv, err := c.rewrite(ctx, space, gr)
	var permanent *failure
	switch {
	case errors.As(err, &permanent):
		return c.finish(ctx, kube, m, svmv1.MigrationFailed, permanent.reason, permanent.message, "")
	case err != nil:
		return err
	}
	klog.FromContext(ctx).V(2).Info("migrated a resource's storage", "resource", gr)
	return c.finish(ctx, kube, m, svmv1.MigrationSucceeded, "Completed", "every object was written again", rv)
}

// failure is an error a retry cannot mend.
type failure struct{ reason, message string }

func (f *failure) Error() string { return f.message }

// rewrite applies, unchanged, every object of a resource of a space, and
// returns the resourceVersion of the list it started from.
func (c *Controller) rewrite(ctx context.Context, space string, gr schema.GroupResource) (string, error) {
	disco, err := c.clients.Discovery(space)
	if err != nil {
		return "", err
	}
	groups, err := restmapper.GetAPIGroupResources(disco)
	if err != nil && len(groups) == 0 {
		return "", err
	}
	mapper := restmapper.NewDiscoveryRESTMapper(groups)
	gvr, err := mapper.ResourceFor(gr.WithVersion(""))
	if meta.IsNoMatchError(err) {
		return "", &failure{reason: "NotServed", message: fmt.Sprintf("space %q serves no resource %s", space, gr)}
	}
	if err != nil {
		return "", err
	}
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return "", err
	}
	md, err := c.clients.Metadata(space)
	if err != nil {
		return "", err
	}
	dyn, err := c.clients.Dynamic(space)
	if err != nil {
		return "", err
	}
	var first string
	opts := metav1.ListOptions{Limit: page}
	for {
		list, err := md.Resource(gvr).List(ctx, opts)
		if apierrors.IsMethodNotSupported(err) || apierrors.IsNotFound(err) {
			return "", &failure{reason: "NotListable", message: fmt.Sprintf("resource %s cannot be listed: %v", gr, err)}
		}
		if err != nil {
			return "", err
		}
		if first == "" {
			first = list.ResourceVersion
		}
		for i := range list.Items {
			item := &list.Items[i]
			patch, err := json.Marshal(map[string]any{"apiVersion": gvk.GroupVersion().String(), "kind": gvk.Kind,
				"metadata": map[string]any{"name": item.Name, "namespace": item.Namespace, "resourceVersion": item.ResourceVersion}})
			if err != nil {
				return "", err
			}
			_, err = dyn.Resource(gvr).Namespace(item.Namespace).Patch(ctx, item.Name, types.ApplyPatchType, patch,
				metav1.PatchOptions{FieldManager: ControllerName})
			switch {
			case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err):
				// Gone, or written since the list: in the new version either way.
			case apierrors.IsMethodNotSupported(err):
				return "", &failure{reason: "NotWritable", message: fmt.Sprintf("resource %s cannot be written: %v", gr, err)}
			default:
				return "", err
			}
		}
		if list.Continue == "" {
			return first, nil
		}
		opts.Continue = list.Continue
	}
}

// finish sets the migration's last condition (Running false, and typ
// true).
func (c *Controller) finish(ctx context.Context, kube kubernetes.Interface, m *svmv1.StorageVersionMigration, typ svmv1.MigrationConditionType, reason, message, rv string) error {
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(svmv1.MigrationRunning), Status: metav1.ConditionFalse,
		Reason: reason, Message: message})
	meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: string(typ), Status: metav1.ConditionTrue, Reason: reason, Message: message})
	if rv != "" {
		m.Status.ResourceVersion = rv
	}
	_, err := kube.StoragemigrationV1().StorageVersionMigrations().UpdateStatus(ctx, m, metav1.UpdateOptions{})
	return err
}

// finished reports whether a migration has succeeded or failed.
func finished(m *svmv1.StorageVersionMigration) bool {
	return meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationSucceeded)) ||
		meta.IsStatusConditionTrue(m.Status.Conditions, string(svmv1.MigrationFailed))
}
