// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"

	"github.com/kubestellar/kubestellar/spaces"
)

// noStorage is the storage of definitions that serve no request here:
// making one builds everything else.
type noStorage struct{}

func (noStorage) GetRESTOptions(gr schema.GroupResource, _ runtime.Object) (generic.RESTOptions, error) {
	return generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{GroupResource: gr, Config: storagebackend.Config{Codec: unstructured.UnstructuredJSONScheme}},
		ResourcePrefix: "/" + gr.Group + "/" + gr.Resource,
		Decorator: func(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error), func() runtime.Object, func() runtime.Object,
			storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
			return unusedStorage{}, func() {}, nil
		},
	}, nil
}

type unusedStorage struct{ storage.Interface }

func widgets(space string, schema string) *apiextensionsv1.CustomResourceDefinition {
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.com", UID: types.UID("widgets-in-" + space), ResourceVersion: "1"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "example.com", Scope: apiextensionsv1.NamespaceScoped,
			Conversion: &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter},
			Names:      apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
					Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: schema}}}}}}},
		Status: apiextensionsv1.CustomResourceDefinitionStatus{
			AcceptedNames: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Conditions: []apiextensionsv1.CustomResourceDefinitionCondition{
				{Type: apiextensionsv1.NamesAccepted, Status: apiextensionsv1.ConditionTrue},
				{Type: apiextensionsv1.Established, Status: apiextensionsv1.ConditionTrue}}},
	}
}

// TestIdentity: a definition's identity is what serving depends on: the
// same definition in two spaces (other UIDs, other resource versions,
// other states) is one; another schema or other accepted names is
// another.
func TestIdentity(t *testing.T) {
	a, b := widgets("a", "object"), widgets("b", "object")
	b.ResourceVersion = "7"
	b.Status.Conditions[1].Status = apiextensionsv1.ConditionFalse
	now := metav1.Now()
	b.DeletionTimestamp = &now
	require.Equal(t, Identity(a), Identity(b), "a CRD's state is not its definition")

	other := widgets("a", "string")
	require.NotEqual(t, Identity(a), Identity(other), "another schema")
	renamed := widgets("a", "object")
	renamed.Status.AcceptedNames.ShortNames = []string{"wd"}
	require.NotEqual(t, Identity(a), Identity(renamed), "other accepted names")
}

type definitions map[string]*apiextensionsv1.CustomResourceDefinition

func (d definitions) For(space, group, resource string) (*apiextensionsv1.CustomResourceDefinition, error) {
	return d[space], nil
}

func (d definitions) InUse(f func(*apiextensionsv1.CustomResourceDefinition)) error {
	for _, crd := range d {
		f(crd)
	}
	return nil
}

