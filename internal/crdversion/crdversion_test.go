// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package crdversion

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestServed(t *testing.T) {
	crd := func(versions ...any) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "widgets.example.com"},
			"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets"}, "versions": versions}}}
	}
	v := func(name string, served, storage bool) any {
		return map[string]any{"name": name, "served": served, "storage": storage}
	}
	got, err := Served(crd(v("v1", true, false), v("v2", true, true), v("v3", true, false)))
	require.NoError(t, err)
	require.Equal(t, "v2", got.Version, "the storage version")
	got, err = Served(crd(v("v1", false, true), v("v2", true, false)))
	require.NoError(t, err)
	require.Equal(t, schema.GroupResource{Group: "example.com", Resource: "widgets"}, got.GroupResource())
	require.Equal(t, "v2", got.Version, "a served one when the storage version is not")
	_, err = Served(crd(v("v1", false, true)))
	require.ErrorContains(t, err, "serves no version")
}
