// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package tunnel

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
)

// tunnelMux serves a tunnel server's two handlers as the center mounts
// them, the tunnel's for the syncer of inv1/edge1.
func tunnelMux(s *Server) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle(Path, withUser(s, syncerUser("inv1", "edge1")))
	mux.Handle(EdgesPrefix, s.EdgeProxy())
	return mux
}

// runConnected runs client until ctx ends and waits until its tunnel is
// open at s (failing with what otherwise); the function it returns waits
// for the client to end.
func runConnected(ctx context.Context, t *testing.T, s *Server, client *Client, what string) func() {
	done := make(chan struct{})
	go func() { client.Run(ctx); close(done) }()
	require.NoError(t, wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true,
		func(context.Context) (bool, error) { return s.Connected("inv1", "edge1"), nil }), what)
	return func() { <-done }
}

// get returns the body of a GET of url that answered 200.
func get(t *testing.T, c *http.Client, url string) string {
	resp, err := c.Get(url)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	return string(body)
}

// TestTunnelAsHTTP2Stream: given the syncer's API transport over HTTP/2,
// the tunnel is a stream of that one connection: the server reaches the
// edge through it, and the server accepted one connection for the API
// request and the tunnel together.
func TestTunnelAsHTTP2Stream(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	mux := tunnelMux(s)
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
	ended := runConnected(ctx, t, s, client, "the tunnel did not open")

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
	ended()
}

// TestTunnelStreamFallsBackToWebSocket: where the connection is HTTP/1.1
// (a hop that speaks no HTTP/2), the client opens the WebSocket tunnel of
// its own instead, and it works.
func TestTunnelStreamFallsBackToWebSocket(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	mux := tunnelMux(s)
	srv := httptest.NewUnstartedServer(mux)
	srv.EnableHTTP2 = false
	srv.StartTLS()
	defer srv.Close()

	edge := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "edge") })
	rootCAs := srv.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	client := &Client{Servers: []string{srv.URL}, BearerToken: "t", Edge: edge, Transport: srv.Client().Transport,
		TLS: &tls.Config{RootCAs: rootCAs, MinVersion: tls.VersionTLS12}}
	ended := runConnected(ctx, t, s, client, "no tunnel over HTTP/1.1")
	require.Equal(t, "edge", get(t, srv.Client(), srv.URL+EdgesPrefix+"inv1/edge1/proxy/api"))
	cancel()
	ended()
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
	mux := tunnelMux(s)
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
	ended := runConnected(ctx, t, s, client, "no tunnel behind the balancer")
	require.Equal(t, "edge", get(t, http.DefaultClient, backend.URL+EdgesPrefix+"inv1/edge1/proxy/api"))
	cancel()
	ended()
}

// TestTunnelStreamHandshakeBounds: the server reads the handshake inside a
// stream within a size and a time, and refuses what passes them; a
// syncer's token cannot hold streams open by sending nothing.
func TestTunnelStreamHandshakeBounds(t *testing.T) {
	oldTimeout, oldBytes := handshakeTimeout, handshakeBytes
	handshakeTimeout, handshakeBytes = 300*time.Millisecond, 1024
	defer func() { handshakeTimeout, handshakeBytes = oldTimeout, oldBytes }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := NewServer(ctx, syncerOwner, nil, fixtureUIDs)
	srv := httptest.NewUnstartedServer(withUser(s, syncerUser("inv1", "edge1")))
	srv.EnableHTTP2 = true
	srv.StartTLS()
	defer srv.Close()

	open := func(body io.Reader) (*http.Response, error) {
		req, err := http.NewRequest(http.MethodPost, srv.URL+Path, body)
		require.NoError(t, err)
		req.Header.Set(StreamHeader, StreamValue)
		return srv.Client().Do(req)
	}
	// Silent: the server ends the stream after the timeout.
	pr, pw := io.Pipe()
	defer pw.Close()
	resp, err := open(pr)
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	done := make(chan error, 1)
	go func() { _, err := io.ReadAll(resp.Body); done <- err }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("a stream that sends no handshake is held open")
	}
	resp.Body.Close()

	// Too large: refused before the limit's end is read. The server ends
	// the stream while the client may still be sending the rest: the
	// client sees the stream reset, or the stream's end without a 101.
	huge := "GET " + Path + " HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 4096) + "\r\n\r\n"
	resp, err = open(strings.NewReader(huge))
	if err != nil {
		require.ErrorContains(t, err, "stream error", "refused by ending the stream")
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NotContains(t, string(body), "101 Switching Protocols")
	}
	require.Equal(t, 0, s.Tunnels(), "no tunnel counted")
}

// TestClientStreamErrors: the client falls back to a WebSocket of its own
// only when the server says it did not get HTTP/2; a refusal or an
// unreachable server is an attempt that failed.
func TestClientStreamErrors(t *testing.T) {
	probe := func(code int, header string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if header != "" {
				w.Header().Set(StreamHeader, header)
			}
			w.WriteHeader(code)
		})
	}
	for _, tc := range []struct {
		desc      string
		handler   http.Handler
		notHTTP2  bool
		wantError string
	}{
		{desc: "the server got HTTP/1.1 behind an HTTP/2 front", handler: probe(http.StatusNoContent, ""), notHTTP2: true},
		{desc: "unauthorized while the server starts", handler: probe(http.StatusUnauthorized, ""), wantError: "401"},
		{desc: "unavailable", handler: probe(http.StatusServiceUnavailable, ProbeHTTP2), wantError: "503"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv := httptest.NewUnstartedServer(tc.handler)
			srv.EnableHTTP2 = true
			srv.StartTLS()
			defer srv.Close()
			_, err := clientStream(context.Background(), srv.Client().Transport, srv.URL+Path)
			require.Error(t, err)
			require.Equal(t, tc.notHTTP2, errors.Is(err, errNotHTTP2), "%v", err)
			require.Contains(t, err.Error(), tc.wantError)
		})
	}
	t.Run("unreachable", func(t *testing.T) {
		srv := httptest.NewUnstartedServer(probe(http.StatusNoContent, ProbeHTTP2))
		srv.EnableHTTP2 = true
		srv.StartTLS()
		url, rt := srv.URL, srv.Client().Transport
		srv.Close()
		_, err := clientStream(context.Background(), rt, url+Path)
		require.Error(t, err)
		require.False(t, errors.Is(err, errNotHTTP2))
	})
}