// TestDefinitionsAreSharedAndLetGo: spaces with the same definition share
// one upstream handler, a space with another has its own, and a definition
// no space serves any more is let go, its upstream handler told of the
// deletion (which tears its storage down). Requests that are not for a
// custom resource, and all before SetDefinitions, go on.
func TestDefinitionsAreSharedAndLetGo(t *testing.T) {
	passed := 0
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { passed++ })
	h := New(Config{RESTOptionsGetter: noStorage{}}, next)
	serve := func(space string, info *request.RequestInfo) {
		req := httptest.NewRequest(http.MethodGet, "/apis/example.com/v1/widgets", nil)
		ctx := request.WithRequestInfo(spaces.WithSpace(req.Context(), space), info)
		h.ServeHTTP(httptest.NewRecorder(), req.WithContext(ctx))
	}
	list := &request.RequestInfo{IsResourceRequest: true, Verb: "list", APIGroup: "example.com", APIVersion: "v1", Resource: "widgets"}

	serve("a", list)
	require.Equal(t, 1, passed, "before SetDefinitions, every request goes on")
	defs := definitions{"a": widgets("a", "object"), "b": widgets("b", "object"), "c": widgets("c", "string")}
	h.SetDefinitions(defs)
	serve("a", &request.RequestInfo{IsResourceRequest: false, Path: "/apis"})
	serve("a", &request.RequestInfo{IsResourceRequest: true, Verb: "list", APIVersion: "v1", Resource: "pods"})
	serve("nowhere", list)
	require.Equal(t, 4, passed, "discovery, built-in kinds and a resource no CRD defines go on")
	require.Zero(t, h.Served())

	for _, space := range []string{"a", "b", "c"} {
		d, err := h.definitionOf(context.Background(), space, "example.com", "widgets")
		require.NoError(t, err)
		require.NotNil(t, d)
	}
	require.Equal(t, 2, h.Served(), "a and b share a definition; c has its own")
	shared := (*h.served.Load())[Identity(defs["a"])]
	deleted := 0
	shared.removed = append(shared.removed, func(any) { deleted++ })

	delete(defs, "a")
	require.NoError(t, h.Sweep(context.Background()))
	require.Equal(t, 2, h.Served(), "b still serves the shared definition")
	require.Zero(t, deleted)
	delete(defs, "b")
	require.NoError(t, h.Sweep(context.Background()))
	require.Equal(t, 1, h.Served())
	require.Equal(t, 1, deleted, "the upstream handler heard of the deletion")
	require.Empty(t, shared.cache.List(), "its cache is empty: nothing left to serve")
}

// TestTerminatingAndNotYetAccepted: a CRD not yet accepted is not served
// (404, and no handler made for it); creates of the custom resources of a
// CRD being deleted are refused by admission, as upstream refuses them,
// and nothing else is.
func TestTerminatingAndNotYetAccepted(t *testing.T) {
	next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("passed on") })
	h := New(Config{RESTOptionsGetter: noStorage{}}, next)
	crd := widgets("a", "object")
	crd.Status.Conditions = nil
	h.SetDefinitions(definitions{"a": crd})
	req := httptest.NewRequest(http.MethodGet, "/apis/example.com/v1/namespaces/default/widgets", nil)
	ctx := request.WithRequestInfo(spaces.WithSpace(req.Context(), "a"),
		&request.RequestInfo{IsResourceRequest: true, Verb: "list", APIGroup: "example.com", APIVersion: "v1", Namespace: "default", Resource: "widgets"})
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(ctx))
	require.Equal(t, http.StatusNotFound, rec.Code)
	require.Zero(t, h.Served(), "nothing made for a CRD not yet accepted")

	inner := &admitted{}
	a := terminatingAdmission{inner}
	gr := schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}
	attrs := func(op admission.Operation) admission.Attributes {
		return admission.NewAttributesRecord(nil, nil, schema.GroupVersionKind{}, "default", "w", gr, "", op, nil, false, nil)
	}
	terminating := context.WithValue(context.Background(), terminatingKey{}, true)
	require.True(t, a.Handles(admission.Create))
	err := a.Validate(terminating, attrs(admission.Create), nil)
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	require.Contains(t, err.Error(), "create not allowed while custom resource definition is terminating")
	require.Error(t, a.Admit(terminating, attrs(admission.Create), nil))
	require.NoError(t, a.Validate(terminating, attrs(admission.Update), nil), "updates go on while it terminates")
	require.NoError(t, a.Validate(context.Background(), attrs(admission.Create), nil))
	require.NoError(t, a.Admit(context.Background(), attrs(admission.Create), nil))
	require.Equal(t, 3, inner.calls, "the server's admission is asked of everything not refused")
}

// admitted is the server's admission, counting what it is asked.
type admitted struct{ calls int }

func (a *admitted) Handles(admission.Operation) bool { return true }
func (a *admitted) Admit(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	a.calls++
	return nil
}
func (a *admitted) Validate(context.Context, admission.Attributes, admission.ObjectInterfaces) error {
	a.calls++
	return nil
}
