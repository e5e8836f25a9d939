// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	testingclock "k8s.io/utils/clock/testing"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// rolloutCopyOf is a mailbox copy of placement (WDS/NAME) whose content
// hash is contentHash.
func rolloutCopyOf(kind, namespace, name, placement, contentHash string) *unstructured.Unstructured {
	apiVersion := "v1"
	if kind == "Deployment" {
		apiVersion = "apps/v1"
	}
	wds, ep, _ := strings.Cut(placement, "/")
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind}}
	u.SetNamespace(namespace)
	u.SetName(name)
	u.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	u.SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: wds, edgev2alpha1.SourcePlacementAnnotation: ep,
		edgev2alpha1.ContentHashAnnotation: contentHash})
	if kind == "Deployment" {
		u.Object["spec"] = map[string]any{"replicas": int64(2)}
	}
	return u
}

// rolloutWorld is what a syncer knows of a mailbox and its edge: by
// default the placement wds1/web's two copies, applied and healthy.
type rolloutWorld struct {
	copies   map[objKey]*unstructured.Unstructured
	desired  map[objKey]*desired
	edge     map[objKey]*unstructured.Unstructured
	problems map[objKey]problem
	unsynced bool // the copies' caches are still reading the mailbox
}

var (
	webKey  = objKey{GVR: deploymentsGVR, Namespace: "app", Name: "web"}
	confKey = objKey{GVR: configMapsGVR, Namespace: "app", Name: "conf"}
	// webRevision is the record of wds1/web's copies: what the translator
	// writes, spelled out rather than computed by the code under test.
	webRevision = edgev2alpha1.RolloutRecord{Placement: "wds1/web", Revision: "r2", Digest: edgev2alpha1.CopiesDigest([]edgev2alpha1.CopyDigestEntry{
		{Resource: "deployments.apps", Namespace: "app", Name: "web", ContentHash: "d1"},
		{Resource: "configmaps", Namespace: "app", Name: "conf", ContentHash: "c1"},
	})}
)

