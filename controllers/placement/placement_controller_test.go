// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

func TestSourceChanged(t *testing.T) {
	base := configMap("default", "cm", map[string]any{"a": "1"})
	base.SetResourceVersion("1")
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		{name: "a resync", change: func(*unstructured.Unstructured) {}, want: false},
		{name: "status alone", change: func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"ready": true}
			u.SetResourceVersion("2")
			u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "kubestellar-status"}})
		}, want: false},
		{name: "data", change: func(u *unstructured.Unstructured) { u.Object["data"] = map[string]any{"a": "2"} }, want: true},
		{name: "a label (selectors read them)", change: func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"x": "y"}) }, want: true},
		{name: "an annotation (the Customizer is named there)", change: func(u *unstructured.Unstructured) {
			u.SetAnnotations(map[string]string{edgev2alpha1.CustomizerAnnotation: "c"})
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed := base.DeepCopy()
			tc.change(changed)
			require.Equal(t, tc.want, sourceChanged(base, changed))
		})
	}
}

// TestContentChanged: an update of a copy counts when it changes more
// than the copy's status, resource version, generation and associated
// state; the shared cache's handlers get a copy in a mailbox as its record
// (crossspace.Copy), and the records give the same answers as the objects.
func TestContentChanged(t *testing.T) {
	base := configMap("default", "cm", map[string]any{"a": "1"})
	base.SetResourceVersion("1")
	base.SetUID("4f9d1c3e-0d36-4a53-9f1b-6a1d2f0e7c11")
	base.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	base.SetAnnotations(map[string]string{spaces.Annotation: "mb1", edgev2alpha1.SourceSpaceAnnotation: "wds1",
		edgev2alpha1.PlacementsAnnotation: "p1"})
	for _, tc := range []struct {
		name   string
		change func(u *unstructured.Unstructured)
		want   bool
	}{
		{name: "a resync", change: func(*unstructured.Unstructured) {}, want: false},
		{name: "status, resource version and generation", change: func(u *unstructured.Unstructured) {
			u.Object["status"] = map[string]any{"ready": true}
			u.SetResourceVersion("2")
			u.SetGeneration(3)
		}, want: false},
		{name: "the associated state the syncer reports", change: func(u *unstructured.Unstructured) {
			setAnnotation(u, edgev2alpha1.AssociatedStateAnnotation, `{"pods":1}`)
		}, want: false},
		{name: "the placements it is for", change: func(u *unstructured.Unstructured) {
			setAnnotation(u, edgev2alpha1.PlacementsAnnotation, "p1,p2")
		}, want: true},
		{name: "a kubestellar label", change: func(u *unstructured.Unstructured) {
			labels := u.GetLabels()
			labels[edgev2alpha1.UpsyncedLabel] = "true"
			u.SetLabels(labels)
		}, want: true},
		{name: "its deletion", change: func(u *unstructured.Unstructured) {
			now := metav1.Now()
			u.SetDeletionTimestamp(&now)
		}, want: true},
		{name: "a new object of the same name", change: func(u *unstructured.Unstructured) {
			u.SetUID("0b6f3c2a-7e1d-4b9a-8c5f-2d4e6a8b0c13")
		}, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old := base.DeepCopy()
			setAnnotation(old, edgev2alpha1.AssociatedStateAnnotation, `{"pods":0}`)
			changed := old.DeepCopy()
			tc.change(changed)
			require.Equal(t, tc.want, contentChanged(old, changed), "the objects")
			require.Equal(t, tc.want, contentChanged(crossspace.Record(old), crossspace.Record(changed)), "their records")
		})
	}
}

func setAnnotation(u *unstructured.Unstructured, key, value string) {
	annotations := u.GetAnnotations()
	annotations[key] = value
	u.SetAnnotations(annotations)
}

// TestStatusOnly: an update of a placement's status alone reconciles no
// mailbox (crossspace.EnqueueSpec); a change of anything a mailbox is
// made from does.
func TestStatusOnly(t *testing.T) {
	base := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "p", UID: "u1", Generation: 3, Labels: map[string]string{"a": "b"}}}
	for _, tc := range []struct {
		name   string
		change func(*edgev2alpha1.EdgePlacement)
		want   bool
	}{
		{"status", func(ep *edgev2alpha1.EdgePlacement) {
			ep.Status.Rollout = &edgev2alpha1.RolloutStatus{Revision: "r2"}
		}, true},
		{"spec", func(ep *edgev2alpha1.EdgePlacement) { ep.Generation++ }, false},
		{"labels", func(ep *edgev2alpha1.EdgePlacement) { ep.Labels = map[string]string{"a": "c"} }, false},
		{"annotations", func(ep *edgev2alpha1.EdgePlacement) { ep.Annotations = map[string]string{"x": "y"} }, false},
		{"deletion", func(ep *edgev2alpha1.EdgePlacement) { ep.DeletionTimestamp = &metav1.Time{Time: time.Unix(1, 0)} }, false},
		{"recreated", func(ep *edgev2alpha1.EdgePlacement) { ep.UID = "u2" }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := base.DeepCopy()
			tc.change(obj)
			require.Equal(t, tc.want, crossspace.StatusOnly(base, obj))
		})
	}
	require.False(t, crossspace.StatusOnly(&edgev2alpha1.EdgePlacement{}, &edgev2alpha1.EdgePlacement{}), "no generation: no telling")
}

