// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// TestSameStatus: a heartbeat that would change only the heartbeat's time
// writes nothing; any other change is written. A status read back from
// the server (no problems: the field absent) is the same as the one the
// syncer builds (an empty list).
func TestSameStatus(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	read := edgev2alpha1.SyncTargetStatus{LastSyncerHeartbeatTime: &t0, SyncedObjects: 3, SyncerVersion: "v1"}
	for _, tc := range []struct {
		desc string
		edit func(*edgev2alpha1.SyncTargetStatus)
		same bool
	}{
		{desc: "only the heartbeat's time", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.LastSyncerHeartbeatTime = &t1 }, same: true},
		{desc: "an empty list of problems for none", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.Problems = []edgev2alpha1.SyncProblem{} }, same: true},
		{desc: "a count", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.SyncedObjects = 4 }},
		{desc: "a problem", edit: func(s *edgev2alpha1.SyncTargetStatus) {
			s.Problems = []edgev2alpha1.SyncProblem{{Resource: "configmaps", Name: "a", Reason: edgev2alpha1.SyncReasonConflict}}
		}},
		{desc: "a condition's message", edit: func(s *edgev2alpha1.SyncTargetStatus) {
			s.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetSynced, Status: metav1.ConditionTrue, Message: "4 objects in step"}}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			built := read.DeepCopy()
			tc.edit(built)
			if got := sameStatus(&read, built); got != tc.same {
				t.Errorf("sameStatus = %v, want %v", got, tc.same)
			}
		})
	}
}

// TestAnsweredIsNotALostCenter: a heartbeat whose writes keep meeting
// other writers (the server's tunnel condition), or a busy server's 429,
// or that runs out of time while the tunnel is open (a 429's Retry-After
// outlasting it), has reached the center; the syncer does not say it lost
// it, and tries again after a backoff. Out of time with the tunnel closed
// is a lost center.
func TestAnsweredIsNotALostCenter(t *testing.T) {
	outOfTime := &url.Error{Op: "Put", URL: "https://center/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets/edge1/status", Err: context.DeadlineExceeded}
	for name, tc := range map[string]struct {
		answer     error
		tunnelOpen bool
		lost       bool
	}{
		"conflict":                 {answer: apierrors.NewConflict(syncTargetsGVR.GroupResource(), "edge1", errors.New("the object has been modified"))},
		"busy":                     {answer: apierrors.NewTooManyRequests("the syncer of SyncTarget inv1/edge1 sends too many requests", 1)},
		"out of time, tunnel open": {answer: outOfTime, tunnelOpen: true},
		"out of time, no tunnel":   {answer: outOfTime, lost: true},
	} {
		t.Run(name, func(t *testing.T) {
			st := syncTargetObject("edge1", "")
			inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"}, st)
			var writes atomic.Int32
			inv.PrependReactor("update", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
				writes.Add(1)
				return true, nil, tc.answer
			})
			var out bytes.Buffer
			o := NewOptions()
			o.HeartbeatInterval = 20 * time.Millisecond
			s := &Syncer{opts: o, out: &out, inventory: inv, id: Identity{SyncTarget: "edge1"}, statusNow: make(chan struct{}, 1),
				problems: map[objKey]problem{}, inStep: map[objKey]bool{}, now: time.Now}
			s.connected.Store(true)
			s.tunnelOpen.Store(tc.tunnelOpen)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); s.heartbeatLoop(ctx) }()
			err := wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
				return writes.Load() >= 3, nil
			})
			cancel()
			<-done
			require.NoError(t, err, "the heartbeat stopped writing")
			if tc.lost {
				require.Contains(t, out.String(), "lost the center")
				return
			}
			require.True(t, s.connected.Load(), "an answer is not a lost center")
			require.NotContains(t, out.String(), "lost the center")
		})
	}
}

