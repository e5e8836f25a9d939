// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// mailboxCopy is a copy as the translator and the syncer leave it, before
// the store reduces it.
func mailboxCopy(mailbox, ns, name, wds, placements string, annotations map[string]string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment",
		"spec": map[string]any{"replicas": int64(2)}, "status": map[string]any{"readyReplicas": int64(2)}}}
	u.SetNamespace(ns)
	u.SetName(name)
	ann := map[string]string{spaces.Annotation: mailbox, edgev2alpha1.SourceSpaceAnnotation: wds,
		edgev2alpha1.PlacementsAnnotation: placements, "unrelated": "dropped"}
	for k, v := range annotations {
		ann[k] = v
	}
	u.SetAnnotations(ann)
	u.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	return u
}

// putCopy records a copy of deployments in the store as its informer would.
func putCopy(s *Store, u *unstructured.Unstructured) bool {
	return s.setCopy(copyKey{u.GetAnnotations()[spaces.Annotation], "apps", "deployments", u.GetNamespace(), u.GetName()}, copyOf(u))
}

func TestCopyOf(t *testing.T) {
	u := mailboxCopy("mb1", "ns", "web", "wds1", "p2, p1", map[string]string{
		edgev2alpha1.SyncErrorAnnotation:       "Conflict: an object of that name is not the syncer's",
		edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":{"Running":2}}`,
	})
	require.Equal(t, copyRecord{wds: "wds1", placements: []string{"p1", "p2"}, syncError: "Conflict: an object of that name is not the syncer's",
		associated: &edgev2alpha1.AssociatedState{PodPhases: map[string]int64{"Running": 2}}}, copyOf(u))
	// An associated state that does not decode is not shown.
	bad := u.GetAnnotations()
	bad[edgev2alpha1.AssociatedStateAnnotation] = "not json"
	u.SetAnnotations(bad)
	require.Nil(t, copyOf(u).associated)
}

