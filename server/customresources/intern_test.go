// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// TestSpecsAreShared: equal specs in many spaces share their schemas;
// another spec keeps its own; a spec goes when its last CRD does.
func TestSpecsAreShared(t *testing.T) {
	s := NewSpecs()
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, space := range []string{"a", "b", "c"} {
		crds = append(crds, s.Intern(widgets(space, "object")))
	}
	other := s.Intern(widgets("d", "string"))
	require.Equal(t, 2, s.Len())
	schema := func(crd *apiextensionsv1.CustomResourceDefinition) *apiextensionsv1.JSONSchemaProps {
		return crd.Spec.Versions[0].Schema.OpenAPIV3Schema
	}
	require.Same(t, schema(crds[0]), schema(crds[1]), "one schema for equal specs")
	require.Same(t, schema(crds[0]), schema(crds[2]))
	require.NotSame(t, schema(crds[0]), schema(other))
	require.Equal(t, "string", schema(other).Properties["spec"].Type)

	for _, crd := range crds {
		s.Forget(crd)
	}
	require.Equal(t, 1, s.Len(), "the shared spec went with its last CRD")
	s.Forget(other)
	require.Zero(t, s.Len())
}
