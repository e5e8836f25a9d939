// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// fakePlacementsAPI answers as the API server would for the EdgePlacements
// of wds1: shop (Progressive) and plain (All). Only bob may patch; what
// it was asked is recorded.
type fakePlacementsAPI struct {
	mu   sync.Mutex
	seen []string // METHOD PATH as IMPERSONATED-USER: BODY
}

func (f *fakePlacementsAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	f.mu.Lock()
	f.seen = append(f.seen, r.Method+" "+r.URL.Path+" as "+r.Header.Get("Impersonate-User")+": "+string(body))
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	const prefix = "/spaces/wds1/apis/edge.kubestellar.io/v2alpha1/edgeplacements/"
	name, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok || (name != "shop" && name != "plain") {
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound, Message: "not found"})
		return
	}
	if r.Method == http.MethodPatch && r.Header.Get("Impersonate-User") != "bob" {
		w.WriteHeader(http.StatusForbidden)
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden,
			Message: `edgeplacements.edge.kubestellar.io "shop" is forbidden: User "` + r.Header.Get("Impersonate-User") + `" cannot patch resource "edgeplacements"`})
		return
	}
	ep := edgev2alpha1.EdgePlacement{TypeMeta: metav1.TypeMeta{Kind: "EdgePlacement", APIVersion: edgev2alpha1.SchemeGroupVersion.String()}, ObjectMeta: metav1.ObjectMeta{Name: name}}
	if name == "shop" {
		ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	}
	_ = json.NewEncoder(w).Encode(ep)
}

// TestPauseFromTheDashboard: a session's POST pauses a Progressive
// placement's rollout as the session's user (impersonated), so the API
// server decides and its refusal is the answer; it takes a session, the
// dashboard's own page and a Progressive placement.
func TestPauseFromTheDashboard(t *testing.T) {
	h, _ := testHandler(t)
	api := &fakePlacementsAPI{}
	apiSrv := httptest.NewServer(api)
	t.Cleanup(apiSrv.Close)
	h.loopback = &rest.Config{Host: apiSrv.URL}
	alice := loginAs(t, h, &user.DefaultInfo{Name: "alice", Groups: []string{"team-a"}})
	bob := loginAs(t, h, &user.DefaultInfo{Name: "bob", Groups: []string{"team-b"}})

	post := func(cookie *http.Cookie, site, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, Path+rolloutAPI, strings.NewReader(body))
		if site != "" {
			req.Header.Set("Sec-Fetch-Site", site)
		}
		if cookie != nil {
			req.AddCookie(cookie)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	const pause = `{"space":"wds1","name":"shop","paused":true}`
	for _, tc := range []struct {
		desc     string
		cookie   *http.Cookie
		site     string
		body     string
		want     int
		contains string
	}{
		{desc: "no session", body: pause, want: http.StatusUnauthorized},
		{desc: "from another site", cookie: bob, site: "cross-site", body: pause, want: http.StatusForbidden, contains: "dashboard's own page"},
		{desc: "not JSON", cookie: bob, site: "same-origin", body: "paused", want: http.StatusBadRequest},
		{desc: "no space", cookie: bob, site: "same-origin", body: `{"name":"shop","paused":true}`, want: http.StatusBadRequest},
		{desc: "every space", cookie: bob, site: "same-origin", body: `{"space":"*","name":"shop","paused":true}`, want: http.StatusBadRequest},
		{desc: "too large", cookie: bob, site: "same-origin", body: `{"space":"wds1","name":"` + strings.Repeat("x", 8<<10) + `"}`, want: http.StatusBadRequest},
		{desc: "a user who may not patch", cookie: alice, site: "same-origin", body: pause, want: http.StatusForbidden, contains: `User \"alice\" cannot patch`},
		{desc: "no such placement", cookie: bob, site: "same-origin", body: `{"space":"wds1","name":"nope","paused":true}`, want: http.StatusNotFound},
		{desc: "not Progressive", cookie: bob, site: "same-origin", body: `{"space":"wds1","name":"plain","paused":true}`, want: http.StatusConflict, contains: "no Progressive rollout"},
		{desc: "a user who may", cookie: bob, site: "same-origin", body: pause, want: http.StatusOK},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			api.mu.Lock()
			api.seen = nil
			api.mu.Unlock()
			rec := post(tc.cookie, tc.site, tc.body)
			require.Equal(t, tc.want, rec.Code, rec.Body.String())
			require.Contains(t, rec.Body.String(), tc.contains)
			api.mu.Lock()
			defer api.mu.Unlock()
			switch tc.want {
			case http.StatusUnauthorized, http.StatusBadRequest:
				require.Empty(t, api.seen, "nothing reaches the API server")
			case http.StatusOK:
				require.Equal(t, []string{
					"GET /spaces/wds1/apis/edge.kubestellar.io/v2alpha1/edgeplacements/shop as bob: ",
					`PATCH /spaces/wds1/apis/edge.kubestellar.io/v2alpha1/edgeplacements/shop as bob: {"spec":{"rollout":{"paused":true}}}`,
				}, api.seen)
			}
			if tc.site == "cross-site" {
				require.Empty(t, api.seen)
			}
		})
	}

	// The page offers the button only to who may patch the placement.
	ctx := context.Background()
	require.False(t, h.allowedTo(ctx, Identity{Name: "alice"}, "patch")("inv2", PlacementsGVR), "alice may list in inv2, not patch")
	require.True(t, h.allowedTo(ctx, Identity{Name: "alice"}, "list")("inv2", PlacementsGVR))
	require.True(t, h.allowedTo(ctx, Identity{Name: "root", Groups: []string{user.SystemPrivilegedGroup}}, "patch")("wds1", PlacementsGVR))
}
