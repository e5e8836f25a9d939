// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
	"sigs.k8s.io/yaml"
)

// CRDIndex tells which resources CRDs define and which spaces serve them.
type CRDIndex interface {
	// Resource returns the bindings of the CRD that defines group/resource,
	// and false when no CRD does. An error means the answer is not known
	// yet (the server is starting).
	Resource(group, resource string) (Bindings, bool, error)
	// GroupVersion tells whether CRDs define group/version (any version
	// when version is "") and whether space serves any of them.
	GroupVersion(space, group, version string) (defined, served bool)
	// Hides tells whether some CRD is not served in space: else its
	// discovery and OpenAPI documents are the server's, unfiltered.
	Hides(space string) bool
}

// WithCRDBindings hides, inside a space, the CRDs bound to other spaces
// (see BoundAnnotation): their instances are not served there, and
// discovery (/apis, /apis/GROUP[/VERSION]) and the OpenAPI v3 index leave
// them out, as for a cluster that never had them. The server's own view
// (ServerView) sees every CRD. It runs after authorization. With CRDs
// stored per space, the CRDs are the root space's, and resources false:
// which CRD serves a resource in a space is the space's own matter, which
// the handler of custom resources resolves.
func WithCRDBindings(handler http.Handler, index CRDIndex, resources bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		info, ok := genericapirequest.RequestInfoFrom(ctx)
		if !ok || ServerView(ctx) {
			handler.ServeHTTP(w, req)
			return
		}
		space := SpaceOrRoot(ctx)
		if info.IsResourceRequest {
			if info.APIGroup != "" && resources {
				b, isCRD, err := index.Resource(info.APIGroup, info.Resource)
				if err != nil {
					WriteStatus(w, apierrors.NewServiceUnavailable(err.Error()))
					return
				}
				if isCRD && !b.Has(space) {
					WriteStatus(w, notServed())
					return
				}
			}
			handler.ServeHTTP(w, req)
			return
		}
		if !index.Hides(space) {
			handler.ServeHTTP(w, req)
			return
		}
		// Every way to ask for a discovery or OpenAPI document is
		// filtered: their handlers answer any method, and strip any
		// number of trailing slashes.
		path := strings.TrimRight(req.URL.Path, "/")
		if strings.HasPrefix(path, "/apis") || strings.HasPrefix(path, "/openapi") {
			if req.Method != http.MethodGet && req.Method != http.MethodHead {
				WriteStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "discovery"}, strings.ToLower(req.Method)))
				return
			}
			if strings.Contains(path, "//") {
				WriteStatus(w, notServed())
				return
			}
			if req.Method == http.MethodHead {
				// Filtered as a GET; the server sends no body for HEAD.
				req = req.Clone(req.Context())
				req.Method = http.MethodGet
			}
		}
		var filter func(map[string]any) bool
		switch {
		case path == "/apis":
			filter = func(doc map[string]any) bool { return filterGroups(doc, space, index) }
		case strings.HasPrefix(path, "/apis/"):
			group, version, _ := strings.Cut(strings.TrimPrefix(path, "/apis/"), "/")
			if strings.Contains(version, "/") {
				break
			}
			if defined, served := index.GroupVersion(space, group, version); defined && !served {
				WriteStatus(w, notServed())
				return
			} else if defined && version != "" {
				filter = func(doc map[string]any) bool { return filterResources(doc, group, space, index) }
			}
		case path == "/openapi/v2":
			serveOpenAPIV2(w, req, handler, func(doc map[string]any) bool { return filterOpenAPIV2(doc, space, index) })
			return
		case path == "/openapi/v3":
			filter = func(doc map[string]any) bool { return filterOpenAPIPaths(doc, space, index) }
		case strings.HasPrefix(path, "/openapi/v3/apis/"):
			group, version, _ := strings.Cut(strings.TrimPrefix(path, "/openapi/v3/apis/"), "/")
			if defined, served := index.GroupVersion(space, group, version); defined && !served {
				WriteStatus(w, notServed())
				return
			}
		}
		if filter == nil {
			handler.ServeHTTP(w, req)
			return
		}
		serveFiltered(w, req, handler, filter)
	})
}

func notServed() *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound, Message: "the server could not find the requested resource"}}
}