// TestPlacementCopies: per destination of a placement, how many of its
// copies are in step, failed, missing or waiting for a disconnected edge.
func TestPlacementCopies(t *testing.T) {
	s := NewStore()
	s.synced = true
	dest := func(name string) edgev2alpha1.SinglePlacement {
		return edgev2alpha1.SinglePlacement{Space: "inv", SyncTargetName: name, SyncTargetUID: uidOf(name)}
	}
	var dests []Destination
	for _, name := range []string{"full", "failing", "partial", "offline", "empty"} {
		d := dest(name)
		dests = append(dests, Destination{Space: d.Space, SyncTarget: d.SyncTargetName, mailbox: mailboxOf(d)})
		status := metav1.ConditionTrue
		if name == "offline" {
			status = metav1.ConditionFalse
		}
		s.edges[key("inv", name)] = edgeOf("inv", syncTarget(name, status, time.Second, 0))
	}
	s.placements["wds1/p"] = Placement{Space: "wds1", Name: "p"}
	s.slices["wds1/p"] = dests
	mb := func(name string) string { return mailboxOf(dest(name)) }
	for i := range 3 {
		obj := fmt.Sprint("obj", i)
		require.True(t, putCopy(s, mailboxCopy(mb("full"), "ns", obj, "wds1", "p", nil)))
		require.True(t, putCopy(s, mailboxCopy(mb("offline"), "ns", obj, "wds1", "p", nil)))
		var failing map[string]string
		if i > 0 {
			failing = map[string]string{edgev2alpha1.SyncErrorAnnotation: "Rejected: denied by admission"}
		}
		require.True(t, putCopy(s, mailboxCopy(mb("failing"), "ns", obj, "wds1", "p", failing)))
	}
	require.True(t, putCopy(s, mailboxCopy(mb("partial"), "ns", "obj0", "wds1", "p", nil)))
	// Another placement's copy, and another WDS's, do not count.
	require.True(t, putCopy(s, mailboxCopy(mb("partial"), "ns", "other", "wds1", "q", nil)))
	require.True(t, putCopy(s, mailboxCopy(mb("partial"), "ns", "theirs", "wds2", "p", nil)))

	all := func(string, schema.GroupVersionResource) bool { return true }
	view := s.Compute("placements", all, now, Query{}).Places
	require.Len(t, view.Placements, 1)
	got := map[string]CopyCounts{}
	for _, d := range view.Placements[0].Destinations {
		got[d.SyncTarget] = d.Copies
	}
	require.Equal(t, CopyCounts{Expected: 3, InMailbox: 3, Synced: 3, Summary: "3/3 synced"}, got["full"])
	require.Equal(t, CopyCounts{Expected: 3, InMailbox: 3, Synced: 1, Failed: 2, Summary: "1/3 synced, 2 failed",
		Failures: []Problem{{Object: "deployments.apps/ns/obj1", Reason: "Rejected", Message: "denied by admission"},
			{Object: "deployments.apps/ns/obj2", Reason: "Rejected", Message: "denied by admission"}}}, got["failing"])
	require.Equal(t, CopyCounts{Expected: 3, InMailbox: 1, Synced: 1, Missing: 2, Summary: "1/3 synced, 2 missing"}, got["partial"])
	require.Equal(t, CopyCounts{Expected: 3, InMailbox: 3, Waiting: 3, Summary: "0/3 synced, 3 waiting for the edge"}, got["offline"])
	require.Equal(t, CopyCounts{Expected: 3, Missing: 3, Summary: "0/3 synced, 3 missing"}, got["empty"])

	// The syncer writing the edge's status again changes nothing shown;
	// its problem going away does, and so does a copy going.
	require.False(t, putCopy(s, mailboxCopy(mb("full"), "ns", "obj0", "wds1", "p", nil)))
	require.True(t, putCopy(s, mailboxCopy(mb("failing"), "ns", "obj1", "wds1", "p", nil)))
	s.deleteCopy(copyKey{mb("full"), "apps", "deployments", "ns", "obj2"})
	view = s.Compute("placements", all, now, Query{}).Places
	for _, d := range view.Placements[0].Destinations {
		got[d.SyncTarget] = d.Copies
	}
	require.Equal(t, "2/3 synced, 1 missing", got["full"].Summary)
	require.Equal(t, "2/3 synced, 1 failed", got["failing"].Summary)

	// Whoever may not see the placement sees none of it.
	none := func(string, schema.GroupVersionResource) bool { return false }
	require.Empty(t, s.Compute("placements", none, now, Query{}).Places.Placements)
	for _, mbox := range []string{mb("full"), mb("failing"), mb("partial"), mb("offline")} {
		for _, obj := range []string{"obj0", "obj1", "obj2", "other", "theirs"} {
			s.deleteCopy(copyKey{mbox, "apps", "deployments", "ns", obj})
		}
	}
	require.Empty(t, s.copyIndex, "tallies go with the copies")
}

func uidOf(name string) types.UID { return types.UID("uid-" + name) }

