// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package customresources

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	openapiv2 "github.com/google/gnostic-models/openapiv2"
	openapiv3 "github.com/google/gnostic-models/openapiv3"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	appsv1 "k8s.io/api/apps/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/endpoints/discovery"
	"k8s.io/apiserver/pkg/endpoints/discovery/aggregated"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	clientdiscovery "k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/rest"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"

	serveropenapi "github.com/kubestellar/kubestellar/server/openapi"
	"github.com/kubestellar/kubestellar/spaces"
)

// sized is a space's widgets.example.com whose spec.size has type typ.
func sized(space, typ string) *apiextensionsv1.CustomResourceDefinition {
	crd := widgets(space, "object")
	crd.Spec.Versions[0].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object",
		Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object",
			Properties: map[string]apiextensionsv1.JSONSchemaProps{"size": {Type: typ}}}}}}
	return crd
}

// inGroup is a space's CRD of plural in group, served in versions.
func inGroup(space, group, plural, kind string, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	crd := established(sized(space, "integer"), versions...)
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Schema = &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}
	}
	names := apiextensionsv1.CustomResourceDefinitionNames{Plural: plural, Singular: strings.TrimSuffix(plural, "s"), Kind: kind, ListKind: kind + "List"}
	crd.Name, crd.UID, crd.Spec.Group, crd.Spec.Names, crd.Status.AcceptedNames = plural+"."+group, types.UID(plural+"-in-"+space), group, names, names
	return crd
}

// rootGizmos is the root space's CRD served in every space: it is in the
// server's documents.
func rootGizmos() *apiextensionsv1.CustomResourceDefinition {
	return inGroup(spaces.Root, "root.example.org", "gizmos", "Gizmo", "v1")
}

// deploymentRoutes are apps/v1's routes, as an API group installs them:
// get and delete of deployments.
func deploymentRoutes() *restful.WebService {
	ws := new(restful.WebService).Path("/apis/apps/v1").Consumes("application/json").Produces("application/json")
	noop := func(*restful.Request, *restful.Response) {}
	ws.Route(ws.GET("/namespaces/{namespace}/deployments/{name}").To(noop).Operation("readAppsV1NamespacedDeployment").
		Param(ws.PathParameter("namespace", "namespace")).Param(ws.PathParameter("name", "name")).
		Returns(http.StatusOK, "OK", appsv1.Deployment{}).Writes(appsv1.Deployment{}))
	ws.Route(ws.DELETE("/namespaces/{namespace}/deployments/{name}").To(noop).Operation("deleteAppsV1NamespacedDeployment").
		Param(ws.PathParameter("namespace", "namespace")).Param(ws.PathParameter("name", "name")).
		Reads(metav1.DeleteOptions{}).Returns(http.StatusOK, "OK", metav1.Status{}).Writes(metav1.Status{}))
	return ws
}

