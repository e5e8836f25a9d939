// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rbac evaluates Kubernetes RBAC in each space: the Roles,
// RoleBindings, ClusterRoles and ClusterRoleBindings stored in a space
// govern that space alone, as a cluster's govern that cluster.
//
// The rule matching is Kubernetes' own (k8s.io/kubernetes' RBAC authorizer
// and rule resolver), fed by getters that read the space of the request
// from its context. Every space has the default ClusterRoles and
// ClusterRoleBindings of a new cluster (cluster-admin, admin, edit, view,
// system:basic-user, system:discovery...): they are served from code, built
// once per server, and cost nothing per space. A space's own ClusterRole of
// a default's name replaces the default there, and a space's ClusterRoles
// labelled for aggregation add their rules to the aggregated roles of that
// space only.
package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync/atomic"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac/bootstrappolicy"

	"github.com/kubestellar/kubestellar/spaces"
)

// Index names of the caches.
const (
	bySpace          = "space"
	bySpaceNamespace = "space-namespace"
)

func spaceIndex(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	return []string{m.GetAnnotations()[spaces.Annotation]}, nil
}

func spaceNamespaceIndex(obj any) ([]string, error) {
	m, err := metaOf(obj)
	if err != nil {
		return nil, err
	}
	return []string{m.GetAnnotations()[spaces.Annotation] + "/" + m.GetNamespace()}, nil
}

func metaOf(obj any) (metav1.Object, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, fmt.Errorf("%T has no object metadata", obj)
	}
	return m, nil
}

// Store holds the RBAC objects of every space, from caches across spaces,
// and the defaults every space has. Until Start has synced its caches it
// knows only the defaults.
type Store struct {
	defaults *defaults
	caches   atomic.Pointer[caches]
}

type caches struct {
	roles, roleBindings, clusterRoles, clusterRoleBindings cache.Indexer
}

// NewStore returns a Store with the defaults of a new cluster, and
// kubestellar's roles (kubestellarClusterRoles).
func NewStore() *Store {
	return &Store{defaults: newDefaults(append(bootstrappolicy.ClusterRoles(), kubestellarClusterRoles()...), bootstrappolicy.ClusterRoleBindings())}
}

// Start runs the caches until ctx is done, through loopback (a root-space
// client configuration with full privileges), and returns once they have
// synced.
func (s *Store) Start(ctx context.Context, loopback *rest.Config) error {
	kube, err := kubernetes.NewForConfig(spaces.ScopedConfig(loopback))
	if err != nil {
		return err
	}
	rbac := kube.RbacV1()
	wildcard := func(ctx context.Context) context.Context { return spaces.WithSpace(ctx, spaces.Wildcard) }
	type listWatch struct {
		list  func(context.Context, metav1.ListOptions) (runtime.Object, error)
		watch func(context.Context, metav1.ListOptions) (watch.Interface, error)
	}
	start := func(resource string, lw listWatch, obj runtime.Object, indexers cache.Indexers) (cache.Indexer, cache.InformerSynced, error) {
		indexer, controller := spaces.NewInformer(&cache.ListWatch{
			ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
				return lw.list(wildcard(ctx), o)
			},
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
				return lw.watch(wildcard(ctx), o)
			},
		}, obj, 0, cache.ResourceEventHandlerFuncs{})
		if err := indexer.AddIndexers(indexers); err != nil {
			return nil, nil, fmt.Errorf("%s cache: %w", resource, err)
		}
		go controller.RunWithContext(ctx)
		return indexer, controller.HasSynced, nil
	}
	namespaced := cache.Indexers{bySpace: spaceIndex, bySpaceNamespace: spaceNamespaceIndex}
	clusterScoped := cache.Indexers{bySpace: spaceIndex}
	c := &caches{}
	var synced [4]cache.InformerSynced
	if c.roles, synced[0], err = start("roles", listWatch{
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return rbac.Roles("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return rbac.Roles("").Watch(ctx, o)
		},
	}, &rbacv1.Role{}, namespaced); err != nil {
		return err
	}
	if c.roleBindings, synced[1], err = start("rolebindings", listWatch{
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return rbac.RoleBindings("").List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return rbac.RoleBindings("").Watch(ctx, o)
		},
	}, &rbacv1.RoleBinding{}, namespaced); err != nil {
		return err
	}
	if c.clusterRoles, synced[2], err = start("clusterroles", listWatch{
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return rbac.ClusterRoles().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return rbac.ClusterRoles().Watch(ctx, o)
		},
	}, &rbacv1.ClusterRole{}, clusterScoped); err != nil {
		return err
	}
	if c.clusterRoleBindings, synced[3], err = start("clusterrolebindings", listWatch{
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return rbac.ClusterRoleBindings().List(ctx, o)
		},
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return rbac.ClusterRoleBindings().Watch(ctx, o)
		},
	}, &rbacv1.ClusterRoleBinding{}, clusterScoped); err != nil {
		return err
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced[:]...) {
		return errors.New("the RBAC caches did not sync")
	}
	s.caches.Store(c)
	klog.FromContext(ctx).V(2).Info("RBAC of every space is served")
	return nil
}

