// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package memedge

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/tools/cache"
)

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func configMap(name string, labels map[string]string, data map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "data": data}}
	u.SetName(name)
	u.SetLabels(labels)
	return u
}

// TestClients drives the cluster with client-go's own clients, as the
// syncer does: discovery, server-side apply, a label-selected informer,
// metadata lists, deletes with preconditions, a namespace's delete.
func TestClients(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := New()
	cfg := c.Config()
	dyn := dynamic.NewForConfigOrDie(cfg)
	disc := discovery.NewDiscoveryClientForConfigOrDie(cfg)

	lists, err := disc.ServerPreferredResources()
	if err != nil {
		t.Fatalf("discovery: %v", err)
	}
	found := false
	for _, l := range lists {
		for _, r := range l.APIResources {
			found = found || (l.GroupVersion == "apps/v1" && r.Name == "deployments" && r.Namespaced)
		}
	}
	if !found {
		t.Fatalf("discovery does not list apps/v1 deployments: %v", lists)
	}

	cms := dyn.Resource(configMapsGVR).Namespace("shop")
	if _, err := cms.Apply(ctx, "a", configMap("a", nil, map[string]any{"k": "v"}), metav1.ApplyOptions{FieldManager: "t"}); !apierrors.IsNotFound(err) {
		t.Fatalf("apply into a namespace that does not exist: %v, want NotFound", err)
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}}
	if _, err := dyn.Resource(namespacesGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	seen := make(chan string, 16)
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, configMapsGVR, "shop", 0, cache.Indexers{},
		func(o *metav1.ListOptions) { o.LabelSelector = "app=shop" }).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { seen <- "add " + obj.(*unstructured.Unstructured).GetName() },
		UpdateFunc: func(_, obj any) { seen <- "update " + obj.(*unstructured.Unstructured).GetName() },
		DeleteFunc: func(obj any) { seen <- "delete" },
	}); err != nil {
		t.Fatal(err)
	}
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("the informer did not sync")
	}
	expect := func(want string) {
		t.Helper()
		select {
		case got := <-seen:
			if got != want {
				t.Fatalf("informer saw %q, want %q", got, want)
			}
		case <-ctx.Done():
			t.Fatalf("informer never saw %q", want)
		}
	}

	first, err := cms.Apply(ctx, "a", configMap("a", map[string]string{"app": "shop"}, map[string]any{"k": "v"}), metav1.ApplyOptions{FieldManager: "t", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	expect("add a")
	mf := first.GetManagedFields()
	if len(mf) != 1 || mf[0].Manager != "t" || mf[0].Operation != metav1.ManagedFieldsOperationApply ||
		mf[0].FieldsV1.GetRawString() != `{"f:data":{".":{},"f:k":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}` {
		t.Fatalf("managed fields after apply: %+v", mf)
	}
	again, err := cms.Apply(ctx, "a", configMap("a", map[string]string{"app": "shop"}, map[string]any{"k": "v"}), metav1.ApplyOptions{FieldManager: "t", Force: true})
	if err != nil || again.GetResourceVersion() != first.GetResourceVersion() {
		t.Fatalf("the same apply again: %v, resourceVersion %s then %s (want no write)", err, first.GetResourceVersion(), again.GetResourceVersion())
	}
	if _, err := cms.Apply(ctx, "a", configMap("a", map[string]string{"app": "shop"}, map[string]any{"k": "w"}), metav1.ApplyOptions{FieldManager: "t", Force: true}); err != nil {
		t.Fatal(err)
	}
	expect("update a")
	if _, err := cms.Create(ctx, configMap("other", map[string]string{"app": "else"}, nil), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, configMap("other", nil, nil), metav1.CreateOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}

	md := metadata.NewForConfigOrDie(cfg)
	mlist, err := md.Resource(configMapsGVR).Namespace("shop").List(ctx, metav1.ListOptions{})
	if err != nil || len(mlist.Items) != 2 {
		t.Fatalf("metadata list: %v, %d items, want 2", err, len(mlist.Items))
	}

	wrong := types.UID("not-its-uid")
	if err := cms.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}}); !apierrors.IsConflict(err) {
		t.Fatalf("delete with another UID: %v, want Conflict", err)
	}
	if err := dyn.Resource(namespacesGVR).Delete(ctx, "shop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("delete")
	if n := c.Objects(configMapsGVR); n != 0 {
		t.Fatalf("%d ConfigMaps left after their namespace's delete", n)
	}
	select {
	case got := <-seen:
		t.Fatalf("the informer saw %q of an object its selector leaves out", got)
	default:
	}
}

// TestWatchFromTooOld: a watch from a resourceVersion older than the
// history is told so (410), and the informer lists again rather than
// missing changes.
func TestWatchFromTooOld(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := New()
	dyn := dynamic.NewForConfigOrDie(c.Config())
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "n"}}}
	if _, err := dyn.Resource(namespacesGVR).Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range historyLength + 10 {
		if _, err := dyn.Resource(configMapsGVR).Namespace("n").Apply(ctx, "a", configMap("a", nil, map[string]any{"i": string(rune('a'+i%26)) + string(rune('a'+i/26%26))}),
			metav1.ApplyOptions{FieldManager: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	w, err := dyn.Resource(configMapsGVR).Watch(ctx, metav1.ListOptions{ResourceVersion: "2"})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	e := <-w.ResultChan()
	if st, ok := e.Object.(*metav1.Status); e.Type != "ERROR" || !ok || st.Code != 410 {
		t.Fatalf("watch from an expired resourceVersion: %s %#v, want an ERROR event with 410", e.Type, e.Object)
	}
}
