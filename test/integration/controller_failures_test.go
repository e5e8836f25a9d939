// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"encoding/json"
	"fmt"
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

// TestMalformedAssociatedStateShowsOnPlacement has a syncer write an
// associated-state annotation that is not JSON (admission lets a syncer
// write that annotation of its copies): the placement's StatusReturned
// condition says so, naming the object, the SyncTarget and the error, and
// clears when the syncer writes a good one.
func TestMalformedAssociatedStateShowsOnPlacement(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb2 := mailboxOf(t, c, "inv1", "edge2")
	edge2 := syncerKube(t, s, mb2, strings.TrimSpace(mustCLI(t, s, "token", "create", "--sync-target", "inv1/edge2")))
	w := in("wds1")

	require.NoError(t, c.Create(w, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}))
	require.NoError(t, c.Create(w, webDeployment("app", "web")))
	require.NoError(t, c.Create(w, &edgev2alpha1.StatusCollector{ObjectMeta: metav1.ObjectMeta{Name: "running"}, Spec: edgev2alpha1.StatusCollectorSpec{Limit: 10,
		CombinedFields: []edgev2alpha1.NamedAggregator{{Name: "running", Type: edgev2alpha1.AggregationSum, Subject: expr("returned.associated.podPhases.Running")}}}}))
	require.NoError(t, c.Create(w, &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"tier": "special"}}},
		Downsync: []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To("apps"), Resources: []string{"deployments"}, Namespaces: []string{"app"},
			ObjectNames: []string{"web"}, StatusCollectors: []string{"running"}}},
	}}))
	waitReturned := func(status metav1.ConditionStatus, reason string, contains ...string) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			ep := &edgev2alpha1.EdgePlacement{}
			if err := c.Get(w, client.ObjectKey{Name: "web"}, ep); err != nil {
				return false, err
			}
			cond := meta.FindStatusCondition(ep.Status.Conditions, "StatusReturned")
			if cond == nil {
				return false, fmt.Errorf("no StatusReturned condition; conditions: %+v", ep.Status.Conditions)
			}
			ok := cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == ep.Generation
			for _, s := range contains {
				ok = ok && strings.Contains(cond.Message, s)
			}
			if !ok {
				return false, fmt.Errorf("have %s %s %q", cond.Status, cond.Reason, cond.Message)
			}
			return true, nil
		}, "StatusReturned=%s %s", status, reason)
	}
	// A placement that names StatusCollectors gets the condition at once.
	waitReturned(metav1.ConditionTrue, "Returned")

	setAssociated := func(value string) {
		t.Helper()
		waitCopy(t, edge2, "app", "web")
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{edgev2alpha1.AssociatedStateAnnotation: value}}})
		require.NoError(t, err)
		_, err = edge2.AppsV1().Deployments("app").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{})
		require.NoError(t, err, "a syncer may write the associated-state annotation of its copies")
	}
	// More than the server keeps for a copy is refused, with why.
	for key, most := range map[string]int{edgev2alpha1.SyncErrorAnnotation: edgev2alpha1.MaxSyncErrorLength,
		edgev2alpha1.AssociatedStateAnnotation: edgev2alpha1.MaxAssociatedStateLength} {
		waitCopy(t, edge2, "app", "web")
		patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: strings.Repeat("x", most+1)}}})
		require.NoError(t, err)
		_, err = edge2.AppsV1().Deployments("app").Patch(context.Background(), "web", types.MergePatchType, patch, metav1.PatchOptions{})
		require.True(t, apierrors.IsForbidden(err), "%s of %d bytes: %v", key, most+1, err)
		require.ErrorContains(t, err, fmt.Sprintf("annotation %s of deployments \"web\" is %d bytes, more than the %d a syncer may write", key, most+1, most))
	}
	// So is a status longer than the server keeps for a copy; the copy's
	// status is otherwise the syncer's to write.
	for size, allowed := range map[int]bool{edgev2alpha1.MaxCopyStatusLength: true, edgev2alpha1.MaxCopyStatusLength + 1: false} {
		eventually(t, 30*time.Second, func() (bool, error) {
			cp, err := edge2.AppsV1().Deployments("app").Get(context.Background(), "web", metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			// A condition whose message makes the status exactly size bytes.
			cp.Status = appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{Type: "Big", Status: "True"}}}
			data, err := json.Marshal(cp.Status)
			require.NoError(t, err)
			cp.Status.Conditions[0].Message = strings.Repeat("x", size-len(data)-len(`,"message":""`))
			data, err = json.Marshal(cp.Status)
			require.NoError(t, err)
			require.Len(t, data, size)
			_, err = edge2.AppsV1().Deployments("app").UpdateStatus(context.Background(), cp, metav1.UpdateOptions{})
			if apierrors.IsConflict(err) {
				return false, err
			}
			if allowed {
				require.NoError(t, err, "a status of %d bytes", size)
			} else {
				require.True(t, apierrors.IsForbidden(err), "a status of %d bytes: %v", size, err)
				require.ErrorContains(t, err, fmt.Sprintf("the status of deployments \"web\" is %d bytes in JSON, more than the %d a syncer may write", size, edgev2alpha1.MaxCopyStatusLength))
			}
			return true, nil
		}, "a status of %d bytes written or refused", size)
	}
	setAssociated(`{"podPhases": {"Running": 2}`) // not JSON
	waitReturned(metav1.ConditionFalse, "InvalidAssociatedState",
		"deployments.apps app/web", "SyncTarget edge2", edgev2alpha1.AssociatedStateAnnotation, "unexpected end of JSON input")

	setAssociated(`{"podPhases": {"Running": 2}}`)
	waitReturned(metav1.ConditionTrue, "Returned")
	// And the summary reads the good one.
	eventually(t, 30*time.Second, func() (bool, error) {
		cs := &edgev2alpha1.CombinedStatus{}
		if err := c.Get(w, client.ObjectKey{Namespace: "app", Name: "web.deployments.web"}, cs); err != nil {
			return false, err
		}
		data, _ := json.Marshal(cs.Results)
		return string(data) == `[{"name":"running","columnNames":["running"],"rows":[{"columns":[2]}]}]`, fmt.Errorf("have %s", data)
	}, "the summary of the good associated state")
}

// waitCopy waits until a Deployment's copy is in the mailbox of the
// syncer whose client is c.
func waitCopy(t *testing.T, c kubernetes.Interface, ns, name string) {
	t.Helper()
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := c.AppsV1().Deployments(ns).Get(context.Background(), name, metav1.GetOptions{})
		return err == nil, err
	}, "the copy of %s/%s", ns, name)
}
