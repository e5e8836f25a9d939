// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package crdversion tells which version of a CRD's instances to read
// them at, for those (the syncer, the server's garbage sweep) that list
// the instances of CRDs they know only as unstructured objects.
package crdversion

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Served is the resource of a CRD's instances, in its storage version if
// that is served, else its first served one.
func Served(crd *unstructured.Unstructured) (schema.GroupVersionResource, error) {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	version := ""
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		served, _ := m["served"].(bool)
		storage, _ := m["storage"].(bool)
		if served && (version == "" || storage) {
			version = name
		}
	}
	if group == "" || plural == "" || version == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("CRD %s serves no version of its instances, so they cannot be listed", crd.GetName())
	}
	return schema.GroupVersionResource{Group: group, Version: version, Resource: plural}, nil
}
