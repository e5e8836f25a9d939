// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package mailbox

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// fakeMailboxes is the world a reconciler sees: the SyncTarget cache and
// the Spaces of the server as maps, and writes that change them, as the
// server and the informer would. It records every call to the server, in
// order, with the space its context carries, and every requeue.
type fakeMailboxes struct {
	syncTargets map[string]*edgev2alpha1.SyncTarget // space|name
	spaces      map[string]*tenancyv1alpha1.Space   // name
	// lingering keeps a deleted Space (marked deleted), as the server does
	// while the space controller empties it.
	lingering bool
	// lagging: the cache of Spaces has not seen them yet (it is spaces
	// otherwise).
	lagging bool
	// fail fails a call: "update", "updateStatus", "create", "get" or
	// "delete".
	fail map[string]error

	now      time.Time
	calls    []string
	requeues []string
}

const (
	inv    = "inv1"
	stName = "edge1"
	stUID  = types.UID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")
)

var (
	stKey   = spaces.Key(inv, "", stName)
	mailbox = Name(inv, stUID)
	// mailboxLabels are those of the mailbox of edge1.
	mailboxLabels = map[string]string{LabelSyncTargetSpace: inv, LabelSyncTargetName: stName, LabelSyncTargetUID: string(stUID)}
	errBoom       = errors.New("boom")
)

func newFakeMailboxes() *fakeMailboxes {
	return &fakeMailboxes{syncTargets: map[string]*edgev2alpha1.SyncTarget{}, spaces: map[string]*tenancyv1alpha1.Space{},
		fail: map[string]error{}, now: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}
}

// syncTarget adds edge1 to inv1 with the given finalizers.
func (f *fakeMailboxes) syncTarget(finalizers ...string) *edgev2alpha1.SyncTarget {
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: stName, UID: stUID, Generation: 4, ResourceVersion: "9", Finalizers: finalizers}}
	f.syncTargets[stKey] = st
	return st
}

// ready adds edge1 as it is once its mailbox exists and its status says so.
func (f *fakeMailboxes) ready() *edgev2alpha1.SyncTarget {
	st := f.syncTarget(Finalizer)
	st.Status.MailboxSpace = mailbox
	f.space(mailbox, SpaceType, mailboxLabels)
	return st
}

func (f *fakeMailboxes) space(name, typ string, labels map[string]string) *tenancyv1alpha1.Space {
	sp := &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: tenancyv1alpha1.SpaceSpec{Type: typ}}
	f.spaces[name] = sp
	return sp
}

// heartbeat makes edge1's syncer say it heartbeats, last some time ago.
func heartbeat(st *edgev2alpha1.SyncTarget, last time.Time) {
	st.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetHeartbeat, Status: metav1.ConditionTrue, Reason: "Heartbeat"}}
	st.Status.LastSyncerHeartbeatTime = &metav1.Time{Time: last}
}

func deleting(st *edgev2alpha1.SyncTarget) {
	st.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
}

func (f *fakeMailboxes) record(ctx context.Context, call string) error {
	space, _ := spaces.FromContext(ctx)
	verb, _, _ := strings.Cut(call, " ")
	f.calls = append(f.calls, call+" in "+space)
	return f.fail[verb]
}

func spacesResource() schema.GroupResource {
	return schema.GroupResource{Group: tenancyv1alpha1.SchemeGroupVersion.Group, Resource: "spaces"}
}