func newRolloutWorld(t *testing.T) *rolloutWorld {
	w := &rolloutWorld{copies: map[objKey]*unstructured.Unstructured{}, desired: map[objKey]*desired{},
		edge: map[objKey]*unstructured.Unstructured{}, problems: map[objKey]problem{}}
	w.add(t, webKey.GVR, rolloutCopyOf("Deployment", "app", "web", "wds1/web", "d1"))
	w.add(t, confKey.GVR, rolloutCopyOf("ConfigMap", "app", "conf", "wds1/web", "c1"))
	w.edge[webKey].SetGeneration(1)
	w.edge[webKey].Object["status"] = map[string]any{"observedGeneration": int64(1), "replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2)}
	return w
}

// add puts a copy in the mailbox, what the syncer makes of it in desired,
// and that at the edge.
func (w *rolloutWorld) add(t *testing.T, gvr schema.GroupVersionResource, cp *unstructured.Unstructured) {
	t.Helper()
	d, err := edgeObject(cp, gvr, "edge1", "inv1/edge1")
	require.NoError(t, err)
	w.copies[d.Key], w.desired[d.Key] = cp, d
	w.edge[d.Key] = d.Object.DeepCopy()
	w.edge[d.Key].SetUID(types.UID("uid-" + d.Key.Name))
}

// storeOf is a synced cache holding objs of gvr from m.
func storeOf(m map[objKey]*unstructured.Unstructured, gvr schema.GroupVersionResource, synced bool) *running {
	store := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for k, o := range m {
		if k.GVR == gvr {
			_ = store.Add(o)
		}
	}
	return &running{informer: syncedInformer{store: store}, synced: func() bool { return synced }, stop: make(chan struct{})}
}

func (w *rolloutWorld) syncer() *Syncer {
	s := &Syncer{owner: "edge1", desired: w.desired, problems: w.problems,
		copies: map[schema.GroupVersionResource]*running{}, edgeObjs: map[schema.GroupVersionResource]*running{}}
	for _, gvr := range []schema.GroupVersionResource{deploymentsGVR, configMapsGVR, namespacesGVR} {
		s.copies[gvr] = storeOf(w.copies, gvr, !w.unsynced)
		s.edgeObjs[gvr] = storeOf(w.edge, gvr, true)
	}
	return s
}

func TestRolloutReport(t *testing.T) {
	want := func(applied, healthy bool, message, problem string) edgev2alpha1.RolloutReport {
		return edgev2alpha1.RolloutReport{Placement: webRevision.Placement, Revision: webRevision.Revision, Digest: webRevision.Digest,
			Applied: applied, Healthy: healthy, Message: message, Problem: problem}
	}
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, w *rolloutWorld)
		want edgev2alpha1.RolloutReport
	}{
		{name: "every copy applied and healthy", want: want(true, true, "", "")},
		{name: "a copy of the revision not read yet", edit: func(_ *testing.T, w *rolloutWorld) {
			delete(w.copies, confKey)
		}, want: want(false, false, notReadYet, "")},
		{name: "a copy still of the last revision", edit: func(_ *testing.T, w *rolloutWorld) {
			w.copies[confKey].SetAnnotations(map[string]string{edgev2alpha1.SourceSpaceAnnotation: "wds1",
				edgev2alpha1.SourcePlacementAnnotation: "web", edgev2alpha1.ContentHashAnnotation: "c0"})
		}, want: want(false, false, notReadYet, "")},
		{name: "a copy not at the edge", edit: func(_ *testing.T, w *rolloutWorld) {
			delete(w.edge, confKey)
		}, want: want(false, false, "configmaps app/conf is not applied at the edge yet", "")},
		{name: "the edge object holds an older content of the copy", edit: func(_ *testing.T, w *rolloutWorld) {
			w.desired[confKey].ContentHash = "c0"
		}, want: want(false, false, "configmaps app/conf is not applied at the edge yet", "")},
		{name: "the edge object has another content", edit: func(_ *testing.T, w *rolloutWorld) {
			w.edge[confKey].SetAnnotations(map[string]string{AppliedHashAnnotation: "older"})
		}, want: want(false, false, "configmaps app/conf is not applied at the edge yet", "")},
		{name: "the edge object is not the syncer's", edit: func(_ *testing.T, w *rolloutWorld) {
			w.edge[confKey].SetLabels(map[string]string{edgev2alpha1.SyncerOwnerLabel: "someone-else"})
		}, want: want(false, false, "configmaps app/conf is not applied at the edge yet", "")},
		{name: "a Deployment not available", edit: func(_ *testing.T, w *rolloutWorld) {
			w.edge[webKey].Object["status"].(map[string]any)["availableReplicas"] = int64(1)
		}, want: want(true, false, "deployments.apps app/web: 1 of 2 updated replicas available", "")},
		{name: "a problem", edit: func(_ *testing.T, w *rolloutWorld) {
			w.problems[confKey] = problem{Reason: edgev2alpha1.SyncReasonRejected, Message: "the edge cluster refused it: no"}
		}, want: want(false, false, "", "configmaps app/conf: Rejected: the edge cluster refused it: no")},
		{name: "a problem, and a Deployment waited for", edit: func(_ *testing.T, w *rolloutWorld) {
			w.problems[confKey] = problem{Reason: edgev2alpha1.SyncReasonRejected, Message: "no"}
			w.edge[webKey].SetGeneration(2)
		}, want: want(false, false, "deployments.apps app/web: waiting for its controller to observe generation 2 (it has seen 1)",
			"configmaps app/conf: Rejected: no")},
		{name: "other placements' copies are not this one's", edit: func(t *testing.T, w *rolloutWorld) {
			w.add(t, configMapsGVR, rolloutCopyOf("ConfigMap", "app", "other", "wds1/other", "o1"))
			w.add(t, configMapsGVR, rolloutCopyOf("ConfigMap", "app", "same-name", "wds2/web", "o2"))
			delete(w.edge, objKey{GVR: configMapsGVR, Namespace: "app", Name: "other"})
			w.problems[objKey{GVR: configMapsGVR, Namespace: "app", Name: "same-name"}] = problem{Reason: "Conflict", Message: "x"}
		}, want: want(true, true, "", "")},
		{name: "a namespace is no placement's copy", edit: func(t *testing.T, w *rolloutWorld) {
			ns := rolloutCopyOf("Namespace", "", "app", "wds1/web", "n1")
			w.add(t, namespacesGVR, ns)
			delete(w.edge, keyOf(namespacesGVR, ns))
		}, want: want(true, true, "", "")},
		{name: "a copy being deleted has left the mailbox", edit: func(t *testing.T, w *rolloutWorld) {
			cp := rolloutCopyOf("ConfigMap", "app", "going", "wds1/web", "g1")
			now := metav1.Now()
			cp.SetDeletionTimestamp(&now)
			w.add(t, configMapsGVR, cp)
		}, want: want(true, true, "", "")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := newRolloutWorld(t)
			if tc.edit != nil {
				tc.edit(t, w)
			}
			reports, known := w.syncer().rolloutReports([]edgev2alpha1.RolloutRecord{webRevision})
			require.True(t, known)
			require.Equal(t, []edgev2alpha1.RolloutReport{tc.want}, reports)
		})
	}
}