// serveFiltered serves req as JSON, uncompressed and uncached, and passes
// the document through filter before writing it.
func serveFiltered(w http.ResponseWriter, req *http.Request, handler http.Handler, filter func(map[string]any) bool) {
	req = req.Clone(req.Context())
	// A space's answer is not the one the server caches: no revalidation
	// against it (a 304 would keep a client's copy from before a CRD was
	// bound), and no validators on what is sent.
	req.Header.Del("If-None-Match")
	req.Header.Del("If-Modified-Since")
	req.Header.Del("Accept-Encoding")
	// The filter reads JSON: whatever the client accepts (protobuf, YAML,
	// CBOR), the document is asked for in JSON, filtered, and a client
	// that takes YAML but not JSON gets it converted.
	accept := req.Header.Get("Accept")
	wantYAML := strings.Contains(accept, "yaml") && !strings.Contains(accept, "json") && !strings.Contains(accept, "*/*")
	if accept != "" {
		req.Header.Set("Accept", asJSON(accept))
	}
	rec := NewRecorder()
	handler.ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if rec.Code == http.StatusOK {
		contentType := rec.HeaderMap.Get("Content-Type")
		if !strings.Contains(contentType, "json") {
			// Never a document the filter could not read.
			WriteStatus(w, apierrors.NewGenericServerResponse(http.StatusNotAcceptable, "get", schema.GroupResource{}, "", fmt.Sprintf(
				"discovery and OpenAPI in a space are served as JSON, YAML or protobuf, not %q", contentType), 0, false))
			return
		}
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err != nil {
			WriteStatus(w, apierrors.NewInternalError(fmt.Errorf("reading a discovery document to filter: %w", err)))
			return
		}
		out, err := body, error(nil)
		if filter(doc) {
			out, err = json.Marshal(doc)
		}
		if err == nil && wantYAML {
			out, err = yaml.JSONToYAML(out)
			rec.HeaderMap.Set("Content-Type", strings.Replace(contentType, "application/json", "application/yaml", 1))
		}
		if err != nil {
			klog.FromContext(req.Context()).Error(err, "re-encoding a discovery document failed", "path", req.URL.Path)
			WriteStatus(w, apierrors.NewInternalError(err))
			return
		}
		body = out
	}
	for k, v := range rec.HeaderMap {
		w.Header()[k] = v
	}
	w.Header().Del("ETag")
	w.Header().Del("Last-Modified")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.Code)
	_, _ = w.Write(body)
}

// asJSON rewrites the media types of an Accept header to JSON, keeping
// their parameters (aggregated discovery's g, v and as).
func asJSON(accept string) string {
	for _, t := range []string{"application/vnd.kubernetes.protobuf", "application/yaml", "application/cbor"} {
		accept = strings.ReplaceAll(accept, t, "application/json")
	}
	return accept
}

// openAPIV2Protobuf is the media type of OpenAPI v2 in protobuf, which
// client-go asks for.
const openAPIV2Protobuf = "application/com.github.proto-openapi.spec.v2.v1.0+protobuf"

// serveOpenAPIV2 serves the OpenAPI v2 document filtered, in JSON, or in
// protobuf for a client that asks for it (the filter reads JSON).
func serveOpenAPIV2(w http.ResponseWriter, req *http.Request, handler http.Handler, filter func(map[string]any) bool) {
	if !strings.Contains(req.Header.Get("Accept"), "protobuf") {
		serveFiltered(w, req, handler, filter)
		return
	}
	inner := req.Clone(req.Context())
	inner.Header.Set("Accept", "application/json")
	rec := NewRecorder()
	serveFiltered(rec, inner, handler, filter)
	if rec.Code != http.StatusOK {
		copyResponse(w, rec)
		return
	}
	doc, err := openapiv2.ParseDocument(rec.Body.Bytes())
	if err == nil {
		var out []byte
		if out, err = proto.Marshal(doc); err == nil {
			w.Header().Set("Content-Type", openAPIV2Protobuf)
			w.Header().Set("Content-Length", strconv.Itoa(len(out)))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(out)
			return
		}
	}
	klog.FromContext(req.Context()).Error(err, "encoding the filtered OpenAPI v2 document failed")
	WriteStatus(w, apierrors.NewInternalError(err))
}

