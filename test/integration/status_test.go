// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/harness"
)

// report writes into a mailbox copy what a syncer would, with the client c
// of that mailbox's syncer: the edge's status and the state of the
// Deployment's pods.
func report(t *testing.T, c kubernetes.Interface, mailbox, ns, name string, available int32, phases map[string]int64) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := c.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil, err
	}, "the copy of %s/%s in %s", ns, name, mailbox)
	require.NoError(t, writeReport(c, ns, name, available, phases))
}

// writeReport writes a copy's status and its pods' states once, as a
// syncer does.
func writeReport(c kubernetes.Interface, ns, name string, available int32, phases map[string]int64) error {
	ctx := context.Background()
	d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	d.Status = appsv1.DeploymentStatus{Replicas: *d.Spec.Replicas, ReadyReplicas: available, AvailableReplicas: available, ObservedGeneration: 1}
	if _, err := c.AppsV1().Deployments(ns).UpdateStatus(ctx, d, metav1.UpdateOptions{}); err != nil {
		return err
	}
	state, err := json.Marshal(edgev2alpha1.AssociatedState{PodPhases: phases})
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{edgev2alpha1.AssociatedStateAnnotation: string(state)}}})
	if err != nil {
		return err
	}
	_, err = c.AppsV1().Deployments(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

func expr(s string) *edgev2alpha1.Expression { e := edgev2alpha1.Expression(s); return &e }

// TestStatusReturnAndSummaries writes status into mailbox copies as syncers
// would, and checks the singleton status, the executing count and the
// CombinedStatus summaries in the WDS.
func TestStatusReturnAndSummaries(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	edge1 := syncerKube(t, s, mb1, strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge1")))
	edge2 := syncerKube(t, s, mb2, strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge2")))
	w := in("wds1")

	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	web := webDeployment("app", "web")
	web.Spec.Replicas = ptr.To[int32](3)
	require.NoError(t, c.Create(w, web))
	require.NoError(t, c.Create(w, webDeployment("app", "special")))
	for _, sc := range []*edgev2alpha1.StatusCollector{
		{ObjectMeta: metav1.ObjectMeta{Name: "available"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
			CombinedFields: []edgev2alpha1.NamedAggregator{
				{Name: "available", Type: edgev2alpha1.AggregationSum, Subject: expr("returned.status.availableReplicas")},
				{Name: "clusters", Type: edgev2alpha1.AggregationCount},
				{Name: "running", Type: edgev2alpha1.AggregationSum, Subject: expr("returned.associated.podPhases.Running")},
				{Name: "pending", Type: edgev2alpha1.AggregationSum, Subject: expr("returned.associated.podPhases.Pending")},
			}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "not-available"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
			Filter: expr("!has(returned.status.availableReplicas) || returned.status.availableReplicas < obj.spec.replicas"),
			Select: []edgev2alpha1.NamedExpression{{Name: "cluster", Def: "inventory.name"}}}},
	} {
		require.NoError(t, c.Create(w, sc))
	}
	// A bad expression is refused (statuscollector_cost_test.go has more);
	// the placement below names it all the same.
	refused := c.Create(w, &edgev2alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "broken"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
		Select: []edgev2alpha1.NamedExpression{{Name: "x", Def: "this is not CEL ("}}}})
	require.True(t, apierrors.IsInvalid(refused), "a bad expression is refused: %v", refused)
	apps := ptr.To("apps")
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "common"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync: []edgev2alpha1.DownsyncClause{{APIGroup: apps, Resources: []string{"deployments"}, Namespaces: []string{"app"}, ObjectNames: []string{"web"},
			StatusCollectors: []string{"available", "not-available", "broken"}}},
	}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "special"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors:          []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}},
		WantSingletonReportedState: true,
		Downsync:                   []edgev2alpha1.DownsyncClause{{APIGroup: apps, Resources: []string{"deployments"}, Namespaces: []string{"app"}, ObjectNames: []string{"special"}}},
	}}))

	// Good expressions are reported so on their StatusCollector.
	eventually(t, 30*time.Second, func() (bool, error) {
		sc := &edgev2alpha1.StatusCollector{}
		if err := c.Get(w, client.ObjectKey{Name: "available"}, sc); err != nil {
			return false, err
		}
		cond := meta.FindStatusCondition(sc.Status.Conditions, edgev2alpha1.StatusCollectorReady)
		return cond != nil && cond.Status == metav1.ConditionTrue && cond.Reason == "Valid", nil
	}, "the available StatusCollector to be reported valid")

	report(t, edge1, mb1, "app", "web", 2, map[string]int64{"Running": 2, "Pending": 1})
	report(t, edge2, mb2, "app", "web", 3, map[string]int64{"Running": 3})
	report(t, edge2, mb2, "app", "special", 2, map[string]int64{"Running": 2})

	// The common Deployment runs on two clusters: summaries, no singleton.
	// Each edge wrote once: the summary follows those writes, however
	// they interleave with the summarizer's own (a CombinedStatus made
	// from the first report and not in its cache yet when the second
	// comes is compared again, not left behind).
	var got map[string]string
	eventually(t, 30*time.Second, func() (bool, error) {
		cs := &edgev2alpha1.CombinedStatus{}
		if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "common.deployments.web"}, cs); err != nil {
			return false, err
		}
		got = map[string]string{}
		for _, r := range cs.Results {
			data, _ := json.Marshal(r)
			got[r.Name] = string(data)
		}
		return got["available"] == `{"name":"available","columnNames":["available","clusters","running","pending"],"rows":[{"columns":[5,2,5,1]}]}` &&
			got["not-available"] == `{"name":"not-available","columnNames":["cluster"],"rows":[{"columns":["edge1"]}]}` &&
			len(cs.Results) == 2, nil
	}, "the CombinedStatus of the common Deployment (last seen: %v)", &got)
	wdsWeb := &appsv1.Deployment{}
	require.NoError(t, c.Get(w, client.ObjectKey{Namespace: "app", Name: "web"}, wdsWeb))
	require.Zero(t, wdsWeb.Status.AvailableReplicas, "with two destinations, .status is not overwritten")
	require.NotContains(t, wdsWeb.Labels, edgev2alpha1.ExecutingCountLabel)

	// The special Deployment runs on one cluster: its status is the edge's.
	eventually(t, 30*time.Second, func() (bool, error) {
		d := &appsv1.Deployment{}
		if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "special"}, d); err != nil {
			return false, err
		}
		return d.Status.AvailableReplicas == 2 && d.Status.ReadyReplicas == 2 && d.Labels[edgev2alpha1.ExecutingCountLabel] == "1", nil
	}, "the singleton status and executing count of the special Deployment")

	// Summaries follow new reports.
	report(t, edge1, mb1, "app", "web", 3, map[string]int64{"Running": 3})
	eventually(t, 30*time.Second, func() (bool, error) {
		cs := &edgev2alpha1.CombinedStatus{}
		if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "common.deployments.web"}, cs); err != nil {
			return false, err
		}
		for _, r := range cs.Results {
			if r.Name == "not-available" {
				return len(r.Rows) == 0, nil
			}
		}
		return false, nil
	}, "the not-available list to empty")

	// Deleting the object removes its summaries.
	require.NoError(t, c.Delete(w, wdsWeb))
	eventually(t, 30*time.Second, func() (bool, error) {
		err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "common.deployments.web"}, &edgev2alpha1.CombinedStatus{})
		return err != nil, nil
	}, "the CombinedStatus of a deleted object to go")
}
