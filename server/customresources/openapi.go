// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"fmt"
	"slices"
	"strings"

	apiextensionshelpers "k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// OpenAPIV3Of builds the OpenAPI v3 document of each group version a
// space's CRDs serve (what /openapi/v3/apis/GROUP/VERSION answers), as the
// apiextensions server's OpenAPI v3 controller builds a cluster's: each
// established CRD's served versions through the upstream builder, merged
// per group version (WithSpaceDocuments serves it).
func OpenAPIV3Of(crds []*apiextensionsv1.CustomResourceDefinition, opts builder.Options) (map[metav1.GroupVersion]*spec3.OpenAPI, error) {
	crds = slices.Clone(crds)
	slices.SortFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	specs := map[metav1.GroupVersion][]*spec3.OpenAPI{}
	for _, crd := range crds {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			opts.V2 = false
			s, err := builder.BuildOpenAPIV3(crd, v.Name, opts)
			if err != nil {
				return nil, fmt.Errorf("the OpenAPI document of %s, version %s: %w", crd.Name, v.Name, err)
			}
			gv := metav1.GroupVersion{Group: crd.Spec.Group, Version: v.Name}
			specs[gv] = append(specs[gv], s)
		}
	}
	out := make(map[metav1.GroupVersion]*spec3.OpenAPI, len(specs))
	for gv, s := range specs {
		merged, err := builder.MergeSpecsV3(s...)
		if err != nil {
			return nil, fmt.Errorf("merging the OpenAPI documents of %s: %w", gv, err)
		}
		out[gv] = merged
	}
	return out, nil
}

// OpenAPIV2Of builds the definitions, parameters and paths that a space's
// CRDs add to /openapi/v2, as the apiextensions server's OpenAPI v2
// controller builds a cluster's: each established CRD's served versions
// through the upstream builder in v2 (opts.V2 is set), their defaults
// pruned, merged per CRD and then across CRDs without a check for
// conflicts (a space's names are judged within it, as upstream's naming
// controller judges a cluster's). The document has no info or version of
// its own: it is published merged into the server's document, with
// builder.MergeSpecs(served, spaces), which keeps the served document's
// paths and definitions where the space's collide and renames the
// space's colliding definitions (NAME_v2), as upstream merges CRDs into
// the static document.
func OpenAPIV2Of(crds []*apiextensionsv1.CustomResourceDefinition, opts builder.Options) (*spec.Swagger, error) {
	crds = slices.Clone(crds)
	slices.SortFunc(crds, func(a, b *apiextensionsv1.CustomResourceDefinition) int { return strings.Compare(a.Name, b.Name) })
	opts.V2 = true
	var specs []*spec.Swagger
	for _, crd := range crds {
		if !apiextensionshelpers.IsCRDConditionTrue(crd, apiextensionsv1.Established) {
			continue
		}
		merged := &spec.Swagger{}
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			s, err := builder.BuildOpenAPIV2(crd, v.Name, opts)
			if err != nil {
				return nil, fmt.Errorf("the OpenAPI v2 document of %s, version %s: %w", crd.Name, v.Name, err)
			}
			// Pruned as the static document is, so that the definitions
			// every CRD shares (ObjectMeta and the like) merge into it
			// without a rename.
			s.Definitions = handler.PruneDefaults(s.Definitions)
			if merged, err = builder.MergeSpecs(merged, s); err != nil {
				return nil, fmt.Errorf("merging the OpenAPI v2 documents of %s: %w", crd.Name, err)
			}
		}
		specs = append(specs, merged)
	}
	out, err := builder.MergeSpecs(&spec.Swagger{}, specs...)
	if err != nil {
		return nil, fmt.Errorf("merging the OpenAPI v2 documents of a space's CRDs: %w", err)
	}
	return out, nil
}