// Ready tells whether the caches have synced.
func (s *Store) Ready() bool { return s.caches.Load() != nil }

var notFound = func(resource, name string) error {
	return apierrors.NewNotFound(schema.GroupResource{Group: rbacv1.GroupName, Resource: resource}, name)
}

// GetRole implements the rule resolver's RoleGetter for the space of ctx.
func (s *Store) GetRole(ctx context.Context, namespace, name string) (*rbacv1.Role, error) {
	c := s.caches.Load()
	if c == nil {
		return nil, notFound("roles", name)
	}
	obj, ok, err := c.roles.GetByKey(spaces.Key(spaces.SpaceOrRoot(ctx), namespace, name))
	if err != nil || !ok {
		return nil, notFound("roles", name)
	}
	return obj.(*rbacv1.Role), nil
}

// ListRoleBindings implements the rule resolver's RoleBindingLister for the
// space of ctx.
func (s *Store) ListRoleBindings(ctx context.Context, namespace string) ([]*rbacv1.RoleBinding, error) {
	c := s.caches.Load()
	if c == nil {
		return nil, nil
	}
	objs, err := c.roleBindings.ByIndex(bySpaceNamespace, spaces.SpaceOrRoot(ctx)+"/"+namespace)
	if err != nil {
		return nil, err
	}
	out := make([]*rbacv1.RoleBinding, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*rbacv1.RoleBinding))
	}
	return out, nil
}

// spaceClusterRoles returns the space's own ClusterRoles.
func (s *Store) spaceClusterRoles(space string) []*rbacv1.ClusterRole {
	c := s.caches.Load()
	if c == nil {
		return nil
	}
	objs, _ := c.clusterRoles.ByIndex(bySpace, space)
	out := make([]*rbacv1.ClusterRole, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.(*rbacv1.ClusterRole))
	}
	return out
}

// GetClusterRole implements the rule resolver's ClusterRoleGetter for the
// space of ctx: the space's own ClusterRole of that name, else the default
// one. An aggregated role (its own or the default) holds the rules of
// every ClusterRole of the space, its own or default, its selectors match.
func (s *Store) GetClusterRole(ctx context.Context, name string) (*rbacv1.ClusterRole, error) {
	space := spaces.SpaceOrRoot(ctx)
	own := s.spaceClusterRoles(space)
	var role *rbacv1.ClusterRole
	for _, r := range own {
		if r.Name == name {
			role = r
			break
		}
	}
	if role == nil {
		role = s.defaults.clusterRoles[name]
	}
	if role == nil {
		return nil, notFound("clusterroles", name)
	}
	if role.AggregationRule == nil {
		return role, nil
	}
	return s.aggregate(role, own)
}

