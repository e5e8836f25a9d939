// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package builtin

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestIsBuiltInGroup: the built-in kinds' groups (the core group among
// them) and the reserved ones are the server's; the groups CRDs define,
// the server's own CRDs' included, are not.
func TestIsBuiltInGroup(t *testing.T) {
	for group, want := range map[string]bool{
		"": true, "apps": true, "rbac.authorization.k8s.io": true, "apiextensions.k8s.io": true, "authorization.k8s.io": true,
		"example.com": false, "edge.kubestellar.io": false, "tenancy.kubestellar.io": false, "cert-manager.io": false,
	} {
		require.Equal(t, want, IsBuiltInGroup(group), "%q", group)
	}
	for _, k := range Kinds() {
		require.True(t, IsBuiltInGroup(k.Group), "%q, a built-in kind's", k.Group)
	}
}

func BenchmarkIsBuiltInGroup(b *testing.B) {
	for b.Loop() {
		IsBuiltInGroup("example.com")
	}
}
