// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/server/customresources"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestSpaceCRDCacheMoves: what each CRD serves by is kept as it changes,
// and a change that takes a space's objects to or from a definition is
// told (moved), while a CRD that starts serving is not.
func TestSpaceCRDCacheMoves(t *testing.T) {
	type move struct {
		ids      []string
		revision string
	}
	var moves []move
	c := &spaceCRDCache{specs: customresources.NewSpecs(), servedBy: map[string]string{}, servers: map[string]map[string]bool{},
		indexer: cache.NewIndexer(spaces.KeyFunc, nil)}
	c.moved = func(ids []string, revision string) { moves = append(moves, move{ids, revision}) }

	crd := func(space, rv string, accepted bool, field string) *apiextensionsv1.CustomResourceDefinition {
		x := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", ResourceVersion: rv, Annotations: map[string]string{spaces.Annotation: space}},
			Spec:       apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: field}}}
		if accepted {
			x.Status.AcceptedNames = x.Spec.Names
			x.Status.Conditions = []apiextensionsv1.CustomResourceDefinitionCondition{{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue}}
		}
		return x
	}
	made := crd("s1", "1", false, "Widget")
	c.OnAdd(made, false)
	require.Empty(t, c.servedIn("s1", made.Name), "names not accepted: serves nothing")
	accepted := crd("s1", "2", true, "Widget")
	c.OnUpdate(made, accepted)
	idA := customresources.Identity(accepted)
	require.Equal(t, idA, c.servedIn("s1", made.Name))
	require.Empty(t, moves, "a CRD that starts serving joins: no objects of its own yet")
	key, ok := c.servingOne(idA)
	require.True(t, ok)
	require.Equal(t, spaces.Key("s1", "", made.Name), key)

	c.OnUpdate(accepted, crd("s1", "3", true, "Widget"))
	require.Empty(t, moves, "a status update that changes no definition")

	changed := crd("s1", "4", true, "Gadget")
	c.OnUpdate(crd("s1", "3", true, "Widget"), changed)
	idB := customresources.Identity(changed)
	require.Equal(t, []move{{[]string{idA, idB}, "4"}}, moves, "a move: both definitions' reads list again")
	_, ok = c.servingOne(idA)
	require.False(t, ok, "nobody serves A any more")

	moves = nil
	refused := crd("s1", "5", true, "Gadget")
	refused.Status.Conditions[0].Status = apiextensionsv1.ConditionFalse
	c.OnUpdate(changed, refused)
	require.Equal(t, []move{{[]string{idB}, "5"}}, moves, "names refused: it serves nothing, its objects stay")
	moves = nil
	c.OnUpdate(refused, changed)
	require.Equal(t, []move{{[]string{idB}, "4"}}, moves, "accepted again, with its objects")

	moves = nil
	c.OnDelete(changed)
	require.Empty(t, moves, "a CRD deleted has had its objects purged first")
	require.Empty(t, c.servedIn("s1", made.Name))
	_, ok = c.servingOne(idB)
	require.False(t, ok)
	require.Empty(t, c.servers)
	require.Empty(t, c.servedBy)

	// A CRD in the cache but not yet handed to OnAdd is asked itself.
	late := crd("s2", "9", true, "Widget")
	require.NoError(t, c.indexer.Add(late))
	require.Equal(t, customresources.Identity(late), c.servedIn("s2", late.Name))
}