// TestRolloutReportsFollowTheRecords: one report per record, in their
// order, whatever else the mailbox holds; none until the copies are read.
func TestRolloutReportsFollowTheRecords(t *testing.T) {
	w := newRolloutWorld(t)
	w.add(t, configMapsGVR, rolloutCopyOf("ConfigMap", "app", "other", "wds1/other", "o1"))
	other := edgev2alpha1.RolloutRecord{Placement: "wds1/other", Revision: "r7", Digest: edgev2alpha1.CopiesDigest([]edgev2alpha1.CopyDigestEntry{
		{Resource: "configmaps", Namespace: "app", Name: "other", ContentHash: "o1"}})}
	gone := edgev2alpha1.RolloutRecord{Placement: "wds1/gone", Revision: "r1", Digest: "0123"}
	reports, known := w.syncer().rolloutReports([]edgev2alpha1.RolloutRecord{other, gone, webRevision, other})
	require.True(t, known)
	require.Len(t, reports, 3, "one report per placement")
	for i, rec := range []edgev2alpha1.RolloutRecord{other, gone, webRevision} {
		require.Equal(t, rec.Placement, reports[i].Placement)
		require.Equal(t, rec.Revision, reports[i].Revision)
	}
	require.True(t, reports[0].Healthy)
	require.Equal(t, notReadYet, reports[1].Message)
	require.True(t, reports[2].Healthy)

	w.unsynced = true
	_, known = w.syncer().rolloutReports([]edgev2alpha1.RolloutRecord{webRevision})
	require.False(t, known, "a cache still reading the mailbox")
}

// A problem of any length fits what the center takes.
func TestRolloutReportIsCut(t *testing.T) {
	w := newRolloutWorld(t)
	w.problems[confKey] = problem{Reason: edgev2alpha1.SyncReasonRejected, Message: strings.Repeat("é", 1000)}
	reports, _ := w.syncer().rolloutReports([]edgev2alpha1.RolloutRecord{webRevision})
	require.LessOrEqual(t, len(reports[0].Problem), edgev2alpha1.MaxRolloutReportMessage)
	require.True(t, strings.HasPrefix(reports[0].Problem, "configmaps app/conf: Rejected: éé"))
}

// statusFixture is a syncer whose mailbox is a fake holding the-one with
// webRevision in spec.rollouts, whose rollouts queue runs on a fake clock,
// and whose status writes are recorded.
type statusFixture struct {
	t       *testing.T
	ctx     context.Context
	s       *Syncer
	w       *rolloutWorld
	mailbox *dynamicfake.FakeDynamicClient
	clock   *testingclock.FakeClock
	writes  []edgev2alpha1.SyncerConfigStatus
	answer  atomic.Pointer[error] // an error the next status write gets, once
}