// servedDocuments is what the server serves, inside a space, of
// discovery and OpenAPI: apps/v1 and the root's gizmos, by the upstream
// handlers the server serves them with (the generic server's discovery,
// aggregated and legacy, kube-openapi's OpenAPI services with the v2
// document merged as the apiextensions server merges CRDs into it).
func servedDocuments(t *testing.T) http.Handler {
	t.Helper()
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	codecs := serializer.NewCodecFactory(scheme)
	gizmos := DiscoveryOf([]*apiextensionsv1.CustomResourceDefinition{rootGizmos()})
	m := mux.NewPathRecorderMux("served")

	apps := metav1.APIGroup{Name: "apps", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "apps/v1", Version: "v1"}}}
	apps.PreferredVersion = apps.Versions[0]
	deployments := []metav1.APIResource{{Name: "deployments", SingularName: "deployment", Namespaced: true, Kind: "Deployment",
		Verbs: metav1.Verbs{"get", "delete"}}}
	legacy := discovery.NewRootAPIsHandler(discovery.DefaultAddresses{DefaultAddress: "10.0.0.1:6443"}, codecs)
	legacy.AddGroup(apps)
	legacy.AddGroup(gizmos.Groups[0])
	agg := aggregated.NewResourceManager("apis")
	agg.AddGroupVersion("apps", apidiscoveryv2.APIVersionDiscovery{Version: "v1", Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
		Resources: []apidiscoveryv2.APIResourceDiscovery{{Resource: "deployments", SingularResource: "deployment", Scope: apidiscoveryv2.ScopeNamespace,
			ResponseKind: &metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Verbs: []string{"get", "delete"}}}})
	for _, v := range gizmos.Aggregated[0].Versions {
		agg.AddGroupVersion("root.example.org", v)
	}
	m.Handle("/apis", aggregated.WrapAggregatedDiscoveryToHandler(legacy, agg, nil))
	m.Handle("/apis/apps", discovery.NewAPIGroupHandler(codecs, apps))
	m.Handle("/apis/apps/v1", discovery.NewAPIVersionHandler(codecs, schema.GroupVersion{Group: "apps", Version: "v1"},
		discovery.APIResourceListerFunc(func() []metav1.APIResource { return deployments })))
	m.Handle("/apis/root.example.org", discovery.NewAPIGroupHandler(codecs, gizmos.Groups[0]))
	m.Handle("/apis/root.example.org/v1", discovery.NewAPIVersionHandler(codecs, schema.GroupVersion{Group: "root.example.org", Version: "v1"},
		discovery.APIResourceListerFunc(func() []metav1.APIResource {
			return gizmos.Resources[metav1.GroupVersion{Group: "root.example.org", Version: "v1"}].APIResources
		})))

	namer := openapinamer.NewDefinitionNamer(scheme)
	routes := restfuladapter.AdaptWebServices([]*restful.WebService{deploymentRoutes()})
	// As the server's config completed: the version is the server's.
	v2config := genericapiserver.DefaultOpenAPIConfig(serveropenapi.GetOpenAPIDefinitions, namer)
	v3config := genericapiserver.DefaultOpenAPIV3Config(serveropenapi.GetOpenAPIDefinitions, namer)
	v2config.Info.Version, v3config.Info.Version = "v1.37.2", "v1.37.2"
	static, err := builder2.BuildOpenAPISpecFromRoutes(routes, v2config)
	require.NoError(t, err)
	static.Definitions = handler.PruneDefaults(static.Definitions)
	root, err := builder.BuildOpenAPIV2(rootGizmos(), "v1", builder.Options{V2: true})
	require.NoError(t, err)
	root.Definitions = handler.PruneDefaults(root.Definitions)
	v2, err := builder.MergeSpecs(static, root)
	require.NoError(t, err)
	handler.NewOpenAPIService(v2).RegisterOpenAPIVersionedService("/openapi/v2", m)

	v3 := handler3.NewOpenAPIService()
	require.NoError(t, v3.RegisterOpenAPIV3VersionedService("/openapi/v3", m))
	appsDoc, err := builder3.BuildOpenAPISpecFromRoutes(routes, v3config)
	require.NoError(t, err)
	v3.UpdateGroupVersion("apis/apps/v1", appsDoc)
	rootDoc, err := builder.BuildOpenAPIV3(rootGizmos(), "v1", builder.Options{})
	require.NoError(t, err)
	v3.UpdateGroupVersion("apis/root.example.org/v1", rootDoc)
	return m
}

// servedOpenAPIV2 is the server's /openapi/v2, in JSON.
func servedOpenAPIV2(t *testing.T) []byte {
	rec := serve(servedDocuments(t), http.MethodGet, "/openapi/v2", "application/json")
	require.Equal(t, http.StatusOK, rec.Code)
	return rec.Body.Bytes()
}

// ownCRDs is SpaceCRDs from a map: a space not in it is not synced.
type ownCRDs map[string][]*apiextensionsv1.CustomResourceDefinition

func (o ownCRDs) Own(space string) ([]*apiextensionsv1.CustomResourceDefinition, bool) {
	crds, ok := o[space]
	return crds, ok
}

