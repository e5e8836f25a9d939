// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/tools/cache"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// storeWith returns a Store whose caches hold objs (each with its space
// annotation set by in).
func storeWith(t testing.TB, objs ...metav1.Object) *Store {
	t.Helper()
	s := NewStore()
	namespaced := cache.Indexers{bySpace: spaceIndex, bySpaceNamespace: spaceNamespaceIndex}
	clusterScoped := cache.Indexers{bySpace: spaceIndex}
	c := &caches{
		roles:               cache.NewIndexer(spaces.KeyFunc, namespaced),
		roleBindings:        cache.NewIndexer(spaces.KeyFunc, namespaced),
		clusterRoles:        cache.NewIndexer(spaces.KeyFunc, clusterScoped),
		clusterRoleBindings: cache.NewIndexer(spaces.KeyFunc, clusterScoped),
	}
	for _, o := range objs {
		var err error
		switch o.(type) {
		case *rbacv1.Role:
			err = c.roles.Add(o)
		case *rbacv1.RoleBinding:
			err = c.roleBindings.Add(o)
		case *rbacv1.ClusterRole:
			err = c.clusterRoles.Add(o)
		case *rbacv1.ClusterRoleBinding:
			err = c.clusterRoleBindings.Add(o)
		}
		require.NoError(t, err)
	}
	s.caches.Store(c)
	return s
}

func in(space string, o metav1.Object) metav1.Object {
	o.SetAnnotations(map[string]string{spaces.Annotation: space})
	return o
}

func roleBinding(ns, name, role, kind, subject string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{{Kind: kind, APIGroup: rbacv1.GroupName, Name: subject}}}
}

func ask(u user.Info, verb, resource, ns string) authorizer.AttributesRecord {
	return authorizer.AttributesRecord{User: u, Verb: verb, Resource: resource, Namespace: ns, APIVersion: "v1", ResourceRequest: true}
}

func TestDefaultsAggregateTransitively(t *testing.T) {
	s := NewStore()
	ctx := spaces.WithSpace(context.Background(), "team-a")
	edit, err := s.GetClusterRole(ctx, "edit")
	require.NoError(t, err)
	allows := func(role *rbacv1.ClusterRole, verb, resource string) bool {
		for _, r := range role.Rules {
			if (containsOrStar(r.Verbs, verb)) && containsOrStar(r.Resources, resource) && containsOrStar(r.APIGroups, "") {
				return true
			}
		}
		return false
	}
	require.True(t, allows(edit, "create", "configmaps"), "edit's own rules")
	require.True(t, allows(edit, "get", "configmaps"), "view's rules, through view's aggregation into edit")
	require.False(t, allows(edit, "create", "roles"))
	admin, err := s.GetClusterRole(ctx, "admin")
	require.NoError(t, err)
	require.True(t, allows(admin, "get", "configmaps"), "admin aggregates edit, which aggregates view")
	_, err = s.GetClusterRole(ctx, "no-such-role")
	require.Error(t, err)
}

func containsOrStar(list []string, s string) bool {
	for _, x := range list {
		if x == s || x == "*" {
			return true
		}
	}
	return false
}

