// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/crossspace"
	"github.com/kubestellar/kubestellar/spaces"
)

func TestSourcesOrder(t *testing.T) {
	f := newFake()
	f.place("wds2", "b", 5)
	f.place("wds1", "z", 5)
	f.place("wds1", "a", 5)
	f.place("wds9", "old", 1)
	f.place("wds3", "gone", 0)
	delete(f.placements, spaces.Key("wds3", "", "gone")) // a slice whose placement is gone
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
		require.Equal(t, "loc1", p.dest.location.GetName())
		require.Equal(t, stName, p.dest.syncTarget.GetName())
	}
	require.Equal(t, []string{"wds9/old", "wds1/a", "wds1/z", "wds2/b"}, got)
}

// TestSourcesOutsideTheWDSInventories: a slice naming a SyncTarget of an
// inventory space its WDS does not name (forged: the scheduler writes
// none) places nothing there, whoever wrote it.
func TestSourcesOutsideTheWDSInventories(t *testing.T) {
	f := newFake()
	f.place("wds1", "mine", 5)
	f.place("wds2", "forged", 5)
	f.outside = map[string]bool{"wds2": true}
	r := f.reconciler()
	st, _, ok := r.target(spaces.Key(inv, "", stName))
	require.True(t, ok)
	var got []string
	for _, p := range r.sources(context.Background(), st) {
		got = append(got, p.String())
	}
	require.Equal(t, []string{"wds1/mine"}, got)
}

// TestClusterOwnedNeverPlaced: a clause that selects every ConfigMap,
// ServiceAccount and Service of a namespace places neither the
// namespace's root CA ConfigMap nor its default ServiceAccount nor
// default's kubernetes Service, which each edge has of its own, and places
// the rest.
func TestClusterOwnedNeverPlaced(t *testing.T) {
	f := newFake()
	serviceAccounts := resource{GroupVersionResource: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), Kind: "ServiceAccount"}
	services := resource{GroupVersionResource: corev1.SchemeGroupVersion.WithResource("services"), Kind: "Service"}
	f.served = append(f.served, serviceAccounts, services)
	object := func(kind, namespace, name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": kind, "metadata": map[string]any{"name": name, "namespace": namespace}}}
	}
	sa := func(name string) *unstructured.Unstructured { return object("ServiceAccount", "app", name) }
	f.put(services.GroupVersionResource, "wds1", object("Service", "default", "kubernetes"))
	f.put(services.GroupVersionResource, "wds1", object("Service", "default", "web"))
	f.put(services.GroupVersionResource, "wds1", object("Service", "app", "kubernetes"))
	f.put(cmGVR, "wds1", configMap("app", "settings", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("app", "kube-root-ca.crt", map[string]any{"ca.crt": "the center's CA"}))
	f.put(serviceAccounts.GroupVersionResource, "wds1", sa("default"))
	f.put(serviceAccounts.GroupVersionResource, "wds1", sa("deployer"))
	core := ""
	f.place("wds1", "p", 1, edgev2alpha1.DownsyncClause{APIGroup: &core, Resources: []string{"configmaps", "serviceaccounts", "services"}, Namespaces: []string{"app", "default"}})
	_, _, err := f.run(t)
	require.NoError(t, err)
	require.NotNil(t, f.get(cmGVR, f.mailbox(), "app", "settings"))
	require.NotNil(t, f.get(serviceAccounts.GroupVersionResource, f.mailbox(), "app", "deployer"))
	require.Nil(t, f.get(cmGVR, f.mailbox(), "app", "kube-root-ca.crt"), "the center's CA would replace the edge's")
	require.Nil(t, f.get(serviceAccounts.GroupVersionResource, f.mailbox(), "app", "default"))
	require.NotNil(t, f.get(services.GroupVersionResource, f.mailbox(), "default", "web"))
	require.NotNil(t, f.get(services.GroupVersionResource, f.mailbox(), "app", "kubernetes"), "a Service named kubernetes outside default is the tenant's")
	require.Nil(t, f.get(services.GroupVersionResource, f.mailbox(), "default", "kubernetes"), "the center's address would replace the edge API server's")
}

