// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
)

func TestBindings(t *testing.T) {
	b := ParseBindings("b, a,,b")
	require.Equal(t, "a,b", b.String())
	require.True(t, b.Has("a") && b.Has("b") && !b.Has("c"))
	require.True(t, b.Shared())
	require.Equal(t, "a", b.Without("b").String())
	require.False(t, b.Without("b").Shared())
	require.Equal(t, "a,b,c", b.With("c").String())
	require.Equal(t, "a,b", b.String(), "With and Without copy")
	all := BindingsOf(nil)
	require.True(t, all.All() && all.Has("anything"), "a CRD stored before bindings is served everywhere")
	require.True(t, all.Without("x").Has("x"), "all stays all")
	require.Empty(t, ParseBindings("").String())
	require.False(t, ParseBindings("").Has(""))
}

func TestSpaceEvent(t *testing.T) {
	crd := func(before, now string) *apiextensions.CustomResourceDefinition {
		return &apiextensions.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com",
			Annotations: map[string]string{boundBeforeAnnotation: before, BoundAnnotation: now, "kept": "yes"}}}
	}
	for _, tc := range []struct {
		name        string
		in          watch.EventType
		before, now string
		out         watch.EventType // "" for no event
	}{
		{"created here", watch.Added, "", "a", watch.Added},
		{"created elsewhere", watch.Added, "", "b", ""},
		{"bound here", watch.Modified, "b", "a,b", watch.Added},
		{"changed, bound here", watch.Modified, "a,b", "a,b", watch.Modified},
		{"unbound here", watch.Modified, "a,b", "b", watch.Deleted},
		{"changed elsewhere", watch.Modified, "b", "b,c", ""},
		{"deleted here", watch.Deleted, "a", "a", watch.Deleted},
		{"deleted elsewhere", watch.Deleted, "b", "b", ""},
		{"served everywhere", watch.Modified, "*", "*", watch.Modified},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obj := crd(tc.before, tc.now)
			e, keep := spaceEvent("a", watch.Event{Type: tc.in, Object: obj})
			if tc.out == "" {
				require.False(t, keep)
				return
			}
			require.True(t, keep)
			require.Equal(t, tc.out, e.Type)
			require.Equal(t, map[string]string{"kept": "yes"}, obj.Annotations, "the bindings are hidden")
		})
	}
	bookmark := watch.Event{Type: watch.Bookmark, Object: &apiextensions.CustomResourceDefinition{}}
	e, keep := spaceEvent("a", bookmark)
	require.True(t, keep)
	require.Equal(t, watch.Bookmark, e.Type)
}

func TestSpecDiff(t *testing.T) {
	a := &apiextensions.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensions.NamespaceScoped}
	b := a.DeepCopy()
	require.Empty(t, specDiff(a, b))
	b.Scope = apiextensions.ClusterScoped
	b.Names.Kind = "Widget"
	require.Equal(t, []string{"spec.names", "spec.scope"}, specDiff(a, b))
}
