// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestHealth: /livez answers from the start, /readyz only once the syncer
// keeps the edge, with the status it announced; a port in use is an error
// naming the flag.
func TestHealth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := &health{}
	addr, err := serveHealth(ctx, "127.0.0.1:0", h)
	require.NoError(t, err)
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr.String() + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(body)
	}
	code, _ := get("/livez")
	require.Equal(t, http.StatusOK, code)
	code, body := get("/readyz")
	require.Equal(t, http.StatusServiceUnavailable, code)
	require.Contains(t, body, "not ready")
	code, _ = get("/metrics")
	require.Equal(t, http.StatusNotFound, code)

	s := &Syncer{opts: &Options{}, health: h}
	s.ready("keeping the edge from the saved state (3 objects)")
	code, body = get("/readyz")
	require.Equal(t, http.StatusOK, code)
	require.Equal(t, "ok: keeping the edge from the saved state (3 objects)\n", body)

	_, err = serveHealth(ctx, addr.String(), &health{})
	require.ErrorContains(t, err, "--health-address "+addr.String())
	cancel()
	require.Eventually(t, func() bool {
		_, err := net.Dial("tcp", addr.String())
		return err != nil
	}, 10e9, 10e6, "the endpoint closes with the syncer")
}

// TestEdgeConfigInCluster: with no kubeconfig anywhere and the kubelet's
// environment, the syncer uses the service account in
// --service-account-dir; without its files it says what to mount.
func TestEdgeConfigInCluster(t *testing.T) {
	t.Setenv("HOME", t.TempDir()) // no ~/.kube/config
	dir := t.TempDir()
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	getenv := func(k string) string { return env[k] }
	o := NewOptions()
	o.ServiceAccountDir = dir

	_, _, err := edgeConfig(o, getenv)
	require.ErrorContains(t, err, "--service-account-dir "+dir+" has no token: mount the pod's service account token")
	require.NoError(t, os.WriteFile(filepath.Join(dir, "token"), []byte("t"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("c"), 0o600))
	cfg, inCluster, err := edgeConfig(o, getenv)
	require.NoError(t, err)
	require.True(t, inCluster)
	require.Equal(t, "https://10.96.0.1:443", cfg.Host)
	require.Equal(t, filepath.Join(dir, "token"), cfg.BearerTokenFile, "the token is re-read as the kubelet rotates it")
	require.Equal(t, filepath.Join(dir, "ca.crt"), cfg.CAFile)
	require.Equal(t, o.EdgeQPS, cfg.QPS)

	env["KUBERNETES_SERVICE_HOST"] = "fd00::1"
	cfg, _, err = edgeConfig(o, getenv)
	require.NoError(t, err)
	require.Equal(t, "https://[fd00::1]:443", cfg.Host)

	delete(env, "KUBERNETES_SERVICE_PORT")
	_, _, err = edgeConfig(o, getenv)
	require.ErrorContains(t, err, "$KUBERNETES_SERVICE_PORT is not")

	// Outside a pod, with nothing given, the error says what to pass.
	delete(env, "KUBERNETES_SERVICE_HOST")
	_, inCluster, err = edgeConfig(o, getenv)
	require.ErrorContains(t, err, "no edge cluster to sync to: pass --kubeconfig")
	require.False(t, inCluster)
}