// TestWorkloadEdges: each edge a workload is placed on, once, with the
// state of its copy and its pods.
func TestWorkloadEdges(t *testing.T) {
	mb := func(name string) string { return spaces.MailboxName("inv", string(uidOf(name))) }
	dest := func(name, state string) Destination {
		return Destination{Space: "inv", SyncTarget: name, State: state, mailbox: mb(name)}
	}
	placements := []Placement{
		{Space: "wds1", Name: "a", Destinations: []Destination{dest("running", StateConnected), dest("crashing", StateConnected), dest("conflict", StateConnected)}},
		{Space: "wds1", Name: "b", Destinations: []Destination{dest("running", StateConnected), dest("offline", StateDisconnected), dest("notyet", StateConnected), dest("plain", StateConnected)}},
	}
	copies := map[copyKey]copyRecord{}
	put := func(name string, r copyRecord) {
		copies[copyKey{mb(name), "apps", "deployments", "ns", "web"}] = r
	}
	put("running", copyRecord{associated: &edgev2alpha1.AssociatedState{ReplicaSets: 1, PodPhases: map[string]int64{"Running": 3}}})
	put("crashing", copyRecord{associated: &edgev2alpha1.AssociatedState{ReplicaSets: 2, PodPhases: map[string]int64{"Running": 2, "Pending": 1, "Succeeded": 1},
		NotReadyPods: []edgev2alpha1.NotReadyPod{{Name: "web-1", Reason: "CrashLoopBackOff"}, {Name: "web-2", Reason: "Unschedulable"}}}})
	put("conflict", copyRecord{syncError: "Conflict: deployment ns/web at the edge is not the syncer's"})
	put("offline", copyRecord{associated: &edgev2alpha1.AssociatedState{PodPhases: map[string]int64{"Running": 1}}})
	put("plain", copyRecord{})
	lookup := func(k copyKey) (copyRecord, bool) {
		r, ok := copies[k]
		return r, ok
	}

	edges := workloadEdges(placements, lookup, "apps", "deployments", "ns", "web")
	byName := map[string]WorkloadEdge{}
	var names []string
	for _, e := range edges {
		byName[e.SyncTarget] = e
		names = append(names, e.SyncTarget)
	}
	require.Equal(t, []string{"conflict", "crashing", "notyet", "offline", "plain", "running"}, names, "each edge once, by name")
	require.Equal(t, WorkloadEdge{Space: "inv", SyncTarget: "running", State: StateConnected, Placements: []string{"a", "b"}, Copy: CopySynced,
		Reported: true, ReplicaSets: 1, PodPhases: map[string]int64{"Running": 3}, Pods: 3, LivePods: 3, ReadyPods: 3}, byName["running"])
	crashing := byName["crashing"]
	require.Equal(t, CopySynced, crashing.Copy)
	require.Equal(t, []int64{4, 3, 1, 2}, []int64{crashing.Pods, crashing.LivePods, crashing.ReadyPods, crashing.ReplicaSets},
		"pods, live (not finished), ready, ReplicaSets")
	require.Equal(t, "CrashLoopBackOff", crashing.NotReadyPods[0].Reason)
	require.Equal(t, CopyFailed, byName["conflict"].Copy)
	require.Contains(t, byName["conflict"].SyncError, "Conflict")
	require.False(t, byName["conflict"].Reported)
	require.Equal(t, CopyWaiting, byName["offline"].Copy, "a disconnected edge's copy waits")
	require.Equal(t, int64(1), byName["offline"].ReadyPods, "the last report stays")
	require.Equal(t, CopyMissing, byName["notyet"].Copy)
	require.Equal(t, CopySynced, byName["plain"].Copy)
	require.False(t, byName["plain"].Reported, "no report: not a kind whose pods the syncer follows, or not yet")

	// A full list of not-ready pods may have been cut: ready is at most.
	many := &edgev2alpha1.AssociatedState{PodPhases: map[string]int64{"Pending": 30}}
	for i := range edgev2alpha1.MaxNotReadyPods {
		many.NotReadyPods = append(many.NotReadyPods, edgev2alpha1.NotReadyPod{Name: fmt.Sprint("p", i), Reason: "Unschedulable"})
	}
	put("running", copyRecord{associated: many})
	e := workloadEdges(placements[:1], lookup, "apps", "deployments", "ns", "web")
	require.Equal(t, "running", e[2].SyncTarget)
	require.True(t, e[2].ReadyAtMost)
	require.Equal(t, int64(10), e[2].ReadyPods)
}