// TestACacheBehindIsNotAChange: a server busy with a fan-out serves the
// SyncTarget from a cache minutes behind the syncer's own writes. A
// heartbeat with nothing new writes nothing though the copy it reads is
// old; a change is still written, and so is anything once the server
// says it missed the syncer's heartbeats.
func TestACacheBehindIsNotAChange(t *testing.T) {
	stale := syncTargetObject("edge1", "7")
	inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"})
	var served atomic.Pointer[unstructured.Unstructured]
	served.Store(stale)
	inv.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, served.Load().DeepCopy(), nil
	})
	var writes []*edgev2alpha1.SyncTarget
	inv.PrependReactor("update", "synctargets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured)
		st := &edgev2alpha1.SyncTarget{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
		writes = append(writes, st)
		return true, u, nil
	})
	now := time.Unix(1000, 0)
	s := tunnelledSyncer(inv, func() time.Time { return now })
	heartbeat := heartbeats(t, s, &now)

	heartbeat()
	require.Len(t, writes, 1, "the first heartbeat reports the syncer")
	heartbeat()
	heartbeat()
	require.Len(t, writes, 1, "nothing new, though the copy read is the one before the write")

	s.inStep[objKey{GVR: podsGVR, Namespace: "ns", Name: "p"}] = true
	heartbeat()
	require.Len(t, writes, 2, "a change is written")
	require.EqualValues(t, 1, writes[1].Status.SyncedObjects)
	heartbeat()
	require.Len(t, writes, 2)

	// The server says it missed the heartbeats: the next one says otherwise.
	missed := writes[1].DeepCopy()
	missed.ResourceVersion = "8" // the server's write is a new version
	missed.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetHeartbeat, Status: metav1.ConditionFalse, Reason: "HeartbeatMissed"}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(missed)
	require.NoError(t, err)
	served.Store(&unstructured.Unstructured{Object: obj})
	heartbeat()
	require.Len(t, writes, 3, "a missed heartbeat is answered")

	// A SyncTarget made again under the name is told everything.
	again := stale.DeepCopy()
	again.SetUID("another")
	served.Store(again)
	heartbeat()
	require.Len(t, writes, 4, "a SyncTarget made again is reported to")
}

// TestReadSelfConvertsAVersionOnce: the heartbeat converts a version of
// the SyncTarget once, and each read hands out a copy of its own; a new
// version, or a SyncTarget made again, is read anew.
func TestReadSelfConvertsAVersionOnce(t *testing.T) {
	first := syncTargetObject("edge1", "1")
	require.NoError(t, unstructured.SetNestedField(first.Object, int64(3), "status", "syncedObjects"))
	var served atomic.Pointer[unstructured.Unstructured]
	served.Store(first)
	inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"})
	inv.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, served.Load(), nil // as a cache hands it out: not a copy
	})
	s := &Syncer{inventory: inv, id: Identity{SyncTarget: "edge1"}}
	ctx := context.Background()
	read := func() (*edgev2alpha1.SyncTarget, []byte) {
		t.Helper()
		st, key, err := s.readSelf(ctx, false)
		require.NoError(t, err)
		return st, key
	}

	a, keyA := read()
	require.EqualValues(t, 3, a.Status.SyncedObjects)
	a.Status.SyncedObjects = 99 // the heartbeat builds its status in what it read
	b, keyB := read()
	require.EqualValues(t, 3, b.Status.SyncedObjects, "each read is a copy of its own")
	require.NotSame(t, a, b)
	require.Equal(t, keyA, keyB)
	converted := s.lastRead.st
	read()
	require.Same(t, converted, s.lastRead.st, "the same version is not converted again")

	second := first.DeepCopy()
	second.SetResourceVersion("2")
	require.NoError(t, unstructured.SetNestedField(second.Object, int64(4), "status", "syncedObjects"))
	served.Store(second)
	c, keyC := read()
	require.EqualValues(t, 4, c.Status.SyncedObjects, "a new version is read")
	require.NotEqual(t, keyA, keyC)

	again := second.DeepCopy()
	again.SetUID("another")
	require.NoError(t, unstructured.SetNestedField(again.Object, int64(0), "status", "syncedObjects"))
	served.Store(again)
	d, _ := read()
	require.Equal(t, types.UID("another"), d.UID, "a SyncTarget made again under its name is read")
	require.Zero(t, d.Status.SyncedObjects)
	require.EqualValues(t, 3, first.Object["status"].(map[string]any)["syncedObjects"], "the served object is left as it was")
}

// TestHeartbeatReadsItsCache: at a connect, the first heartbeat waits for
// the syncer's cache of its SyncTarget rather than reading the SyncTarget
// from the server, and after a conflict (the server's SyncerConnected
// condition written first) it waits for the cache to catch up: a fleet
// connecting at once costs the server one status write per edge, not
// reads besides.
func TestHeartbeatReadsItsCache(t *testing.T) {
	st := syncTargetObject("edge1", "1")
	inv, gets := countedSyncTargets(st)
	var updates atomic.Int32
	inv.PrependReactor("update", "synctargets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		if updates.Add(1) > 1 {
			return false, nil, nil
		}
		// The server's own write comes first: the cache sees it.
		connected := st.DeepCopy()
		connected.SetResourceVersion("2")
		require.NoError(t, inv.Tracker().Update(syncTargetsGVR, connected, ""))
		return true, nil, apierrors.NewConflict(syncTargetsGVR.GroupResource(), "edge1", errors.New("the object has been modified"))
	})
	s := &Syncer{opts: NewOptions(), out: &bytes.Buffer{}, inventory: inv, inventoryCaches: listThenWatch{inv},
		id: Identity{SyncTarget: "edge1"}, problems: map[objKey]problem{}, inStep: map[objKey]bool{}, now: time.Now,
		statusNow: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	s.self = s.startSelf(ctx) // not yet synced
	s.mu.Unlock()
	defer s.stopInformers()

	require.NoError(t, s.heartbeat(ctx, false))
	require.Zero(t, gets.Load(), "the SyncTarget is read from the cache, not the server")
	require.EqualValues(t, 2, updates.Load(), "a conflict, then the write from the cache caught up")
	got, err := inv.Resource(syncTargetsGVR).Get(ctx, "edge1", metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "2", got.GetResourceVersion(), "written over the version the cache caught up with")
	cond := meta.FindStatusCondition(conditionsOf(t, got), edgev2alpha1.SyncTargetHeartbeat)
	require.NotNil(t, cond, "the heartbeat was written")

	// Without a cache (before the caches start), the server is read.
	gets.Store(0)
	s.stopInformers()
	require.NoError(t, s.heartbeat(ctx, true))
	require.NotZero(t, gets.Load())
}

