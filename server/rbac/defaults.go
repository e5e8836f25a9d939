// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
)

// defaults are the ClusterRoles and ClusterRoleBindings every space has,
// shared by all of them.
type defaults struct {
	clusterRoles map[string]*rbacv1.ClusterRole
	names        []string // of clusterRoles, sorted
	// aggregated holds the aggregated defaults with their rules, for
	// spaces without ClusterRoles of their own.
	aggregated          map[string]*rbacv1.ClusterRole
	clusterRoleBindings []*rbacv1.ClusterRoleBinding
}

func newDefaults(roles []rbacv1.ClusterRole, bindings []rbacv1.ClusterRoleBinding) *defaults {
	d := &defaults{clusterRoles: map[string]*rbacv1.ClusterRole{}, aggregated: map[string]*rbacv1.ClusterRole{}}
	for i := range roles {
		d.clusterRoles[roles[i].Name] = &roles[i]
		d.names = append(d.names, roles[i].Name)
	}
	sort.Strings(d.names)
	for _, name := range d.names {
		if role := d.clusterRoles[name]; role.AggregationRule != nil {
			if out, err := aggregateIn(role, nil, d); err == nil { // the defaults' selectors are well formed
				d.aggregated[name] = out
			}
		}
	}
	for i := range bindings {
		d.clusterRoleBindings = append(d.clusterRoleBindings, &bindings[i])
	}
	return d
}
