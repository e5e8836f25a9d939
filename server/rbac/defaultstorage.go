// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"context"
	"path"
	"reflect"
	"slices"
	"strings"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/storage"

	"github.com/kubestellar/kubestellar/spaces"
)

// ClusterRolesWithDefaults wraps the storage of ClusterRoles so that each
// space shows the default ClusterRoles it does not replace, as a new
// cluster shows them (kubectl get clusterroles, describe clusterrole
// edit), with the rules aggregated in that space. They are served from
// code, not stored: watches do not show them, and a space changes one by
// creating its own of that name, which replaces it there.
func (s *Store) ClusterRolesWithDefaults(inner storage.Interface) storage.Interface {
	return &defaultsStorage{Interface: inner, since: metav1.NewTime(time.Now()), defaults: func(ctx context.Context) []runtime.Object {
		own := map[string]bool{}
		for _, r := range s.spaceClusterRoles(spaces.SpaceOrRoot(ctx)) {
			own[r.Name] = true
		}
		out := make([]runtime.Object, 0, len(s.defaults.names))
		for _, name := range s.defaults.names {
			if own[name] {
				continue
			}
			if role, err := s.GetClusterRole(ctx, name); err == nil {
				out = append(out, role)
			}
		}
		return out
	}}
}

// ClusterRoleBindingsWithDefaults does for ClusterRoleBindings what
// ClusterRolesWithDefaults does for ClusterRoles.
func (s *Store) ClusterRoleBindingsWithDefaults(inner storage.Interface) storage.Interface {
	return &defaultsStorage{Interface: inner, since: metav1.NewTime(time.Now()), defaults: func(ctx context.Context) []runtime.Object {
		own := map[string]bool{}
		if c := s.caches.Load(); c != nil {
			objs, _ := c.clusterRoleBindings.ByIndex(bySpace, spaces.SpaceOrRoot(ctx))
			for _, o := range objs {
				own[o.(*rbacv1.ClusterRoleBinding).Name] = true
			}
		}
		out := make([]runtime.Object, 0, len(s.defaults.clusterRoleBindings))
		for _, b := range s.defaults.clusterRoleBindings {
			if !own[b.Name] {
				out = append(out, b)
			}
		}
		return out
	}}
}

type defaultsStorage struct {
	storage.Interface
	since    metav1.Time
	defaults func(ctx context.Context) []runtime.Object
}

// shown returns a default as a space shows it.
func (d *defaultsStorage) shown(obj runtime.Object) runtime.Object {
	out := obj.DeepCopyObject()
	if m, err := meta.Accessor(out); err == nil {
		m.SetCreationTimestamp(d.since)
		m.SetResourceVersion("")
	}
	return out
}

func (d *defaultsStorage) Get(ctx context.Context, key string, opts storage.GetOptions, objPtr runtime.Object) error {
	err := d.Interface.Get(ctx, key, opts, objPtr)
	if !storage.IsNotFound(err) || spaces.SpaceOrRoot(ctx) == spaces.Wildcard {
		return err
	}
	name := path.Base(key)
	for _, def := range d.defaults(ctx) {
		if m, merr := meta.Accessor(def); merr == nil && m.GetName() == name && reflect.TypeOf(def) == reflect.TypeOf(objPtr) {
			reflect.ValueOf(objPtr).Elem().Set(reflect.ValueOf(d.shown(def)).Elem())
			return nil
		}
	}
	return err
}

func (d *defaultsStorage) GetList(ctx context.Context, key string, opts storage.ListOptions, listObj runtime.Object) error {
	if err := d.Interface.GetList(ctx, key, opts, listObj); err != nil {
		return err
	}
	if spaces.SpaceOrRoot(ctx) == spaces.Wildcard {
		return nil
	}
	list, err := meta.ListAccessor(listObj)
	if err != nil || list.GetContinue() != "" {
		// Defaults come after the stored objects, on the last page.
		return err
	}
	items, err := meta.ExtractList(listObj)
	if err != nil {
		return err
	}
	stored := map[string]bool{}
	for _, item := range items {
		if m, err := meta.Accessor(item); err == nil {
			stored[m.GetName()] = true
		}
	}
	for _, def := range d.defaults(ctx) {
		m, err := meta.Accessor(def)
		if err != nil || stored[m.GetName()] {
			continue
		}
		if !matches(opts.Predicate, def, m) {
			continue
		}
		items = append(items, d.shown(def))
	}
	// In name order, as a datastore lists them.
	slices.SortFunc(items, func(a, b runtime.Object) int {
		ma, _ := meta.Accessor(a)
		mb, _ := meta.Accessor(b)
		return strings.Compare(ma.GetName(), mb.GetName())
	})
	return meta.SetList(listObj, items)
}

// matches tells whether a default is selected by a list's label and field
// selectors (defaults are selected by name and labels only).
func matches(p storage.SelectionPredicate, obj runtime.Object, m metav1.Object) bool {
	if p.Empty() {
		return true
	}
	if p.GetAttrs != nil {
		ok, err := p.Matches(obj)
		return err == nil && ok
	}
	return (p.Label == nil || p.Label.Matches(labels.Set(m.GetLabels()))) &&
		(p.Field == nil || p.Field.Matches(fields.Set{"metadata.name": m.GetName()}))
}
