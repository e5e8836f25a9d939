// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package storage

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDefaultEndpoint(t *testing.T) {
	require.Equal(t, "sqlite:///data/db/state.db?"+SQLiteParams, DefaultEndpoint("/data"))
	require.Equal(t, "sqlite://rel/db/state.db?"+SQLiteParams, DefaultEndpoint("rel"))
}

func TestResourcePrefix(t *testing.T) {
	tests := []struct {
		gr   schema.GroupResource
		want string
	}{
		{gr: schema.GroupResource{Resource: "configmaps"}, want: "/core/configmaps"},
		{gr: schema.GroupResource{Resource: "namespaces"}, want: "/core/namespaces"},
		{gr: schema.GroupResource{Group: "apps", Resource: "deployments"}, want: "/apps/deployments"},
		{gr: schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}, want: "/rbac.authorization.k8s.io/clusterroles"},
		{gr: schema.GroupResource{Group: "tenancy.kubestellar.io", Resource: "spaces"}, want: "/tenancy.kubestellar.io/spaces"},
		{gr: schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}, want: "/apiextensions.k8s.io/customresourcedefinitions"},
	}
	for _, tc := range tests {
		t.Run(tc.want, func(t *testing.T) {
			require.Equal(t, tc.want, ResourcePrefix(tc.gr))
		})
	}
}
