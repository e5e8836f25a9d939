// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// A copy's record made from the typed object the registry holds is the
// record made from the same object converted to unstructured, as the
// in-process lists and watches converted it before: for kinds with and
// without a status, set or empty, deleted or not.
func TestTypedCopyIsTheUnstructuredOnesRecord(t *testing.T) {
	deleted := metav1.NewTime(time.Date(2026, 11, 27, 10, 0, 0, 0, time.FixedZone("x", 3600)))
	meta := func(space string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: "web", Namespace: "apps", UID: "2e9bb380-ec68-4fd9-b651-bf2cab732357", ResourceVersion: "42", Generation: 3,
			Labels: map[string]string{edgev2alpha1.PlacementCopyLabel: "true", "app": "web", "edge.kubestellar.io/x": "y"},
			Annotations: map[string]string{spaces.Annotation: space, "edge.kubestellar.io/content-hash": "abc", "other.io/z": "w",
				edgev2alpha1.SourceSpaceAnnotation: "wds1"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}}}
	}
	deletedMeta := meta("inv-mb-1")
	deletedMeta.DeletionTimestamp = &deleted
	deletedMeta.UID = "not-a-uuid"
	deletedMeta.Namespace = ""
	for _, tc := range []struct {
		obj runtime.Object
		gvk schema.GroupVersionKind
	}{
		{&corev1.ConfigMap{ObjectMeta: meta("inv-mb-1"), Data: map[string]string{"k": "v"}}, corev1.SchemeGroupVersion.WithKind("ConfigMap")},
		{&corev1.Secret{ObjectMeta: meta("inv-mb-1"), Data: map[string][]byte{"k": []byte("v")}}, corev1.SchemeGroupVersion.WithKind("Secret")},
		{&appsv1.Deployment{ObjectMeta: meta("inv-mb-1"), Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
			Status: appsv1.DeploymentStatus{ReadyReplicas: 3, ObservedGeneration: 3, Conditions: []appsv1.DeploymentCondition{
				{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, LastUpdateTime: deleted, Reason: "r"}}}},
			appsv1.SchemeGroupVersion.WithKind("Deployment")},
		{&appsv1.Deployment{ObjectMeta: meta("inv-mb-1")}, appsv1.SchemeGroupVersion.WithKind("Deployment")},
		{&corev1.Service{ObjectMeta: deletedMeta, Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{
			Ingress: []corev1.LoadBalancerIngress{{IP: "10.0.0.1"}}}}}, corev1.SchemeGroupVersion.WithKind("Service")},
		{&batchv1.Job{ObjectMeta: meta("inv-mb-2"), Status: batchv1.JobStatus{Succeeded: 1, StartTime: &deleted}}, batchv1.SchemeGroupVersion.WithKind("Job")},
	} {
		content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tc.obj)
		require.NoError(t, err)
		u := &unstructured.Unstructured{Object: content}
		u.SetGroupVersionKind(tc.gvk)
		want := newCopy(u)

		got, ok := typedCopy(tc.obj, tc.gvk)
		require.True(t, ok, "%s", tc.gvk.Kind)
		require.Equal(t, want, got, "%s: the record from the typed object", tc.gvk.Kind)
		require.Equal(t, Expand(want), Expand(got), "%s: and what readers see of it", tc.gvk.Kind)
	}
}

// typedTrimmer makes records of the translator's copies in mailboxes only,
// as trimmer does, and declines the rest (they are made unstructured and
// cached whole).
func TestTypedTrimmerTakesCopiesInMailboxes(t *testing.T) {
	gvk := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	cm := func(space string, copyLabel bool) *corev1.ConfigMap {
		c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "n",
			Annotations: map[string]string{spaces.Annotation: space}}}
		if copyLabel {
			c.Labels = map[string]string{edgev2alpha1.PlacementCopyLabel: "true"}
		}
		return c
	}
	require.Nil(t, typedTrimmer(nil), "nothing typed is taken unless copies are trimmed")
	trim := typedTrimmer(func(space string) bool { return space == "inv-mb-1" })
	got, ok := trim(cm("inv-mb-1", true), gvk)
	require.True(t, ok)
	require.Equal(t, spaces.Key("inv-mb-1", "n", "a"), got.(*Copy).CacheKey())
	for _, declined := range []*corev1.ConfigMap{cm("inv-mb-1", false), cm("wds1", true), cm("", true)} {
		_, ok := trim(declined, gvk)
		require.False(t, ok, "%v", declined.ObjectMeta)
	}
	_, ok = trim(&metav1.Status{}, gvk)
	require.False(t, ok, "not an object with metadata")
}
