// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/validation/spec"
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

// TestOpenAPIV2Of: the v2 definitions and paths of the served versions of
// established CRDs, each CRD's own schema; merged into the server's
// document as upstream merges CRDs into the static one, the definitions
// every CRD shares with the built-in kinds (ObjectMeta, Status,
// DeleteOptions...) are the server's, not renamed copies.
func TestOpenAPIV2Of(t *testing.T) {
	str := sized("b", "string")
	v1beta1 := sized("a", "integer")
	v1beta1.Spec.Versions = append(v1beta1.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1beta1", Served: true,
		Schema: v1beta1.Spec.Versions[0].Schema})
	v1beta1.Spec.Versions = append(v1beta1.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{Name: "v1alpha1", Served: false,
		Schema: v1beta1.Spec.Versions[0].Schema})
	installing := sized("a", "integer")
	installing.Spec.Group, installing.Name, installing.Status.Conditions = "installing.example.org", "widgets.installing.example.org", nil

	doc, err := OpenAPIV2Of([]*apiextensionsv1.CustomResourceDefinition{v1beta1, installing}, builder.Options{})
	require.NoError(t, err)
	require.Equal(t, "integer", doc.Definitions["com.example.v1.Widget"].Properties["spec"].Properties["size"].Type[0])
	require.Contains(t, doc.Definitions, "com.example.v1beta1.Widget")
	require.NotContains(t, doc.Definitions, "com.example.v1alpha1.Widget", "a version not served")
	require.Contains(t, doc.Paths.Paths, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
	require.Contains(t, doc.Paths.Paths, "/apis/example.com/v1beta1/namespaces/{namespace}/widgets")
	for p := range doc.Paths.Paths {
		require.NotContains(t, p, "installing", "a CRD not established")
	}
	require.Empty(t, doc.Info, "no info of its own: it is merged into the server's")

	other, err := OpenAPIV2Of([]*apiextensionsv1.CustomResourceDefinition{str}, builder.Options{})
	require.NoError(t, err)
	require.Equal(t, "string", other.Definitions["com.example.v1.Widget"].Properties["spec"].Properties["size"].Type[0],
		"another space's definition of the name, its own document")

	// Merged into the server's document, read back from its JSON as the
	// filter of a space reads it.
	var served spec.Swagger
	require.NoError(t, json.Unmarshal(servedOpenAPIV2(t), &served))
	require.Contains(t, served.Definitions, "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
	merged, err := builder.MergeSpecs(&served, doc)
	require.NoError(t, err)
	for name := range merged.Definitions {
		require.NotRegexp(t, `_v\d+$`, name, "a definition renamed: the space's differs from the server's")
	}
	require.Contains(t, merged.Definitions, "com.example.v1.Widget")
	require.Contains(t, merged.Definitions, "io.k8s.api.apps.v1.Deployment")
	metadata := merged.Definitions["com.example.v1.Widget"].Properties["metadata"]
	require.Equal(t, "#/definitions/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta", metadata.Ref.String())
}