// TestAFillingCacheIsNotRead: when the server is slow to list the
// SyncTarget to the syncer's cache (thousands of syncers connecting at
// once), the heartbeat waits for the cache and reads nothing from the
// server meanwhile; it does not say it lost the center, and writes once
// the cache fills.
func TestAFillingCacheIsNotRead(t *testing.T) {
	st := syncTargetObject("edge1", "1")
	inv, gets := countedSyncTargets(st)
	var updates atomic.Int32
	inv.PrependReactor("update", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		updates.Add(1)
		return false, nil, nil
	})
	listed := make(chan struct{})
	inv.PrependReactor("list", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		<-listed // the server's answer is slow
		return false, nil, nil
	})
	var out bytes.Buffer
	o := NewOptions()
	o.HeartbeatInterval = 20 * time.Millisecond
	s := &Syncer{opts: o, out: &out, inventory: inv, inventoryCaches: listThenWatch{inv},
		id: Identity{SyncTarget: "edge1"}, problems: map[objKey]problem{}, inStep: map[objKey]bool{}, now: time.Now,
		statusNow: make(chan struct{}, 1)}
	s.connected.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s.mu.Lock()
	s.self = s.startSelf(ctx)
	s.mu.Unlock()
	defer s.stopInformers()

	short, cancelShort := context.WithTimeout(ctx, 200*time.Millisecond)
	err := s.heartbeat(short, false)
	cancelShort()
	require.ErrorIs(t, err, errRetry, "a cache that has not filled is not yet, not an outage")

	done := make(chan struct{})
	go func() { defer close(done); s.heartbeatLoop(ctx) }()
	// The loop's heartbeat waits for the cache until the list is answered.
	close(listed)
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return updates.Load() >= 1, nil
	}), "the heartbeat writes once the cache fills")
	cancel()
	<-done
	require.Zero(t, gets.Load(), "nothing read from the server while the cache filled")
	require.True(t, s.connected.Load())
	require.NotContains(t, out.String(), "lost the center")
}

// countedSyncTargets is an inventory holding st, and the count of its
// GETs of SyncTargets.
func countedSyncTargets(st *unstructured.Unstructured) (*dynamicfake.FakeDynamicClient, *atomic.Int32) {
	inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"}, st)
	gets := &atomic.Int32{}
	inv.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		gets.Add(1)
		return false, nil, nil
	})
	return inv, gets
}

func conditionsOf(t *testing.T, u *unstructured.Unstructured) []metav1.Condition {
	t.Helper()
	st := &edgev2alpha1.SyncTarget{}
	require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
	return st.Status.Conditions
}

// syncTargetObject is a SyncTarget named name at resourceVersion rv.
func syncTargetObject(name, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(edgev2alpha1.SchemeGroupVersion.String())
	u.SetKind("SyncTarget")
	u.SetName(name)
	u.SetResourceVersion(rv)
	return u
}

// tunnelledSyncer is a syncer of SyncTarget edge1 whose tunnel is open,
// with nothing to report, on the clock now.
func tunnelledSyncer(inv dynamic.Interface, now func() time.Time) *Syncer {
	s := &Syncer{opts: NewOptions(), out: &bytes.Buffer{}, inventory: inv, id: Identity{SyncTarget: "edge1"},
		problems: map[objKey]problem{}, inStep: map[objKey]bool{}, now: now}
	s.tunnelOpen.Store(true)
	return s
}

// heartbeats returns what runs s's heartbeat once, then moves the clock
// now on by the heartbeat's interval.
func heartbeats(t *testing.T, s *Syncer, now *time.Time) func() {
	return func() {
		t.Helper()
		_, err := s.writeStatus(context.Background(), false, false)
		require.NoError(t, err)
		*now = now.Add(s.opts.HeartbeatInterval)
	}
}

