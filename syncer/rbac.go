// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// writeVerbs are what the syncer does to an object it places: it watches
// it (drift), applies it (server-side apply is a patch; create and update
// for what apply cannot) and deletes it when it leaves the mailbox.
var writeVerbs = []string{"get", "list", "watch", "create", "update", "patch", "delete"}

// readVerbs are what it does to an object it upsyncs.
var readVerbs = []string{"get", "list", "watch"}

// PlacedRules returns the RBAC rules a syncer needs at the edge for what
// its SyncerConfig names: write access to every resource it holds copies
// of and to CRDs when it places any, read access to what it upsyncs. What
// it needs whatever is placed (namespaces, pods and ReplicaSets for
// status) is not included: the syncer's manifest grants that apart
// (packaging/chart). Rules are one per API group and verb set, sorted, so
// that the same config always gives the same ClusterRole.
func PlacedRules(spec edgev2alpha1.SyncerConfigSpec) []rbacv1.PolicyRule {
	write := map[string][]string{}
	read := map[string][]string{}
	for _, r := range spec.Resources {
		if r.Group == namespacesGVR.Group && r.Resource == namespacesGVR.Resource {
			continue
		}
		write[r.Group] = append(write[r.Group], r.Resource)
	}
	if len(spec.CRDs) > 0 {
		write[crdsGVR.Group] = append(write[crdsGVR.Group], crdsGVR.Resource)
	}
	for _, u := range spec.Upsync {
		read[u.APIGroup] = append(read[u.APIGroup], u.Resources...)
	}
	var rules []rbacv1.PolicyRule
	add := func(groups map[string][]string, verbs []string) {
		names := make([]string, 0, len(groups))
		for g := range groups {
			names = append(names, g)
		}
		sort.Strings(names)
		for _, g := range names {
			resources := slices.Clone(groups[g])
			sort.Strings(resources)
			rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{g}, Resources: slices.Compact(resources), Verbs: slices.Clone(verbs)})
		}
	}
	add(write, writeVerbs)
	add(read, readVerbs)
	return rules
}
