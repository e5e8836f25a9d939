// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/internal/provenance"
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

// oneCRD is a storage that holds one CRD and updates it as the API
// server's storage does: tryUpdate on a copy of what is stored.
type oneCRD struct {
	storage.Interface
	stored *apiextensions.CustomResourceDefinition
}

func (s *oneCRD) GuaranteedUpdate(_ context.Context, _ string, destination runtime.Object, _ bool,
	_ *storage.Preconditions, tryUpdate storage.UpdateFunc, _ runtime.Object) error {
	out, _, err := tryUpdate(s.stored.DeepCopy(), storage.ResponseMeta{})
	if err != nil {
		return err
	}
	s.stored = out.(*apiextensions.CustomResourceDefinition).DeepCopy()
	s.stored.DeepCopyInto(destination.(*apiextensions.CustomResourceDefinition))
	return nil
}

// TestCRDServedInEverySpace: a CRD bound to every space (the server's own,
// or one made before CRDs were per space) is changed or deleted only in
// the root space: a space's owner who changes its definition or
// finalizers, or deletes it, would do so for every space. What is the
// space's alone (labels) it may change.
func TestCRDServedInEverySpace(t *testing.T) {
	crd := &apiextensions.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", Annotations: map[string]string{BoundAnnotation: AllSpaces}},
		Spec: apiextensions.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensions.NamespaceScoped,
			Names:    apiextensions.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextensions.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true}}},
	}
	owner := &user.DefaultInfo{Name: "alice"}
	admin := provenance.Vouch(&user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	update := func(space string, u user.Info, change func(*apiextensions.CustomResourceDefinition)) (*oneCRD, error) {
		inner := &oneCRD{stored: crd.DeepCopy()}
		s := DecorateCRDs(inner, ServerView)
		ctx := genericapirequest.WithUser(WithSpace(context.Background(), space), u)
		err := s.GuaranteedUpdate(ctx, "/customresourcedefinitions/widgets.example.com", &apiextensions.CustomResourceDefinition{}, false, nil,
			func(in runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
				out := in.(*apiextensions.CustomResourceDefinition).DeepCopy()
				change(out)
				return out, nil, nil
			}, nil)
		return inner, err
	}
	changes := map[string]func(*apiextensions.CustomResourceDefinition){
		"a new version": func(c *apiextensions.CustomResourceDefinition) {
			c.Spec.Versions = append(c.Spec.Versions, apiextensions.CustomResourceDefinitionVersion{Name: "v2", Served: true})
		},
		"a finalizer": func(c *apiextensions.CustomResourceDefinition) {
			c.Finalizers = append(c.Finalizers, "example.com/keep")
		},
		"its deletion": func(c *apiextensions.CustomResourceDefinition) {
			now := metav1.Now()
			c.DeletionTimestamp = &now
		},
	}
	for what, change := range changes {
		inner, err := update("team-a", owner, change)
		require.True(t, apierrors.IsForbidden(err), "%s in team-a: %v", what, err)
		require.ErrorContains(t, err, "this CRD is served in every space")
		require.Equal(t, crd.Spec, inner.stored.Spec, "%s in team-a changed nothing", what)
	}
	inner, err := update(Root, admin, changes["a new version"])
	require.NoError(t, err, "the admin in the root space")
	require.Len(t, inner.stored.Spec.Versions, 2)
	inner, err = update("team-a", owner, func(c *apiextensions.CustomResourceDefinition) { c.Labels = map[string]string{"team": "a"} })
	require.NoError(t, err, "a label is not the definition")
	require.Equal(t, AllSpaces, inner.stored.Annotations[BoundAnnotation], "still bound to every space")
}