// versionedSyncTarget serves one SyncTarget as a cache does (not a copy),
// each write a new version, and counts the writes.
func versionedSyncTarget() (*dynamicfake.FakeDynamicClient, *int) {
	var served atomic.Pointer[unstructured.Unstructured]
	served.Store(syncTargetObject("edge1", "1"))
	inv := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{syncTargetsGVR: "SyncTargetList"})
	inv.PrependReactor("get", "synctargets", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, served.Load(), nil
	})
	writes := new(int)
	inv.PrependReactor("update", "synctargets", func(a clienttesting.Action) (bool, runtime.Object, error) {
		*writes++
		u := a.(clienttesting.UpdateAction).GetObject().(*unstructured.Unstructured).DeepCopy()
		u.SetResourceVersion(strconv.Itoa(*writes + 1))
		served.Store(u)
		return true, u, nil
	})
	return inv, writes
}

// BenchmarkQuietHeartbeat is a heartbeat with nothing to say, as nearly
// every heartbeat of a fleet at rest is: the SyncTarget read from the
// cache as the last heartbeat read it.
func BenchmarkQuietHeartbeat(b *testing.B) {
	inv, writes := versionedSyncTarget()
	s := tunnelledSyncer(inv, time.Now)
	for i := range 20 {
		s.inStep[objKey{GVR: podsGVR, Namespace: "ns", Name: strconv.Itoa(i)}] = true
	}
	ctx := context.Background()
	if _, err := s.writeStatus(ctx, false, false); err != nil || *writes != 1 {
		b.Fatalf("the first heartbeat: %d writes, %v", *writes, err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := s.writeStatus(ctx, false, false); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	if *writes != 1 {
		b.Fatalf("%d writes of a status with nothing new", *writes)
	}
}

// TestQuietHeartbeatRefreshes: with the tunnel open and nothing new, the
// status is written again once StatusRefresh has passed since the last
// write, as the server's verdict expects; not before.
func TestQuietHeartbeatRefreshes(t *testing.T) {
	inv, writes := versionedSyncTarget()
	start := time.Unix(1000, 0)
	now := start
	s := tunnelledSyncer(inv, func() time.Time { return now })
	heartbeat := heartbeats(t, s, &now)
	heartbeat()
	require.Equal(t, 1, *writes)
	for now.Sub(start) < s.opts.StatusRefresh {
		heartbeat()
	}
	require.Equal(t, 1, *writes, "nothing new within the refresh")
	heartbeat()
	require.Equal(t, 2, *writes, "written again after the refresh")
	heartbeat()
	require.Equal(t, 2, *writes)
}

// TestChangedFields names what a write changes, for its log.
func TestChangedFields(t *testing.T) {
	before, err := statusKey(&edgev2alpha1.SyncTargetStatus{SyncedObjects: 3, SyncerVersion: "v1"})
	require.NoError(t, err)
	after, err := statusKey(&edgev2alpha1.SyncTargetStatus{SyncedObjects: 4, ReportsRollouts: true})
	require.NoError(t, err)
	require.Equal(t, []string{"reportsRollouts", "syncedObjects", "syncerVersion"}, changedFields(before, after))
	require.Empty(t, changedFields(after, after))
	require.Nil(t, changedFields([]byte("{not json"), after))
}

// TestFirstWriteSaysItReportsRollouts: a syncer's first write of its
// status says it reports its rollouts there, before it has computed any;
// computed, no reports cost no second write, and a report is written.
func TestFirstWriteSaysItReportsRollouts(t *testing.T) {
	inv, writes := versionedSyncTarget()
	now := time.Unix(1000, 0)
	s := tunnelledSyncer(inv, func() time.Time { return now })
	heartbeat := heartbeats(t, s, &now)
	status := func() *edgev2alpha1.SyncTargetStatus {
		t.Helper()
		u, err := inv.Resource(syncTargetsGVR).Get(context.Background(), "edge1", metav1.GetOptions{})
		require.NoError(t, err)
		st := &edgev2alpha1.SyncTarget{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, st))
		return &st.Status
	}

	heartbeat()
	require.Equal(t, 1, *writes)
	require.True(t, status().ReportsRollouts, "said with the first write")
	require.Empty(t, status().Rollouts)

	s.mu.Lock()
	s.rollouts = heartbeatReports{set: true} // computed: none
	s.mu.Unlock()
	heartbeat()
	require.Equal(t, 1, *writes, "no report: nothing new to write")
	require.True(t, s.reported.set, "the status holds the reports")

	report := edgev2alpha1.RolloutReport{Placement: "wds1/web", Revision: "r1", Applied: true}
	s.mu.Lock()
	s.rollouts = heartbeatReports{set: true, reports: []edgev2alpha1.RolloutReport{report}}
	s.mu.Unlock()
	heartbeat()
	require.Equal(t, 2, *writes)
	require.Equal(t, []edgev2alpha1.RolloutReport{report}, status().Rollouts)
}
