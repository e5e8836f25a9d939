// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crossspace

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubestellar/kubestellar/spaces"
)

// Label and Annotation say what GetLabels and GetAnnotations say of one
// key, of unstructured, typed and Copy objects alike, and read an
// unstructured object's in place, allocating nothing.
func TestLabelAndAnnotationReadOneKey(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName("a")
	u.SetLabels(map[string]string{"kubestellar.io/l": "1", "other": "2"})
	u.SetAnnotations(map[string]string{spaces.Annotation: "mb", "kubestellar.io/a": "3"})
	typed := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: u.GetLabels(), Annotations: u.GetAnnotations()}}
	cp := newCopy(u)
	bare := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "b"}}}
	for _, obj := range []metav1.Object{u, typed, cp, bare} {
		for _, key := range []string{"kubestellar.io/l", "other", "missing"} {
			require.Equal(t, obj.GetLabels()[key], Label(obj, key), "%T label %s", obj, key)
		}
		for _, key := range []string{spaces.Annotation, "kubestellar.io/a", "missing"} {
			require.Equal(t, obj.GetAnnotations()[key], Annotation(obj, key), "%T annotation %s", obj, key)
		}
	}
	require.Equal(t, "mb", SpaceOf(u))
	require.Zero(t, testing.AllocsPerRun(10, func() {
		_ = Label(u, "kubestellar.io/l")
		_ = Annotation(u, "kubestellar.io/a")
		_ = SpaceOf(u)
	}), "an unstructured object's labels and annotations are read in place")
}
