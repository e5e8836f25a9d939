// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	restful "github.com/emicklei/go-restful/v3"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/apiserver/pkg/server/routes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/kube-openapi/pkg/common"

	"github.com/kubestellar/kubestellar/server/openapi"
)

// TestLazyOpenAPI: the OpenAPI documents built when first asked for are
// the ones the generic server builds as it starts (routes.OpenAPI), v2 in
// JSON and protobuf, v3 of each group version and its discovery; nothing
// is built before a client asks.
func TestLazyOpenAPI(t *testing.T) {
	scheme := runtime.NewScheme()
	require.NoError(t, clientgoscheme.AddToScheme(scheme))
	namer := openapinamer.NewDefinitionNamer(scheme)
	configs := func() *openAPIConfigs {
		c := &openAPIConfigs{
			v2: genericapiserver.DefaultOpenAPIConfig(openapi.GetOpenAPIDefinitions, namer),
			v3: genericapiserver.DefaultOpenAPIV3Config(openapi.GetOpenAPIDefinitions, namer),
		}
		// As the server's config completed.
		c.v2.Info.Version, c.v3.Info.Version = KubernetesVersion, KubernetesVersion
		return c
	}
	container := restful.NewContainer()
	container.Add(webService("/api/v1", "CoreV1", "configmaps", corev1.ConfigMap{}))
	container.Add(webService("/apis/apps/v1", "AppsV1", "deployments", appsv1.Deployment{}))

	eager := mux.NewPathRecorderMux("eager")
	ec := configs()
	routes.OpenAPI{Config: ec.v2}.InstallV2(container, eager)
	routes.OpenAPI{V3Config: ec.v3}.InstallV3(container, eager)

	lazy := mux.NewPathRecorderMux("lazy")
	lc := configs()
	o, err := serveLazyOpenAPI(container, lazy, lc.v2, lc.v3)
	require.NoError(t, err)
	require.Nil(t, o.static.Paths, "the v2 document is built before anyone asks")

	get := func(h http.Handler, path, accept string) []byte {
		t.Helper()
		req := httptest.NewRequest(http.MethodGet, path, nil)
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		require.Equal(t, http.StatusOK, rec.Code, "%s: %s", path, rec.Body.String())
		body, err := io.ReadAll(rec.Body)
		require.NoError(t, err)
		return body
	}
	const protobufV2 = "application/com.github.proto-openapi.spec.v2@v1.0+protobuf"
	for _, c := range []struct{ path, accept string }{
		{"/openapi/v2", "application/json"},
		{"/openapi/v2", protobufV2},
		{"/openapi/v3/api/v1", "application/json"},
		{"/openapi/v3/apis/apps/v1", "application/json"},
		{"/openapi/v3", "application/json"},
	} {
		want, got := get(eager, c.path, c.accept), get(lazy, c.path, c.accept)
		require.True(t, bytes.Equal(want, got), "%s as %s: %d bytes, not the %d bytes built as the server starts", c.path, c.accept, len(got), len(want))
	}
	require.NotNil(t, o.static.Paths, "the static v2 document, once asked for")

	// The v3 document of apps/v1 lists WatchEvent for apps/v1 and core/v1
	// alone, where the scheme registers it in every group.
	var doc struct {
		Components struct {
			Schemas map[string]struct {
				GVKs []map[string]string `json:"x-kubernetes-group-version-kind"`
			} `json:"schemas"`
		} `json:"components"`
	}
	require.NoError(t, json.Unmarshal(get(lazy, "/openapi/v3/apis/apps/v1", "application/json"), &doc))
	watchEvent, ok := doc.Components.Schemas["io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"]
	require.True(t, ok, "no WatchEvent schema in %v", doc.Components.Schemas)
	require.Greater(t, len(scheme.AllKnownTypes()), 0)
	registered := 0
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Kind == "WatchEvent" {
			registered++
		}
	}
	require.Greater(t, registered, 2, "the scheme registers WatchEvent in every group")
	require.ElementsMatch(t, []map[string]string{{"group": "apps", "version": "v1", "kind": "WatchEvent"}, {"group": "", "version": "v1", "kind": "WatchEvent"}},
		watchEvent.GVKs)
}

type openAPIConfigs struct {
	v2 *common.Config
	v3 *common.OpenAPIV3Config
}

// webService is a group version's routes, as an API group installs them:
// get and watch of one resource.
func webService(root, operationPrefix, resource string, obj any) *restful.WebService {
	ws := new(restful.WebService).Path(root).Consumes("application/json").Produces("application/json")
	noop := func(*restful.Request, *restful.Response) {}
	ws.Route(ws.GET("/namespaces/{namespace}/"+resource+"/{name}").To(noop).Operation("read"+operationPrefix+"Namespaced"+resource).
		Param(ws.PathParameter("namespace", "namespace")).Param(ws.PathParameter("name", "name")).
		Returns(http.StatusOK, "OK", obj).Writes(obj))
	ws.Route(ws.GET("/watch/namespaces/{namespace}/"+resource).To(noop).Operation("watch"+operationPrefix+"Namespaced"+resource).
		Param(ws.PathParameter("namespace", "namespace")).
		Returns(http.StatusOK, "OK", metav1.WatchEvent{}).Writes(metav1.WatchEvent{}))
	return ws
}
