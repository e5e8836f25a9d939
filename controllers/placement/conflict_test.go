// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
)

var (
	configmaps = resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	epoch      = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
)

// placementAt is an EdgePlacement created some seconds after epoch.
func placementAt(name string, seconds int) *edgev2alpha1.EdgePlacement {
	return &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: name,
		CreationTimestamp: metav1.NewTime(epoch.Add(time.Duration(seconds) * time.Second))}}
}

// sharedCopy is a ConfigMap default/shared copy from a WDS with some data.
func sharedCopy(wds, data string) *unstructured.Unstructured {
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "shared", "namespace": "default",
			"annotations": map[string]any{edgev2alpha1.SourceSpaceAnnotation: wds}},
		"data": map[string]any{"v": data}}}
	return obj
}

// held is the current mailbox copy written from a placement.
func held(wds, placement, data string) *unstructured.Unstructured {
	obj := sharedCopy(wds, data)
	obj.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	a := obj.GetAnnotations()
	a[edgev2alpha1.SourcePlacementAnnotation] = placement
	obj.SetAnnotations(a)
	return obj
}

func TestSourceOrder(t *testing.T) {
	sources := []source{
		{wds: "wds2", ep: placementAt("b", 5)},
		{wds: "wds1", ep: placementAt("z", 5)},
		{wds: "wds1", ep: placementAt("a", 5)},
		{wds: "wds9", ep: placementAt("old", 1)},
	}
	want := []string{"wds9/old", "wds1/a", "wds1/z", "wds2/b"}
	for i := range sources {
		for j := range sources {
			a, b := indexOf(want, sources[i].String()), indexOf(want, sources[j].String())
			require.Equal(t, a < b, sources[i].before(sources[j]), "%s before %s", sources[i], sources[j])
		}
	}
}

func indexOf(list []string, s string) int {
	for i, v := range list {
		if v == s {
			return i
		}
	}
	return -1
}