func serve(h http.Handler, method, path, accept string, header ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

const (
	aggregatedJSON     = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	aggregatedProtobuf = "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
	kubernetesProtobuf = "application/vnd.kubernetes.protobuf"
)

// spaceServer is the filter in front of the server's documents, behind
// the filter of space paths, as in the server's chain.
func spaceServer(t *testing.T, crds ownCRDs) (http.Handler, *spaceDocuments, http.Handler) {
	served := servedDocuments(t)
	d := newSpaceDocuments(served, crds, builder.Options{})
	return spaces.WithSpacePath(d), d, served
}

func decode(t *testing.T, data []byte, into any) {
	t.Helper()
	require.NoError(t, json.Unmarshal(data, into), string(data))
}

// TestSpaceDocumentsDiscovery: a space with a CRD of its own finds it in
// /apis (legacy and aggregated, in JSON and protobuf), its group and its
// group version, beside the server's groups; another space, with another
// definition of the name, finds its own.
func TestSpaceDocumentsDiscovery(t *testing.T) {
	h, d, served := spaceServer(t, ownCRDs{"team-a": {sized("a", "integer")}, "team-b": {sized("b", "string")}})

	rec := serve(h, http.MethodGet, "/spaces/team-a/apis", "application/json")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var list metav1.APIGroupList
	decode(t, rec.Body.Bytes(), &list)
	var names []string
	for _, g := range list.Groups {
		names = append(names, g.Name)
	}
	require.Equal(t, []string{"apps", "root.example.org", "example.com"}, names)
	require.Equal(t, "example.com/v1", list.Groups[2].PreferredVersion.GroupVersion)
	require.Equal(t, list.Groups[0].ServerAddressByClientCIDRs, list.Groups[2].ServerAddressByClientCIDRs)
	require.NotEmpty(t, list.Groups[2].ServerAddressByClientCIDRs)
	// Encoded as the server encodes its own list.
	var top, servedTop map[string]any
	decode(t, rec.Body.Bytes(), &top)
	decode(t, serve(served, http.MethodGet, "/apis", "application/json").Body.Bytes(), &servedTop)
	require.Equal(t, servedTop["kind"], top["kind"])
	require.Equal(t, servedTop["apiVersion"], top["apiVersion"])

	// The server's list in protobuf has no apiVersion (the generic
	// server strips it, as it has since Kubernetes 1.1): nor has the
	// space's.
	rec = serve(h, http.MethodGet, "/spaces/team-a/apis", kubernetesProtobuf)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, kubernetesProtobuf, rec.Header().Get("Content-Type"))
	groupList := &schema.GroupVersionKind{Version: "v1", Kind: "APIGroupList"}
	_, _, err := d.codecs.UniversalDeserializer().Decode(serve(served, http.MethodGet, "/apis", kubernetesProtobuf).Body.Bytes(), nil, nil)
	require.ErrorContains(t, err, "'apiVersion' is missing")
	_, _, err = d.codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, nil)
	require.ErrorContains(t, err, "'apiVersion' is missing")
	obj, _, err := d.codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), groupList, nil)
	require.NoError(t, err)
	require.Len(t, obj.(*metav1.APIGroupList).Groups, 3)
	require.Equal(t, "example.com", obj.(*metav1.APIGroupList).Groups[2].Name)

	aggregatedWidgets := func(list *apidiscoveryv2.APIGroupDiscoveryList) apidiscoveryv2.APIResourceDiscovery {
		t.Helper()
		var groups []string
		for _, g := range list.Items {
			groups = append(groups, g.Name)
		}
		require.Equal(t, []string{"apps", "root.example.org", "example.com"}, groups)
		ex := list.Items[2]
		require.Len(t, ex.Versions, 1)
		require.Len(t, ex.Versions[0].Resources, 1)
		return ex.Versions[0].Resources[0]
	}
	rec = serve(h, http.MethodGet, "/spaces/team-a/apis", aggregatedJSON+","+clientdiscovery.AcceptV1)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, aggregatedJSON, rec.Header().Get("Content-Type"))
	var agg apidiscoveryv2.APIGroupDiscoveryList
	decode(t, rec.Body.Bytes(), &agg)
	require.Equal(t, "widgets", aggregatedWidgets(&agg).Resource)
	require.Equal(t, apidiscoveryv2.ScopeNamespace, aggregatedWidgets(&agg).Scope)
	etag := rec.Header().Get("ETag")
	require.NotEmpty(t, etag)
	require.NotEqual(t, serve(served, http.MethodGet, "/apis", aggregatedJSON).Header().Get("ETag"), etag, "the validator of the space's document")
	rec = serve(h, http.MethodGet, "/spaces/team-a/apis", aggregatedJSON, "If-None-Match", etag)
	require.Equal(t, http.StatusNotModified, rec.Code)
	require.Equal(t, http.StatusOK, serve(h, http.MethodGet, "/spaces/team-b/apis", aggregatedJSON, "If-None-Match", etag).Code,
		"another space's document is another")

	rec = serve(h, http.MethodGet, "/spaces/team-a/apis", aggregatedProtobuf+","+aggregatedJSON)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, aggregatedProtobuf, rec.Header().Get("Content-Type"))
	obj, _, err = d.codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, nil)
	require.NoError(t, err)
	require.Equal(t, "widgets", aggregatedWidgets(obj.(*apidiscoveryv2.APIGroupDiscoveryList)).Resource)

	rec = serve(h, http.MethodGet, "/spaces/team-a/apis", "application/yaml")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Contains(t, rec.Body.String(), "name: example.com")

	rec = serve(h, http.MethodGet, "/spaces/team-a/apis/example.com", "application/json")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var group metav1.APIGroup
	decode(t, rec.Body.Bytes(), &group)
	require.Equal(t, "example.com/v1", group.PreferredVersion.GroupVersion)

	for _, accept := range []string{"application/json", kubernetesProtobuf} {
		rec = serve(h, http.MethodGet, "/spaces/team-a/apis/example.com/v1/", accept)
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		obj, _, err = d.codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, nil)
		require.NoError(t, err)
		resources := obj.(*metav1.APIResourceList)
		require.Equal(t, "example.com/v1", resources.GroupVersion)
		require.Len(t, resources.APIResources, 1)
		require.Equal(t, "widgets", resources.APIResources[0].Name)
		require.Equal(t, "Widget", resources.APIResources[0].Kind)
	}

	require.Equal(t, http.StatusNotAcceptable, serve(h, http.MethodGet, "/spaces/team-a/apis/example.com/v1", "text/plain").Code)

	// HEAD is answered as GET (the server sends no body).
	rec = serve(h, http.MethodHead, "/spaces/team-a/apis", aggregatedJSON)
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, etag, rec.Header().Get("ETag"))
}

