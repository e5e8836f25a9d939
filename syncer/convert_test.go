// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var deploymentsGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}

func mailboxCopy() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{
			"name": "web", "namespace": "common", "uid": "u1", "resourceVersion": "42", "generation": int64(3),
			"creationTimestamp": "2026-11-21T10:00:00Z", "managedFields": []any{map[string]any{"manager": "x"}},
			"labels": map[string]any{"app": "web", edgev2alpha1.PlacementCopyLabel: "true"},
			"annotations": map[string]any{
				"kubestellar.io/space":                 "inv1-mb-1",
				edgev2alpha1.SourceSpaceAnnotation:     "wds1",
				edgev2alpha1.PlacementsAnnotation:      "common",
				edgev2alpha1.AssociatedStateAnnotation: `{"podPhases":{"Running":2}}`,
				"edge.kubestellar.io/content-hash":     "abc",
				"example.com/keep":                     "yes",
			},
		},
		"spec":   map[string]any{"replicas": int64(2)},
		"status": map[string]any{"replicas": int64(2)},
	}}
}

func TestEdgeObject(t *testing.T) {
	d, err := edgeObject(mailboxCopy(), deploymentsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	require.Equal(t, objKey{GVR: deploymentsGVR, Namespace: "common", Name: "web"}, d.Key)
	meta := d.Object.Object["metadata"].(map[string]any)
	for _, f := range []string{"uid", "resourceVersion", "generation", "creationTimestamp", "managedFields"} {
		require.NotContains(t, meta, f)
	}
	require.NotContains(t, d.Object.Object, "status")
	require.Equal(t, map[string]string{"app": "web", edgev2alpha1.SyncerOwnerLabel: "edge1"}, d.Object.GetLabels())
	require.Equal(t, map[string]string{
		edgev2alpha1.SourceSpaceAnnotation: "wds1", "example.com/keep": "yes",
		SyncTargetAnnotation: "inv1/edge1", AppliedHashAnnotation: d.Hash,
	}, d.Object.GetAnnotations())
	require.False(t, d.CreateOnly)

	// What the syncer itself writes to the copy (status, the state of
	// descendants, sync errors) and server bookkeeping do not change the
	// hash; the content does.
	cp := mailboxCopy()
	cp.SetResourceVersion("43")
	cp.Object["status"] = map[string]any{"replicas": int64(3)}
	ann := cp.GetAnnotations()
	ann[edgev2alpha1.SyncErrorAnnotation] = "Conflict: x"
	cp.SetAnnotations(ann)
	same, err := edgeObject(cp, deploymentsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	require.Equal(t, d.Hash, same.Hash)
	cp.Object["spec"] = map[string]any{"replicas": int64(3)}
	changed, err := edgeObject(cp, deploymentsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	require.NotEqual(t, d.Hash, changed.Hash)

	cp = mailboxCopy()
	ann = cp.GetAnnotations()
	ann[edgev2alpha1.CreateOnlyAnnotation] = "true"
	cp.SetAnnotations(ann)
	createOnly, err := edgeObject(cp, deploymentsGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	require.True(t, createOnly.CreateOnly)
	require.NotContains(t, createOnly.Object.GetAnnotations(), edgev2alpha1.CreateOnlyAnnotation)
}

func TestEdgeNamespaceHasNoSpec(t *testing.T) {
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": "common"}, "spec": map[string]any{"finalizers": []any{"kubernetes"}}}}
	d, err := edgeObject(ns, namespacesGVR, "edge1", "inv1/edge1")
	require.NoError(t, err)
	require.NotContains(t, d.Object.Object, "spec")
}

func TestOwnerValue(t *testing.T) {
	require.Equal(t, "edge1", OwnerValue("inv1", "edge1"))
	long := strings.Repeat("a", 70)
	v := OwnerValue("inv1", long)
	require.True(t, strings.HasPrefix(v, "st-"))
	require.LessOrEqual(t, len(v), 63)
	require.NotEqual(t, v, OwnerValue("inv2", long), "the inventory space tells two long names apart")
	require.Equal(t, "edge1", OwnerValue("inv1", "edge1"))
}

func TestUpsyncObject(t *testing.T) {
	edge := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "report", "namespace": "ops", "uid": "u", "resourceVersion": "7",
			"labels": map[string]any{"a": "b"}, "annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}"}},
		"data": map[string]any{"k": "v"}}}
	up := upsyncObject(edge)
	require.Equal(t, map[string]string{"a": "b", UpsyncedLabel: "true"}, up.GetLabels())
	require.Empty(t, up.GetAnnotations())
	require.Empty(t, up.GetUID())
	require.Empty(t, up.GetResourceVersion())

	inMailbox := up.DeepCopy()
	inMailbox.SetResourceVersion("99")
	inMailbox.SetUID("other")
	inMailbox.SetAnnotations(map[string]string{"kubestellar.io/space": "mb"})
	require.True(t, sameUpsync(edge, inMailbox))
	edge.Object["data"] = map[string]any{"k": "changed"}
	require.False(t, sameUpsync(edge, inMailbox))
}

func TestUpsyncSelects(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	for _, tc := range []struct {
		desc   string
		clause edgev2alpha1.UpsyncClause
		ns     string
		name   string
		want   bool
	}{
		{"resource and namespace", edgev2alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"ops"}}, "ops", "x", true},
		{"other namespace", edgev2alpha1.UpsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"ops"}}, "dev", "x", false},
		{"other group", edgev2alpha1.UpsyncClause{APIGroup: "apps", Resources: []string{"configmaps"}}, "ops", "x", false},
		{"wildcard resource", edgev2alpha1.UpsyncClause{Resources: []string{"*"}}, "ops", "x", true},
		{"names", edgev2alpha1.UpsyncClause{Resources: []string{"configmaps"}, Names: []string{"y"}}, "ops", "x", false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.want, upsyncSelects(tc.clause, cm, tc.ns, tc.name))
		})
	}
}
