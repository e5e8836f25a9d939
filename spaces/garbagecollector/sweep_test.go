// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package garbagecollector

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
	got := queued(c)
	want := []string{
		"1 one configmaps default/owned",
		"2 " + mailbox + " configmaps default/held",
		"2 two widgets.example.com default/w",
	}
	if !slices.Equal(got, want) || n != len(want) {
		t.Errorf("swept %d items:\n%q\nwant\n%q", n, got, want)
	}
}

// byDefinitionClients answers each space (a wildcard, or a definition's)
// from a metadata client of its own, and records which were asked.
type byDefinitionClients struct {
	fakeClients
	meta  map[string]metadata.Interface
	asked *[]string
}

func (f byDefinitionClients) Metadata(space string) (metadata.Interface, error) {
	*f.asked = append(*f.asked, space)
	if m, ok := f.meta[space]; ok {
		return m, nil
	}
	return fakemetadata.NewSimpleMetadataClient(fakemetadata.NewTestScheme()), nil
}

// TestSweepReadsByDefinition: with CRDs per space, the custom resources of
// the spaces' own CRDs are swept one definition at a time (two spaces that
// define widgets differently, each read apart), never through the plain
// wildcard, which cannot serve them; a CRD whose names are not accepted
// serves nothing and is not read.
func TestSweepReadsByDefinition(t *testing.T) {
	deleting := func(p *metav1.PartialObjectMetadata) {
		now := metav1.NewTime(time.Now())
		p.DeletionTimestamp = &now
		p.Finalizers = []string{metav1.FinalizerDeleteDependents}
	}
	crd := func(space, field string, accepted bool) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
			"metadata": map[string]any{"name": "widgets.example.com", "annotations": map[string]any{spaces.Annotation: space}},
			"spec": map[string]any{"group": "example.com", "names": map[string]any{"plural": "widgets", "kind": "Widget"}, "scope": "Namespaced",
				"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
					"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "properties": map[string]any{field: map[string]any{"type": "string"}}}}}}}}}
		if accepted {
			u.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "NamesAccepted", "status": "True"}}}
		}
		return u
	}
	two, three, unaccepted := crd("two", "size", true), crd("three", "color", true), crd("four", "shape", false)
	identity := func(u *unstructured.Unstructured) string {
		typed := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, typed); err != nil {
			t.Fatal(err)
		}
		return spaces.DefinitionIdentity(typed)
	}
	scheme := fakemetadata.NewTestScheme()
	metav1.AddMetaToScheme(scheme)
	meta := map[string]metadata.Interface{
		spaces.WildcardOf(identity(two)):   fakemetadata.NewSimpleMetadataClient(scheme, partial("example.com/v1", "Widget", "two", "default", "a", deleting)),
		spaces.WildcardOf(identity(three)): fakemetadata.NewSimpleMetadataClient(scheme, partial("example.com/v1", "Widget", "three", "default", "b", deleting)),
	}
	disc := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: []*metav1.APIResourceList{{
		GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: []string{"list", "delete"}}}}}}}
	// Spaces' CRDs share names, which the fake's tracker cannot hold: the
	// list is answered as the wildcard answers it.
	dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{crdsGVR: "CustomResourceDefinitionList"})
	dyn.PrependReactor("list", "customresourcedefinitions", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinitionList"},
			Items: []unstructured.Unstructured{*two, *three, *unaccepted}}, nil
	})
	var asked []string
	c := New()
	c.ReadByDefinition()
	n, err := c.sweep(context.Background(), byDefinitionClients{fakeClients: fakeClients{disc: disc, dyn: dyn}, meta: meta, asked: &asked})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	want := []string{spaces.Wildcard, spaces.WildcardOf(identity(three)), spaces.WildcardOf(identity(two))}
	slices.Sort(want)
	if !slices.Equal(asked, want) {
		t.Errorf("read across %q, want %q", asked, want)
	}
	got := queued(c)
	wantItems := []string{"2 three widgets.example.com default/b", "2 two widgets.example.com default/a"}
	if !slices.Equal(got, wantItems) || n != len(wantItems) {
		t.Errorf("swept %d items:\n%q\nwant\n%q", n, got, wantItems)
	}
}

// queued takes every item off the collector's queue, sorted.
func queued(c *Collector) []string {
	var got []string
	for c.queue.Len() > 0 {
		i, _ := c.queue.Get()
		got = append(got, i.String())
		c.queue.Done(i)
	}
	slices.Sort(got)
	return got
}