func TestDecide(t *testing.T) {
	type claimSpec struct {
		wds, placement string
		age            int    // seconds after epoch
		data           string // "" means its copy could not be made
		createOnly     bool
	}
	type loss struct{ placement, reason string }
	for _, tc := range []struct {
		name    string
		claims  []claimSpec
		current *unstructured.Unstructured
		// want is the winning placement (WDS/NAME) and its data; keep
		// means the current copy is left as it is.
		want       string
		wantData   string
		keep       bool
		placements []string // names in the copy's placements annotation
		createOnly bool
		losers     []loss
	}{
		{
			name:   "one placement",
			claims: []claimSpec{{"wds1", "p", 1, "a", false}},
			want:   "wds1/p", wantData: "a", placements: []string{"p"},
		},
		{
			name:   "two WDSes, no copy yet: the older placement wins",
			claims: []claimSpec{{"wds2", "first", 1, "b", false}, {"wds1", "second", 2, "a", false}},
			want:   "wds2/first", wantData: "b", placements: []string{"first"},
			losers: []loss{{"wds1/second", edgev2alpha1.ConflictReasonOtherSpace}},
		},
		{
			name:    "two WDSes: the one holding the copy keeps it, though younger",
			claims:  []claimSpec{{"wds1", "old", 1, "a", false}, {"wds2", "new", 2, "b", false}},
			current: held("wds2", "new", "b"),
			want:    "wds2/new", wantData: "b", placements: []string{"new"},
			losers: []loss{{"wds1/old", edgev2alpha1.ConflictReasonOtherSpace}},
		},
		{
			name:    "two WDSes: the holder no longer places it, the other takes it",
			claims:  []claimSpec{{"wds1", "old", 1, "a", false}},
			current: held("wds2", "new", "b"),
			want:    "wds1/old", wantData: "a", placements: []string{"old"},
		},
		{
			name:    "a copy not the translator's gives no claim to its space",
			claims:  []claimSpec{{"wds1", "old", 1, "a", false}, {"wds2", "new", 2, "b", false}},
			current: sharedCopy("wds2", "b"),
			want:    "wds1/old", wantData: "a", placements: []string{"old"},
			losers: []loss{{"wds2/new", edgev2alpha1.ConflictReasonOtherSpace}},
		},
		{
			name:   "same age: the WDS name decides",
			claims: []claimSpec{{"wds1", "p", 1, "a", false}, {"wds2", "p", 1, "b", false}},
			want:   "wds1/p", wantData: "a", placements: []string{"p"},
			losers: []loss{{"wds2/p", edgev2alpha1.ConflictReasonOtherSpace}},
		},
		{
			name:   "one WDS, same copy: the placements add up",
			claims: []claimSpec{{"wds1", "a", 1, "x", false}, {"wds1", "b", 2, "x", true}},
			want:   "wds1/a", wantData: "x", placements: []string{"a", "b"},
		},
		{
			name:   "one WDS, same copy, all create-only",
			claims: []claimSpec{{"wds1", "a", 1, "x", true}, {"wds1", "b", 2, "x", true}},
			want:   "wds1/a", wantData: "x", placements: []string{"a", "b"}, createOnly: true,
		},
		{
			name:   "one WDS, customized differently: the older placement wins",
			claims: []claimSpec{{"wds1", "east", 1, "east", false}, {"wds1", "west", 2, "west", false}},
			want:   "wds1/east", wantData: "east", placements: []string{"east"},
			losers: []loss{{"wds1/west", edgev2alpha1.ConflictReasonCustomization}},
		},
		{
			name:    "one WDS, customized differently: the holder keeps it",
			claims:  []claimSpec{{"wds1", "east", 1, "east", false}, {"wds1", "west", 2, "west", false}},
			current: held("wds1", "west", "west"),
			want:    "wds1/west", wantData: "west", placements: []string{"west"},
			losers: []loss{{"wds1/east", edgev2alpha1.ConflictReasonCustomization}},
		},
		{
			name:   "one WDS: a placement that could not make its copy yields to one that could",
			claims: []claimSpec{{"wds1", "broken", 1, "", false}, {"wds1", "good", 2, "x", false}},
			want:   "wds1/good", wantData: "x", placements: []string{"good"},
		},
		{
			name:    "the owning WDS could not make its copy: the copy stays, the other still loses",
			claims:  []claimSpec{{"wds1", "broken", 2, "", false}, {"wds2", "other", 3, "b", false}},
			current: held("wds1", "broken", "old"),
			keep:    true,
			losers:  []loss{{"wds2/other", edgev2alpha1.ConflictReasonOtherSpace}},
		},
		{
			name: "three WDSes and two placements of the owner",
			claims: []claimSpec{{"wds3", "c", 1, "c", false}, {"wds1", "a", 2, "a", false}, {"wds1", "a2", 3, "a", false},
				{"wds2", "b", 4, "b", false}},
			current: held("wds1", "a2", "a"),
			want:    "wds1/a2", wantData: "a", placements: []string{"a", "a2"},
			losers: []loss{{"wds3/c", edgev2alpha1.ConflictReasonOtherSpace}, {"wds2/b", edgev2alpha1.ConflictReasonOtherSpace}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func() []*claim {
				var claims []*claim
				for _, c := range tc.claims {
					cl := &claim{source: source{wds: c.wds, ep: placementAt(c.placement, c.age)}, res: configmaps, createOnly: c.createOnly,
						clauses: []edgev2alpha1.DownsyncClause{{Resources: []string{"configmaps"}}}}
					if c.data == "" {
						cl.failed, cl.obj = true, sharedCopy("", "source")
					} else {
						cl.obj = sharedCopy(c.wds, c.data)
					}
					claims = append(claims, cl)
				}
				return claims
			}
			// The current copy as the translator reads it: the shared
			// cache's record of it (and the object, which it stands for).
			currents := []metav1.Object{nil}
			if tc.current != nil {
				currents = []metav1.Object{tc.current, crossspace.Record(tc.current)}
			}
			for _, current := range currents {
				d, conflicts := decide(build(), current, "SyncTarget inv1/edge1")
				require.Equal(t, tc.keep, d.keep)
				if !tc.keep {
					require.Equal(t, tc.want, d.obj.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation]+"/"+d.sourcePlacement)
					require.Equal(t, tc.wantData, d.obj.Object["data"].(map[string]any)["v"])
					require.Equal(t, tc.placements, sortedKeys(d.placements))
					require.Equal(t, tc.createOnly, d.createOnly)
				}
				var got []loss
				for _, cf := range conflicts {
					got = append(got, loss{cf.loser.String(), cf.problem.Reason})
					require.Contains(t, cf.problem.Message, "configmap default/shared for SyncTarget inv1/edge1")
					if !tc.keep {
						require.Contains(t, cf.problem.Message, "EdgePlacement "+tc.want)
					}
				}
				require.Equal(t, tc.losers, got)

				// The same state decides the same way, however often it is asked.
				for range 5 {
					again, againConflicts := decide(build(), current, "SyncTarget inv1/edge1")
					require.Equal(t, d.obj, again.obj)
					require.Equal(t, conflicts, againConflicts)
				}
			}
		})
	}
}