func (f *fakeMailboxes) reconciler() *reconciler {
	spaceOf := func(ctx context.Context) string {
		space, _ := spaces.FromContext(ctx)
		return space
	}
	return &reconciler{
		syncTarget: func(space, name string) (*edgev2alpha1.SyncTarget, bool) {
			st, ok := f.syncTargets[spaces.Key(space, "", name)]
			return st, ok
		},
		updateSyncTarget: func(ctx context.Context, st *edgev2alpha1.SyncTarget) error {
			if err := f.record(ctx, "update SyncTarget "+st.Name); err != nil {
				return err
			}
			if len(st.Finalizers) == 0 && st.DeletionTimestamp != nil {
				delete(f.syncTargets, spaces.Key(spaceOf(ctx), "", st.Name))
				return nil
			}
			f.syncTargets[spaces.Key(spaceOf(ctx), "", st.Name)] = st.DeepCopy()
			return nil
		},
		updateSyncTargetStatus: func(ctx context.Context, st *edgev2alpha1.SyncTarget) error {
			if err := f.record(ctx, "updateStatus SyncTarget "+st.Name); err != nil {
				return err
			}
			f.syncTargets[spaces.Key(spaceOf(ctx), "", st.Name)] = st.DeepCopy()
			return nil
		},
		cachedSpace: func(name string) (*tenancyv1alpha1.Space, bool) {
			sp, ok := f.spaces[name]
			if f.lagging || !ok || sp.DeletionTimestamp != nil {
				return nil, false
			}
			return sp.DeepCopy(), true
		},
		getSpace: func(ctx context.Context, name string) (*tenancyv1alpha1.Space, error) {
			if err := f.record(ctx, "get Space"); err != nil {
				return nil, err
			}
			sp, ok := f.spaces[name]
			if !ok {
				return nil, apierrors.NewNotFound(spacesResource(), name)
			}
			return sp.DeepCopy(), nil
		},
		createSpace: func(ctx context.Context, sp *tenancyv1alpha1.Space) error {
			if err := f.record(ctx, "create Space"); err != nil {
				return err
			}
			if _, ok := f.spaces[sp.Name]; ok {
				return apierrors.NewAlreadyExists(spacesResource(), sp.Name)
			}
			f.spaces[sp.Name] = sp.DeepCopy()
			return nil
		},
		deleteSpace: func(ctx context.Context, name string) error {
			if err := f.record(ctx, "delete Space"); err != nil {
				return err
			}
			sp, ok := f.spaces[name]
			switch {
			case !ok:
				return apierrors.NewNotFound(spacesResource(), name)
			case f.lingering:
				sp.DeletionTimestamp = &metav1.Time{Time: f.now}
			default:
				delete(f.spaces, name)
			}
			return nil
		},
		now: func() time.Time { return f.now },
		requeueAfter: func(key string, after time.Duration) {
			f.requeues = append(f.requeues, fmt.Sprintf("%s after %s", key, after))
		},
	}
}