// TestSpaceDocumentsOpenAPI: a space's OpenAPI v3 index lists its group
// version at a URL relative to the space, as the server's are; the
// document there is the space's own schema (JSON, protobuf), cached for
// good when asked with its hash; the v2 document has the space's
// definitions and paths beside the server's. Another space's definition
// of the name gives its own.
func TestSpaceDocumentsOpenAPI(t *testing.T) {
	h, _, served := spaceServer(t, ownCRDs{"team-a": {sized("a", "integer")}, "team-b": {sized("b", "string")}})

	index := func(space string) handler3.OpenAPIV3Discovery {
		t.Helper()
		rec := serve(h, http.MethodGet, "/spaces/"+space+"/openapi/v3", "application/json")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var index handler3.OpenAPIV3Discovery
		decode(t, rec.Body.Bytes(), &index)
		return index
	}
	var servedIndex handler3.OpenAPIV3Discovery
	decode(t, serve(served, http.MethodGet, "/openapi/v3", "").Body.Bytes(), &servedIndex)
	a := index("team-a")
	require.Len(t, a.Paths, len(servedIndex.Paths)+1)
	for p, gv := range servedIndex.Paths {
		require.Equal(t, gv, a.Paths[p], "the server's group versions, as they were")
	}
	widgetsURL := a.Paths["apis/example.com/v1"].ServerRelativeURL
	require.Regexp(t, `^/openapi/v3/apis/example.com/v1\?hash=[0-9A-F]{128}$`, widgetsURL, "of the form of the server's")
	require.Regexp(t, `^/openapi/v3/apis/apps/v1\?hash=[0-9A-F]{128}$`, a.Paths["apis/apps/v1"].ServerRelativeURL)
	b := index("team-b")
	require.NotEqual(t, widgetsURL, b.Paths["apis/example.com/v1"].ServerRelativeURL)

	size := func(space, u string) (string, *httptest.ResponseRecorder) {
		t.Helper()
		rec := serve(h, http.MethodGet, "/spaces/"+space+u, "application/json")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
		var doc struct {
			Components struct {
				Schemas map[string]struct {
					Properties map[string]struct {
						Properties map[string]struct {
							Type string `json:"type"`
						} `json:"properties"`
					} `json:"properties"`
				} `json:"schemas"`
			} `json:"components"`
		}
		decode(t, rec.Body.Bytes(), &doc)
		return doc.Components.Schemas["com.example.v1.Widget"].Properties["spec"].Properties["size"].Type, rec
	}
	typ, rec := size("team-a", widgetsURL)
	require.Equal(t, "integer", typ)
	hash := strings.TrimPrefix(widgetsURL, "/openapi/v3/apis/example.com/v1?hash=")
	require.Equal(t, `"`+hash+`"`, rec.Header().Get("Etag"))
	require.Equal(t, "public, immutable", rec.Header().Get("Cache-Control"))
	require.Equal(t, http.StatusNotModified, serve(h, http.MethodGet, "/spaces/team-a"+widgetsURL, "application/json", "If-None-Match", `"`+hash+`"`).Code)
	typ, rec = size("team-a", "/openapi/v3/apis/example.com/v1?hash=0123")
	require.Equal(t, "integer", typ)
	require.Empty(t, rec.Header().Get("Cache-Control"), "another hash: not to be kept for good")
	typ, _ = size("team-b", b.Paths["apis/example.com/v1"].ServerRelativeURL)
	require.Equal(t, "string", typ, "another space's definition of the name")

	rec = serve(h, http.MethodGet, "/spaces/team-a"+widgetsURL, openapi.ContentTypeOpenAPIV3PB)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, openAPIV3Protobuf, rec.Header().Get("Content-Type"))
	var doc3 openapiv3.Document
	require.NoError(t, proto.Unmarshal(rec.Body.Bytes(), &doc3))
	var found bool
	for _, s := range doc3.GetComponents().GetSchemas().GetAdditionalProperties() {
		found = found || s.GetName() == "com.example.v1.Widget"
	}
	require.True(t, found, "the Widget schema in the protobuf document")
	require.Equal(t, http.StatusNotAcceptable, serve(h, http.MethodGet, "/spaces/team-a"+widgetsURL, "text/html").Code)

	// v2: the server's document, and the space's definitions and paths.
	v2size := func(space string) (string, map[string]json.RawMessage) {
		t.Helper()
		rec := serve(h, http.MethodGet, "/spaces/"+space+"/openapi/v2", "application/json")
		require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
		var doc struct {
			Swagger     string                     `json:"swagger"`
			Paths       map[string]json.RawMessage `json:"paths"`
			Definitions map[string]json.RawMessage `json:"definitions"`
		}
		decode(t, rec.Body.Bytes(), &doc)
		require.Equal(t, "2.0", doc.Swagger)
		require.Contains(t, doc.Paths, "/apis/example.com/v1/namespaces/{namespace}/widgets/{name}")
		require.Contains(t, doc.Paths, "/apis/apps/v1/namespaces/{namespace}/deployments/{name}")
		require.Contains(t, doc.Paths, "/apis/root.example.org/v1/namespaces/{namespace}/gizmos/{name}")
		for name := range doc.Definitions {
			require.NotRegexp(t, `_v\d+$`, name, "a definition renamed")
		}
		var widget struct {
			Properties map[string]struct {
				Properties map[string]struct {
					Type string `json:"type"`
				} `json:"properties"`
			} `json:"properties"`
		}
		decode(t, doc.Definitions["com.example.v1.Widget"], &widget)
		return widget.Properties["spec"].Properties["size"].Type, doc.Definitions
	}
	typ, defs := v2size("team-a")
	require.Equal(t, "integer", typ)
	require.Contains(t, defs, "io.k8s.api.apps.v1.Deployment")
	typ, _ = v2size("team-b")
	require.Equal(t, "string", typ)

	rec = serve(h, http.MethodGet, "/spaces/team-a/openapi/v2", "application/com.github.proto-openapi.spec.v2@v1.0+protobuf")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, openAPIV2Protobuf, rec.Header().Get("Content-Type"))
	var doc2 openapiv2.Document
	require.NoError(t, proto.Unmarshal(rec.Body.Bytes(), &doc2))
	var names []string
	for _, def := range doc2.GetDefinitions().GetAdditionalProperties() {
		names = append(names, def.GetName())
	}
	require.Contains(t, names, "com.example.v1.Widget")
	require.Contains(t, names, "io.k8s.api.apps.v1.Deployment")
	etag := rec.Header().Get("Etag")
	require.NotEmpty(t, etag)
	require.NotEqual(t, serve(served, http.MethodGet, "/openapi/v2", "application/json").Header().Get("Etag"), etag)
	require.Equal(t, http.StatusNotModified, serve(h, http.MethodGet, "/spaces/team-a/openapi/v2", "application/json", "If-None-Match", etag).Code)
	require.Equal(t, http.StatusOK, serve(h, http.MethodGet, "/spaces/team-b/openapi/v2", "application/json", "If-None-Match", etag).Code)
}

