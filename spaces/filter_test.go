// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package spaces

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
)

func TestSplitPath(t *testing.T) {
	tests := []struct {
		path      string
		wantSpace string
		wantRest  string
		wantErr   string
	}{
		{path: "/", wantSpace: Root, wantRest: "/"},
		{path: "", wantSpace: Root, wantRest: ""},
		{path: "/api/v1/namespaces", wantSpace: Root, wantRest: "/api/v1/namespaces"},
		{path: "/apis/tenancy.kubestellar.io/v1alpha1/spaces/foo", wantSpace: Root, wantRest: "/apis/tenancy.kubestellar.io/v1alpha1/spaces/foo"},
		{path: "/spacesfoo/api", wantSpace: Root, wantRest: "/spacesfoo/api"},
		{path: "/spaces/foo/api/v1/pods", wantSpace: "foo", wantRest: "/api/v1/pods"},
		{path: "/spaces/foo/", wantSpace: "foo", wantRest: "/"},
		{path: "/spaces/foo", wantSpace: "foo", wantRest: "/"},
		{path: "/spaces/foo//api", wantSpace: "foo", wantRest: "//api"},
		{path: "/spaces/*/api/v1/configmaps", wantSpace: Wildcard, wantRest: "/api/v1/configmaps"},
		{path: "/spaces/*", wantSpace: Wildcard, wantRest: "/"},
		{path: "/spaces/root/api", wantSpace: Root, wantRest: "/api"},
		{path: "/spaces", wantErr: "missing space name"},
		{path: "/spaces/", wantErr: "invalid space name"},
		{path: "/spaces//api", wantErr: "invalid space name"},
		{path: "/spaces/Foo/api", wantErr: "invalid space name"},
		{path: "/spaces/a.b/api", wantErr: "invalid space name"},
		{path: "/spaces/a_b", wantErr: "invalid space name"},
		{path: "/spaces/**/api", wantErr: "invalid space name"},
		{path: "/spaces/*~0123456789abcdef0123456789abcdef/apis/g/v1/rs", wantSpace: "*~0123456789abcdef0123456789abcdef", wantRest: "/apis/g/v1/rs"},
		{path: "/spaces/*~0123456789ABCDEF0123456789abcdef/apis", wantErr: "lowercase hex"},
		{path: "/spaces/*~0123/apis", wantErr: "invalid definition"},
		{path: "/spaces/*~/apis", wantErr: "invalid definition"},
		{path: "/spaces/*~0123456789abcdef0123456789abcdef0/apis", wantErr: "invalid definition"},
		{path: "/spaces/~0123456789abcdef0123456789abcdef/apis", wantErr: "invalid space name"},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			space, rest, err := splitPath(tc.path)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Empty(t, space)
				require.Empty(t, rest)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantSpace, space)
			require.Equal(t, tc.wantRest, rest)
		})
	}
}

type seenRequest struct {
	space      string
	spaceSet   bool
	definition string
	path       string
	rawPath    string
	requestURI string
}