// What decide chose, once written, is what decide chooses next: the copy
// never flips, whatever order the claims come in after the first write.
func TestDecideIsStableOnceWritten(t *testing.T) {
	older := &claim{source: source{wds: "wds1", ep: placementAt("p", 1)}, res: configmaps, obj: sharedCopy("wds1", "a"),
		clauses: []edgev2alpha1.DownsyncClause{{}}}
	younger := &claim{source: source{wds: "wds2", ep: placementAt("p", 2)}, res: configmaps, obj: sharedCopy("wds2", "b"),
		clauses: []edgev2alpha1.DownsyncClause{{}}}
	d, _ := decide([]*claim{older, younger}, nil, "here")
	written := d.obj.DeepCopy()
	written.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	annotations := written.GetAnnotations()
	d.annotate(annotations)
	written.SetAnnotations(annotations)
	for range 10 {
		again, conflicts := decide([]*claim{older, younger}, written, "here")
		require.Equal(t, "wds1", again.obj.GetAnnotations()[edgev2alpha1.SourceSpaceAnnotation])
		require.Len(t, conflicts, 1)
		require.Equal(t, "wds2/p", conflicts[0].loser.String())
	}
}

func TestPlacementConditions(t *testing.T) {
	conflictA := problem{Reason: edgev2alpha1.ConflictReasonOtherSpace, Message: "configmap default/shared for SyncTarget inv1/edge1 is placed from EdgePlacement wds1/p"}
	conflictB := problem{Reason: edgev2alpha1.ConflictReasonCustomization, Message: "configmap default/other for SyncTarget inv1/edge2 is customized differently"}
	failure := problem{Reason: "CustomizerNotFound", Message: "deployment common/bad names Customizer common/nope, which does not exist"}
	for _, tc := range []struct {
		name           string
		problems       []problem
		wantPropagated metav1.ConditionStatus
		wantReady      metav1.ConditionStatus
		wantConflicted string // "" means absent
		wantReason     string
	}{
		{name: "nothing wrong", wantPropagated: metav1.ConditionTrue},
		{name: "a conflict alone", problems: []problem{conflictA}, wantPropagated: metav1.ConditionTrue,
			wantConflicted: conflictA.Message, wantReason: edgev2alpha1.ConflictReasonOtherSpace},
		{name: "the same conflict twice shows once", problems: []problem{conflictA, conflictA}, wantPropagated: metav1.ConditionTrue,
			wantConflicted: conflictA.Message, wantReason: edgev2alpha1.ConflictReasonOtherSpace},
		{name: "two conflicts", problems: []problem{conflictB, conflictA}, wantPropagated: metav1.ConditionTrue,
			wantConflicted: conflictB.Message + "; " + conflictA.Message, wantReason: edgev2alpha1.ConflictReasonCustomization},
		{name: "a failure and a conflict", problems: []problem{conflictA, failure}, wantPropagated: metav1.ConditionFalse,
			wantConflicted: conflictA.Message, wantReason: edgev2alpha1.ConflictReasonOtherSpace},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := placementAt("p", 1)
			ep.Generation = 3
			// Scheduled, so Ready follows Propagated; and a stale conflict
			// that must go when there is none.
			meta.SetStatusCondition(&ep.Status.Conditions, metav1.Condition{Type: epstatus.Scheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"})
			meta.SetStatusCondition(&ep.Status.Conditions, metav1.Condition{Type: edgev2alpha1.EdgePlacementConflicted, Status: metav1.ConditionTrue, Reason: "Old", Message: "stale"})
			require.True(t, placementConditions(ep, tc.problems))
			require.Equal(t, tc.wantPropagated, meta.FindStatusCondition(ep.Status.Conditions, epstatus.Propagated).Status)
			cond := meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementConflicted)
			if tc.wantConflicted == "" {
				require.Nil(t, cond)
			} else {
				require.NotNil(t, cond)
				require.Equal(t, metav1.ConditionTrue, cond.Status)
				require.Equal(t, tc.wantReason, cond.Reason)
				require.Equal(t, tc.wantConflicted, cond.Message)
				require.Equal(t, int64(3), cond.ObservedGeneration)
			}
			n := 0
			for _, c := range ep.Status.Conditions {
				if c.Type == edgev2alpha1.EdgePlacementConflicted {
					n++
				}
			}
			require.LessOrEqual(t, n, 1)
			// Once set, the same problems change nothing: no status write.
			require.False(t, placementConditions(ep, tc.problems))
		})
	}
}