// TestAuthorizerPerSpace: a space's bindings govern that space alone;
// nobody unnamed there gets in; the wildcard and mailboxes are refused.
func TestAuthorizerPerSpace(t *testing.T) {
	reports := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "reports-viewer",
		Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
		Rules: []rbacv1.PolicyRule{{Verbs: []string{"get"}, APIGroups: []string{""}, Resources: []string{"reports"}}}}
	store := storeWith(t,
		in("team-a", roleBinding("default", "alice-edit", "edit", rbacv1.UserKind, "alice")),
		in("team-a", roleBinding("default", "viewers", "view", rbacv1.GroupKind, "auditors")),
		in("team-b", reports),
		in("team-b", roleBinding("default", "carol-view", "view", rbacv1.UserKind, "carol")),
		in("mb-1", roleBinding("default", "alice-edit", "edit", rbacv1.UserKind, "alice")),
	)
	types := map[string]string{"mb-1": tenancyv1alpha1.SpaceTypeMailbox}
	az := NewAuthorizer(store, func(space string) string { return types[space] })
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	dave := &user.DefaultInfo{Name: "dave", Groups: []string{"auditors", user.AllAuthenticated}}
	carol := &user.DefaultInfo{Name: "carol", Groups: []string{user.AllAuthenticated}}
	for _, tc := range []struct {
		desc   string
		space  string
		attrs  authorizer.AttributesRecord
		allow  bool
		reason string
	}{
		{"edit grants writes in its namespace", "team-a", ask(alice, "create", "configmaps", "default"), true, ""},
		{"and reads, through view", "team-a", ask(alice, "list", "configmaps", "default"), true, ""},
		{"not in another namespace", "team-a", ask(alice, "list", "configmaps", "kube-system"), false, `no RBAC rule of space "team-a"`},
		{"not RBAC", "team-a", ask(alice, "create", "rolebindings", "default"), false, `no RBAC rule`},
		{"a group binding", "team-a", ask(dave, "get", "pods", "default"), true, ""},
		{"view is read-only", "team-a", ask(dave, "delete", "pods", "default"), false, `no RBAC rule`},
		{"another space: not a member", "team-b", ask(alice, "list", "configmaps", "default"), false, `user "alice" has no access to space "team-b"`},
		{"not even discovery", "team-b", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/api"}, false, "has no access"},
		{"a member gets discovery", "team-a", authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/api"}, true, ""},
		{"root: discovery for every user", spaces.Root, authorizer.AttributesRecord{User: alice, Verb: "get", Path: "/apis"}, true, ""},
		{"root: nothing more", spaces.Root, ask(alice, "list", "secrets", "kube-system"), false, "no RBAC rule"},
		{"the wildcard", spaces.Wildcard, ask(alice, "list", "configmaps", ""), false, "may not use the wildcard space"},
		{"a mailbox, even with a binding there", "mb-1", ask(alice, "list", "configmaps", "default"), false, "may not use mailbox space"},
		{"a space's own aggregated role", "team-b", ask(carol, "get", "reports", "default"), true, ""},
		{"stays in that space", "team-a", ask(dave, "get", "reports", "default"), false, "no RBAC rule"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := spaces.WithSpace(context.Background(), tc.space)
			decision, reason, err := az.Authorize(ctx, tc.attrs)
			require.NoError(t, err)
			if tc.allow {
				require.Equal(t, authorizer.DecisionAllow, decision, reason)
				return
			}
			require.Equal(t, authorizer.DecisionDeny, decision, "never no-opinion")
			require.Contains(t, reason, tc.reason)
		})
	}

	// can-i --list follows the same gate.
	res, _, _, err := az.RulesFor(spaces.WithSpace(context.Background(), "team-b"), alice, "default")
	require.NoError(t, err)
	require.Empty(t, res)
	res, _, _, err = az.RulesFor(spaces.WithSpace(context.Background(), "team-a"), alice, "default")
	require.NoError(t, err)
	var all []string
	for _, r := range res {
		all = append(all, strings.Join(r.GetResources(), ","))
	}
	require.Contains(t, strings.Join(all, " "), "configmaps")
}

// TestNoStoreKnowsOnlyDefaults: before the caches sync, nobody but the
// defaults' subjects gets anything.
func TestNoStoreKnowsOnlyDefaults(t *testing.T) {
	az := NewAuthorizer(NewStore(), nil)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	decision, _, err := az.Authorize(spaces.WithSpace(context.Background(), "team-a"), ask(alice, "get", "configmaps", "default"))
	require.NoError(t, err)
	require.Equal(t, authorizer.DecisionDeny, decision)
}

