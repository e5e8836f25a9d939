// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestAddImpliedNamespaces(t *testing.T) {
	desired := map[string]*desiredCopy{}
	for _, c := range [][2]string{{"configmaps", "a/x"}, {"configmaps", "a/y"}, {"configmaps", "b/x"}, {"namespaces", "/b"}, {"clusterroles", "/r"}} {
		ns, name, _ := strings.Cut(c[1], "/")
		res := configmaps
		switch c[0] {
		case "namespaces":
			res = namespaceResource
		case "clusterroles":
			res = resource{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}}
		}
		k, d := copyOf(res, ns, name)
		desired[k] = d
	}
	placedB := desired[copyKey(namespaceResource.GroupVersionResource, "", "b")]
	addImpliedNamespaces(desired)
	require.Len(t, desired, 6)
	a := desired[copyKey(namespaceResource.GroupVersionResource, "", "a")]
	require.NotNil(t, a)
	require.True(t, a.implied)
	require.Equal(t, "Namespace", a.obj.GetKind())
	require.Same(t, placedB, desired[copyKey(namespaceResource.GroupVersionResource, "", "b")], "a placed namespace stays as placed")
}
