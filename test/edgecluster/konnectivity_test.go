// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestKonnectivityCarriesTLSEndToEnd starts konnectivity's proxy-server and
// proxy-agent and sends HTTPS requests through them to a server on
// loopback, as the bench does to an edge cluster: the client's TLS
// reaches the server itself (the server sees the client's HTTP/2), and a
// CONNECT to a port nobody listens on fails with the server's answer.
func TestKonnectivityCarriesTLSEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts konnectivity")
	}
	target := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Proto+" "+r.URL.Path)
	}))
	target.EnableHTTP2 = true
	target.StartTLS()
	t.Cleanup(target.Close)

	ctx := t.Context()
	kn, err := StartKonnectivity(ctx, KonnectivityOptions{Dir: t.TempDir(), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, kn.Stop()) })
	pids := kn.PIDs()
	require.Len(t, pids, 2)

	client := target.Client()
	transport := client.Transport.(*http.Transport)
	transport.DialContext = kn.DialContext
	var dialed []string
	transport.DialTLSContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dialed = append(dialed, addr)
		conn, err := kn.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		config := transport.TLSClientConfig.Clone()
		config.ServerName, _, _ = net.SplitHostPort(addr)
		config.NextProtos = []string{"h2"}
		tlsConn := tls.Client(conn, config)
		if err := tlsConn.HandshakeContext(ctx); err != nil {
			conn.Close()
			return nil, err
		}
		return tlsConn, nil
	}
	for _, path := range []string{"/one", "/two"} {
		resp, err := client.Get(target.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode)
		require.Equal(t, "HTTP/2.0 "+path, string(body), "the target answers the client's own HTTP/2 through the tunnel")
	}
	require.Equal(t, []string{strings.TrimPrefix(target.URL, "https://")}, dialed, "one connection, reused")

	// A port nobody listens on: the agent cannot dial it, and the CONNECT
	// says so rather than hanging.
	closed, err := freePorts(1)
	require.NoError(t, err)
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	started := time.Now()
	_, err = kn.DialContext(dctx, "tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(closed[0])))
	t.Logf("CONNECT to a closed port: %v after %s", err, time.Since(started))
	require.Error(t, err)
	require.Contains(t, err.Error(), "konnectivity CONNECT")
}
