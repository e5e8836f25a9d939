// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func copyOf(res resource, namespace, name string) (string, *desiredCopy) {
	obj := &unstructured.Unstructured{Object: map[string]any{}}
	obj.SetName(name)
	obj.SetNamespace(namespace)
	return copyKey(res.GroupVersionResource, namespace, name), &desiredCopy{res: res, obj: obj}
}

func TestSyncerConfigSpec(t *testing.T) {
	deployments := resource{GroupVersionResource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Kind: "Deployment", Namespaced: true}
	configmaps := resource{GroupVersionResource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: "ConfigMap", Namespaced: true}
	clusterroles := resource{GroupVersionResource: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}, Kind: "ClusterRole"}
	widgets := resource{GroupVersionResource: schema.GroupVersionResource{Group: "example.com", Version: "v1beta1", Resource: "widgets"}, Kind: "Widget", Namespaced: true}
	upsync := []edgev2alpha1.UpsyncClause{{APIGroup: "", Resources: []string{"pods"}, Namespaces: []string{"b"}}, {APIGroup: "apps", Resources: []string{"*"}}}

	for _, tc := range []struct {
		name   string
		copies [][2]string // resource name, namespace/name
		crds   []string
		upsync []edgev2alpha1.UpsyncClause
		want   edgev2alpha1.SyncerConfigSpec
	}{
		{name: "nothing", want: edgev2alpha1.SyncerConfigSpec{}},
		{
			name: "sorted and deduplicated",
			copies: [][2]string{
				{"deployments", "zeta/web"}, {"deployments", "alpha/web"}, {"configmaps", "alpha/a"}, {"configmaps", "alpha/b"},
				{"configmaps", "mid/a"}, {"clusterroles", "/reader"}, {"widgets", "zeta/w"}, {"namespaces", "/alpha"},
			},
			crds:   []string{"widgets.example.com", "gadgets.example.com", "apples.example.com"},
			upsync: upsync,
			want: edgev2alpha1.SyncerConfigSpec{
				Namespaces: []string{"alpha", "mid", "zeta"},
				Resources: []edgev2alpha1.SyncedResource{
					{Group: "", Version: "v1", Resource: "configmaps", Namespaced: true},
					{Group: "", Version: "v1", Resource: "namespaces", Namespaced: false},
					{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true},
					{Group: "example.com", Version: "v1beta1", Resource: "widgets", Namespaced: true},
					{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles", Namespaced: false},
				},
				CRDs:   []string{"apples.example.com", "gadgets.example.com", "widgets.example.com"},
				Upsync: upsync,
			},
		},
		{
			name:   "cluster-scoped copies add no namespace",
			copies: [][2]string{{"clusterroles", "/a"}, {"clusterroles", "/b"}},
			want: edgev2alpha1.SyncerConfigSpec{Resources: []edgev2alpha1.SyncedResource{
				{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}}},
		},
		{
			name: "CRDs and upsync alone",
			crds: []string{"b.example.com", "a.example.com"}, upsync: upsync,
			want: edgev2alpha1.SyncerConfigSpec{CRDs: []string{"a.example.com", "b.example.com"}, Upsync: upsync},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			byName := map[string]resource{"deployments": deployments, "configmaps": configmaps, "clusterroles": clusterroles,
				"widgets": widgets, "namespaces": namespaceResource}
			desired := map[string]*desiredCopy{}
			for _, c := range tc.copies {
				ns, name, _ := strings.Cut(c[1], "/")
				k, d := copyOf(byName[c[0]], ns, name)
				desired[k] = d
			}
			crdNames := map[string]bool{}
			for _, n := range tc.crds {
				crdNames[n] = true
			}
			// Maps iterate in random order: the result must not depend on it.
			for range 20 {
				require.Equal(t, tc.want, syncerConfigSpec(desired, crdNames, tc.upsync))
			}
		})
	}
}

func TestGVROfKeyRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name               string
		gvr                schema.GroupVersionResource
		namespace, objName string
	}{
		{name: "core namespaced", gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, namespace: "ns", objName: "cm"},
		{name: "core cluster-scoped", gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, objName: "ns"},
		{name: "named group", gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, namespace: "default", objName: "web"},
		{name: "dotted group, beta version", gvr: schema.GroupVersionResource{Group: "widgets.example.com", Version: "v1beta2", Resource: "widgets"},
			namespace: "a", objName: "w.with.dots"},
		{name: "cluster-scoped in a named group", gvr: schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
			objName: "system:aggregate-to-view"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k := copyKey(tc.gvr, tc.namespace, tc.objName)
			require.Equal(t, tc.gvr, gvrOfKey(k))
		})
	}
}

func TestCopyKeysDiffer(t *testing.T) {
	cm := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	secrets := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	keys := map[string]bool{
		copyKey(cm, "a", "x"):      true,
		copyKey(cm, "b", "x"):      true,
		copyKey(cm, "a", "y"):      true,
		copyKey(cm, "", "x"):       true,
		copyKey(secrets, "a", "x"): true,
		copyKey(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "configmaps"}, "a", "x"): true,
	}
	require.Len(t, keys, 6)
}

func TestContentHash(t *testing.T) {
	obj := func(pairs ...any) *unstructured.Unstructured {
		m := map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
		data := map[string]any{}
		for i := 0; i < len(pairs); i += 2 {
			data[pairs[i].(string)] = pairs[i+1]
		}
		m["data"] = data
		return &unstructured.Unstructured{Object: m}
	}
	base := obj("a", "1", "b", "2")
	h, err := contentHash(base)
	require.NoError(t, err)
	require.Regexp(t, "^[0-9a-f]{32}$", h)

	for _, tc := range []struct {
		name string
		obj  *unstructured.Unstructured
		same bool
	}{
		{name: "same object again", obj: base, same: true},
		{name: "deep copy", obj: base.DeepCopy(), same: true},
		{name: "same content built in another order", obj: obj("b", "2", "a", "1"), same: true},
		{name: "changed value", obj: obj("a", "1", "b", "3"), same: false},
		{name: "added key", obj: obj("a", "1", "b", "2", "c", "3"), same: false},
		{name: "removed key", obj: obj("a", "1"), same: false},
		{name: "value type changed", obj: obj("a", int64(1), "b", "2"), same: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := contentHash(tc.obj)
			require.NoError(t, err)
			if tc.same {
				require.Equal(t, h, got)
			} else {
				require.NotEqual(t, h, got)
			}
		})
	}

	t.Run("unmarshalable content is an error", func(t *testing.T) {
		_, err := contentHash(&unstructured.Unstructured{Object: map[string]any{"bad": make(chan int)}})
		require.Error(t, err)
	})
}