func copyResponse(w http.ResponseWriter, rec *Recorder) {
	for k, v := range rec.HeaderMap {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

// filterOpenAPIV2 drops from the OpenAPI v2 document the paths and
// definitions of the CRDs space does not serve.
func filterOpenAPIV2(doc map[string]any, space string, index CRDIndex) bool {
	hiddenGV := func(group, version string) bool {
		defined, served := index.GroupVersion(space, group, version)
		return defined && !served
	}
	changed := false
	if paths, ok := doc["paths"].(map[string]any); ok {
		for p := range paths {
			rest, ok := strings.CutPrefix(p, "/apis/")
			if !ok {
				continue
			}
			parts := strings.SplitN(rest, "/", 3)
			if len(parts) >= 2 && hiddenGV(parts[0], parts[1]) {
				delete(paths, p)
				changed = true
			}
		}
	}
	if defs, ok := doc["definitions"].(map[string]any); ok {
		for name, def := range defs {
			d, _ := def.(map[string]any)
			gvks, _ := d["x-kubernetes-group-version-kind"].([]any)
			if len(gvks) == 0 {
				continue
			}
			all := true
			for _, x := range gvks {
				gvk, _ := x.(map[string]any)
				group, _ := gvk["group"].(string)
				version, _ := gvk["version"].(string)
				all = all && hiddenGV(group, version)
			}
			if all {
				delete(defs, name)
				changed = true
			}
		}
	}
	return changed
}

// Recorder holds a handler's response for a filter to read, and change,
// before it answers.
type Recorder struct {
	HeaderMap http.Header
	Code      int
	Body      bytes.Buffer
}

// NewRecorder returns a Recorder of a 200 with no header yet.
func NewRecorder() *Recorder { return &Recorder{HeaderMap: http.Header{}, Code: http.StatusOK} }

func (r *Recorder) Header() http.Header         { return r.HeaderMap }
func (r *Recorder) WriteHeader(code int)        { r.Code = code }
func (r *Recorder) Write(b []byte) (int, error) { return r.Body.Write(b) }

// hidden tells whether a resource of a group is a CRD's that space does
// not serve.
func hidden(index CRDIndex, space, group, resource string) bool {
	base, _, _ := strings.Cut(resource, "/")
	b, isCRD, err := index.Resource(group, base)
	return err != nil || (isCRD && !b.Has(space))
}

// filterGroups drops from /apis (aggregated APIGroupDiscoveryList or
// APIGroupList) what space does not serve, and reports whether it changed
// anything.
func filterGroups(doc map[string]any, space string, index CRDIndex) bool {
	changed := false
	switch doc["kind"] {
	case "APIGroupDiscoveryList":
		var groupsDropped bool
		doc["items"], groupsDropped = keep(doc["items"], func(item map[string]any) bool {
			meta, _ := item["metadata"].(map[string]any)
			group, _ := meta["name"].(string)
			versions, dropped := keep(item["versions"], func(version map[string]any) bool {
				resources, dropped := keep(version["resources"], func(r map[string]any) bool {
					name, _ := r["resource"].(string)
					return !hidden(index, space, group, name)
				})
				version["resources"] = resources
				changed = changed || dropped
				return !dropped || len(resources) > 0
			})
			item["versions"] = versions
			changed = changed || dropped
			return len(versions) > 0
		})
		changed = changed || groupsDropped
	case "APIGroupList":
		doc["groups"], changed = keep(doc["groups"], func(g map[string]any) bool {
			name, _ := g["name"].(string)
			defined, served := index.GroupVersion(space, name, "")
			return !defined || served
		})
	}
	return changed
}

// filterResources drops from an APIResourceList of group the resources
// space does not serve.
func filterResources(doc map[string]any, group, space string, index CRDIndex) bool {
	if doc["kind"] != "APIResourceList" {
		return false
	}
	var changed bool
	doc["resources"], changed = keep(doc["resources"], func(r map[string]any) bool {
		name, _ := r["name"].(string)
		return !hidden(index, space, group, name)
	})
	return changed
}

// filterOpenAPIPaths drops from the OpenAPI v3 index the group versions
// space does not serve.
func filterOpenAPIPaths(doc map[string]any, space string, index CRDIndex) bool {
	paths, ok := doc["paths"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for p := range paths {
		rest, ok := strings.CutPrefix(p, "apis/")
		if !ok {
			continue
		}
		group, version, _ := strings.Cut(rest, "/")
		if defined, served := index.GroupVersion(space, group, version); defined && !served {
			delete(paths, p)
			changed = true
		}
	}
	return changed
}

// keep filters a JSON array of objects, and reports whether it dropped any.
func keep(v any, f func(map[string]any) bool) ([]any, bool) {
	items, _ := v.([]any)
	out := make([]any, 0, len(items))
	for _, item := range items {
		if m, ok := item.(map[string]any); !ok || f(m) {
			out = append(out, item)
		}
	}
	return out, len(out) != len(items)
}
