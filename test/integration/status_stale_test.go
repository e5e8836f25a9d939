// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestSingletonStatusNeverStale moves a Deployment that wants the singleton
// reported state from one destination to two, to none, back to one, and
// then withdraws the request: the edge's status is in the WDS only while
// the object is on exactly one destination that reported, the
// executing-count label says on how many it is, and a status field the
// summarizer did not write is never removed.
func TestSingletonStatusNeverStale(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	edge1 := syncerKube(t, s, mb1, strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge1")))
	edge2 := syncerKube(t, s, mb2, strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge2")))
	w := in("wds1")

	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	require.NoError(t, c.Create(w, webDeployment("app", "solo")))
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "solo"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors:          []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}},
		WantSingletonReportedState: true,
		Downsync: []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To("apps"), Resources: []string{"deployments"},
			Namespaces: []string{"app"}, ObjectNames: []string{"solo"}}},
	}}
	require.NoError(t, c.Create(w, ep))
	setPlacement := func(change func(*edgev2alpha1.EdgePlacement)) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			cur := &edgev2alpha1.EdgePlacement{}
			if err := c.Get(w, client.ObjectKey{Name: "solo"}, cur); err != nil {
				return false, err
			}
			change(cur)
			return c.Update(w, cur) == nil, nil
		}, "updating the placement")
	}
	// wait waits for the WDS Deployment's label and available replicas
	// ("" for no label).
	wait := func(label string, available int32, what string) *appsv1.Deployment {
		t.Helper()
		d := &appsv1.Deployment{}
		eventually(t, 30*time.Second, func() (bool, error) {
			if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "solo"}, d); err != nil {
				return false, err
			}
			got, ok := d.Labels[edgev2alpha1.ExecutingCountLabel]
			if !ok {
				got = "<none>"
			}
			want := label
			if want == "" {
				want = "<none>"
			}
			if got != want || d.Status.AvailableReplicas != available {
				return false, fmt.Errorf("have executing-count %s and %d available replicas", got, d.Status.AvailableReplicas)
			}
			return true, nil
		}, "%s: executing-count %q and %d available replicas", what, label, available)
		return d
	}

	// On one destination that reported: the edge's status.
	report(t, edge2, mb2, "app", "solo", 1, nil)
	wait("1", 1, "one destination")
	// A status field someone else writes, after the summarizer.
	patch := []byte(`{"status":{"collisionCount":5}}`)
	require.NoError(t, c.Status().Patch(w, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "solo"}},
		client.RawPatch(types.MergePatchType, patch), client.FieldOwner("someone-else")))

	// On two destinations: the status the summarizer wrote goes, even
	// though both report; the other writer's field stays.
	setPlacement(func(ep *edgev2alpha1.EdgePlacement) {
		ep.Spec.LocationSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}
	})
	report(t, edge1, mb1, "app", "solo", 1, nil)
	d := wait("2", 0, "two destinations")
	require.Equal(t, ptr.To[int32](5), d.Status.CollisionCount, "a status field the summarizer did not write stays")
	require.Zero(t, d.Status.Replicas, "every field the summarizer wrote goes")

	// On none: "0".
	setPlacement(func(ep *edgev2alpha1.EdgePlacement) {
		ep.Spec.LocationSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "nowhere"}}}
	})
	wait("0", 0, "no destination")

	// Back on one: no status until it reports (a status from before would
	// be stale), then the edge's.
	setPlacement(func(ep *edgev2alpha1.EdgePlacement) {
		ep.Spec.LocationSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}}
	})
	wait("1", 0, "one destination that has not reported")
	report(t, edge2, mb2, "app", "solo", 1, nil)
	wait("1", 1, "one destination that reported")

	// The request withdrawn: no label, no status of the summarizer's.
	setPlacement(func(ep *edgev2alpha1.EdgePlacement) { ep.Spec.WantSingletonReportedState = false })
	d = wait("", 0, "singleton no longer wanted")
	require.Equal(t, ptr.To[int32](5), d.Status.CollisionCount)

	// A status written by an update (as a server before server-side apply
	// did) is removed too.
	d.Status.AvailableReplicas, d.Status.Replicas = 7, 7
	require.NoError(t, c.Status().Update(w, d, client.FieldOwner("kubestellar-status")))
	setPlacement(func(ep *edgev2alpha1.EdgePlacement) {
		ep.Spec.WantSingletonReportedState = true
		ep.Spec.LocationSelectors = []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}}
	})
	d = wait("2", 0, "two destinations, after an update")
	require.Zero(t, d.Status.Replicas)
}