func newStatusFixture(t *testing.T) *statusFixture {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &statusFixture{t: t, ctx: ctx, w: newRolloutWorld(t), clock: testingclock.NewFakeClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))}
	cfg := &edgev2alpha1.SyncerConfig{
		TypeMeta:   metav1.TypeMeta{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "SyncerConfig"},
		ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName, ResourceVersion: "1"},
		Spec: edgev2alpha1.SyncerConfigSpec{Rollouts: []edgev2alpha1.RolloutRecord{webRevision}, Resources: []edgev2alpha1.SyncedResource{
			{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true},
			{Version: "v1", Resource: "configmaps", Namespaced: true},
			{Version: "v1", Resource: "namespaces"},
		}},
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(cfg)
	require.NoError(t, err)
	f.mailbox = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncerConfigsGVR: "SyncerConfigList"}, &unstructured.Unstructured{Object: content})
	f.mailbox.PrependReactor("update", "syncerconfigs", func(a clienttesting.Action) (bool, runtime.Object, error) {
		require.Equal(t, "status", a.GetSubresource(), "the syncer writes the status only")
		if err := f.answer.Swap(nil); err != nil {
			return true, nil, *err
		}
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		got := &edgev2alpha1.SyncerConfig{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, got))
		f.writes = append(f.writes, got.Status)
		return false, nil, nil // the tracker stores it
	})
	f.s = f.w.syncer()
	f.s.mailbox = f.mailbox
	f.s.configInf = &running{informer: syncedInformer{store: cache.NewStore(cache.MetaNamespaceKeyFunc)}, synced: func() bool { return true }}
	f.s.connected.Store(true)
	f.s.reportsInConfig.Store(true) // the SyncerConfig's status, as with a server before the SyncTarget's reports
	f.s.clock = f.clock
	f.s.rolloutQ = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
		workqueue.TypedRateLimitingQueueConfig[string]{Clock: f.clock})
	t.Cleanup(f.s.rolloutQ.ShutDown)
	return f
}

// readConfig gives the syncer the SyncerConfig as the mailbox holds it, as
// its cache would.
func (f *statusFixture) readConfig() {
	f.t.Helper()
	u, err := f.mailbox.Resource(syncerConfigsGVR).Get(f.ctx, edgev2alpha1.SyncerConfigName, metav1.GetOptions{})
	require.NoError(f.t, err)
	require.NoError(f.t, f.s.configInf.store().Add(u))
	f.s.onConfig(f.ctx, u)
}

// work waits out the queue's delay, then computes the reports as the
// queue's worker does, once.
func (f *statusFixture) work() error {
	f.t.Helper()
	require.NoError(f.t, wait.PollUntilContextTimeout(f.ctx, time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		f.clock.Step(rolloutsDelay) // until the queue's timer has seen it
		return f.s.rolloutQ.Len() > 0, nil
	}), "nothing queued")
	key, _ := f.s.rolloutQ.Get()
	defer f.s.rolloutQ.Done(key)
	_, err := f.s.reconcileRollouts(f.ctx, key)
	return err
}

// TestRolloutStatusWrites: a burst of news makes one write, and a
// computation that finds the status as it is writes nothing.
func TestRolloutStatusWrites(t *testing.T) {
	f := newStatusFixture(t)
	f.readConfig()
	for range 100 { // the copies' and edge objects' news
		for _, k := range []objKey{webKey, confKey} {
			_, _ = f.s.reconcileReport(f.ctx, k)
		}
	}
	require.Zero(t, f.s.rolloutQ.Len(), "the burst waits out the delay")
	require.NoError(t, f.work())
	require.Zero(t, f.s.rolloutQ.Len(), "one look for the burst")
	require.Equal(t, []edgev2alpha1.SyncerConfigStatus{{ReportsRollouts: true, Rollouts: []edgev2alpha1.RolloutReport{{
		Placement: "wds1/web", Revision: "r2", Digest: webRevision.Digest, Applied: true, Healthy: true}}}}, f.writes)

	// The cache brings the write back: the same reports, nothing to write.
	f.readConfig()
	require.NoError(t, f.work())
	require.Len(t, f.writes, 1, "unchanged: not written again")

	// The Deployment stops being available at the edge.
	f.w.edge[webKey].Object["status"].(map[string]any)["availableReplicas"] = int64(1)
	require.NoError(t, f.s.edgeObjs[deploymentsGVR].store().Update(f.w.edge[webKey]))
	_, _ = f.s.reconcileReport(f.ctx, webKey)
	require.NoError(t, f.work())
	require.Len(t, f.writes, 1, "news of an edge on its way waits for more")
	require.NoError(t, f.work())
	require.Len(t, f.writes, 2, "and is written once it has waited progressHold")
	require.Equal(t, edgev2alpha1.RolloutReport{Placement: "wds1/web", Revision: "r2", Digest: webRevision.Digest, Applied: true,
		Message: "deployments.apps app/web: 1 of 2 updated replicas available"}, f.writes[1].Rollouts[0])
	require.True(t, f.writes[1].ReportsRollouts)
}

