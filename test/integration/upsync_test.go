// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/harness"
)

// upsyncFromEdge creates (or updates) in a mailbox what a syncer upsyncs,
// with the syncer's client c, as the syncer does: a namespace labelled as
// upsynced if missing, then the object. It retries until the server knows
// the upsync clauses (the syncer, too, upsyncs only what its SyncerConfig
// names) and returns the last error.
func upsyncFromEdge(t *testing.T, c client.Client, mailbox, ns, name, value string) error {
	t.Helper()
	ctx := in(mailbox)
	upsyncedLabel := map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
	var last error
	_ = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		last = c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: upsyncedLabel}})
		if last != nil && !apierrors.IsAlreadyExists(last) {
			return false, nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: upsyncedLabel}, Data: map[string]string{"value": value}}
		if last = c.Create(ctx, cm); apierrors.IsAlreadyExists(last) {
			existing := &corev1.ConfigMap{}
			if last = c.Get(ctx, client.ObjectKeyFromObject(cm), existing); last == nil {
				existing.Data = cm.Data
				last = c.Update(ctx, existing)
			}
		}
		return last == nil, nil
	})
	return last
}

// upsynced lists the upsynced ConfigMaps of a WDS namespace as name=value@source.
func upsynced(t *testing.T, c client.Client, wds, ns string) []string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	require.NoError(t, c.List(in(wds), list, client.InNamespace(ns), client.MatchingLabels{"edge.kubestellar.io/upsynced": "true"}))
	var out []string
	for _, cm := range list.Items {
		out = append(out, cm.Name+"="+cm.Data["value"]+"@"+cm.Annotations[edgev2alpha1.UpsyncedFromAnnotation])
	}
	sort.Strings(out)
	return out
}

// TestUpsyncKeepsClustersApart upsyncs objects of the same name from two
// clusters into one WDS, then changes and removes them at the edge.
func TestUpsyncKeepsClustersApart(t *testing.T) {
	s := harness.StartInProcess(t, "")
	c := edgeClient(t, s)
	createEdgeSpaces(t, s)
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "reports"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Upsync:            []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}, Namespaces: []string{"reports"}}},
	}}))
	edge1, edge2 := syncerClient(t, s, "inv1", "edge1"), syncerClient(t, s, "inv1", "edge2")
	require.NoError(t, upsyncFromEdge(t, edge1, mb1, "reports", "report", "from-edge1"))
	require.NoError(t, upsyncFromEdge(t, edge2, mb2, "reports", "report", "from-edge2"))
	// What no upsync clause selects, the syncer may not write at all.
	err := upsyncFromEdge(t, edge2, mb2, "elsewhere", "ignored", "not selected")
	require.True(t, apierrors.IsForbidden(err), "an upsync no clause selects: %v", err)
	require.ErrorContains(t, err, "no upsync clause")
	// Nor into another syncer's mailbox.
	err = upsyncFromEdge(t, edge1, mb2, "reports", "intruder", "from edge1")
	require.True(t, apierrors.IsForbidden(err), "edge1 writing edge2's mailbox: %v", err)

	wait := func(want ...string) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			return strings.Join(upsynced(t, c, "wds1", "reports"), ",") == strings.Join(want, ","), nil
		}, "upsynced objects %v (have %v)", want, upsynced(t, c, "wds1", "reports"))
	}
	wait("report-edge1=from-edge1@inv1/edge1", "report-edge2=from-edge2@inv1/edge2")
	err = c.Get(in("wds1"), client.ObjectKey{Namespace: "elsewhere", Name: "ignored-edge2"}, &corev1.ConfigMap{})
	require.True(t, apierrors.IsNotFound(err), "objects no upsync clause selects stay at the edge: %v", err)

	require.NoError(t, upsyncFromEdge(t, edge1, mb1, "reports", "report", "changed"))
	wait("report-edge1=changed@inv1/edge1", "report-edge2=from-edge2@inv1/edge2")

	require.NoError(t, edge2.Delete(in(mb2), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "reports"}}))
	wait("report-edge1=changed@inv1/edge1")

	// Upsynced objects never become downsync objects: nothing of edge1's
	// report reaches edge2's mailbox.
	cms := &corev1.ConfigMapList{}
	require.NoError(t, c.List(in(mb2), cms, client.InNamespace("reports")))
	require.Empty(t, cms.Items)
}