// TestSpaceDocumentsPassThrough: what a space without CRDs of its own
// (or with none established) is served is the server's, byte for byte; so
// is the root's and the wildcard's, whatever CRDs they have, the group
// versions a space does not define, and what is not a discovery or
// OpenAPI document. A space whose CRDs are not known yet is answered 503.
func TestSpaceDocumentsPassThrough(t *testing.T) {
	installing := sized("c", "integer")
	installing.Status.Conditions = nil
	h, _, served := spaceServer(t, ownCRDs{"team-a": {sized("a", "integer")}, "team-c": {}, "team-i": {installing},
		spaces.Root: {sized("root", "integer")}, spaces.Wildcard: {sized("any", "integer")}})

	same := func(prefix, path, accept string) {
		t.Helper()
		want := serve(served, http.MethodGet, path, accept)
		got := serve(h, http.MethodGet, prefix+path, accept)
		require.Equal(t, want.Code, got.Code, "%s%s as %s", prefix, path, accept)
		require.Equal(t, want.Body.String(), got.Body.String(), "%s%s as %s", prefix, path, accept)
		require.Equal(t, want.Header().Get("Content-Type"), got.Header().Get("Content-Type"), "%s%s as %s", prefix, path, accept)
		require.Equal(t, want.Header().Get("Etag"), got.Header().Get("Etag"), "%s%s as %s", prefix, path, accept)
	}
	documents := []struct{ path, accept string }{
		{"/apis", "application/json"}, {"/apis", aggregatedJSON}, {"/apis", aggregatedProtobuf}, {"/apis", kubernetesProtobuf},
		{"/apis/apps", "application/json"}, {"/apis/apps/v1", "application/json"},
		{"/openapi/v2", "application/json"}, {"/openapi/v2", openAPIV2ProtobufAt},
		{"/openapi/v3", "application/json"}, {"/openapi/v3/apis/apps/v1", "application/json"},
		{"/openapi/v3/apis/root.example.org/v1", openAPIV3ProtobufAt},
	}
	for _, prefix := range []string{"/spaces/team-c", "/spaces/team-i", "", "/spaces/root"} {
		for _, doc := range documents {
			same(prefix, doc.path, doc.accept)
		}
	}
	// The wildcard's requests are the server's (read-only, as admission
	// says further out).
	for _, doc := range documents {
		same("/spaces/*", doc.path, doc.accept)
	}
	// What team-a does not define.
	for _, path := range []string{"/apis/apps", "/apis/apps/v1", "/apis/root.example.org/v1", "/openapi/v3/apis/apps/v1",
		"/openapi/v3/apis/root.example.org/v1", "/apis/example.com/v2", "/openapi/v3/apis/example.com/v2", "/api/v1", "/version"} {
		same("/spaces/team-a", path, "application/json")
	}
	// Not a GET: in a space, refused whether it defines anything or
	// not; the root's and the wildcard's pass.
	for _, space := range []string{"team-a", "team-c"} {
		for _, path := range []string{"/apis", "/apis/apps", "/openapi/v2", "/openapi/v3"} {
			require.Equal(t, http.StatusMethodNotAllowed, serve(h, http.MethodPost, "/spaces/"+space+path, "application/json").Code, "POST %s in %s", path, space)
		}
	}
	require.Equal(t, http.StatusOK, serve(h, http.MethodPost, "/spaces/"+spaces.Root+"/apis", "application/json").Code)
	require.Equal(t, http.StatusOK, serve(h, http.MethodPost, "/apis", "application/json").Code)

	rec := serve(h, http.MethodGet, "/spaces/team-u/apis", aggregatedJSON)
	require.Equal(t, http.StatusServiceUnavailable, rec.Code, "a space whose CRDs are not known yet")
	var status metav1.Status
	decode(t, rec.Body.Bytes(), &status)
	require.Equal(t, metav1.StatusReasonServiceUnavailable, status.Reason)
	require.Equal(t, http.StatusServiceUnavailable, serve(h, http.MethodGet, "/spaces/team-u/openapi/v3/apis/apps/v1", "").Code)
	same("/spaces/team-u", "/apis/example.com/v1/widgets", "application/json")
}

