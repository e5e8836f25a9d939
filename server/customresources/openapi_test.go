// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOpenAPIV3Of: one document per served group version, with each
// CRD's own schema (two spaces' definitions of one name give two
// documents that differ as their schemas do), the paths of every CRD of
// the group version; nothing for a CRD not established.
func TestOpenAPIV3Of(t *testing.T) {
	withSchema := func(typ string) *apiextensionsv1.CustomResourceDefinition {
		crd := established(widgets("a", typ), "v1")
		crd.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
				Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: typ}}}}}}
		return crd
	}
	gadgets := withSchema("integer")
	gadgets.Name = "gadgets.example.com"
	gadgets.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Plural: "gadgets", Singular: "gadget", Kind: "Gadget", ListKind: "GadgetList"}
	gadgets.Status.AcceptedNames = gadgets.Spec.Names
	installing := withSchema("integer")
	installing.Spec.Group, installing.Name, installing.Status.Conditions = "installing.example.org", "widgets.installing.example.org", nil
	gv := metav1.GroupVersion{Group: "example.com", Version: "v1"}

	size := func(crds ...*apiextensionsv1.CustomResourceDefinition) (string, []string) {
		docs, err := OpenAPIV3Of(crds, builder.Options{})
		require.NoError(t, err)
		require.Len(t, docs, 1)
		doc := docs[gv]
		require.NotNil(t, doc)
		var paths []string
		for p := range doc.Paths.Paths {
			paths = append(paths, p)
		}
		s := doc.Components.Schemas["com.example.v1.Widget"]
		require.NotNil(t, s, "the Widget schema")
		return s.Properties["spec"].Properties["size"].Type[0], paths
	}
	typ, paths := size(withSchema("integer"), gadgets, installing)
	require.Equal(t, "integer", typ)
	require.Contains(t, paths, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
	require.Contains(t, paths, "/apis/example.com/v1/namespaces/{namespace}/gadgets/{name}")
	typ, _ = size(withSchema("string"))
	require.Equal(t, "string", typ, "another space's definition of the name, its own document")
}
