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
	"k8s.io/kube-openapi/pkg/spec3"
)

// OpenAPIV3Of builds the OpenAPI v3 document of each group version a
// space's CRDs serve (what /openapi/v3/apis/GROUP/VERSION answers), as the
// apiextensions server's OpenAPI v3 controller builds a cluster's: each
// established CRD's served versions through the upstream builder, merged
// per group version (work in progress, issue 52 slice 2: not served yet).
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
