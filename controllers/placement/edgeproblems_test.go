// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestEdgeProblems: what a syncer says about a copy reaches every
// placement that claims it, in the Synced condition, without making the
// placement less Ready; a reason a condition may not carry (the edge
// writes the annotation) is replaced, not passed on to fail the update.
func TestEdgeProblems(t *testing.T) {
	services := resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "services"}, Kind: "Service", Namespaced: true}
	svc := &unstructured.Unstructured{}
	svc.SetName("web")
	svc.SetNamespace("shop")
	epA := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "a", Generation: 3}}
	epB := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "b"}}
	key := copyKey(services.GroupVersionResource, "shop", "web")
	current := func(annotation string) map[string]metav1.Object {
		c := svc.DeepCopy()
		if annotation != "" {
			c.SetAnnotations(map[string]string{edgev2alpha1.SyncErrorAnnotation: annotation})
		}
		return map[string]metav1.Object{key: c}
	}
	for _, tc := range []struct {
		name, annotation, reason string
	}{
		{"a missing permission", "MissingPermission: the syncer may not patch services in namespace shop at the edge", "MissingPermission"},
		{"a reason no condition may carry", "Bad Reason!: " + strings.Repeat("x", 10), reasonEdgeSync},
		{"no reason at all", "something broke", reasonEdgeSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sel := &selection{claims: map[string][]*claim{key: {
				{source: source{wds: "wds1", ep: epA}, res: services, obj: svc},
				{source: source{wds: "wds1", ep: epB}, res: services, obj: svc},
			}}, problems: map[string][]problem{}}
			edgeProblems(sel, current(tc.annotation), "SyncTarget inv1/edge1")
			want := problem{Reason: tc.reason, Edge: true, Message: "at SyncTarget inv1/edge1, services shop/web: " + tc.annotation}
			require.Equal(t, map[string][]problem{spaces.Key("wds1", "", "a"): {want}, spaces.Key("wds1", "", "b"): {want}}, sel.problems)

			ep := epA.DeepCopy()
			require.True(t, placementConditions(ep, sel.problems[spaces.Key("wds1", "", "a")]))
			synced := meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementSynced)
			require.Equal(t, metav1.ConditionFalse, synced.Status)
			require.Equal(t, tc.reason, synced.Reason)
			require.Equal(t, want.Message, synced.Message)
			require.EqualValues(t, 3, synced.ObservedGeneration)
			require.True(t, meta.IsStatusConditionTrue(ep.Status.Conditions, "Propagated"), "the copy is in its mailbox")
		})
	}

	// No annotation: no problem, and Synced is True.
	sel := &selection{claims: map[string][]*claim{key: {{source: source{wds: "wds1", ep: epA}, res: services, obj: svc}}}, problems: map[string][]problem{}}
	edgeProblems(sel, current(""), "SyncTarget inv1/edge1")
	require.Empty(t, sel.problems)
	ep := epA.DeepCopy()
	placementConditions(ep, nil)
	require.True(t, meta.IsStatusConditionTrue(ep.Status.Conditions, edgev2alpha1.EdgePlacementSynced))
}
