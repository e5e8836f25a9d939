// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package rbac

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// Labels that aggregate a ClusterRole's rules into the default roles.
const (
	aggregateToView = "rbac.authorization.k8s.io/aggregate-to-view"
	aggregateToEdit = "rbac.authorization.k8s.io/aggregate-to-edit"
)

// Kubestellar's roles, served in every space with the defaults.
const (
	// InventoryAdminRole manages the inventory of an inventory space:
	// SyncTargets and Locations.
	InventoryAdminRole = "kubestellar:inventory-admin"
	// WorkloadAuthorRole manages a WDS's workloads (what edit allows) and
	// where they go: EdgePlacements, Customizers, StatusCollectors; it reads
	// what comes back (CombinedStatuses, SinglePlacementSlices).
	WorkloadAuthorRole = "kubestellar:workload-author"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}
	// userKinds are the edge kinds users write; the others the server does.
	userKinds   = []string{"edgeplacements", "customizers", "statuscollectors", "synctargets", "locations"}
	serverKinds = []string{"combinedstatuses", "singleplacementslices", "syncerconfigs"}
)

// kubestellarClusterRoles are the roles for kubestellar's kinds: the edge
// kinds aggregate into view, edit and admin as a CRD author's roles do
// (space types still decide which kinds a space accepts), and the roles
// of the seeds' two jobs, an inventory admin and a workload author.
func kubestellarClusterRoles() []rbacv1.ClusterRole {
	group := []string{edgev2alpha1.GroupName}
	withStatus := func(kinds []string) []string {
		out := append([]string(nil), kinds...)
		for _, k := range kinds {
			out = append(out, k+"/status")
		}
		return out
	}
	allKinds := append(append([]string(nil), userKinds...), serverKinds...)
	viewRules := []rbacv1.PolicyRule{{Verbs: readVerbs, APIGroups: group, Resources: withStatus(allKinds)}}
	editRules := []rbacv1.PolicyRule{{Verbs: writeVerbs, APIGroups: group, Resources: userKinds}}
	return []rbacv1.ClusterRole{
		{
			ObjectMeta: metav1.ObjectMeta{Name: "kubestellar:aggregate-to-view", Labels: map[string]string{aggregateToView: "true"}},
			Rules:      viewRules,
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: "kubestellar:aggregate-to-edit", Labels: map[string]string{aggregateToEdit: "true"}},
			Rules:      editRules,
		},
		{
			ObjectMeta: metav1.ObjectMeta{Name: InventoryAdminRole},
			Rules: []rbacv1.PolicyRule{
				{Verbs: append(append([]string(nil), readVerbs...), writeVerbs...), APIGroups: group, Resources: []string{"synctargets", "locations"}},
				{Verbs: readVerbs, APIGroups: group, Resources: []string{"synctargets/status", "locations/status"}},
				{Verbs: readVerbs, APIGroups: []string{""}, Resources: []string{"namespaces", "events"}},
			},
		},
		{
			// An aggregated role: edit (which holds the edge kinds above)
			// plus whatever a space adds with this label.
			ObjectMeta: metav1.ObjectMeta{Name: WorkloadAuthorRole},
			AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
				{MatchLabels: map[string]string{aggregateToEdit: "true"}},
				{MatchLabels: map[string]string{"kubestellar.io/aggregate-to-workload-author": "true"}},
			}},
		},
	}
}