// TestCopyStore: what the reflector of a resource's copies writes becomes
// the records, and a relist forgets the copies of that resource it lacks
// (and no other resource's).
func TestCopyStore(t *testing.T) {
	s := NewStore()
	ctx := context.Background()
	deployments := &copyStore{ctx: ctx, s: s, gr: schema.GroupResource{Group: "apps", Resource: "deployments"}}
	configMaps := &copyStore{ctx: ctx, s: s, gr: schema.GroupResource{Resource: "configmaps"}}
	notified := func(f func() error) bool {
		s.mu.RLock()
		ch := s.changed
		s.mu.RUnlock()
		require.NoError(t, f())
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
	a := mailboxCopy("mb1", "ns", "a", "wds1", "p", nil)
	a.SetResourceVersion("5")
	b := mailboxCopy("mb2", "ns", "b", "wds1", "p", nil)
	require.True(t, notified(func() error { return deployments.Add(a) }))
	require.Equal(t, "5", deployments.LastStoreSyncResourceVersion())
	require.True(t, notified(func() error { return deployments.Add(b) }))
	require.True(t, notified(func() error { return configMaps.Add(mailboxCopy("mb1", "ns", "a", "wds1", "p", nil)) }))
	require.Len(t, s.copies, 3)
	stored := func(k copyKey) copyRecord {
		t.Helper()
		r, ok := s.copyAt(k)
		require.True(t, ok, "no record of %v", k)
		return r
	}
	require.Equal(t, []string{"p"}, stored(copyKey{"mb1", "apps", "deployments", "ns", "a"}).placements)
	// The records hold shared strings, not those of the objects they were
	// read from: two copies of one object in two mailboxes, decoded each
	// on its own, hold its name, namespace, WDS and placement once.
	decoded := func(mailbox string) (*unstructured.Unstructured, copyKey) {
		u := mailboxCopy(mailbox, strings.Clone("ns"), strings.Clone("x"), strings.Clone("wds1"), strings.Clone("p"), nil)
		require.NoError(t, configMaps.Add(u))
		return u, copyKey{mailbox, "", "configmaps", "ns", "x"}
	}
	ux, kx := decoded("mb3")
	_, ky := decoded("mb4")
	var keys [2]copyKey
	for sk := range s.copies {
		switch k := sk.key(); k {
		case kx:
			keys[0] = k
		case ky:
			keys[1] = k
		}
	}
	rx, ry := stored(kx), stored(ky)
	require.NotEqual(t, unsafe.Pointer(unsafe.StringData(ux.GetName())), unsafe.Pointer(unsafe.StringData(keys[0].name)), "the record keeps the object's own string")
	require.Equal(t, unsafe.Pointer(unsafe.StringData(keys[0].name)), unsafe.Pointer(unsafe.StringData(keys[1].name)))
	require.Equal(t, unsafe.Pointer(unsafe.StringData(keys[0].namespace)), unsafe.Pointer(unsafe.StringData(keys[1].namespace)))
	require.Equal(t, unsafe.Pointer(unsafe.StringData(rx.wds)), unsafe.Pointer(unsafe.StringData(ry.wds)))
	require.Equal(t, unsafe.Pointer(unsafe.StringData(rx.placements[0])), unsafe.Pointer(unsafe.StringData(ry.placements[0])))
	require.NoError(t, configMaps.Delete(ux))
	require.NoError(t, configMaps.Delete(mailboxCopy("mb4", "ns", "x", "wds1", "p", nil)))
	require.Len(t, s.copies, 3)

	// The syncer rewriting status changes nothing shown.
	require.False(t, notified(func() error { return deployments.Update(a.DeepCopy()) }))
	failing := mailboxCopy("mb1", "ns", "a", "wds1", "p", map[string]string{edgev2alpha1.SyncErrorAnnotation: "Rejected: no"})
	require.True(t, notified(func() error { return deployments.Update(failing) }))
	require.Equal(t, "Rejected: no", stored(copyKey{"mb1", "apps", "deployments", "ns", "a"}).syncError)

	// A relist without b: b goes, the ConfigMap's record stays.
	require.True(t, notified(func() error { return deployments.Replace([]any{failing}, "9") }))
	require.Equal(t, "9", deployments.LastStoreSyncResourceVersion())
	require.Len(t, s.copies, 2)
	stored(copyKey{"mb1", "", "configmaps", "ns", "a"})
	_, ok := s.copyAt(copyKey{"mb2", "apps", "deployments", "ns", "b"})
	require.False(t, ok)
	require.False(t, notified(func() error { return deployments.Replace([]any{failing}, "10") }), "the same list changes nothing")

	require.True(t, notified(func() error { return deployments.Delete(cache.DeletedFinalStateUnknown{Key: "k", Obj: failing}) }))
	require.False(t, notified(func() error { return deployments.Delete(failing) }), "deleting what is gone changes nothing")
	require.Len(t, s.copies, 1)
	require.Error(t, deployments.Add("not an object"))
}

// TestSlimLists: the pages of a list of copies keep what the store reads
// (the store's record and key of a slim copy are those of the whole one)
// and nothing else; watches are the inner ListerWatcher's.
func TestSlimLists(t *testing.T) {
	ctx := context.Background()
	whole := []*unstructured.Unstructured{
		mailboxCopy("mb1", "apps", "web", "wds1", "p1,p2", map[string]string{
			edgev2alpha1.SyncErrorAnnotation:       "Invalid: no",
			edgev2alpha1.AssociatedStateAnnotation: `{"pods":{"running":2}}`}),
		mailboxCopy("mb2", "", "cluster-wide", "wds2", "p3", nil),
	}
	whole[0].SetResourceVersion("41")
	watched := watch.NewFake()
	inner := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			list := &unstructured.UnstructuredList{}
			for _, u := range whole {
				list.Items = append(list.Items, *u.DeepCopy())
			}
			return list, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return watched, nil },
	}
	lw := cache.ToListerWatcherWithContext(slimLists(inner))
	obj, err := lw.ListWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	items := obj.(*unstructured.UnstructuredList).Items
	require.Len(t, items, len(whole))
	store := &copyStore{gr: schema.GroupResource{Group: "apps", Resource: "deployments"}}
	for i, u := range whole {
		slim := &items[i]
		require.Equal(t, copyOf(u), copyOf(slim))
		require.Equal(t, store.key(u), store.key(slim))
		require.Equal(t, u.GetResourceVersion(), slim.GetResourceVersion())
		require.NotContains(t, slim.Object, "spec")
		require.NotContains(t, slim.Object, "status")
		require.NotContains(t, slim.GetAnnotations(), "unrelated")
		require.Empty(t, slim.GetLabels())
	}
	w, err := lw.WatchWithContext(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Same(t, watched, w)
}

