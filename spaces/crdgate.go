package spaces

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/klog/v2"
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
}

// WithCRDBindings hides, inside a space, the CRDs bound to other spaces
// (see BoundAnnotation): their instances are not served there, and
// discovery (/apis, /apis/GROUP[/VERSION]) and the OpenAPI v3 index leave
// them out, as for a cluster that never had them. The server's own view
// (ServerView) sees every CRD. It runs after authorization.
func WithCRDBindings(handler http.Handler, index CRDIndex) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		ctx := req.Context()
		info, ok := genericapirequest.RequestInfoFrom(ctx)
		if !ok || ServerView(ctx) {
			handler.ServeHTTP(w, req)
			return
		}
		space := SpaceOrRoot(ctx)
		if info.IsResourceRequest {
			if info.APIGroup != "" {
				b, isCRD, err := index.Resource(info.APIGroup, info.Resource)
				if err != nil {
					writeStatus(w, apierrors.NewServiceUnavailable(err.Error()))
					return
				}
				if isCRD && !b.Has(space) {
					writeStatus(w, notServed())
					return
				}
			}
			handler.ServeHTTP(w, req)
			return
		}
		if req.Method != http.MethodGet {
			handler.ServeHTTP(w, req)
			return
		}
		path := strings.TrimSuffix(req.URL.Path, "/")
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
				writeStatus(w, notServed())
				return
			} else if defined && version != "" {
				filter = func(doc map[string]any) bool { return filterResources(doc, group, space, index) }
			}
		case path == "/openapi/v3":
			filter = func(doc map[string]any) bool { return filterOpenAPIPaths(doc, space, index) }
		case strings.HasPrefix(path, "/openapi/v3/apis/"):
			group, version, _ := strings.Cut(strings.TrimPrefix(path, "/openapi/v3/apis/"), "/")
			if defined, served := index.GroupVersion(space, group, version); defined && !served {
				writeStatus(w, notServed())
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
	if accept := req.Header.Get("Accept"); accept != "" {
		req.Header.Set("Accept", strings.ReplaceAll(accept, "application/vnd.kubernetes.protobuf", "application/json"))
	}
	rec := &recorder{header: http.Header{}, code: http.StatusOK}
	handler.ServeHTTP(rec, req)
	body := rec.body.Bytes()
	if rec.code == http.StatusOK && strings.Contains(rec.header.Get("Content-Type"), "json") {
		var doc map[string]any
		if err := json.Unmarshal(body, &doc); err == nil && filter(doc) {
			if out, err := json.Marshal(doc); err == nil {
				body = out
			} else {
				klog.FromContext(req.Context()).Error(err, "re-encoding a discovery document failed", "path", req.URL.Path)
			}
		}
	}
	for k, v := range rec.header {
		w.Header()[k] = v
	}
	w.Header().Del("ETag")
	w.Header().Del("Last-Modified")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(rec.code)
	_, _ = w.Write(body)
}

// recorder holds a response until it is filtered.
type recorder struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(code int)        { r.code = code }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

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
