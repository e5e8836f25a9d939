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
