// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func TestPlacedRules(t *testing.T) {
	all := []string{"get", "list", "watch", "create", "update", "patch", "delete"}
	for _, tc := range []struct {
		name string
		spec edgev2alpha1.SyncerConfigSpec
		want []rbacv1.PolicyRule
	}{
		{name: "nothing placed", want: nil},
		{
			name: "workloads, one rule per group, sorted, namespaces left to the syncer's own role",
			spec: edgev2alpha1.SyncerConfigSpec{Resources: []edgev2alpha1.SyncedResource{
				{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true},
				{Version: "v1", Resource: "namespaces"},
				{Version: "v1", Resource: "services", Namespaced: true},
				{Version: "v1", Resource: "configmaps", Namespaced: true},
				{Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true},
			}},
			want: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: all},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: all},
			},
		},
		{
			name: "CRDs and upsync",
			spec: edgev2alpha1.SyncerConfigSpec{
				CRDs:      []string{"widgets.example.com"},
				Resources: []edgev2alpha1.SyncedResource{{Group: "example.com", Version: "v1", Resource: "widgets", Namespaced: true}},
				Upsync: []edgev2alpha1.UpsyncClause{
					{APIGroup: "example.com", Resources: []string{"reports", "audits"}},
					{APIGroup: "example.com", Resources: []string{"reports"}, Namespaces: []string{"a"}},
				},
			},
			want: []rbacv1.PolicyRule{
				{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: all},
				{APIGroups: []string{"example.com"}, Resources: []string{"widgets"}, Verbs: all},
				{APIGroups: []string{"example.com"}, Resources: []string{"audits", "reports"}, Verbs: []string{"get", "list", "watch"}},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, PlacedRules(tc.spec))
		})
	}
}
