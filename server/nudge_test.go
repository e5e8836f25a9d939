// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestNudgeCRD: a CRD no controller has looked at is written again, so
// that its controllers get an event; its spec and other annotations stay.
func TestNudgeCRD(t *testing.T) {
	crd := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "combinedstatuses.edge.kubestellar.io",
		Annotations: map[string]string{"keep": "me"}, ResourceVersion: "7"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "edge.kubestellar.io"}}
	client := fake.NewClientset(crd).ApiextensionsV1().CustomResourceDefinitions()
	require.Equal(t, noConditions, crdConditions(client, crd.Name))

	nudgeCRD(t.Context(), client, crd.Name)
	got, err := client.Get(t.Context(), crd.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, got.Annotations[nudgedAnnotation])
	require.Equal(t, "me", got.Annotations["keep"])
	require.Equal(t, "edge.kubestellar.io", got.Spec.Group)

	// A CRD that is gone is no error to start-up: it says so and goes on.
	nudgeCRD(t.Context(), client, "gone.example.com")
}
