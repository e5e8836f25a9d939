// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crds embeds the CustomResourceDefinitions generated from ../ (by
// controller-gen, see hack/update-codegen.sh) that the server installs at start.
package crds

import (
	"embed"
	"fmt"
	"io/fs"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml
var manifests embed.FS

// All returns every embedded CRD.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	files, err := fs.Glob(manifests, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, f := range files {
		data, err := manifests.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("decoding embedded CRD %s: %w", f, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
