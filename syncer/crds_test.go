// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestWithoutServerCRDs: the syncer's cache of a mailbox's CRDs keeps only
// the name of the server's own CRDs (which no placement places), and every
// other CRD whole, but for its managed fields.
func TestWithoutServerCRDs(t *testing.T) {
	crd := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": "x", "versions": []any{"big schema"}}}}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		u.SetName(name)
		u.SetResourceVersion("7")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m"}})
		return u
	}
	for _, name := range []string{"synctargets.edge.kubestellar.io", "spaces.tenancy.kubestellar.io"} {
		got, err := withoutServerCRDs(crd(name))
		require.NoError(t, err)
		u := got.(*unstructured.Unstructured)
		require.Equal(t, name, u.GetName())
		require.Equal(t, "7", u.GetResourceVersion())
		require.Nil(t, u.Object["spec"], "%s: the server's own", name)
	}
	for _, name := range []string{"widgets.example.com", "certificates.cert-manager.io", "things.kubestellar.io.example.com"} {
		got, err := withoutServerCRDs(crd(name))
		require.NoError(t, err)
		u := got.(*unstructured.Unstructured)
		require.NotNil(t, u.Object["spec"], "%s: placed whole", name)
		require.Empty(t, u.GetManagedFields())
	}
}