func TestWithSpacePath(t *testing.T) {
	tests := []struct {
		desc   string
		target string
		want   seenRequest
		// wantStatus is set when the filter must refuse the request.
		wantStatus  int
		wantMessage string
	}{
		{
			desc:   "root",
			target: "/api/v1/namespaces?limit=1",
			want:   seenRequest{space: Root, spaceSet: true, path: "/api/v1/namespaces", requestURI: "/api/v1/namespaces?limit=1"},
		},
		{
			desc:   "named space with query",
			target: "/spaces/foo/api/v1/pods?watch=1",
			want:   seenRequest{space: "foo", spaceSet: true, path: "/api/v1/pods", requestURI: "/api/v1/pods?watch=1"},
		},
		{
			desc:        "space without rest: the index is the server's",
			target:      "/spaces/foo",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/ is not served in a space",
		},
		{
			desc:   "discovery in a space",
			target: "/spaces/foo/apis",
			want:   seenRequest{space: "foo", spaceSet: true, path: "/apis", requestURI: "/apis"},
		},
		{
			desc:   "OpenAPI in a space",
			target: "/spaces/foo/openapi/v3/apis/apps/v1",
			want:   seenRequest{space: "foo", spaceSet: true, path: "/openapi/v3/apis/apps/v1", requestURI: "/openapi/v3/apis/apps/v1"},
		},
		{
			desc:   "health in a space",
			target: "/spaces/foo/readyz/ping",
			want:   seenRequest{space: "foo", spaceSet: true, path: "/readyz/ping", requestURI: "/readyz/ping"},
		},
		{
			desc:   "the server's own endpoints in the root space",
			target: "/metrics",
			want:   seenRequest{space: Root, spaceSet: true, path: "/metrics", requestURI: "/metrics"},
		},
		{
			desc:        "metrics in a space",
			target:      "/spaces/foo/metrics",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/metrics is not served in a space",
		},
		{
			desc:        "profiling in a space",
			target:      "/spaces/foo/debug/pprof/profile?seconds=30",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/debug/pprof/profile is not served in a space",
		},
		{
			desc:        "the edge proxy in a space",
			target:      "/spaces/foo/kubestellar/v1/edges/inv/edge/proxy/api/v1/secrets",
			wantStatus:  http.StatusNotFound,
			wantMessage: "is not served in a space",
		},
		{
			desc:        "the dashboard in the wildcard space",
			target:      "/spaces/*/dashboard/api/login-codes",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/dashboard/api/login-codes is not served in a space",
		},
		{
			desc:        "a path that only begins like the API's",
			target:      "/spaces/foo/apisx",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/apisx is not served in a space",
		},
		{
			desc:        "root addressed by its name serves only what a space does",
			target:      "/spaces/root/metrics",
			wantStatus:  http.StatusNotFound,
			wantMessage: "/metrics is not served in a space",
		},
		{
			desc:   "wildcard",
			target: "/spaces/*/apis/apps/v1/deployments",
			// Go keeps the unescaped "*" in RawPath; the filter rewrites it too.
			want: seenRequest{space: Wildcard, spaceSet: true, path: "/apis/apps/v1/deployments",
				rawPath: "/apis/apps/v1/deployments", requestURI: "/apis/apps/v1/deployments"},
		},
		{
			desc:   "wildcard of a definition",
			target: "/spaces/*~0123456789abcdef0123456789abcdef/apis/example.com/v1/widgets?watch=1",
			want: seenRequest{space: Wildcard, spaceSet: true, definition: "0123456789abcdef0123456789abcdef", path: "/apis/example.com/v1/widgets",
				rawPath: "/apis/example.com/v1/widgets", requestURI: "/apis/example.com/v1/widgets?watch=1"},
		},
		{
			desc:        "wildcard of a malformed definition",
			target:      "/spaces/*~xyz/apis/example.com/v1/widgets",
			wantStatus:  http.StatusBadRequest,
			wantMessage: `invalid definition "xyz"`,
		},
		{
			desc:   "escaped path keeps RawPath",
			target: "/spaces/foo/api/v1/namespaces/ns/configmaps/a%2Fb",
			want: seenRequest{space: "foo", spaceSet: true, path: "/api/v1/namespaces/ns/configmaps/a/b",
				rawPath: "/api/v1/namespaces/ns/configmaps/a%2Fb", requestURI: "/api/v1/namespaces/ns/configmaps/a%2Fb"},
		},
		{
			desc:   "root addressed by its name",
			target: "/spaces/root/api/v1/pods",
			want:   seenRequest{space: Root, spaceSet: true, path: "/api/v1/pods", requestURI: "/api/v1/pods"},
		},
		{
			desc:        "invalid name",
			target:      "/spaces/Foo/api",
			wantStatus:  http.StatusBadRequest,
			wantMessage: `invalid space name "Foo"`,
		},
		{
			desc:        "dotted name",
			target:      "/spaces/a.b/api",
			wantStatus:  http.StatusBadRequest,
			wantMessage: `invalid space name "a.b"`,
		},
		{
			desc:        "prefix alone",
			target:      "/spaces",
			wantStatus:  http.StatusBadRequest,
			wantMessage: "missing space name",
		},
		{
			desc:        "prefix with slash alone",
			target:      "/spaces/",
			wantStatus:  http.StatusBadRequest,
			wantMessage: `invalid space name ""`,
		},
		{
			desc:        "escaped space name is not a name",
			target:      "/spaces/fo%6F/api/x%2Fy",
			wantStatus:  http.StatusBadRequest,
			wantMessage: `invalid space name "fo%6F"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			var seen *seenRequest
			inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				name, ok := FromContext(r.Context())
				seen = &seenRequest{space: name, spaceSet: ok, definition: DefinitionFrom(r.Context()), path: r.URL.Path, rawPath: r.URL.RawPath, requestURI: r.RequestURI}
				w.WriteHeader(http.StatusTeapot)
			})
			req := httptest.NewRequest(http.MethodGet, tc.target, nil)
			originalPath := req.URL.Path
			rec := httptest.NewRecorder()
			WithSpacePath(inner).ServeHTTP(rec, req)

			// The caller's request is never modified.
			require.Equal(t, originalPath, req.URL.Path)
			require.Equal(t, tc.target, req.RequestURI)

			if tc.wantStatus != 0 {
				require.Nil(t, seen, "inner handler must not run")
				reason := metav1.StatusReasonBadRequest
				if tc.wantStatus == http.StatusNotFound {
					reason = metav1.StatusReasonNotFound
				}
				requireStatus(t, rec, tc.wantStatus, reason, tc.wantMessage)
				return
			}
			require.Equal(t, http.StatusTeapot, rec.Code)
			require.NotNil(t, seen)
			require.Equal(t, tc.want, *seen)
		})
	}
}

func requireStatus(t *testing.T, rec *httptest.ResponseRecorder, code int, reason metav1.StatusReason, message string) {
	t.Helper()
	require.Equal(t, code, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	var status metav1.Status
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &status))
	require.Equal(t, "Status", status.Kind)
	require.Equal(t, "v1", status.APIVersion)
	require.Equal(t, metav1.StatusFailure, status.Status)
	require.Equal(t, int32(code), status.Code)
	require.Equal(t, reason, status.Reason)
	require.Contains(t, status.Message, message)
}

type stubLookup struct {
	phases map[string]tenancyv1alpha1.SpacePhase
	err    error
	asked  []string
}

func (l *stubLookup) SpacePhase(name string) (tenancyv1alpha1.SpacePhase, bool, error) {
	l.asked = append(l.asked, name)
	if l.err != nil {
		return "", false, l.err
	}
	phase, ok := l.phases[name]
	return phase, ok, nil
}

func resourceInfo(verb, namespace string) *genericapirequest.RequestInfo {
	return &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: verb, Namespace: namespace, APIVersion: "v1", Resource: "configmaps"}
}

func reviewInfo(resource string) *genericapirequest.RequestInfo {
	return &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "create", APIGroup: "authorization.k8s.io", APIVersion: "v1", Resource: resource}
}

func nonResourceInfo(verb, path string) *genericapirequest.RequestInfo {
	return &genericapirequest.RequestInfo{IsResourceRequest: false, Verb: verb, Path: path}
}

func TestAdmit(t *testing.T) {
	lookup := func() *stubLookup {
		return &stubLookup{phases: map[string]tenancyv1alpha1.SpacePhase{
			"ready":       tenancyv1alpha1.SpacePhaseReady,
			"new":         tenancyv1alpha1.SpacePhaseInitializing,
			"unset":       "",
			"terminating": tenancyv1alpha1.SpacePhaseTerminating,
		}}
	}
	tests := []struct {
		desc      string
		space     string
		info      *genericapirequest.RequestInfo
		lookupErr error
		// wantCode is 0 when the request is admitted.
		wantCode    int32
		wantMessage string
		// wantAsked says whether the lookup must be consulted.
		wantAsked bool
	}{
		{desc: "root create", space: Root, info: resourceInfo("create", "ns")},
		{desc: "root without info", space: Root},
		{desc: "root even when lookup fails", space: Root, info: resourceInfo("get", "ns"), lookupErr: errors.New("boom")},

		{desc: "ready get", space: "ready", info: resourceInfo("get", "ns"), wantAsked: true},
		{desc: "ready create", space: "ready", info: resourceInfo("create", "ns"), wantAsked: true},
		{desc: "initializing create", space: "new", info: resourceInfo("create", "ns"), wantAsked: true},
		{desc: "no phase yet create", space: "unset", info: resourceInfo("create", "ns"), wantAsked: true},
		{desc: "ready without info", space: "ready", wantAsked: true},
		{desc: "missing space", space: "nope", info: resourceInfo("get", "ns"), wantCode: 404, wantMessage: `spaces.tenancy.kubestellar.io "nope" not found`, wantAsked: true},
		{desc: "missing space non-resource", space: "nope", info: nonResourceInfo("get", "/version"), wantCode: 404, wantAsked: true},
		{desc: "lookup error", space: "ready", info: resourceInfo("get", "ns"), lookupErr: errors.New("cache not synced"), wantCode: 503, wantMessage: `space "ready": cache not synced`, wantAsked: true},

		{desc: "terminating create", space: "terminating", info: resourceInfo("create", "ns"), wantCode: 403, wantMessage: "is being deleted", wantAsked: true},
		{desc: "terminating update", space: "terminating", info: resourceInfo("update", "ns"), wantCode: 403, wantMessage: "is being deleted", wantAsked: true},
		{desc: "terminating patch", space: "terminating", info: resourceInfo("patch", "ns"), wantCode: 403, wantMessage: "is being deleted", wantAsked: true},
		{desc: "terminating get", space: "terminating", info: resourceInfo("get", "ns"), wantAsked: true},
		{desc: "terminating list", space: "terminating", info: resourceInfo("list", ""), wantAsked: true},
		{desc: "terminating watch", space: "terminating", info: resourceInfo("watch", ""), wantAsked: true},
		{desc: "terminating delete", space: "terminating", info: resourceInfo("delete", "ns"), wantAsked: true},
		{desc: "terminating deletecollection", space: "terminating", info: resourceInfo("deletecollection", "ns"), wantAsked: true},
		{desc: "terminating without info", space: "terminating", wantAsked: true},

		{desc: "wildcard list", space: Wildcard, info: resourceInfo("list", "")},
		{desc: "wildcard watch", space: Wildcard, info: resourceInfo("watch", "")},
		{desc: "wildcard list in namespace", space: Wildcard, info: resourceInfo("list", "ns"), wantCode: 400, wantMessage: "across all namespaces only"},
		{desc: "wildcard watch in namespace", space: Wildcard, info: resourceInfo("watch", "ns"), wantCode: 400, wantMessage: "across all namespaces only"},
		{desc: "wildcard get", space: Wildcard, info: resourceInfo("get", ""), wantCode: 400, wantMessage: "only list and watch, not get"},
		{desc: "wildcard create", space: Wildcard, info: resourceInfo("create", ""), wantCode: 400, wantMessage: "only list and watch, not create"},
		{desc: "wildcard delete", space: Wildcard, info: resourceInfo("delete", ""), wantCode: 400, wantMessage: "only list and watch, not delete"},
		{desc: "wildcard deletecollection", space: Wildcard, info: resourceInfo("deletecollection", ""), wantCode: 400, wantMessage: "only list and watch, not deletecollection"},
		{desc: "wildcard non-resource get", space: Wildcard, info: nonResourceInfo("get", "/api")},
		{desc: "wildcard non-resource post", space: Wildcard, info: nonResourceInfo("post", "/api"), wantCode: 400, wantMessage: "read-only"},
		{desc: "wildcard non-resource put", space: Wildcard, info: nonResourceInfo("put", "/x"), wantCode: 400, wantMessage: "read-only"},
		{desc: "wildcard without info", space: Wildcard},

		// kubectl auth can-i gets the same answer in a missing space as in
		// one without access, and works in a space being deleted.
		{desc: "self access review in missing space", space: "nope", info: reviewInfo("selfsubjectaccessreviews")},
		{desc: "self rules review in missing space", space: "nope", info: reviewInfo("selfsubjectrulesreviews")},
		{desc: "self access review in terminating space", space: "terminating", info: reviewInfo("selfsubjectaccessreviews")},
		{desc: "self review even when lookup fails", space: "ready", info: reviewInfo("selfsubjectaccessreviews"), lookupErr: errors.New("boom")},
		{desc: "subject access review in missing space", space: "nope", info: reviewInfo("subjectaccessreviews"), wantCode: 404, wantAsked: true},
		{desc: "self review in wildcard", space: Wildcard, info: reviewInfo("selfsubjectaccessreviews"), wantCode: 400, wantMessage: "only list and watch, not create"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			l := lookup()
			l.err = tc.lookupErr
			err := admit(tc.space, tc.info, l)
			if tc.wantAsked {
				require.Equal(t, []string{tc.space}, l.asked)
			} else {
				require.Empty(t, l.asked)
			}
			if tc.wantCode == 0 {
				require.Nil(t, err)
				return
			}
			require.NotNil(t, err)
			require.Equal(t, tc.wantCode, err.Status().Code)
			require.Contains(t, err.Error(), tc.wantMessage)
		})
	}
}

func TestWithSpaceAdmission(t *testing.T) {
	lookup := &stubLookup{phases: map[string]tenancyv1alpha1.SpacePhase{
		"ready":       tenancyv1alpha1.SpacePhaseReady,
		"terminating": tenancyv1alpha1.SpacePhaseTerminating,
	}}
	tests := []struct {
		desc       string
		space      string // "" for a context without a space
		info       *genericapirequest.RequestInfo
		wantCode   int
		wantReason metav1.StatusReason
	}{
		{desc: "no space in context is root", space: "", info: resourceInfo("create", "ns"), wantCode: http.StatusTeapot},
		{desc: "ready space", space: "ready", info: resourceInfo("create", "ns"), wantCode: http.StatusTeapot},
		{desc: "missing space", space: "gone", info: resourceInfo("get", "ns"), wantCode: http.StatusNotFound, wantReason: metav1.StatusReasonNotFound},
		{desc: "terminating create", space: "terminating", info: resourceInfo("create", "ns"), wantCode: http.StatusForbidden, wantReason: metav1.StatusReasonForbidden},
		{desc: "terminating delete", space: "terminating", info: resourceInfo("delete", "ns"), wantCode: http.StatusTeapot},
		{desc: "wildcard list", space: Wildcard, info: resourceInfo("list", ""), wantCode: http.StatusTeapot},
		{desc: "wildcard get", space: Wildcard, info: resourceInfo("get", "ns"), wantCode: http.StatusBadRequest, wantReason: metav1.StatusReasonBadRequest},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			called := false
			inner := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				called = true
				w.WriteHeader(http.StatusTeapot)
			})
			req := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces/ns/configmaps", nil)
			ctx := req.Context()
			if tc.space != "" {
				ctx = WithSpace(ctx, tc.space)
			}
			ctx = genericapirequest.WithRequestInfo(ctx, tc.info)
			rec := httptest.NewRecorder()
			WithSpaceAdmission(inner, lookup).ServeHTTP(rec, req.WithContext(ctx))
			require.Equal(t, tc.wantCode, rec.Code)
			require.Equal(t, tc.wantCode == http.StatusTeapot, called)
			if !called {
				requireStatus(t, rec, tc.wantCode, tc.wantReason, "")
			}
		})
	}
}
