// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"

	restful "github.com/emicklei/go-restful/v3"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/mux"
	"k8s.io/klog/v2"
	builder2 "k8s.io/kube-openapi/pkg/builder"
	"k8s.io/kube-openapi/pkg/builder3"
	"k8s.io/kube-openapi/pkg/cached"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/common/restfuladapter"
	"k8s.io/kube-openapi/pkg/handler"
	"k8s.io/kube-openapi/pkg/handler3"
	"k8s.io/kube-openapi/pkg/spec3"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// lazyOpenAPI serves the core server's OpenAPI documents (/openapi/v2,
// /openapi/v3 and each group version's under it) as kube-apiserver does,
// but builds each the first time a client asks for it, where the generic
// server builds them all as it starts (PrepareRun) and keeps them. Built,
// the documents of the built-in kinds are a sizeable part of an idle
// server's live heap; most clients never ask for them (kubectl reads
// OpenAPI for explain, and for apply of custom resources; discovery is
// enough for the rest), and the heap grows to twice what is live before a
// collection. Once built, a document is kept, as before.
//
// The apiextensions server merges CRD schemas into the v2 document from
// the static one (StaticOpenAPISpec), which it reads when the merged
// document is built, itself on a client's request: the static document is
// filled in before any request reaches the v2 service. Its v3 controller
// adds the CRDs' group versions to the v3 service, beside these.
type lazyOpenAPI struct {
	container *restful.Container
	v2        *common.Config
	v3        *common.OpenAPIV3Config

	// static is the v2 document of the container's routes, empty until
	// fill builds it.
	static   *spec.Swagger
	once     sync.Once
	buildErr error
	// building serializes the builds.
	building sync.Mutex

	v2Service *handler.OpenAPIService
	v3Service *handler3.OpenAPIService
}

// installLazyOpenAPI serves the OpenAPI documents of s (whose config set
// SkipOpenAPIInstallation) from the routes installed so far, and sets the
// services and the static v2 document on s as PrepareRun would.
func installLazyOpenAPI(s *genericapiserver.GenericAPIServer, v2 *common.Config, v3 *common.OpenAPIV3Config) error {
	o, err := serveLazyOpenAPI(s.Handler.GoRestfulContainer, s.Handler.NonGoRestfulMux, v2, v3)
	if err != nil {
		return err
	}
	s.StaticOpenAPISpec, s.OpenAPIVersionedService, s.OpenAPIV3VersionedService = o.static, o.v2Service, o.v3Service
	// The definitions the v3 config holds (megabytes) were for the API groups'
	// installs (server-side apply's type converter), done by now; the
	// builds above make their own.
	v3.Definitions = nil
	return nil
}

// serveLazyOpenAPI registers on mux the OpenAPI documents of the
// container's routes, built when first asked for.
func serveLazyOpenAPI(container *restful.Container, mux *mux.PathRecorderMux, v2 *common.Config, v3 *common.OpenAPIV3Config) (*lazyOpenAPI, error) {
	o := &lazyOpenAPI{container: container, v2: v2, v3: v3, static: &spec.Swagger{}}
	o.v2Service = handler.NewOpenAPIServiceLazy(cached.Static(o.static, "static"))
	o.v2Service.RegisterOpenAPIVersionedService("/openapi/v2", filledFirst{o: o, mux: mux})
	o.v3Service = handler3.NewOpenAPIService()
	if err := o.v3Service.RegisterOpenAPIV3VersionedService("/openapi/v3", mux); err != nil {
		return nil, fmt.Errorf("serving /openapi/v3: %w", err)
	}
	for _, ws := range container.RegisteredWebServices() {
		path := strings.TrimPrefix(ws.RootPath(), "/")
		o.v3Service.UpdateGroupVersionLazy(path, cached.Once(cached.Func(func() (*spec3.OpenAPI, string, error) {
			return o.buildV3(path, ws)
		})))
	}
	return o, nil
}