// TestRolloutStatusHoldsProgress: a new revision's report that says only
// that the edge is on its way waits progressHold; if the edge is healthy
// by then, one write says so.
func TestRolloutStatusHoldsProgress(t *testing.T) {
	f := newStatusFixture(t)
	f.readConfig()
	require.NoError(t, f.work())
	require.Len(t, f.writes, 1)
	f.readConfig()

	// The Deployment is on its way: held.
	status := f.w.edge[webKey].Object["status"].(map[string]any)
	status["availableReplicas"] = int64(1)
	require.NoError(t, f.s.edgeObjs[deploymentsGVR].store().Update(f.w.edge[webKey]))
	_, _ = f.s.reconcileReport(f.ctx, webKey)
	require.NoError(t, f.work())
	require.Len(t, f.writes, 1, "held")

	// Healthy again before the hold is over: nothing to write at all.
	status["availableReplicas"] = int64(2)
	require.NoError(t, f.s.edgeObjs[deploymentsGVR].store().Update(f.w.edge[webKey]))
	require.NoError(t, f.work())
	require.Len(t, f.writes, 1, "the status already says healthy")
	require.Zero(t, f.s.rolloutsWaiting.Load(), "the hold is over")
}

// TestRolloutStatusRetries: a write another writer was first to, or one
// the unreachable center did not take, fails quietly and is retried; a
// syncer whose caches are still reading the mailbox says only that it
// reports, keeping the reports it made before.
func TestRolloutStatusRetries(t *testing.T) {
	t.Run("a conflict", func(t *testing.T) {
		f := newStatusFixture(t)
		f.readConfig()
		conflict := error(apierrors.NewConflict(syncerConfigsGVR.GroupResource(), edgev2alpha1.SyncerConfigName, errors.New("modified")))
		f.answer.Store(&conflict)
		err := f.work()
		require.True(t, apierrors.IsConflict(err))
		require.True(t, isExpected(err), "quiet")
		require.Empty(t, f.writes)
		f.s.rolloutQ.AddRateLimited(rolloutsKey) // as the worker does
		require.NoError(t, f.work())
		require.Len(t, f.writes, 1)
	})
	t.Run("the center unreachable", func(t *testing.T) {
		f := newStatusFixture(t)
		f.readConfig()
		f.s.connected.Store(false)
		refused := error(errors.New("dial tcp: connection refused"))
		f.answer.Store(&refused)
		err := f.work()
		require.ErrorIs(t, err, errOffline)
		require.True(t, isExpected(err), "quiet")
		f.s.connected.Store(true)
		f.s.rolloutQ.AddRateLimited(rolloutsKey)
		require.NoError(t, f.work())
		require.Len(t, f.writes, 1)
	})
	t.Run("caches still reading the mailbox", func(t *testing.T) {
		f := newStatusFixture(t)
		// Before a restart, the syncer reported on the revision (kept)
		// and on a placement since gone (its report would be refused).
		u, err := f.mailbox.Resource(syncerConfigsGVR).Get(f.ctx, edgev2alpha1.SyncerConfigName, metav1.GetOptions{})
		require.NoError(t, err)
		require.NoError(t, unstructured.SetNestedField(u.Object, map[string]any{"rollouts": []any{
			map[string]any{"placement": "wds1/gone", "revision": "r1", "digest": "old", "applied": true, "healthy": true},
			map[string]any{"placement": "wds1/web", "revision": "r2", "digest": webRevision.Digest, "applied": true, "healthy": true},
		}}, "status"))
		require.NoError(t, f.mailbox.Tracker().Update(syncerConfigsGVR, u, ""))
		for _, r := range f.s.copies {
			r.synced = func() bool { return false }
		}
		f.readConfig()
		require.NoError(t, f.work())
		require.Equal(t, []edgev2alpha1.SyncerConfigStatus{{ReportsRollouts: true, Rollouts: []edgev2alpha1.RolloutReport{
			{Placement: "wds1/web", Revision: "r2", Digest: webRevision.Digest, Applied: true, Healthy: true}}}}, f.writes)
		f.readConfig()
		requeue, err := f.s.reconcileRollouts(f.ctx, rolloutsKey)
		require.NoError(t, err)
		require.True(t, requeue, "looked at again once the caches are read")
		require.Len(t, f.writes, 1, "nothing new to say meanwhile")
	})
}