// spaceInformer is an informer's cache indexed by space, filled by hand.
func spaceInformer() *crossspace.Informer {
	return &crossspace.Informer{Indexer: cache.NewIndexer(spaces.KeyFunc, cache.Indexers{crossspace.BySpace: func(obj any) ([]string, error) {
		return []string{crossspace.SpaceOf(obj.(metav1.Object))}, nil
	}})}
}

func testQueue() workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
}

// drainQueue returns the keys queued, sorted, and empties the queue.
func drainQueue(q workqueue.TypedRateLimitingInterface[string]) []string {
	var out []string
	for q.Len() > 0 {
		k, _ := q.Get()
		q.Done(k)
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestSourceChangeWaitsForTheRollout: a change of a WDS's objects
// enqueues the mailboxes of its All placements, and of a Progressive
// placement only its rollout, which admits the mailboxes wave by wave; a
// mailbox both target is enqueued for the All one.
func TestSourceChangeWaitsForTheRollout(t *testing.T) {
	c := &Controller{slices: spaceInformer(), placements: spaceInformer(), mailboxes: testQueue(), statuses: testQueue(), rollouts: testQueue()}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: "wds1"}}
	}
	progressive := &edgev2alpha1.EdgePlacement{ObjectMeta: meta("prog")}
	progressive.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	require.NoError(t, c.placements.Add(progressive))
	require.NoError(t, c.placements.Add(&edgev2alpha1.EdgePlacement{ObjectMeta: meta("all")}))
	to := func(names ...string) []edgev2alpha1.SinglePlacement {
		var out []edgev2alpha1.SinglePlacement
		for _, n := range names {
			out = append(out, edgev2alpha1.SinglePlacement{Space: "inv1", SyncTargetName: n})
		}
		return out
	}
	require.NoError(t, c.slices.Add(&edgev2alpha1.SinglePlacementSlice{ObjectMeta: meta("prog"), Destinations: to("edge2", "edge3")}))
	require.NoError(t, c.slices.Add(&edgev2alpha1.SinglePlacementSlice{ObjectMeta: meta("all"), Destinations: to("edge1", "edge2")}))

	c.enqueueSourceChange("wds1")
	require.Equal(t, []string{"inv1|edge1", "inv1|edge2"}, drainQueue(c.mailboxes))
	require.Equal(t, []string{"wds1|all", "wds1|prog"}, drainQueue(c.rollouts))
	require.Equal(t, []string{"wds1|all", "wds1|prog"}, drainQueue(c.statuses))

	// Strategy All: every destination at once, as before.
	progressive = progressive.DeepCopy()
	progressive.Spec.Rollout = nil
	require.NoError(t, c.placements.Update(progressive))
	c.enqueueSourceChange("wds1")
	require.Equal(t, []string{"inv1|edge1", "inv1|edge2", "inv1|edge3"}, drainQueue(c.mailboxes))
}

// TestObjectChangeConcernsItsPlacements: a change of one object of a WDS
// reconciles the mailboxes of the placements that may select it, by
// group, resource and namespace, and no others; a namespace, or a
// placement that follows dependencies, concerns every one.
func TestObjectChangeConcernsItsPlacements(t *testing.T) {
	c := &Controller{slices: spaceInformer(), placements: spaceInformer(), mailboxes: testQueue(), statuses: testQueue(), rollouts: testQueue()}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.Annotation: "wds1"}}
	}
	core, apps := ptr.To(""), ptr.To("apps")
	place := func(name, edge string, follow bool, clauses ...edgev2alpha1.DownsyncClause) {
		ep := &edgev2alpha1.EdgePlacement{ObjectMeta: meta(name)}
		ep.Spec.Downsync = clauses
		if follow {
			ep.Spec.Dependencies = edgev2alpha1.DependenciesFollow
		}
		require.NoError(t, c.placements.Add(ep))
		require.NoError(t, c.slices.Add(&edgev2alpha1.SinglePlacementSlice{ObjectMeta: meta(name),
			Destinations: []edgev2alpha1.SinglePlacement{{Space: "inv1", SyncTargetName: edge}}}))
	}
	place("shop", "edge1", false, edgev2alpha1.DownsyncClause{APIGroup: core, Resources: []string{"configmaps"}, Namespaces: []string{"shop"}})
	place("web", "edge2", false, edgev2alpha1.DownsyncClause{APIGroup: apps, Resources: []string{"deployments"}})
	place("labelled", "edge3", false, edgev2alpha1.DownsyncClause{Resources: []string{"*"},
		NamespaceSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "a"}}}})
	place("crds", "edge4", false, edgev2alpha1.DownsyncClause{APIGroup: ptr.To("*"), Resources: []string{"widgets"}})
	place("follows", "edge5", true, edgev2alpha1.DownsyncClause{APIGroup: apps, Resources: []string{"deployments"}, Namespaces: []string{"web"}})

	gvr := func(group, resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: group, Version: "v1", Resource: resource}
	}
	for _, tt := range []struct {
		name      string
		gvr       schema.GroupVersionResource
		namespace string
		want      []string
	}{
		{"a ConfigMap of shop", gvr("", "configmaps"), "shop", []string{"inv1|edge1", "inv1|edge3", "inv1|edge5"}},
		{"a ConfigMap elsewhere", gvr("", "configmaps"), "other", []string{"inv1|edge3", "inv1|edge5"}},
		{"a Deployment", gvr("apps", "deployments"), "shop", []string{"inv1|edge2", "inv1|edge3", "inv1|edge5"}},
		{"a cluster-scoped widget", gvr("example.com", "widgets"), "", []string{"inv1|edge4", "inv1|edge5"}},
		{"a namespace", gvr("", "namespaces"), "", []string{"inv1|edge1", "inv1|edge2", "inv1|edge3", "inv1|edge4", "inv1|edge5"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c.enqueueObjectChange("wds1", tt.gvr, tt.namespace)
			require.Equal(t, tt.want, drainQueue(c.mailboxes))
			drainQueue(c.statuses)
			drainQueue(c.rollouts)
		})
	}
}

