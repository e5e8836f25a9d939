package integration

import (
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/harness"
)

// upsyncFromEdge creates (or updates) in a mailbox what a syncer upsyncs.
func upsyncFromEdge(t *testing.T, c client.Client, mailbox, ns, name, value string) {
	t.Helper()
	ctx := in(mailbox)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		require.Contains(t, err.Error(), "already exists")
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"edge.kubestellar.io/upsynced": "true"}},
		Data: map[string]string{"value": value}}
	if err := c.Create(ctx, cm); err != nil {
		existing := &corev1.ConfigMap{}
		require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(cm), existing))
		existing.Data = cm.Data
		require.NoError(t, c.Update(ctx, existing))
	}
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
	createSpace(t, s, "inv1")
	createSpace(t, s, "wds1")
	inventory(t, c, "inv1")
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "reports"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Upsync:            []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}, Namespaces: []string{"reports"}}},
	}}))
	upsyncFromEdge(t, c, mb1, "reports", "report", "from-edge1")
	upsyncFromEdge(t, c, mb2, "reports", "report", "from-edge2")
	upsyncFromEdge(t, c, mb2, "elsewhere", "ignored", "not selected")

	wait := func(want ...string) {
		t.Helper()
		eventually(t, 30*time.Second, func() (bool, error) {
			return strings.Join(upsynced(t, c, "wds1", "reports"), ",") == strings.Join(want, ","), nil
		}, "upsynced objects %v (have %v)", want, upsynced(t, c, "wds1", "reports"))
	}
	wait("report-edge1=from-edge1@inv1/edge1", "report-edge2=from-edge2@inv1/edge2")
	err := c.Get(in("wds1"), client.ObjectKey{Namespace: "elsewhere", Name: "ignored-edge2"}, &corev1.ConfigMap{})
	require.Error(t, err, "objects no upsync clause selects stay at the edge")

	upsyncFromEdge(t, c, mb1, "reports", "report", "changed")
	wait("report-edge1=changed@inv1/edge1", "report-edge2=from-edge2@inv1/edge2")

	require.NoError(t, c.Delete(in(mb2), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "report", Namespace: "reports"}}))
	wait("report-edge1=changed@inv1/edge1")

	// Upsynced objects never become downsync objects: nothing of edge1's
	// report reaches edge2's mailbox.
	cms := &corev1.ConfigMapList{}
	require.NoError(t, c.List(in(mb2), cms, client.InNamespace("reports")))
	require.Empty(t, cms.Items)
}