// A copy the server's in-process reader offers typed makes the slim
// object, and so the record and key, that its unstructured form makes.
func TestSlimTyped(t *testing.T) {
	for _, u := range []*unstructured.Unstructured{
		mailboxCopy("mb1", "apps", "web", "wds1", "p1,p2", map[string]string{
			edgev2alpha1.SyncErrorAnnotation:       "Invalid: no",
			edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":{"Running":2}}`}),
		mailboxCopy("mb2", "", "cluster-wide", "wds2", "p3", nil),
	} {
		u.SetResourceVersion("41")
		typed := &appsv1.Deployment{}
		require.NoError(t, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed))
		gvk := appsv1.SchemeGroupVersion.WithKind("Deployment")
		before := typed.DeepCopy()
		obj, ok := slimTyped(typed, gvk)
		require.True(t, ok)
		require.Equal(t, before, typed, "slimTyped only reads")
		slim := obj.(*unstructured.Unstructured)
		want := slimCopy(u)
		require.Equal(t, &want, slim)
		store := &copyStore{gr: schema.GroupResource{Group: "apps", Resource: "deployments"}}
		require.Equal(t, copyOf(u), copyOf(slim))
		require.Equal(t, store.key(u), store.key(slim))
	}
	_, ok := slimTyped(&metav1.Status{}, schema.GroupVersionKind{Version: "v1", Kind: "Status"})
	require.False(t, ok, "an object without metadata is declined")
}

// TestStoredCopy: a key and record come back from the store's compact
// form as they went in, and that form is two handles and a pointer.
func TestStoredCopy(t *testing.T) {
	keys := []copyKey{{"mb1", "apps", "deployments", "ns", "web"}, {"mb1", "", "namespaces", "", "ns"}, {}}
	for _, k := range keys {
		require.Equal(t, k, k.stored().key())
	}
	records := []copyRecord{
		{},
		{wds: "wds1", placements: []string{"p1"}},
		{wds: "wds1", placements: []string{"p1", "p2"}, syncError: "Conflict: not the syncer's"},
		{wds: "wds2", associated: &edgev2alpha1.AssociatedState{ReplicaSets: 1, PodPhases: map[string]int64{"Running": 2}}},
	}
	for _, r := range records {
		back := r.stored().record()
		require.Equal(t, r, back)
		require.True(t, r.equal(back))
	}
	require.Nil(t, records[1].stored().extra, "a copy the syncer says nothing of has no extra")
	require.Equal(t, records[1].stored().shape, copyRecord{wds: strings.Clone("wds1"), placements: []string{strings.Clone("p1")}}.stored().shape,
		"copies of one version of an object share their shape")
	require.Equal(t, uintptr(32), unsafe.Sizeof(storedKey{})+unsafe.Sizeof(storedRecord{}))
}
