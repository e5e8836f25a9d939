// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package server

import (
	"context"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
)

// TestLoopbackConnectionsCloseWithTheListener: when the listener closes, a
// client made from the loopback configuration (any client: they share one
// cached transport) drops its idle connection, which the server sees
// closed; until then it stays open.
func TestLoopbackConnectionsCloseWithTheListener(t *testing.T) {
	var open, closed atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("{}"))
	}))
	srv.EnableHTTP2 = true
	srv.Config.ConnState = func(_ net.Conn, state http.ConnState) {
		switch state {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed:
			closed.Add(1)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	loopback := &rest.Config{}
	wrapped := closeLoopbackOnStop(ln, loopback, klog.Background())
	srv.Listener = wrapped
	srv.StartTLS()
	defer srv.Close()
	loopback.Host = srv.URL
	loopback.TLSClientConfig.CAData = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})

	client, err := rest.HTTPClientFor(loopback)
	require.NoError(t, err)
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/readyz", nil)
	require.NoError(t, err)
	resp, err := client.Do(req)
	require.NoError(t, err)
	require.Equal(t, "HTTP/2.0", resp.Proto)
	require.NoError(t, resp.Body.Close())
	require.EqualValues(t, 1, open.Load())

	// Idle and open, as long as the listener is: the next request goes on
	// the same connection.
	req, err = http.NewRequestWithContext(context.Background(), http.MethodGet, srv.URL+"/readyz", nil)
	require.NoError(t, err)
	resp, err = client.Do(req)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.EqualValues(t, 1, open.Load(), "the idle connection was not kept")
	require.Zero(t, closed.Load(), "the idle connection closed before the listener did")

	require.NoError(t, wrapped.Close())
	require.Eventually(t, func() bool { return closed.Load() == 1 }, 10*time.Second, 10*time.Millisecond,
		"the client did not drop its idle connection")
}
