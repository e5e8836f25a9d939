// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package mailbox

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// Name returns the mailbox space of a SyncTarget: its inventory space and
// UID, so that a SyncTarget deleted and recreated under the same name gets a
// fresh, empty mailbox. Space names are DNS labels of at most 63
// characters: the inventory part is shortened to fit.
func Name(inventorySpace string, uid types.UID) string {
	return spaces.MailboxName(inventorySpace, string(uid))
}

// Labels on a mailbox Space name the SyncTarget it serves.
const (
	LabelSyncTargetSpace = edgev2alpha1.MailboxSyncTargetSpaceLabel
	LabelSyncTargetName  = edgev2alpha1.MailboxSyncTargetNameLabel
	LabelSyncTargetUID   = edgev2alpha1.MailboxSyncTargetUIDLabel
	// Finalizer holds a deleted SyncTarget until its mailbox is gone.
	// Admission gives it to a SyncTarget as it is created; the
	// reconciler adds it to one that lacks it (made by an earlier release).
	Finalizer = edgev2alpha1.MailboxFinalizer
	// SpaceType is the spec.type of mailbox spaces.
	SpaceType = tenancyv1alpha1.SpaceTypeMailbox
)

func clientKey(name string) client.ObjectKey { return client.ObjectKey{Name: name} }

// reasonHeartbeatMissed is the reason of a Heartbeat condition turned False
// by the server.
const reasonHeartbeatMissed = "HeartbeatMissed"

// heartbeatStale says whether a SyncTarget says its syncer heartbeats
// while it is late (edgev2alpha1.HeartbeatDeadline); if not, how long until
// it would be (0: nothing to watch).
func heartbeatStale(st *edgev2alpha1.SyncTarget, now time.Time) (bool, time.Duration) {
	if !meta.IsStatusConditionTrue(st.Status.Conditions, edgev2alpha1.SyncTargetHeartbeat) {
		return false, 0
	}
	deadline, ok := edgev2alpha1.HeartbeatDeadline(&st.Status)
	if !ok {
		return false, 0
	}
	if now.After(deadline) {
		return true, 0
	}
	return false, deadline.Sub(now) + time.Second
}

// reconciler is the logic of the controller; its dependencies are function
// fields so that tests can stub them. Writes of a SyncTarget take a context
// that carries its inventory space, writes and reads of Spaces one that
// carries the root space (spaces.WithSpace).
type reconciler struct {
	// syncTarget reads the cache.
	syncTarget             func(space, name string) (*edgev2alpha1.SyncTarget, bool)
	updateSyncTarget       func(ctx context.Context, st *edgev2alpha1.SyncTarget) error
	updateSyncTargetStatus func(ctx context.Context, st *edgev2alpha1.SyncTarget) error
	// cachedSpace reads a Space from the cache of Spaces: a SyncTarget's
	// every event (its syncer's heartbeats among them) finds its mailbox
	// there, without a request. nil: none is cached.
	cachedSpace func(name string) (*tenancyv1alpha1.Space, bool)
	// getSpace reads a Space from the server.
	getSpace    func(ctx context.Context, name string) (*tenancyv1alpha1.Space, error)
	createSpace func(ctx context.Context, sp *tenancyv1alpha1.Space) error
	deleteSpace func(ctx context.Context, name string) error
	now         func() time.Time
	// requeueAfter looks at a SyncTarget again after a while.
	requeueAfter func(key string, after time.Duration)
}

// reconcile keeps the mailbox of one SyncTarget. It reports requeue while a
// deleted SyncTarget's mailbox is still going.
func (r *reconciler) reconcile(ctx context.Context, key string) (requeue bool, err error) {
	space, _, name, err := spaces.SplitKey(key)
	if err != nil {
		return false, nil
	}
	st, ok := r.syncTarget(space, name)
	if !ok {
		return false, nil
	}
	mailbox := Name(space, st.UID)
	ctx = klog.NewContext(ctx, klog.FromContext(ctx).WithValues("syncTarget", key, "mailbox", mailbox))
	invCtx := spaces.WithSpace(ctx, space)
	rootCtx := spaces.WithSpace(ctx, spaces.Root)

	if st.DeletionTimestamp != nil {
		return r.deleteMailbox(invCtx, rootCtx, st, mailbox)
	}
	if !slices.Contains(st.Finalizers, Finalizer) {
		// The finalizer first (no mailbox that nothing would delete), then
		// the mailbox in the same pass: the update answers with the
		// SyncTarget as stored.
		updated := st.DeepCopy()
		updated.Finalizers = append(updated.Finalizers, Finalizer)
		if err := r.updateSyncTarget(invCtx, updated); err != nil {
			return false, err
		}
		st = updated
	}
	if err := r.ensureMailbox(rootCtx, space, st, mailbox); err != nil {
		return false, err
	}
	// The server stores a SyncTarget naming its mailbox; one stored by an
	// earlier release, or whose status someone changed since, is named
	// here.
	if st.Status.MailboxSpace != mailbox {
		updated := st.DeepCopy()
		updated.Status.MailboxSpace = mailbox
		return false, r.updateSyncTargetStatus(invCtx, updated)
	}
	return false, r.checkHeartbeat(invCtx, key, st)
}