// TestSpaceDocumentsShared: spaces whose CRDs are the same definitions
// share the documents built (built once, whichever asks first); another
// definition, or a CRD that changes state, is built anew.
func TestSpaceDocumentsShared(t *testing.T) {
	a, a2 := sized("a", "integer"), sized("a2", "integer")
	a2.ResourceVersion = "42"
	crds := ownCRDs{"team-a": {a}, "team-a2": {a2}, "team-b": {sized("b", "string")}}
	h, d, _ := spaceServer(t, crds)
	ask := func(space string) {
		t.Helper()
		for _, p := range []string{"/apis", "/openapi/v2", "/openapi/v3", "/openapi/v3/apis/example.com/v1"} {
			rec := serve(h, http.MethodGet, "/spaces/"+space+p, "application/json")
			require.Equal(t, http.StatusOK, rec.Code, "%s %s: %s", space, p, rec.Body.String())
		}
	}
	ask("team-a")
	require.EqualValues(t, 3, d.builds.Load(), "discovery, OpenAPI v2 and v3")
	ask("team-a")
	ask("team-a2")
	require.EqualValues(t, 3, d.builds.Load(), "team-a2's CRDs are team-a's definitions: built once")
	require.Equal(t, 1, d.docs.Len())
	ask("team-b")
	require.EqualValues(t, 6, d.builds.Load(), "another definition of the name")

	// team-a's CRD is being deleted: no writes in its discovery, which
	// team-a2's keeps.
	terminating := a.DeepCopy()
	terminating.ResourceVersion = "2"
	terminating.Status.Conditions = append(terminating.Status.Conditions,
		apiextensionsv1.CustomResourceDefinitionCondition{Type: apiextensionsv1.Terminating, Status: apiextensionsv1.ConditionTrue})
	crds["team-a"] = []*apiextensionsv1.CustomResourceDefinition{terminating}
	verbs := func(space string) []string {
		t.Helper()
		var list metav1.APIResourceList
		decode(t, serve(h, http.MethodGet, "/spaces/"+space+"/apis/example.com/v1", "application/json").Body.Bytes(), &list)
		require.Len(t, list.APIResources, 1)
		return list.APIResources[0].Verbs
	}
	require.NotContains(t, verbs("team-a"), "create")
	require.Contains(t, verbs("team-a2"), "create")

	// Asked for at once, by spaces that share them: built once.
	h, d, _ = spaceServer(t, ownCRDs{"team-a": {sized("a", "integer")}, "team-a2": {sized("a2", "integer")}})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			space := []string{"team-a", "team-a2"}[i%2]
			for _, p := range []string{"/openapi/v3/apis/example.com/v1", "/openapi/v2", "/apis"} {
				if rec := serve(h, http.MethodGet, "/spaces/"+space+p, openAPIV3ProtobufAt+","+openAPIV2ProtobufAt+","+aggregatedProtobuf); rec.Code != http.StatusOK {
					t.Errorf("%s %s: %d %s", space, p, rec.Code, rec.Body.String())
				}
			}
		}()
	}
	wg.Wait()
	require.EqualValues(t, 3, d.builds.Load())
}