func TestReconcile(t *testing.T) {
	tests := []struct {
		desc string
		// setup builds the world; the key reconciled is inv1|edge1 unless
		// key is set.
		setup        func(f *fakeMailboxes)
		key          string
		wantCalls    []string
		wantRequeue  bool
		wantErr      error
		wantErrText  string
		wantRequeues []string
		// check inspects the world after the reconcile.
		check func(t *testing.T, f *fakeMailboxes)
	}{
		{
			desc:      "a new SyncTarget gets the finalizer first, then its mailbox in the same pass",
			setup:     func(f *fakeMailboxes) { f.syncTarget("other") },
			wantCalls: []string{"update SyncTarget edge1 in inv1", "create Space in root", "updateStatus SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				require.Equal(t, []string{"other", Finalizer}, f.syncTargets[stKey].Finalizers)
				require.Equal(t, mailbox, f.syncTargets[stKey].Status.MailboxSpace)
			},
		},
		{
			desc:      "no mailbox without the finalizer that would delete it",
			setup:     func(f *fakeMailboxes) { f.syncTarget("other"); f.fail["update"] = errBoom },
			wantCalls: []string{"update SyncTarget edge1 in inv1"},
			wantErr:   errBoom,
			check: func(t *testing.T, f *fakeMailboxes) {
				require.Empty(t, f.spaces)
			},
		},
		{
			desc:      "then its mailbox is created with its labels and type, and recorded in its status",
			setup:     func(f *fakeMailboxes) { f.syncTarget(Finalizer) },
			wantCalls: []string{"create Space in root", "updateStatus SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				sp := f.spaces[mailbox]
				require.NotNil(t, sp, "the mailbox is named after the inventory space and UID")
				require.Equal(t, tenancyv1alpha1.SpaceTypeMailbox, sp.Spec.Type)
				require.Equal(t, mailboxLabels, sp.Labels)
				require.Equal(t, []string{tenancyv1alpha1.SpaceFinalizer}, sp.Finalizers, "made with the space controller's finalizer")
				require.Equal(t, mailbox, f.syncTargets[stKey].Status.MailboxSpace)
			},
		},
		{
			desc:      "a mailbox of this SyncTarget that exists is used, from the cache",
			setup:     func(f *fakeMailboxes) { f.space(mailbox, SpaceType, mailboxLabels); f.syncTarget(Finalizer) },
			wantCalls: []string{"updateStatus SyncTarget edge1 in inv1"},
		},
		{
			desc: "one the cache has not seen yet is read from the server",
			setup: func(f *fakeMailboxes) {
				f.space(mailbox, SpaceType, mailboxLabels)
				f.syncTarget(Finalizer)
				f.lagging = true
			},
			wantCalls: []string{"create Space in root", "get Space in root", "updateStatus SyncTarget edge1 in inv1"},
		},
		{
			desc: "a mailbox with more labels than the controller sets is still it",
			setup: func(f *fakeMailboxes) {
				f.ready().Status.MailboxSpace = ""
				f.spaces[mailbox].Labels = map[string]string{LabelSyncTargetSpace: inv, LabelSyncTargetName: stName,
					LabelSyncTargetUID: string(stUID), "team": "a"}
			},
			wantCalls: []string{"updateStatus SyncTarget edge1 in inv1"},
		},
		{
			desc: "a space of that name that is no mailbox is refused",
			setup: func(f *fakeMailboxes) {
				f.space(mailbox, tenancyv1alpha1.SpaceTypeWDS, mailboxLabels)
				f.syncTarget(Finalizer)
			},
			wantErrText: fmt.Sprintf("space %q exists but is not the mailbox of this SyncTarget (type \"wds\"", mailbox),
			check: func(t *testing.T, f *fakeMailboxes) {
				require.Empty(t, f.syncTargets[stKey].Status.MailboxSpace, "never recorded as the mailbox")
			},
		},
		{
			desc: "a mailbox space of another SyncTarget is refused",
			setup: func(f *fakeMailboxes) {
				f.space(mailbox, SpaceType, map[string]string{LabelSyncTargetSpace: inv, LabelSyncTargetName: "edge2", LabelSyncTargetUID: string(stUID)})
				f.syncTarget(Finalizer)
			},
			wantErrText: "is not the mailbox of this SyncTarget",
		},
		{
			desc:      "a failed creation is returned",
			setup:     func(f *fakeMailboxes) { f.syncTarget(Finalizer); f.fail["create"] = errBoom },
			wantCalls: []string{"create Space in root"},
			wantErr:   errBoom,
		},
		{
			desc: "a failed read of the existing space is returned",
			setup: func(f *fakeMailboxes) {
				f.ready()
				f.lagging = true
				f.fail["get"] = errBoom
			},
			wantCalls: []string{"create Space in root", "get Space in root"},
			wantErr:   errBoom,
		},
		{
			desc: "a SyncTarget recreated under its name gets a fresh mailbox",
			setup: func(f *fakeMailboxes) {
				f.ready().Status.MailboxSpace = Name(inv, "old-uid")
				f.space(Name(inv, "old-uid"), SpaceType, nil)
				delete(f.spaces, mailbox)
			},
			wantCalls: []string{"create Space in root", "updateStatus SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				require.Contains(t, f.spaces, mailbox)
				require.Equal(t, mailbox, f.syncTargets[stKey].Status.MailboxSpace)
			},
		},
		{
			desc:  "a ready SyncTarget whose syncer never connected: nothing to do",
			setup: func(f *fakeMailboxes) { f.ready() },
		},
		{
			desc:         "a recent heartbeat: looked at again when it would become stale",
			setup:        func(f *fakeMailboxes) { heartbeat(f.ready(), f.now.Add(-10*time.Second)) },
			wantRequeues: []string{stKey + " after 36s"},
		},
		{
			desc: "a stale heartbeat turns the Heartbeat condition False",
			setup: func(f *fakeMailboxes) {
				heartbeat(f.ready(), f.now.Add(-edgev2alpha1.SyncerHeartbeatTimeout-time.Second))
			},
			wantCalls: []string{"updateStatus SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				c := meta.FindStatusCondition(f.syncTargets[stKey].Status.Conditions, edgev2alpha1.SyncTargetHeartbeat)
				require.NotNil(t, c)
				require.Equal(t, metav1.ConditionFalse, c.Status)
				require.Equal(t, reasonHeartbeatMissed, c.Reason)
				require.Equal(t, int64(4), c.ObservedGeneration)
				require.Equal(t, "no heartbeat from the syncer since 2026-11-21T11:59:14Z", c.Message)
			},
		},
		{
			desc: "a heartbeat already reported missing: nothing to do",
			setup: func(f *fakeMailboxes) {
				st := f.ready()
				heartbeat(st, f.now.Add(-time.Hour))
				st.Status.Conditions[0].Status = metav1.ConditionFalse
			},
		},
		{
			desc: "a deleted SyncTarget: its mailbox is deleted, then its finalizer removed",
			setup: func(f *fakeMailboxes) {
				st := f.ready()
				st.Finalizers = []string{"other", Finalizer}
				deleting(st)
			},
			wantCalls: []string{"delete Space in root", "get Space in root", "update SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				require.NotContains(t, f.spaces, mailbox)
				require.Equal(t, []string{"other"}, f.syncTargets[stKey].Finalizers)
			},
		},
		{
			desc: "a deleted SyncTarget waits while its mailbox is being emptied",
			setup: func(f *fakeMailboxes) {
				deleting(f.ready())
				f.lingering = true
			},
			wantCalls:   []string{"delete Space in root", "get Space in root"},
			wantRequeue: true,
			check: func(t *testing.T, f *fakeMailboxes) {
				require.Equal(t, []string{Finalizer}, f.syncTargets[stKey].Finalizers, "held until the mailbox is gone")
			},
		},
		{
			desc: "a deleted SyncTarget whose mailbox is already gone lets go",
			setup: func(f *fakeMailboxes) {
				deleting(f.ready())
				delete(f.spaces, mailbox)
			},
			wantCalls: []string{"delete Space in root", "get Space in root", "update SyncTarget edge1 in inv1"},
			check: func(t *testing.T, f *fakeMailboxes) {
				require.NotContains(t, f.syncTargets, stKey, "the server deletes it once the last finalizer goes")
			},
		},
		{
			desc: "a failed deletion is returned, the finalizer stays",
			setup: func(f *fakeMailboxes) {
				deleting(f.ready())
				f.fail["delete"] = errBoom
			},
			wantCalls: []string{"delete Space in root"},
			wantErr:   errBoom,
		},
		{
			desc: "a SyncTarget gone while its finalizer was being removed is no error",
			setup: func(f *fakeMailboxes) {
				deleting(f.ready())
				f.fail["update"] = apierrors.NewNotFound(schema.GroupResource{Group: edgev2alpha1.GroupName, Resource: "synctargets"}, stName)
			},
			wantCalls: []string{"delete Space in root", "get Space in root", "update SyncTarget edge1 in inv1"},
		},
		{
			desc: "a failed finalizer removal is returned",
			setup: func(f *fakeMailboxes) {
				deleting(f.ready())
				f.fail["update"] = errBoom
			},
			wantCalls: []string{"delete Space in root", "get Space in root", "update SyncTarget edge1 in inv1"},
			wantErr:   errBoom,
		},
		{
			desc:  "a deleted SyncTarget without the finalizer is left alone",
			setup: func(f *fakeMailboxes) { deleting(f.syncTarget("other")) },
		},
		{
			desc:  "a SyncTarget gone from the cache: nothing to do",
			setup: func(f *fakeMailboxes) {},
		},
		{
			desc:  "a key that is not one is dropped",
			setup: func(f *fakeMailboxes) { f.syncTarget() },
			key:   "a|b|c|d",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeMailboxes()
			tc.setup(f)
			key := tc.key
			if key == "" {
				key = stKey
			}
			requeue, err := f.reconciler().reconcile(context.Background(), key)
			switch {
			case tc.wantErr != nil:
				require.ErrorIs(t, err, tc.wantErr)
			case tc.wantErrText != "":
				require.ErrorContains(t, err, tc.wantErrText)
			default:
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantRequeue, requeue)
			require.Equal(t, tc.wantCalls, f.calls)
			require.Equal(t, tc.wantRequeues, f.requeues)
			if tc.check != nil {
				tc.check(t, f)
			}
		})
	}
}

