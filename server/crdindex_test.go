// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// TestCRDsBySpace: the CRD cache's index finds the CRDs bound to a space,
// with or without those every space serves, and follows a CRD's bindings
// as they change; before the cache is there, it says so.
func TestCRDsBySpace(t *testing.T) {
	crd := func(name, bound string) *apiextensionsv1.CustomResourceDefinition {
		return &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{spaces.BoundAnnotation: bound}}}
	}
	x := &crdIndex{}
	_, err := x.servedBy("team-a", true)
	require.Error(t, err, "before the cache")

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{crdsBySpace: crdSpaces})
	x.bySpace.Store(&indexer)
	for _, c := range []*apiextensionsv1.CustomResourceDefinition{
		crd("widgets.a.example", "team-a"),
		crd("gadgets.shared.example", "team-a,team-b"),
		crd("synctargets.edge.kubestellar.io", spaces.AllSpaces),
		crd("others.b.example", "team-b"),
	} {
		require.NoError(t, indexer.Add(c))
	}
	names := func(space string, all bool) []string {
		crds, err := x.servedBy(space, all)
		require.NoError(t, err)
		var out []string
		for _, c := range crds {
			out = append(out, c.Name)
		}
		slices.Sort(out)
		return out
	}
	require.Equal(t, []string{"gadgets.shared.example", "widgets.a.example"}, names("team-a", false))
	require.Equal(t, []string{"gadgets.shared.example", "synctargets.edge.kubestellar.io", "widgets.a.example"}, names("team-a", true))
	require.Equal(t, []string{"synctargets.edge.kubestellar.io"}, names("team-c", true))

	require.NoError(t, indexer.Update(crd("gadgets.shared.example", "team-b")))
	require.Equal(t, []string{"widgets.a.example"}, names("team-a", false), "unbound from team-a")
}
