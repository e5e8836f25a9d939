// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package namespacecontroller

import (
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubestellar/kubestellar/spaces"
)

// TestSlim: the cache keeps of a namespace its key and its deletion, and
// enqueue reads the same from it as from the whole namespace.
func TestSlim(t *testing.T) {
	now := metav1.Now()
	whole := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "u1", ResourceVersion: "9", DeletionTimestamp: &now,
			Labels:      map[string]string{"kubernetes.io/metadata.name": "app"},
			Annotations: map[string]string{spaces.Annotation: "team-a", "note": "x"}, Finalizers: []string{"f"}},
		Spec:   corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{corev1.FinalizerKubernetes}},
		Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating},
	}
	got, err := spaces.SlimNamespace(whole)
	require.NoError(t, err)
	ns := got.(*corev1.Namespace)
	require.Equal(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "u1", ResourceVersion: "9", DeletionTimestamp: &now,
		Annotations: map[string]string{spaces.Annotation: "team-a"}}}, ns)
	wantKey, err := spaces.KeyFunc(whole)
	require.NoError(t, err)
	key, err := spaces.KeyFunc(ns)
	require.NoError(t, err)
	require.Equal(t, wantKey, key)

	for _, obj := range []*corev1.Namespace{whole, ns} {
		c := &Controller{queue: newQueue()}
		c.enqueue(obj)
		require.Equal(t, 1, c.queue.Len())
	}
	live, err := spaces.SlimNamespace(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app", Annotations: map[string]string{spaces.Annotation: "team-a"}}})
	require.NoError(t, err)
	c := &Controller{queue: newQueue()}
	c.enqueue(live)
	require.Zero(t, c.queue.Len(), "a namespace not being deleted is not queued")
}