// TestSpaceDocumentsSharedGroup: a space's CRD of a group the server's
// documents have (a root CRD served in every space) is listed in the
// group, once; a group version of both has the resources and the
// schemas of both, at a hash of its own.
func TestSpaceDocumentsSharedGroup(t *testing.T) {
	things := inGroup("a", "root.example.org", "things", "Thing", "v2", "v1")
	h, d, served := spaceServer(t, ownCRDs{"team-a": {things}})

	var list metav1.APIGroupList
	decode(t, serve(h, http.MethodGet, "/spaces/team-a/apis", "application/json").Body.Bytes(), &list)
	require.Len(t, list.Groups, 2, "apps, root.example.org")
	require.Equal(t, "root.example.org", list.Groups[1].Name)
	require.Equal(t, []metav1.GroupVersionForDiscovery{{GroupVersion: "root.example.org/v2", Version: "v2"}, {GroupVersion: "root.example.org/v1", Version: "v1"}},
		list.Groups[1].Versions)
	require.Equal(t, "v2", list.Groups[1].PreferredVersion.Version)

	rec := serve(h, http.MethodGet, "/spaces/team-a/apis", aggregatedProtobuf)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	obj, _, err := d.codecs.UniversalDeserializer().Decode(rec.Body.Bytes(), nil, nil)
	require.NoError(t, err)
	agg := obj.(*apidiscoveryv2.APIGroupDiscoveryList)
	require.Len(t, agg.Items, 2)
	root := agg.Items[1]
	require.Equal(t, "root.example.org", root.Name)
	require.Len(t, root.Versions, 2)
	require.Equal(t, "v2", root.Versions[0].Version)
	var resources []string
	for _, r := range root.Versions[1].Resources {
		resources = append(resources, r.Resource)
	}
	require.ElementsMatch(t, []string{"gizmos", "things"}, resources)

	var group metav1.APIGroup
	decode(t, serve(h, http.MethodGet, "/spaces/team-a/apis/root.example.org", "application/json").Body.Bytes(), &group)
	require.Len(t, group.Versions, 2)
	require.Equal(t, "v2", group.PreferredVersion.Version)
	var v1 metav1.APIResourceList
	decode(t, serve(h, http.MethodGet, "/spaces/team-a/apis/root.example.org/v1", "application/json").Body.Bytes(), &v1)
	require.Len(t, v1.APIResources, 2)
	require.Equal(t, "gizmos", v1.APIResources[0].Name)
	require.Equal(t, "things", v1.APIResources[1].Name)

	var index, servedIndex handler3.OpenAPIV3Discovery
	decode(t, serve(h, http.MethodGet, "/spaces/team-a/openapi/v3", "").Body.Bytes(), &index)
	decode(t, serve(served, http.MethodGet, "/openapi/v3", "").Body.Bytes(), &servedIndex)
	u := index.Paths["apis/root.example.org/v1"].ServerRelativeURL
	require.NotEqual(t, servedIndex.Paths["apis/root.example.org/v1"].ServerRelativeURL, u)
	require.Contains(t, index.Paths, "apis/root.example.org/v2")
	rec = serve(h, http.MethodGet, "/spaces/team-a"+u, "application/json")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	require.Equal(t, "public, immutable", rec.Header().Get("Cache-Control"), "the hash of the index is the document's")
	var doc struct {
		Components struct {
			Schemas map[string]json.RawMessage `json:"schemas"`
		} `json:"components"`
	}
	decode(t, rec.Body.Bytes(), &doc)
	require.Contains(t, doc.Components.Schemas, "org.example.root.v1.Gizmo")
	require.Contains(t, doc.Components.Schemas, "org.example.root.v1.Thing")
	parsed, err := url.Parse(u)
	require.NoError(t, err)
	require.Equal(t, `"`+parsed.Query().Get("hash")+`"`, rec.Header().Get("Etag"))
}

