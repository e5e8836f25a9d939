// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package packaging

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubestellar/kubestellar/syncer"
)

func byKind(t *testing.T, objs []*unstructured.Unstructured) map[string][]*unstructured.Unstructured {
	t.Helper()
	out := map[string][]*unstructured.Unstructured{}
	for _, o := range objs {
		out[o.GetKind()] = append(out[o.GetKind()], o)
	}
	return out
}

// TestInClusterManifest: what the manifest is made of, and what it must
// never hold (the token outside its Secret, a rolling update, root).
func TestInClusterManifest(t *testing.T) {
	s := InClusterSyncer{Server: "https://center:6443", Token: testToken, SyncTarget: "edge1", Image: "registry.example/kubestellar@sha256:" + strings.Repeat("a", 64),
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "patch"}}}}
	data, err := s.Manifest()
	require.NoError(t, err)
	objs, err := DecodeManifest(data)
	require.NoError(t, err)
	kinds := byKind(t, objs)
	require.Len(t, kinds["Namespace"], 1)
	require.Equal(t, "kubestellar-syncer", kinds["Namespace"][0].GetName())
	require.Equal(t, "restricted", kinds["Namespace"][0].GetLabels()["pod-security.kubernetes.io/enforce"])
	require.Len(t, kinds["ServiceAccount"], 1)
	require.Len(t, kinds["Secret"], 1)
	require.Len(t, kinds["ClusterRole"], 3)
	require.Len(t, kinds["ClusterRoleBinding"], 1)
	require.Len(t, kinds["Deployment"], 1)
	require.NotContains(t, string(data), "cluster-admin")

	// The token is in the Secret alone (base64), never in clear.
	require.NotContains(t, string(data), testToken)
	tokenData, _, _ := unstructured.NestedString(kinds["Secret"][0].Object, "data", "token")
	require.NotEmpty(t, tokenData)

	placed := kinds["ClusterRole"][2]
	require.Equal(t, "kubestellar-syncer:kubestellar-syncer:placed", placed.GetName())
	rules, _, _ := unstructured.NestedSlice(placed.Object, "rules")
	require.Equal(t, []any{map[string]any{"apiGroups": []any{"apps"}, "resources": []any{"deployments"}, "verbs": []any{"get", "patch"}}}, rules)

	d := kinds["Deployment"][0].Object
	replicas, _, _ := unstructured.NestedInt64(d, "spec", "replicas")
	require.EqualValues(t, 1, replicas)
	strategy, _, _ := unstructured.NestedString(d, "spec", "strategy", "type")
	require.Equal(t, "Recreate", strategy, "two syncers of one SyncTarget never run at once")
	containers, _, _ := unstructured.NestedSlice(d, "spec", "template", "spec", "containers")
	require.Len(t, containers, 1)
	c := containers[0].(map[string]any)
	require.Equal(t, s.Image, c["image"])
	require.Equal(t, []any{"syncer", "join", "--server=https://center:6443", "--sync-target=edge1",
		"--token-file=/etc/kubestellar-syncer/token/token", "--data-dir=/var/lib/kubestellar-syncer", "--health-address=:8081"}, c["args"])
	require.Equal(t, syncer.ContainerName, c["name"])
	var env []string
	for _, e := range c["env"].([]any) {
		env = append(env, e.(map[string]any)["name"].(string))
	}
	require.Equal(t, []string{"GOMEMLIMIT", syncer.PodNameEnv, syncer.PodNamespaceEnv}, env, "the pod's name, for the image the SyncTarget shows; nothing secret")
	sc := c["securityContext"].(map[string]any)
	require.Equal(t, true, sc["readOnlyRootFilesystem"])
	require.Equal(t, false, sc["allowPrivilegeEscalation"])
	require.Equal(t, map[string]any{"drop": []any{"ALL"}}, sc["capabilities"])
	podSC, _, _ := unstructured.NestedMap(d, "spec", "template", "spec", "securityContext")
	require.Equal(t, true, podSC["runAsNonRoot"])
	require.Equal(t, map[string]any{"type": "RuntimeDefault"}, podSC["seccompProfile"])

	// With cluster-admin, one binding and no roles of its own.
	s.RBACMode = RBACClusterAdmin
	data, err = s.Manifest()
	require.NoError(t, err)
	objs, err = DecodeManifest(data)
	require.NoError(t, err)
	kinds = byKind(t, objs)
	require.Empty(t, kinds["ClusterRole"])
	ref, _, _ := unstructured.NestedString(kinds["ClusterRoleBinding"][0].Object, "roleRef", "name")
	require.Equal(t, "cluster-admin", ref)
}

func TestInClusterManifestRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    InClusterSyncer
		err  string
	}{
		{"no server", InClusterSyncer{Token: testToken, SyncTarget: "e"}, "server is required"},
		{"no sync target", InClusterSyncer{Token: testToken, Server: "https://c:6443"}, "syncTarget is required"},
		{"bad token", InClusterSyncer{Token: "nope", Server: "https://c:6443", SyncTarget: "e"}, "the join token: "},
		{"bad namespace", InClusterSyncer{Token: testToken, Server: "https://c:6443", SyncTarget: "e", Namespace: "Not_A_Name"}, `--namespace "Not_A_Name"`},
		{"bad rbac mode", InClusterSyncer{Token: testToken, Server: "https://c:6443", SyncTarget: "e", RBACMode: "root"}, `--rbac-mode "root" must be least-privilege or cluster-admin`},
		{"bad proxy", InClusterSyncer{Token: testToken, Server: "https://c:6443", SyncTarget: "e", Proxy: "proxy:3128"}, `--proxy "proxy:3128"`},
		{"bad image", InClusterSyncer{Token: testToken, Server: "https://c:6443", SyncTarget: "e", Image: "a b"}, `--image "a b"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.s.Manifest()
			require.ErrorContains(t, err, tc.err)
		})
	}
}

// TestUninstallManifest: every object of the manifest by name, the
// namespace last, no Secret data.
func TestUninstallManifest(t *testing.T) {
	data, err := UninstallManifest("edge-agent")
	require.NoError(t, err)
	require.NotContains(t, string(data), "\ndata:")
	objs, err := DecodeManifest(data)
	require.NoError(t, err)
	var names []string
	for _, o := range objs {
		require.Len(t, o.Object, 3, "kind and name only")
		names = append(names, o.GetKind()+"/"+o.GetName())
	}
	require.Equal(t, []string{
		"Deployment/kubestellar-syncer", "ClusterRoleBinding/kubestellar-syncer:edge-agent",
		"ClusterRole/kubestellar-syncer:edge-agent:placed", "ClusterRole/kubestellar-syncer:edge-agent:self", "ClusterRole/kubestellar-syncer:edge-agent",
		"Secret/kubestellar-syncer-token", "ServiceAccount/kubestellar-syncer", "Namespace/edge-agent",
	}, names)
}
