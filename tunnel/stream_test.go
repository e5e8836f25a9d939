// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestTunnelAsHTTP2Stream: given the syncer's API transport over HTTP/2,
// the tunnel is a stream of that one connection: the server reaches the
// edge through it, and the server accepted one connection for the API
// request and the tunnel together.
func TestTunnelAsHTTP2Stream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	mux := http.NewServeMux()
	mux.Handle(Path, withUser(s, syncerUser("inv1", "edge1")))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	srv := httptest.NewUnstartedServer(mux)
	conns := &trackingListener{Listener: srv.Listener}
	srv.Listener = conns
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path)
	})
	api := srv.Client()
	client := &Client{Servers: []string{srv.URL}, BearerToken: "t", Edge: edge, Transport: api.Transport}
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return s.Connected("inv1", "edge1"), nil }), "the tunnel did not open")

	// An API request of the syncer's, on its transport.
	resp, err := api.Get(srv.URL + "/healthz")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 2, resp.ProtoMajor)

	// The center reaches the edge through the tunnel.
	req, err := http.NewRequest(http.MethodGet, srv.URL+EdgesPrefix+"inv1/edge1/proxy/api/v1/pods", nil)
	require.NoError(t, err)
	resp, err = (&http.Client{Transport: srv.Client().Transport.(*http.Transport).Clone()}).Do(req)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	require.Equal(t, "GET /api/v1/pods", string(body))

	conns.mu.Lock()
	accepted := len(conns.conns)
	conns.mu.Unlock()
	// The syncer's one connection, and the admin's of the proxy request.
	require.Equal(t, 2, accepted, "the tunnel took a connection of its own")
	cancel()
	<-done
}

// TestTunnelStreamFallsBackToWebSocket: where the connection is HTTP/1.1
// (a hop that speaks no HTTP/2), the client opens the WebSocket tunnel of
// its own instead, and it works.
func TestTunnelStreamFallsBackToWebSocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	mux := http.NewServeMux()
	mux.Handle(Path, withUser(s, syncerUser("inv1", "edge1")))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "edge") })
	rootCAs := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &Client{Servers: []string{srv.URL}, BearerToken: "t", Edge: edge, Transport: srv.Client().Transport,
		TLS: &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}}
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return s.Connected("inv1", "edge1"), nil }), "no tunnel over HTTP/1.1")
	resp, err := srv.Client().Get(srv.URL + EdgesPrefix + "inv1/edge1/proxy/api")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "edge", string(body))
	cancel()
	<-done
}

// TestTunnelStreamBehindHTTP1Backend: a load balancer that speaks HTTP/2
// to the syncer but HTTP/1.1 to the server (nginx's http2 listener with
// proxy_pass) cannot carry a stream: the probe says so (the server saw
// HTTP/1.1) and the tunnel is a WebSocket of its own, through the same
// balancer.
func TestTunnelStreamBehindHTTP1Backend(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	mux := http.NewServeMux()
	mux.Handle(Path, withUser(s, syncerUser("inv1", "edge1")))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	backend := httptest.NewServer(mux) // plain HTTP/1.1
	defer backend.Close()
	target, err := url.Parse(backend.URL)
	require.NoError(t, err)
	front := httptest.NewUnstartedServer(httputil.NewSingleHostReverseProxy(target))
	front.EnableHTTP2 = true
	front.StartTLS()
	defer front.Close()

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "edge") })
	rootCAs := front.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &Client{Servers: []string{front.URL}, BearerToken: "t", Edge: edge, Transport: front.Client().Transport,
		TLS: &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}}
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return s.Connected("inv1", "edge1"), nil }), "no tunnel behind the balancer")
	resp, err := http.Get(backend.URL + EdgesPrefix + "inv1/edge1/proxy/api")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, "edge", string(body))
	cancel()
	<-done
}