// TestSpaceDocumentsClientGo: client-go's discovery and OpenAPI clients,
// with a space's URL as their base (as kubectl has it), find the space's
// CRD: the URLs of the OpenAPI v3 index are followed within the space.
func TestSpaceDocumentsClientGo(t *testing.T) {
	h, _, _ := spaceServer(t, ownCRDs{"team-a": {sized("a", "integer")}})
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, protobuf := range []bool{false, true} {
		cfg := &rest.Config{Host: srv.URL + "/spaces/team-a"}
		if protobuf {
			cfg.ContentType = kubernetesProtobuf
			cfg.AcceptContentTypes = kubernetesProtobuf + ",application/json"
		}
		client, err := clientdiscovery.NewDiscoveryClientForConfig(cfg)
		require.NoError(t, err)
		_, lists, err := client.ServerGroupsAndResources()
		require.NoError(t, err)
		var found []string
		for _, l := range lists {
			for _, r := range l.APIResources {
				found = append(found, l.GroupVersion+"/"+r.Name)
			}
		}
		require.Contains(t, found, "example.com/v1/widgets")
		require.Contains(t, found, "root.example.org/v1/gizmos")

		paths, err := client.OpenAPIV3().Paths()
		require.NoError(t, err)
		require.Contains(t, paths, "apis/example.com/v1")
		data, err := paths["apis/example.com/v1"].Schema(openapi.ContentTypeOpenAPIV3PB)
		require.NoError(t, err)
		var doc openapiv3.Document
		require.NoError(t, proto.Unmarshal(data, &doc))
		require.Contains(t, string(data), "com.example.v1.Widget")
		data, err = paths["apis/example.com/v1"].Schema("application/json")
		require.NoError(t, err)
		require.Contains(t, string(data), "/apis/example.com/v1/namespaces/{namespace}/widgets")

		v2, err := client.OpenAPISchema()
		require.NoError(t, err)
		var names []string
		for _, def := range v2.GetDefinitions().GetAdditionalProperties() {
			names = append(names, def.GetName())
		}
		require.Contains(t, names, "com.example.v1.Widget")
	}
}