// TestReconcileLifecycle takes one SyncTarget from creation to deletion,
// reconciling after every change as the informer would.
func TestReconcileLifecycle(t *testing.T) {
	f := newFakeMailboxes()
	r := f.reconciler()
	ctx := context.Background()
	step := func(desc string, change func(), wantRequeue bool, wantCalls ...string) {
		t.Helper()
		f.calls, f.requeues = nil, nil
		change()
		requeue, err := r.reconcile(ctx, stKey)
		require.NoError(t, err, desc)
		require.Equal(t, wantRequeue, requeue, desc)
		require.Equal(t, wantCalls, f.calls, desc)
	}
	step("created", func() { f.syncTarget() }, false, "update SyncTarget edge1 in inv1", "create Space in root", "updateStatus SyncTarget edge1 in inv1")
	step("steady: the mailbox is in the cache", func() {}, false)
	step("the syncer heartbeats", func() { heartbeat(f.syncTargets[stKey], f.now) }, false)
	require.Equal(t, []string{stKey + " after 46s"}, f.requeues)
	step("the syncer goes silent", func() { f.now = f.now.Add(edgev2alpha1.SyncerHeartbeatTimeout + time.Second) }, false,
		"updateStatus SyncTarget edge1 in inv1")
	require.Empty(t, f.requeues)
	step("still silent", func() {}, false)
	f.lingering = true
	step("deleted", func() { deleting(f.syncTargets[stKey]) }, true, "delete Space in root", "get Space in root")
	step("the mailbox is emptied", func() { f.lingering = false; delete(f.spaces, mailbox) }, false,
		"delete Space in root", "get Space in root", "update SyncTarget edge1 in inv1")
	require.Empty(t, f.syncTargets)
	step("gone", func() {}, false)
}