// TestRolloutReportsRideTheHeartbeat: against a server that keeps rollout
// reports in the SyncTarget's status, the reports make no write of their
// own: news asks the heartbeat to write soon, and its write of the
// SyncTarget's status carries them; the same reports again ask nothing.
// A server that drops them (before these reports) has them written in
// the SyncerConfig's status from then on.
func TestRolloutReportsRideTheHeartbeat(t *testing.T) {
	healthy := edgev2alpha1.RolloutReport{Placement: "wds1/web", Revision: "r2", Digest: webRevision.Digest, Applied: true, Healthy: true}
	for _, older := range []bool{false, true} {
		t.Run(map[bool]string{false: "a server that keeps them", true: "a server before them"}[older], func(t *testing.T) {
			f := newStatusFixture(t)
			f.s.reportsInConfig.Store(false)
			inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"}, syncTargetObject("edge1", "1"))
			var written []edgev2alpha1.SyncTargetStatus
			inv.PrependReactor("update", "synctargets", func(a clienttesting.Action) (bool, runtime.Object, error) {
				u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
				st := &edgev2alpha1.SyncTarget{}
				require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
				written = append(written, st.Status)
				u.SetResourceVersion(strconv.Itoa(len(written) + 1)) // a write is a new version
				if older {
					// Pruned, as a schema without the fields does.
					unstructured.RemoveNestedField(u.Object, "status", "reportsRollouts")
					unstructured.RemoveNestedField(u.Object, "status", "rollouts")
				}
				require.NoError(t, inv.Tracker().Update(syncTargetsGVR, u, ""))
				return true, u, nil
			})
			f.s.inventory, f.s.id, f.s.opts = inv, Identity{SyncTarget: "edge1"}, NewOptions()
			f.s.now, f.s.statusNow = f.clock.Now, make(chan struct{}, 1)
			f.s.tunnelOpen.Store(true)
			asked := func() bool {
				select {
				case <-f.s.statusNow:
					return true
				default:
					return false
				}
			}
			heartbeat := func() {
				t.Helper()
				_, err := f.s.writeStatus(f.ctx, false, false)
				require.NoError(t, err)
			}

			f.readConfig()
			require.NoError(t, f.work())
			require.Empty(t, f.writes, "no write of the SyncerConfig")
			require.True(t, asked(), "the heartbeat is asked to write soon")
			heartbeat()
			require.Len(t, written, 1)
			require.True(t, written[0].ReportsRollouts)
			require.Equal(t, []edgev2alpha1.RolloutReport{healthy}, written[0].Rollouts)
			if older {
				require.True(t, f.s.reportsInConfig.Load())
				require.NoError(t, f.work())
				require.Equal(t, []edgev2alpha1.SyncerConfigStatus{{ReportsRollouts: true, Rollouts: []edgev2alpha1.RolloutReport{healthy}}}, f.writes)
				heartbeat()
				require.Len(t, written, 1, "and no longer in the SyncTarget's")
				return
			}
			require.False(t, f.s.reportsInConfig.Load())

			// The same reports again: nothing asked, nothing written.
			f.s.rolloutQ.Add(rolloutsKey)
			require.NoError(t, f.work())
			require.False(t, asked())
			heartbeat()
			require.Len(t, written, 1)
			require.Empty(t, f.writes)

			// The Deployment stops being available: news of an edge on
			// its way waits progressHold, then rides the next write.
			f.w.edge[webKey].Object["status"].(map[string]any)["availableReplicas"] = int64(1)
			require.NoError(t, f.s.edgeObjs[deploymentsGVR].store().Update(f.w.edge[webKey]))
			_, _ = f.s.reconcileReport(f.ctx, webKey)
			require.NoError(t, f.work())
			require.False(t, asked(), "held")
			require.NoError(t, f.work())
			require.True(t, asked())
			heartbeat()
			require.Len(t, written, 2)
			require.False(t, written[1].Rollouts[0].Healthy)
			require.Equal(t, "deployments.apps app/web: 1 of 2 updated replicas available", written[1].Rollouts[0].Message)
			require.Empty(t, f.writes)
		})
	}
}