// A clause that names its namespaces is selected from their objects
// alone, each namespace read once, and selects what it did when every
// object of the WDS was gone through; "*" and no namespaces go through
// them all.
func TestClausesNamingNamespacesReadOnlyThem(t *testing.T) {
	nsClause := func(namespaces ...string) edgev2alpha1.DownsyncClause {
		c := cmClause()
		c.Namespaces = namespaces
		return c
	}
	for _, tc := range []struct {
		name           string
		clause         edgev2alpha1.DownsyncClause
		want           []string // copies in the mailbox, namespace/name
		namespaceReads []string
		spaceReads     int
	}{
		{name: "two namespaces, one named twice", clause: nsClause("a", "c", "a"),
			want: []string{"a/one", "c/three"}, namespaceReads: []string{"a", "c"}},
		{name: "a namespace with nothing", clause: nsClause("none"), namespaceReads: []string{"none"}},
		{name: "every namespace", clause: nsClause("*"), want: []string{"a/one", "b/two", "c/three"}, spaceReads: 1},
		{name: "no namespaces named", clause: cmClause(), want: []string{"a/one", "b/two", "c/three"}, spaceReads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.put(cmGVR, "wds1", configMap("a", "one", map[string]any{"k": "1"}))
			f.put(cmGVR, "wds1", configMap("b", "two", map[string]any{"k": "2"}))
			f.put(cmGVR, "wds1", configMap("c", "three", map[string]any{"k": "3"}))
			f.put(cmGVR, "wds2", configMap("a", "elsewhere", map[string]any{"k": "4"}))
			f.place("wds1", "p", 1, tc.clause)
			_, _, err := f.run(t)
			require.NoError(t, err)
			var got []string
			for k := range f.objects[cmGVR] {
				if space, ns, name, _ := spaces.SplitKey(k); space == f.mailbox() {
					got = append(got, ns+"/"+name)
				}
			}
			require.ElementsMatch(t, tc.want, got)
			require.Equal(t, tc.namespaceReads, f.namespaceReads)
			require.Equal(t, tc.spaceReads, f.spaceReads)
		})
	}
}

// Without a reader of one namespace, a clause's namespaces are taken
// from every object of the space.
func TestCandidatesWithoutANamespaceReader(t *testing.T) {
	f := newFake()
	f.put(cmGVR, "wds1", configMap("a", "one", nil))
	f.put(cmGVR, "wds1", configMap("b", "two", nil))
	r := f.reconciler()
	r.objectsIn = nil
	cl, err := parseClause(0, edgev2alpha1.DownsyncClause{Resources: []string{"configmaps"}, Namespaces: []string{"b"}})
	require.NoError(t, err)
	objs, synced := r.candidates(cmGVR, "wds1", cl)
	require.True(t, synced)
	require.Len(t, objs, 1)
	require.Equal(t, "two", objs[0].GetName())
	f.notSynced[cmGVR] = true
	_, synced = r.candidates(cmGVR, "wds1", cl)
	require.False(t, synced, "a cache not synced yet says so")
}

// The index files a WDS's namespaced objects under their space and
// namespace, and neither cluster-scoped objects nor copies (as the
// cache holds them: an object in a WDS, a record in a mailbox).
func TestIndexByWorkloadNamespace(t *testing.T) {
	inSpace := func(space string, obj *unstructured.Unstructured) *unstructured.Unstructured {
		obj.SetAnnotations(map[string]string{spaces.Annotation: space})
		return obj
	}
	got, err := indexByWorkloadNamespace(inSpace("wds1", configMap("a", "one", nil)))
	require.NoError(t, err)
	require.Equal(t, []string{spaces.Key("wds1", "a", "")}, got)

	ns := inSpace("wds1", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "a"}}})
	got, err = indexByWorkloadNamespace(ns)
	require.NoError(t, err)
	require.Empty(t, got, "a cluster-scoped object")

	cp := inSpace("mb", configMap("a", "one", nil))
	cp.SetLabels(map[string]string{edgev2alpha1.PlacementCopyLabel: "true"})
	got, err = indexByWorkloadNamespace(cp)
	require.NoError(t, err)
	require.Empty(t, got, "a copy")
	got, err = indexByWorkloadNamespace(crossspace.Record(cp))
	require.NoError(t, err)
	require.Empty(t, got, "a copy's record")
}