// TestKubestellarRoles: edit and admin cover placing workloads; view reads
// what comes back; the inventory admin manages SyncTargets and Locations
// and nothing of a WDS; server-written kinds stay the server's.
func TestKubestellarRoles(t *testing.T) {
	store := storeWith(t,
		in("wds1", roleBinding("", "author", WorkloadAuthorRole, rbacv1.UserKind, "wendy")),
		in("wds1", roleBinding("", "viewer", "view", rbacv1.UserKind, "vic")),
		in("inv1", roleBinding("", "inventory", InventoryAdminRole, rbacv1.UserKind, "ivan")),
	)
	// Cluster-wide grants in a space are ClusterRoleBindings; the helper
	// made RoleBindings in namespace "": turn them into ClusterRoleBindings.
	c := store.caches.Load()
	for _, o := range c.roleBindings.List() {
		rb := o.(*rbacv1.RoleBinding)
		require.NoError(t, c.roleBindings.Delete(rb))
		require.NoError(t, c.clusterRoleBindings.Add(&rbacv1.ClusterRoleBinding{ObjectMeta: rb.ObjectMeta, RoleRef: rb.RoleRef, Subjects: rb.Subjects}))
	}
	az := NewAuthorizer(store, nil)
	wendy := &user.DefaultInfo{Name: "wendy"}
	vic := &user.DefaultInfo{Name: "vic"}
	ivan := &user.DefaultInfo{Name: "ivan"}
	edge := func(u user.Info, verb, resource, ns string) authorizer.AttributesRecord {
		a := ask(u, verb, resource, ns)
		a.APIGroup = "edge.kubestellar.io"
		return a
	}
	for _, tc := range []struct {
		space string
		attrs authorizer.AttributesRecord
		allow bool
	}{
		{"wds1", edge(wendy, "create", "edgeplacements", ""), true},
		{"wds1", edge(wendy, "update", "customizers", ""), true},
		{"wds1", func() authorizer.AttributesRecord {
			a := ask(wendy, "create", "deployments", "default")
			a.APIGroup = "apps"
			return a
		}(), true},
		{"wds1", ask(wendy, "create", "configmaps", "default"), true},
		{"wds1", edge(wendy, "list", "combinedstatuses", "default"), true},
		{"wds1", edge(wendy, "create", "combinedstatuses", "default"), false},
		{"wds1", edge(wendy, "update", "singleplacementslices", ""), false},
		{"wds1", edge(vic, "get", "edgeplacements", ""), true},
		{"wds1", edge(vic, "create", "edgeplacements", ""), false},
		{"inv1", edge(ivan, "create", "synctargets", ""), true},
		{"inv1", edge(ivan, "delete", "locations", ""), true},
		{"inv1", ask(ivan, "create", "configmaps", "default"), false},
		{"inv1", func() authorizer.AttributesRecord {
			a := edge(ivan, "update", "synctargets", "")
			a.Subresource = "status"
			return a
		}(), false},
		{"inv1", func() authorizer.AttributesRecord {
			a := edge(ivan, "get", "synctargets", "")
			a.Subresource = "status"
			return a
		}(), true},
	} {
		ctx := spaces.WithSpace(context.Background(), tc.space)
		decision, reason, err := az.Authorize(ctx, tc.attrs)
		require.NoError(t, err)
		want := authorizer.DecisionDeny
		if tc.allow {
			want = authorizer.DecisionAllow
		}
		require.Equal(t, want, decision, "%s %s %s/%s in %s: %s", tc.attrs.User.GetName(), tc.attrs.Verb, tc.attrs.APIGroup, tc.attrs.Resource, tc.space, reason)
	}
}

// TestVisibleSpaces: everyone lists the Spaces they may use; root-space
// RBAC that grants list shows them all.
func TestVisibleSpaces(t *testing.T) {
	store := storeWith(t,
		in("team-a", roleBinding("default", "alice-edit", "edit", rbacv1.UserKind, "alice")),
		in(spaces.Root, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "space-lister"},
			Rules: []rbacv1.PolicyRule{{Verbs: []string{"list"}, APIGroups: []string{tenancyv1alpha1.GroupName}, Resources: []string{"spaces"}}}}),
		in(spaces.Root, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "ops-list"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "space-lister"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "ops"}}}),
	)
	az := NewAuthorizer(store, nil)
	alice := &user.DefaultInfo{Name: "alice", Groups: []string{user.AllAuthenticated}}
	ops := &user.DefaultInfo{Name: "ops", Groups: []string{user.AllAuthenticated}}
	anonymous := &user.DefaultInfo{Name: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	root := spaces.WithSpace(context.Background(), spaces.Root)
	space := func(u user.Info, verb, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: tenancyv1alpha1.GroupName, APIVersion: "v1alpha1",
			Resource: "spaces", Name: name, ResourceRequest: true}
	}
	for _, tc := range []struct {
		attrs authorizer.AttributesRecord
		allow bool
	}{
		{space(alice, "list", ""), true},
		{space(alice, "watch", ""), true},
		{space(alice, "get", "team-a"), true},
		{space(alice, "get", "team-b"), false},
		{space(alice, "delete", "team-a"), false},
		{space(anonymous, "list", ""), false},
	} {
		d, reason, err := az.Authorize(root, tc.attrs)
		require.NoError(t, err)
		require.Equal(t, tc.allow, d == authorizer.DecisionAllow, "%s %s %s: %s", tc.attrs.User.GetName(), tc.attrs.Verb, tc.attrs.Name, reason)
	}
	sees := az.VisibleSpaces(genericapirequest.WithUser(root, alice))
	require.NotNil(t, sees)
	require.True(t, sees("team-a"))
	require.False(t, sees("team-b"))
	require.Nil(t, az.VisibleSpaces(genericapirequest.WithUser(root, ops)), "RBAC that grants list shows every space")
	require.Nil(t, az.VisibleSpaces(genericapirequest.WithUser(root, &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})))
}
