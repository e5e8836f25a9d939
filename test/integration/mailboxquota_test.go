// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/server"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestHostileEdgeIsBoundedInItsMailbox plays an edge whose token is stolen:
// with upsync clauses that select any name in any namespace, it creates
// namespaces and objects in its mailbox as fast as it can. The server
// stops it at --mailbox-object-limit per resource, with an error naming
// the limit; the server's own copies are not bounded; a delete makes room
// again; another edge's mailbox is counted on its own.
func TestHostileEdgeIsBoundedInItsMailbox(t *testing.T) {
	const limit = 12
	s := harness.StartInProcessWith(t, "", func(o *server.Options) { o.MailboxObjectLimit = limit })
	c := edgeClient(t, s)
	ctx := context.Background()
	createEdgeSpaces(t, s)
	_, tok1 := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge1", "--inventory-space", "inv1", "--labels", "env=prod"))
	_, tok2 := joinCommand(t, mustCLI(t, s, "synctarget", "create", "edge2", "--inventory-space", "inv1", "--labels", "env=prod"))
	mb1, mb2 := mailboxOf(t, c, "inv1", "edge1"), mailboxOf(t, c, "inv1", "edge2")

	wds := kube(t, s, "wds1")
	_, err := wds.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	placed := func(from, to int) {
		for i := from; i < to; i++ {
			_, err := wds.CoreV1().ConfigMaps("app").Create(ctx, configMap("app", fmt.Sprintf("placed-%02d", i), "v"), metav1.CreateOptions{})
			require.NoError(t, err)
		}
	}
	placed(0, 6)
	require.NoError(t, c.Create(in("wds1"), &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "everything-up"}, Spec: edgev2alpha1.EdgePlacementSpec{
		LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"env": "prod"}}},
		Downsync:          []edgev2alpha1.DownsyncClause{{APIGroup: ptr.To(""), Resources: []string{"configmaps"}, Namespaces: []string{"app"}}},
		Upsync:            []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"configmaps"}}},
	}}))
	admin := kube(t, s, mb1)
	copies := func(mailbox string) int {
		list, err := kube(t, s, mailbox).CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: edgev2alpha1.PlacementCopyLabel + "=true"})
		require.NoError(t, err)
		return len(list.Items)
	}
	eventually(t, 30*time.Second, func() (bool, error) { return copies(mb1) == 6, nil }, "the 6 copies in %s", mb1)

	hostile := syncerKube(t, s, mb1, tok1.String())
	eventually(t, 30*time.Second, func() (bool, error) {
		_, err := hostile.CoreV1().Namespaces().Create(ctx, upsyncedNamespace("flood-00"), metav1.CreateOptions{})
		return err == nil, nil
	}, "the syncer to upsync once the SyncerConfig allows it")

	// Namespaces: up to the limit, counting those the server made.
	created, err := flood(ctx, limit+5, func(i int) error {
		_, err := hostile.CoreV1().Namespaces().Create(ctx, upsyncedNamespace(fmt.Sprintf("flood-%02d", i+1)), metav1.CreateOptions{})
		return err
	})
	requireQuotaRefusal(t, err, mb1, limit, "namespaces")
	namespaces, err := admin.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, namespaces.Items, limit, "the mailbox's namespaces stop at the limit (%d created by the syncer)", created+1)

	// ConfigMaps: the 6 copies count; the syncer gets the rest.
	all := func() int {
		list, err := admin.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
		require.NoError(t, err)
		return len(list.Items)
	}
	before := all()
	require.Less(t, before, limit)
	created, err = flood(ctx, limit+5, func(i int) error {
		_, err := hostile.CoreV1().ConfigMaps("flood-00").Create(ctx, upsyncedConfigMap("flood-00", fmt.Sprintf("up-%02d", i)), metav1.CreateOptions{})
		return err
	})
	requireQuotaRefusal(t, err, mb1, limit, "configmaps")
	require.Equal(t, limit-before, created, "the syncer creates until the mailbox holds %d", limit)
	require.Equal(t, limit, all())

	// Its updates still go through; a delete makes room for one more.
	cm, err := hostile.CoreV1().ConfigMaps("flood-00").Get(ctx, "up-00", metav1.GetOptions{})
	require.NoError(t, err)
	cm.Data = map[string]string{"v": "updated at the edge"}
	_, err = hostile.CoreV1().ConfigMaps("flood-00").Update(ctx, cm, metav1.UpdateOptions{})
	require.NoError(t, err, "an update at the limit")
	require.NoError(t, hostile.CoreV1().ConfigMaps("flood-00").Delete(ctx, "up-00", metav1.DeleteOptions{}))
	_, err = hostile.CoreV1().ConfigMaps("flood-00").Create(ctx, upsyncedConfigMap("flood-00", "after-delete"), metav1.CreateOptions{})
	require.NoError(t, err, "a delete made room")

	// The server's copies are not bounded: placing more goes past the limit.
	placed(6, 10)
	eventually(t, 30*time.Second, func() (bool, error) { return copies(mb1) == 10, nil }, "all 10 copies in %s, past the limit", mb1)
	require.Greater(t, all(), limit)

	// The other edge's mailbox is counted on its own.
	eventually(t, 30*time.Second, func() (bool, error) { return copies(mb2) == 10, nil }, "the 10 copies in %s", mb2)
	other := syncerKube(t, s, mb2, tok2.String())
	_, err = other.CoreV1().Namespaces().Create(ctx, upsyncedNamespace("reports"), metav1.CreateOptions{})
	require.NoError(t, err, "another mailbox's namespaces")
}

// flood calls create up to n times and stops at its first error: it
// returns how many creates succeeded and that error.
func flood(ctx context.Context, n int, create func(i int) error) (int, error) {
	for i := range n {
		if err := create(i); err != nil {
			return i, err
		}
		if ctx.Err() != nil {
			return i, ctx.Err()
		}
	}
	return n, nil
}

func requireQuotaRefusal(t *testing.T, err error, mailbox string, limit int, resource string) {
	t.Helper()
	require.Error(t, err, "the syncer created %s past the limit", resource)
	require.True(t, apierrors.IsForbidden(err), "refused as forbidden: %v", err)
	require.ErrorContains(t, err, fmt.Sprintf("mailbox %q already holds %d %s", mailbox, limit, resource))
	require.ErrorContains(t, err, fmt.Sprintf("--mailbox-object-limit %d", limit))
}

func upsyncedNamespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{edgev2alpha1.UpsyncedLabel: "true"}}}
}

func upsyncedConfigMap(ns, name string) *corev1.ConfigMap {
	cm := configMap(ns, name, "from the edge")
	cm.Labels = map[string]string{edgev2alpha1.UpsyncedLabel: "true"}
	return cm
}