// fill builds the static v2 document, once.
func (o *lazyOpenAPI) fill() error {
	o.once.Do(func() {
		o.building.Lock()
		defer o.building.Unlock()
		built, err := builder2.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices(o.container.RegisteredWebServices()), o.v2)
		if err != nil {
			o.buildErr = fmt.Errorf("building the OpenAPI v2 document: %w", err)
			return
		}
		built.Definitions = handler.PruneDefaults(built.Definitions)
		*o.static = *built
	})
	return o.buildErr
}

// buildV3 builds the v3 document of one group version's routes (path is
// its root path: api/v1, apis/GROUP/VERSION).
func (o *lazyOpenAPI) buildV3(path string, ws *restful.WebService) (*spec3.OpenAPI, string, error) {
	o.building.Lock()
	defer o.building.Unlock()
	// Each build gets definitions of its own: builder3 edits those of its
	// config (their extensions), which the documents it builds share.
	// Built one after the other as the server starts, none was served
	// before the last was built; built when asked for, one is encoded
	// while another is built.
	config := *o.v3
	config.Definitions = nil
	doc, err := builder3.BuildOpenAPISpecFromRoutes(restfuladapter.AdaptWebServices([]*restful.WebService{ws}), &config)
	if err != nil {
		return nil, "", fmt.Errorf("building the OpenAPI v3 document of %s: %w", path, err)
	}
	if group, version, ok := groupVersionOfPath(path); ok {
		narrowMetaKinds(doc, group, version)
	}
	return doc, "", nil
}

// filledFirst registers the v2 service's handler so that the static
// document is filled in before the service reads it.
type filledFirst struct {
	o   *lazyOpenAPI
	mux interface{ Handle(string, http.Handler) }
}

func (f filledFirst) Handle(path string, h http.Handler) {
	f.mux.Handle(path, http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if err := f.o.fill(); err != nil {
			klog.FromContext(req.Context()).Error(err, "serving OpenAPI v2")
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, req)
	}))
}

// groupVersionOfPath reads the group and version of a root path: api/v1
// is the core group's v1, apis/GROUP/VERSION a named group's.
func groupVersionOfPath(path string) (group, version string, ok bool) {
	parts := strings.Split(path, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return "", parts[1], true
	case len(parts) == 3 && parts[0] == "apis":
		return parts[1], parts[2], true
	}
	return "", "", false
}

// metaKindsInEveryGroup are the kinds every API group registers (by
// metav1.AddToGroupVersion): in a group version's v3 document their
// schema lists every group's GVK, which kube-apiserver narrows to the
// document's own and core/v1's. So does narrowMetaKinds.
var metaKindsInEveryGroup = map[string]bool{"WatchEvent": true, "DeleteOptions": true}

// narrowMetaKinds keeps, in the x-kubernetes-group-version-kind list of
// the schemas of metaKindsInEveryGroup, the entries of group/version and
// of core/v1.
func narrowMetaKinds(doc *spec3.OpenAPI, group, version string) {
	if doc == nil || doc.Components == nil {
		return
	}
	const gvkExtension = "x-kubernetes-group-version-kind"
	for _, schema := range doc.Components.Schemas {
		if schema == nil {
			continue
		}
		gvks, ok := schema.Extensions[gvkExtension].([]any)
		if !ok || len(gvks) < 2 {
			continue
		}
		if first, ok := gvks[0].(map[string]any); !ok || !metaKindsInEveryGroup[fmt.Sprint(first["kind"])] {
			continue
		}
		var kept []any
		for _, item := range gvks {
			gvk, _ := item.(map[string]any)
			g, _ := gvk["group"].(string)
			v, _ := gvk["version"].(string)
			if (g == group && v == version) || (g == "" && v == "v1") {
				kept = append(kept, item)
			}
		}
		if len(kept) == 0 {
			delete(schema.Extensions, gvkExtension)
			continue
		}
		schema.Extensions[gvkExtension] = kept
	}
}
