// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package auth

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/endpoints/request"

	"github.com/kubestellar/kubestellar/internal/principal"
)

func TestSyncerLimits(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 100)
	blocking := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		entered <- struct{}{}
		<-release
		w.WriteHeader(http.StatusOK)
	})
	limits := SyncerLimits{QPS: 1000, Burst: 1000, MaxInFlight: 2, MaxLongRunning: 3}
	h := WithSyncerLimits(blocking, limits, func(_ *http.Request, info *request.RequestInfo) bool { return info.Verb == "watch" })
	serve := func(u user.Info, verb string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/api/v1/configmaps", nil)
		ctx := request.WithUser(req.Context(), u)
		ctx = request.WithRequestInfo(ctx, &request.RequestInfo{IsResourceRequest: true, Verb: verb})
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req.WithContext(ctx))
		return rec
	}
	edge1, edge2 := principal.SyncerUser("inv1", "edge1"), principal.SyncerUser("inv1", "edge2")

	// Fill edge1's watches and requests; each waits in the handler.
	done := make(chan int, 10)
	for _, verb := range []string{"watch", "watch", "watch", "get", "get"} {
		go func() { done <- serve(edge1, verb).Code }()
		<-entered
	}
	// One more of either is refused, with a reason and Retry-After.
	for _, verb := range []string{"watch", "get"} {
		rec := serve(edge1, verb)
		require.Equal(t, http.StatusTooManyRequests, rec.Code, verb)
		require.Equal(t, "1", rec.Header().Get("Retry-After"))
		require.Contains(t, rec.Body.String(), "inv1/edge1")
	}
	// Another syncer and the admin are not held back by edge1.
	go func() { done <- serve(edge2, "watch").Code }()
	<-entered
	go func() { done <- serve(AdminInfo(), "get").Code }()
	<-entered
	close(release)
	for range 7 {
		require.Equal(t, http.StatusOK, <-done)
	}
	// Released: edge1 may watch again.
	require.Equal(t, http.StatusOK, serve(edge1, "watch").Code)

	// The rate: a burst of 3, then refusals.
	h = WithSyncerLimits(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}), SyncerLimits{QPS: 0.001, Burst: 3, MaxInFlight: 10, MaxLongRunning: 10}, nil)
	codes := map[int]int{}
	for range 5 {
		codes[serve(edge1, "get").Code]++
	}
	require.Equal(t, map[int]int{http.StatusOK: 3, http.StatusTooManyRequests: 2}, codes)
}
