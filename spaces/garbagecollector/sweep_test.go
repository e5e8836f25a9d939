// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package garbagecollector

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	fakedynamic "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/metadata"
	fakemetadata "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/kubestellar/kubestellar/spaces"
)

type fakeClients struct {
	meta metadata.Interface
	disc discovery.DiscoveryInterface
	dyn  dynamic.Interface
}

func (f fakeClients) Metadata(string) (metadata.Interface, error)            { return f.meta, nil }
func (f fakeClients) Discovery(string) (discovery.DiscoveryInterface, error) { return f.disc, nil }
func (f fakeClients) Dynamic(string) (dynamic.Interface, error)              { return f.dyn, nil }

func partial(apiVersion, kind, space, ns, name string, mutate func(*metav1.PartialObjectMetadata)) *metav1.PartialObjectMetadata {
	p := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{spaces.Annotation: space}}}
	if mutate != nil {
		mutate(p)
	}
	return p
}

// TestSweepFindsWhatWasLeft checks that a sweep queues the objects a
// stopped server may have left: those with owners outside mailboxes, and
// those being deleted with the collector's finalizers anywhere, of
// built-in kinds and of every CRD.
func TestSweepFindsWhatWasLeft(t *testing.T) {
	owned := func(p *metav1.PartialObjectMetadata) {
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "o", UID: "u"}}
	}
	deleting := func(p *metav1.PartialObjectMetadata) {
		now := metav1.NewTime(time.Now())
		p.DeletionTimestamp = &now
		p.Finalizers = []string{metav1.FinalizerDeleteDependents}
	}
	mailbox := "inv1-mb-0c7b6a2e-5d1f-4a8e-9c3b-2f6d8e1a4b7c"
	scheme := fakemetadata.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	meta := fakemetadata.NewSimpleMetadataClient(scheme,
		partial("v1", "ConfigMap", "one", "default", "owned", owned),
		partial("v1", "ConfigMap", "one", "default", "plain", nil),
		partial("v1", "ConfigMap", mailbox, "default", "copy", owned),
		partial("v1", "ConfigMap", mailbox, "default", "held", deleting),
		partial("example.com/v1", "Widget", "two", "default", "w", deleting),
	)
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1",
		APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete", "get"}},
			{Name: "configmaps/status", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"get"}},
			{Name: "bindings", Namespaced: true, Kind: "Binding", Verbs: []string{"create"}},
		}}}}}
	crd := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": map[string]any{"name": "widgets.example.com"},
		"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets"},
			"versions": []any{map[string]any{"name": "v1beta1", "served": false, "storage": false}, map[string]any{"name": "v1", "served": true, "storage": true}}}}}
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdsGVR: "CustomResourceDefinitionList"}, crd)

	c := New()
	n, err := c.sweep(context.Background(), fakeClients{meta: meta, disc: disc, dyn: dyn})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for c.queue.Len() > 0 {
		i, _ := c.queue.Get()
		got = append(got, i.String())
		c.queue.Done(i)
	}
	slices.Sort(got)
	want := []string{
		"1 one configmaps default/owned",
		"2 " + mailbox + " configmaps default/held",
		"2 two widgets.example.com default/w",
	}
	if !slices.Equal(got, want) || n != len(want) {
		t.Errorf("swept %d items:\n%q\nwant\n%q", n, got, want)
	}
}