// aggregate returns role with the rules of the ClusterRoles its selectors
// match (the space's own, and the defaults the space does not replace), as
// the cluster role aggregation controller would write them; aggregated
// roles it matches contribute their aggregated rules (edit holds view's).
func (s *Store) aggregate(role *rbacv1.ClusterRole, own []*rbacv1.ClusterRole) (*rbacv1.ClusterRole, error) {
	if len(own) == 0 && role == s.defaults.clusterRoles[role.Name] {
		return s.defaults.aggregated[role.Name], nil
	}
	return aggregateIn(role, own, s.defaults)
}

// aggregateIn aggregates role among own and the defaults d.
func aggregateIn(role *rbacv1.ClusterRole, own []*rbacv1.ClusterRole, d *defaults) (*rbacv1.ClusterRole, error) {
	byName := map[string]*rbacv1.ClusterRole{}
	var names []string
	for _, name := range d.names {
		byName[name] = d.clusterRoles[name]
	}
	for _, r := range own {
		byName[r.Name] = r
	}
	for name := range byName {
		names = append(names, name)
	}
	sort.Strings(names)
	var rulesOf func(r *rbacv1.ClusterRole, visiting map[string]bool) ([]rbacv1.PolicyRule, error)
	rulesOf = func(r *rbacv1.ClusterRole, visiting map[string]bool) ([]rbacv1.PolicyRule, error) {
		if r.AggregationRule == nil {
			return r.Rules, nil
		}
		visiting[r.Name] = true
		defer delete(visiting, r.Name)
		var selectors []labels.Selector
		for i := range r.AggregationRule.ClusterRoleSelectors {
			sel, err := metav1.LabelSelectorAsSelector(&r.AggregationRule.ClusterRoleSelectors[i])
			if err != nil {
				return nil, fmt.Errorf("ClusterRole %s: aggregation selector: %w", r.Name, err)
			}
			selectors = append(selectors, sel)
		}
		var rules []rbacv1.PolicyRule
		for _, name := range names {
			other := byName[name]
			if visiting[name] || !slices.ContainsFunc(selectors, func(sel labels.Selector) bool { return sel.Matches(labels.Set(other.Labels)) }) {
				continue
			}
			more, err := rulesOf(other, visiting)
			if err != nil {
				return nil, err
			}
			rules = append(rules, more...)
		}
		return rules, nil
	}
	rules, err := rulesOf(role, map[string]bool{})
	if err != nil {
		return nil, err
	}
	out := role.DeepCopy()
	out.Rules = rules
	return out, nil
}

// ListClusterRoleBindings implements the rule resolver's
// ClusterRoleBindingLister for the space of ctx: the space's own and the
// defaults.
func (s *Store) ListClusterRoleBindings(ctx context.Context) ([]*rbacv1.ClusterRoleBinding, error) {
	out := append([]*rbacv1.ClusterRoleBinding(nil), s.defaults.clusterRoleBindings...)
	c := s.caches.Load()
	if c == nil {
		return out, nil
	}
	objs, err := c.clusterRoleBindings.ByIndex(bySpace, spaces.SpaceOrRoot(ctx))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		out = append(out, o.(*rbacv1.ClusterRoleBinding))
	}
	return out, nil
}

// ownBindingsSubjects calls f with the subjects (and binding namespace,
// "" for ClusterRoleBindings) of every binding stored in space, until f
// returns true.
func (s *Store) ownBindingsSubjects(space string, f func(namespace string, subjects []rbacv1.Subject) bool) {
	c := s.caches.Load()
	if c == nil {
		return
	}
	crbs, _ := c.clusterRoleBindings.ByIndex(bySpace, space)
	for _, o := range crbs {
		if f("", o.(*rbacv1.ClusterRoleBinding).Subjects) {
			return
		}
	}
	rbs, _ := c.roleBindings.ByIndex(bySpace, space)
	for _, o := range rbs {
		rb := o.(*rbacv1.RoleBinding)
		if f(rb.Namespace, rb.Subjects) {
			return
		}
	}
}