// deleteMailbox deletes the mailbox of a deleted SyncTarget, then lets the
// SyncTarget go by removing the finalizer. It reports requeue until the
// mailbox is gone.
func (r *reconciler) deleteMailbox(invCtx, rootCtx context.Context, st *edgev2alpha1.SyncTarget, mailbox string) (requeue bool, err error) {
	if !slices.Contains(st.Finalizers, Finalizer) {
		return false, nil
	}
	if err := r.deleteSpace(rootCtx, mailbox); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	// Wait until the mailbox and its contents are gone: nothing here
	// watches Spaces, so look again, with backoff.
	if _, err := r.getSpace(rootCtx, mailbox); !apierrors.IsNotFound(err) {
		return true, nil
	}
	updated := st.DeepCopy()
	updated.Finalizers = slices.DeleteFunc(updated.Finalizers, func(f string) bool { return f == Finalizer })
	if err := r.updateSyncTarget(invCtx, updated); err != nil && !apierrors.IsNotFound(err) {
		return false, err
	}
	klog.FromContext(invCtx).Info("deleted mailbox")
	return false, nil
}

// ensureMailbox creates the mailbox space of a SyncTarget, or checks that
// the space of that name is it.
func (r *reconciler) ensureMailbox(rootCtx context.Context, space string, st *edgev2alpha1.SyncTarget, mailbox string) error {
	mb := &tenancyv1alpha1.Space{
		ObjectMeta: metav1.ObjectMeta{Name: mailbox, Labels: map[string]string{
			LabelSyncTargetSpace: space, LabelSyncTargetName: st.Name, LabelSyncTargetUID: string(st.UID)},
			// The space controller's finalizer, which it would otherwise
			// add in a write of its own.
			Finalizers: []string{tenancyv1alpha1.SpaceFinalizer}},
		Spec: tenancyv1alpha1.SpaceSpec{Type: SpaceType},
	}
	existing, cached := (*tenancyv1alpha1.Space)(nil), false
	if r.cachedSpace != nil {
		existing, cached = r.cachedSpace(mailbox)
	}
	if !cached {
		err := r.createSpace(rootCtx, mb)
		if err == nil {
			klog.FromContext(rootCtx).Info("created mailbox")
			return nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return err
		}
		if existing, err = r.getSpace(rootCtx, mailbox); err != nil {
			return err
		}
	}
	if existing.Spec.Type != SpaceType || !isSubset(mb.Labels, existing.Labels) {
		// Only the server makes mailbox spaces (admission sees to it): a
		// space of that name that is no mailbox of this SyncTarget is
		// never used as one.
		return fmt.Errorf("space %q exists but is not the mailbox of this SyncTarget (type %q, labels %v): delete it", mailbox, existing.Spec.Type, existing.Labels)
	}
	return nil
}

// checkHeartbeat turns the Heartbeat condition False when the syncer stopped
// heartbeating, or looks again when it would become stale.
func (r *reconciler) checkHeartbeat(invCtx context.Context, key string, st *edgev2alpha1.SyncTarget) error {
	stale, wait := heartbeatStale(st, r.now())
	if !stale {
		if wait > 0 {
			r.requeueAfter(key, wait)
		}
		return nil
	}
	updated := st.DeepCopy()
	meta.SetStatusCondition(&updated.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetHeartbeat,
		Status: metav1.ConditionFalse, Reason: reasonHeartbeatMissed, ObservedGeneration: st.Generation,
		Message: fmt.Sprintf("no heartbeat from the syncer since %s", st.Status.LastSyncerHeartbeatTime.UTC().Format(time.RFC3339))})
	klog.FromContext(invCtx).Info("syncer stopped heartbeating", "lastHeartbeat", st.Status.LastSyncerHeartbeatTime.Time)
	return r.updateSyncTargetStatus(invCtx, updated)
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
