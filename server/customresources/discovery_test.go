// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func established(crd *apiextensionsv1.CustomResourceDefinition, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd.Spec.Versions = nil
	for i, v := range versions {
		crd.Spec.Versions = append(crd.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: v, Served: true, Storage: i == 0})
	}
	return crd
}

// TestDiscoveryOf: a space's CRDs in discovery as upstream puts a
// cluster's: groups sorted, versions newest first (the preferred one
// first), resources per version with their subresources, aggregated the
// same; a terminating CRD without its write verbs; a CRD not established,
// or a version not served, left out.
func TestDiscoveryOf(t *testing.T) {
	ws := established(widgets("a", "object"), "v1", "v2", "v1beta1")
	ws.Spec.Versions[1].Subresources = &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{},
		Scale: &apiextensionsv1.CustomResourceSubresourceScale{SpecReplicasPath: ".spec.replicas", StatusReplicasPath: ".status.replicas"}}
	gadgets := established(widgets("a", "object"), "v1")
	gadgets.Name, gadgets.Status.AcceptedNames.Plural, gadgets.Status.AcceptedNames.Kind = "gadgets.example.com", "gadgets", "Gadget"
	gadgets.Status.Conditions = append(gadgets.Status.Conditions, apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue})
	other := established(widgets("a", "object"), "v1alpha1")
	other.Spec.Group, other.Name = "another.example.org", "widgets.another.example.org"
	installing := established(widgets("a", "object"), "v9")
	installing.Spec.Group, installing.Name = "installing.example.org", "widgets.installing.example.org"
	installing.Status.Conditions = nil
	unserved := established(widgets("a", "object"), "v1")
	unserved.Spec.Group, unserved.Name = "unserved.example.org", "widgets.unserved.example.org"
	unserved.Spec.Versions[0].Served = false

	d := DiscoveryOf([]*apiextensionsv1.CustomResourceDefinition{ws, gadgets, other, installing, unserved})
	require.Len(t, d.Groups, 2)
	require.Equal(t, "another.example.org", d.Groups[0].Name)
	ex := d.Groups[1]
	require.Equal(t, "example.com", ex.Name)
	var versions []string
	for _, v := range ex.Versions {
		versions = append(versions, v.Version)
	}
	require.Equal(t, []string{"v2", "v1", "v1beta1"}, versions)
	require.Equal(t, "example.com/v2", ex.PreferredVersion.GroupVersion)

	v1 := d.Resources[metav1.GroupVersion{Group: "example.com", Version: "v1"}]
	require.Len(t, v1.APIResources, 2)
	require.Equal(t, "gadgets", v1.APIResources[0].Name)
	require.Equal(t, metav1.Verbs{"delete", "deletecollection", "get", "list", "watch"}, v1.APIResources[0].Verbs, "terminating: no create, update or patch")
	require.Equal(t, "widgets", v1.APIResources[1].Name)
	require.True(t, v1.APIResources[1].Namespaced)
	require.NotEmpty(t, v1.APIResources[1].StorageVersionHash)
	v2 := d.Resources[metav1.GroupVersion{Group: "example.com", Version: "v2"}]
	var names []string
	for _, r := range v2.APIResources {
		names = append(names, r.Name)
	}
	require.Equal(t, []string{"widgets", "widgets/status", "widgets/scale"}, names)
	require.Equal(t, "Scale", v2.APIResources[2].Kind)

	require.Len(t, d.Aggregated, 2)
	agg := d.Aggregated[1]
	require.Equal(t, "example.com", agg.Name)
	require.Equal(t, "v2", agg.Versions[0].Version)
	require.Len(t, agg.Versions[0].Resources, 1)
	require.Len(t, agg.Versions[0].Resources[0].Subresources, 2)
	require.Len(t, agg.Versions[1].Resources, 2, "v1: gadgets and widgets")
	require.NotContains(t, d.Resources, metav1.GroupVersion{Group: "installing.example.org", Version: "v9"})
	require.NotContains(t, d.Resources, metav1.GroupVersion{Group: "unserved.example.org", Version: "v1"})
}
