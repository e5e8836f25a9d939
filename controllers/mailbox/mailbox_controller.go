// Package mailbox keeps one mailbox space per SyncTarget: the space the
// placement translator writes what goes to that edge cluster into, and its
// syncer reads from. The mailbox is created with the SyncTarget, recorded
// in its status, and deleted with it (a finalizer holds the SyncTarget until
// the mailbox is gone).
package mailbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
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
	return c
}

// Run keeps mailboxes until ctx is done.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer utilruntime.HandleCrash()
	defer c.queue.ShutDown()
	logger := klog.FromContext(ctx).WithValues("controller", ControllerName)
	ctx = klog.NewContext(ctx, logger)
	crossspace.Run(ctx, c.syncTargets)
	if !crossspace.WaitForSync(ctx, c.syncTargets) {
		return
	}
	logger.Info("started controller")
	worker.Loop[string]{Name: ControllerName, Queue: c.queue, Failure: "keeping mailbox failed, will retry", Quiet: worker.Conflicts,
		Process: c.process}.Start(ctx, workers)
	<-ctx.Done()
}

// process keeps the mailbox of one SyncTarget. It reports requeue while a
// deleted SyncTarget's mailbox is still going.
func (c *Controller) process(ctx context.Context, key string) (requeue bool, err error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	st, ok := crossspace.Get[*edgev2alpha1.SyncTarget](c.syncTargets, space, "", name)
	if !ok {
		return false, nil
	}
	invCtx := spaces.WithSpace(ctx, space)
	rootCtx := spaces.WithSpace(ctx, spaces.Root)
	mailbox := Name(space, st.UID)
	logger := klog.FromContext(ctx).WithValues("syncTarget", key, "mailbox", mailbox)

	if st.DeletionTimestamp != nil {
		if !slices.Contains(st.Finalizers, Finalizer) {
			return false, nil
		}
		err := c.clients.Client.Delete(rootCtx, &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: mailbox}})
		if err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		// Wait until the mailbox and its contents are gone: nothing here
		// watches Spaces, so look again, with backoff.
		if err := c.clients.Client.Get(rootCtx, clientKey(mailbox), &tenancyv1alpha1.Space{}); !apierrors.IsNotFound(err) {
			return true, nil
		}
		updated := st.DeepCopy()
		updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == Finalizer })
		if err := c.clients.Client.Update(invCtx, updated); err != nil && !apierrors.IsNotFound(err) {
			return false, err
		}
		logger.Info("deleted mailbox")
		return false, nil
	}

	if !slices.Contains(st.Finalizers, Finalizer) {
		updated := st.DeepCopy()
		updated.Finalizers = append(updated.Finalizers, Finalizer)
		return false, c.clients.Client.Update(invCtx, updated)
	}
	existing := &tenancyv1alpha1.Space{}
	mb := &tenancyv1alpha1.Space{
		ObjectMeta: metav1.ObjectMeta{Name: mailbox, Labels: map[string]string{
			LabelSyncTargetSpace: space, LabelSyncTargetName: name, LabelSyncTargetUID: string(st.UID)}},
		Spec: tenancyv1alpha1.SpaceSpec{Type: SpaceType},
	}
	if err := c.clients.Client.Create(rootCtx, mb); err == nil {
		logger.Info("created mailbox")
	} else if !apierrors.IsAlreadyExists(err) {
		return false, err
	} else if err := c.clients.Client.Get(rootCtx, clientKey(mailbox), existing); err != nil {
		return false, err
	} else if existing.Spec.Type != SpaceType || !isSubset(mb.Labels, existing.Labels) {
		// Only the server makes mailbox spaces (admission sees to it): a
		// space of that name that is no mailbox of this SyncTarget is
		// never used as one.
		return false, fmt.Errorf("space %q exists but is not the mailbox of this SyncTarget (type %q, labels %v): delete it", mailbox, existing.Spec.Type, existing.Labels)
	}
	if st.Status.MailboxSpace != mailbox {
		updated := st.DeepCopy()
		updated.Status.MailboxSpace = mailbox
		return false, c.clients.Client.Status().Update(invCtx, updated)
	}
	// A syncer that stopped heartbeating says so.
	if stale, wait := heartbeatStale(st, time.Now()); stale {
		updated := st.DeepCopy()
		meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetHeartbeat,
			Status: metav1.ConditionFalse, Reason: "HeartbeatMissed", ObservedGeneration: st.Generation,
			Message: fmt.Sprintf("no heartbeat from the syncer since %s", st.Status.LastSyncerHeartbeatTime.UTC().Format(time.RFC3339))})
		logger.Info("syncer stopped heartbeating", "lastHeartbeat", st.Status.LastSyncerHeartbeatTime.Time)
		return false, c.clients.Client.Status().Update(invCtx, updated)
	} else if wait > 0 {
		c.queue.AddAfter(key, wait)
	}
	return false, nil
}

// isSubset reports whether every key of want has the same value in have.
func isSubset(want, have map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}
