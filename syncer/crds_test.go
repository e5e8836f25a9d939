// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/util/workqueue"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// TestWithoutServerCRDs: the syncer's cache of a mailbox's CRDs keeps only
// the name of the server's own CRDs (which no placement places), and every
// other CRD whole, but for its managed fields.
func TestWithoutServerCRDs(t *testing.T) {
	crd := func(name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"group": "x", "versions": []any{"big schema"}}}}
		u.SetAPIVersion("apiextensions.k8s.io/v1")
		u.SetKind("CustomResourceDefinition")
		u.SetName(name)
		u.SetResourceVersion("7")
		u.SetManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m"}})
		return u
	}
	for _, name := range []string{"synctargets.edge.kubestellar.io", "spaces.tenancy.kubestellar.io"} {
		got, err := withoutServerCRDs(crd(name))
		require.NoError(t, err)
		u := got.(*unstructured.Unstructured)
		require.Equal(t, name, u.GetName())
		require.Equal(t, "7", u.GetResourceVersion())
		require.Nil(t, u.Object["spec"], "%s: the server's own", name)
	}
	for _, name := range []string{"widgets.example.com", "certificates.cert-manager.io", "things.kubestellar.io.example.com"} {
		got, err := withoutServerCRDs(crd(name))
		require.NoError(t, err)
		u := got.(*unstructured.Unstructured)
		require.NotNil(t, u.Object["spec"], "%s: placed whole", name)
		require.Empty(t, u.GetManagedFields())
	}
}

// TestCRDCacheFollowsConfig: the syncer lists and watches the mailbox's
// CRDs only while its SyncerConfig lists CRDs to place (an edge placed
// none costs the server no watch of them), and what it stops following
// leaves the desired state.
func TestCRDCacheFollowsConfig(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	placed := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true}}},
	}}
	server := placed.DeepCopy()
	server.SetName("synctargets.edge.kubestellar.io")
	mailbox := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdsGVR: "CustomResourceDefinitionList"}, placed, server)
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[objKey]())
	defer q.ShutDown()
	s := &Syncer{
		mailboxCaches: listThenWatch{mailbox}, owner: "edge1", downQ: q,
		desired: map[objKey]*desired{}, copies: map[schema.GroupVersionResource]*running{}, upsyncGVRs: map[schema.GroupVersionResource]bool{},
		removing: map[objKey]time.Time{}, now: time.Now,
	}
	s.id.InventorySpace, s.id.SyncTarget = "inv1", "edge1"
	defer s.stopInformers()
	config := func(crds ...string) *unstructured.Unstructured {
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&edgev2alpha1.SyncerConfig{
			ObjectMeta: metav1.ObjectMeta{Name: edgev2alpha1.SyncerConfigName}, Spec: edgev2alpha1.SyncerConfigSpec{CRDs: crds}})
		require.NoError(t, err)
		return &unstructured.Unstructured{Object: u}
	}
	crdCalls := func() int {
		n := 0
		for _, a := range mailbox.Actions() {
			if a.GetResource() == crdsGVR && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
				n++
			}
		}
		return n
	}
	widgets := objKey{GVR: crdsGVR, Name: "widgets.example.com"}
	hasDesired := func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		_, ok := s.desired[widgets]
		return ok
	}

	s.onConfig(ctx, config())
	require.Nil(t, s.crds, "no CRD listed: no cache of CRDs")
	require.Zero(t, crdCalls(), "no CRD listed: the mailbox's CRDs are neither listed nor watched")

	s.onConfig(ctx, config("widgets.example.com"))
	require.NotNil(t, s.crds)
	require.Eventually(t, hasDesired, 10*time.Second, 10*time.Millisecond, "the listed CRD is desired once the cache has it")
	require.Equal(t, 2, crdCalls(), "one list, one watch")
	s.mu.Lock()
	require.Len(t, s.desired, 1, "the server's own CRD is not placed")
	stop := s.crds.stop
	s.mu.Unlock()

	s.onConfig(ctx, config())
	require.Nil(t, s.crds, "nothing listed any more: the cache is stopped")
	require.False(t, hasDesired(), "and the CRD it placed is no longer desired")
	select {
	case <-stop:
	default:
		t.Fatal("the cache of CRDs was not stopped")
	}
}