// TestMailboxRelevant: what a syncer's heartbeat writes leaves its
// mailbox alone; anything the translator reads of a SyncTarget (its
// labels and annotations for customization, its spec, its mailbox, its
// hold and window, whether its syncer reports rollouts or is connected)
// has the mailbox looked at again.
func TestMailboxRelevant(t *testing.T) {
	now := metav1.Now()
	base := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: "edge1", ResourceVersion: "1", Labels: map[string]string{"region": "east"}},
		Status: edgev2alpha1.SyncTargetStatus{MailboxSpace: "inv1-mb-1", Conditions: []metav1.Condition{
			{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: metav1.ConditionTrue, Reason: "TunnelOpen"},
			{Type: edgev2alpha1.SyncTargetSynced, Status: metav1.ConditionTrue, Reason: "InStep", Message: "3 objects in step"}}}}
	for _, tc := range []struct {
		name string
		edit func(st *edgev2alpha1.SyncTarget)
		want bool
	}{
		{name: "a heartbeat with news", edit: func(st *edgev2alpha1.SyncTarget) {
			st.ResourceVersion = "2"
			st.Status.SyncedObjects, st.Status.Conflicts, st.Status.LastSyncerHeartbeatTime = 13, 1, &now
			st.Status.Conditions[1].Message = "13 objects in step"
			st.Status.Problems = []edgev2alpha1.SyncProblem{{Resource: "configmaps", Name: "x", Reason: "Conflict"}}
			st.Status.Drift = &edgev2alpha1.SyncDrift{Reverted: 1}
			st.Status.SyncerVersion, st.Status.TunnelServer = "v2", "https://other:6443"
			st.Status.Rollouts = []edgev2alpha1.RolloutReport{{Placement: "wds1/p", Revision: "r1", Healthy: true}}
		}},
		{name: "a write's bookkeeping", edit: func(st *edgev2alpha1.SyncTarget) {
			st.ResourceVersion = "3"
			st.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubestellar-syncer", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status"}}
		}},
		{name: "its labels", edit: func(st *edgev2alpha1.SyncTarget) { st.Labels["region"] = "west" }, want: true},
		{name: "its annotations", edit: func(st *edgev2alpha1.SyncTarget) { st.Annotations = map[string]string{"zone": "a"} }, want: true},
		{name: "its spec", edit: func(st *edgev2alpha1.SyncTarget) {
			st.Spec.UpdateWindows = []edgev2alpha1.UpdateWindow{{Schedule: "0 2 * * *", Duration: metav1.Duration{Duration: time.Hour}}}
		}, want: true},
		{name: "its mailbox", edit: func(st *edgev2alpha1.SyncTarget) { st.Status.MailboxSpace = "inv1-mb-2" }, want: true},
		{name: "a hold", edit: func(st *edgev2alpha1.SyncTarget) { st.Status.Hold = &edgev2alpha1.EdgeHold{} }, want: true},
		{name: "its window", edit: func(st *edgev2alpha1.SyncTarget) {
			st.Status.UpdateWindow = &edgev2alpha1.UpdateWindowStatus{Open: true}
		}, want: true},
		{name: "its syncer comes to report rollouts", edit: func(st *edgev2alpha1.SyncTarget) { st.Status.ReportsRollouts = true }, want: true},
		{name: "its syncer disconnected", edit: func(st *edgev2alpha1.SyncTarget) {
			st.Status.Conditions[0].Status, st.Status.Conditions[0].Reason = metav1.ConditionFalse, "TunnelClosed"
		}, want: true},
		{name: "being deleted", edit: func(st *edgev2alpha1.SyncTarget) { st.DeletionTimestamp = &now }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			edited := base.DeepCopy()
			tc.edit(edited)
			require.Equal(t, tc.want, mailboxRelevant(base, edited))
		})
	}
}
