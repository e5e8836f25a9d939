// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/spaces"
)

// storedRoles answers as a datastore holding roles would.
type storedRoles struct {
	storage.Interface
	roles []rbacv1.ClusterRole
}

func (s *storedRoles) Get(_ context.Context, key string, _ storage.GetOptions, obj runtime.Object) error {
	for _, r := range s.roles {
		if "/clusterroles/"+r.Name == key {
			*obj.(*rbacv1.ClusterRole) = r
			return nil
		}
	}
	return storage.NewKeyNotFoundError(key, 0)
}

func (s *storedRoles) GetList(_ context.Context, _ string, opts storage.ListOptions, list runtime.Object) error {
	out := list.(*rbacv1.ClusterRoleList)
	for _, r := range s.roles {
		if opts.Predicate.Label == nil || opts.Predicate.Label.Matches(labels.Set(r.Labels)) {
			out.Items = append(out.Items, r)
		}
	}
	return nil
}

func TestClusterRolesWithDefaults(t *testing.T) {
	own := rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "view", Annotations: map[string]string{spaces.Annotation: "team-a"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, Resources: []string{"pods"}}}}
	store := storeWith(t, own.DeepCopy())
	s := store.ClusterRolesWithDefaults(&storedRoles{roles: []rbacv1.ClusterRole{own}})
	teamA := spaces.WithSpace(context.Background(), "team-a")
	teamB := spaces.WithSpace(context.Background(), "team-b")

	got := &rbacv1.ClusterRole{}
	require.NoError(t, s.Get(teamB, "/clusterroles/edit", storage.GetOptions{}, got))
	require.Equal(t, "edit", got.Name)
	require.NotEmpty(t, got.Rules, "a default aggregated role shows its rules")
	require.NoError(t, s.Get(teamA, "/clusterroles/view", storage.GetOptions{}, got))
	require.Equal(t, own.Rules, got.Rules, "a space's own role replaces the default")
	err := s.Get(teamA, "/clusterroles/nonesuch", storage.GetOptions{}, got)
	require.True(t, storage.IsNotFound(err), "%v", err)

	list := &rbacv1.ClusterRoleList{}
	require.NoError(t, s.GetList(teamA, "/clusterroles", storage.ListOptions{Predicate: storage.Everything}, list))
	var names []string
	views := 0
	for _, r := range list.Items {
		names = append(names, r.Name)
		if r.Name == "view" {
			views++
		}
	}
	require.IsIncreasing(t, names)
	require.Subset(t, names, []string{"admin", "cluster-admin", "edit", "view"})
	require.Equal(t, 1, views, "the own role, not also the default")

	selected := &rbacv1.ClusterRoleList{}
	sel, err := labels.Parse("rbac.authorization.k8s.io/aggregate-to-admin=true")
	require.NoError(t, err)
	require.NoError(t, s.GetList(teamB, "/clusterroles", storage.ListOptions{Predicate: storage.SelectionPredicate{Label: sel}}, selected))
	require.NotEmpty(t, selected.Items)
	for _, r := range selected.Items {
		require.Equal(t, "true", r.Labels["rbac.authorization.k8s.io/aggregate-to-admin"], r.Name)
	}
	wild := &rbacv1.ClusterRoleList{}
	require.NoError(t, s.GetList(spaces.WithSpace(context.Background(), spaces.Wildcard), "/clusterroles", storage.ListOptions{}, wild))
	require.Len(t, wild.Items, 1, "the wildcard space lists what is stored")
}
