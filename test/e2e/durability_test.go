// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestAcknowledgedWritesSurviveKill9AndRestart writes objects, each
// acknowledged to kubectl, kills the server with SIGKILL and restarts it on
// the same data dir; then stops it cleanly and restarts again.
func TestAcknowledgedWritesSurviveKill9AndRestart(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "durable")
	const n = 40
	for i := range n {
		k.MustRun(t, "--context", "durable", "create", "configmap", fmt.Sprintf("cm-%02d", i), fmt.Sprintf("--from-literal=i=%d", i))
	}
	srv.Kill()
	srv.Restart(t)
	out := k.MustRun(t, "--context", "durable", "get", "configmaps", "-o", `jsonpath={range .items[*]}{.metadata.name}={.data.i} {end}`)
	for i := range n {
		require.Contains(t, out, fmt.Sprintf("cm-%02d=%d ", i, i), "acknowledged write lost after kill -9")
	}

	// A second server on the same data dir is refused, and the first keeps serving.
	second := exec.Command(srv.Bin, "server", "start", "--data-dir", srv.DataDir, "--bind-address", "127.0.0.1", "--port", fmt.Sprint(harness.FreePort(t)))
	out2, err := second.CombinedOutput()
	require.Error(t, err, "a second server on the same data dir must not start: %s", out2)
	require.Contains(t, string(out2), "is in use by another kubestellar server")
	k.MustRun(t, "--context", "durable", "get", "configmap", "cm-00")

	took := srv.Stop(t)
	t.Logf("clean shutdown took %s", took)
	srv.Restart(t)
	require.Contains(t, srv.CLI(t, "space", "list"), "durable")
	// Every ConfigMap written, and the server's kube-root-ca.crt besides.
	names := strings.Fields(k.MustRun(t, "--context", "durable", "get", "configmaps", "--field-selector", "metadata.name!=kube-root-ca.crt", "-o", `jsonpath={.items[*].metadata.name}`))
	require.Len(t, names, n)
}

// TestSpaceDeletionAndAccessControl deletes spaces holding each workload
// set's application through the CLI, and checks that requests without a
// valid token are refused.
func TestSpaceDeletionAndAccessControl(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	deployments := func() string {
		return k.MustRun(t, "--server", base+"/spaces/*", "get", "deployments", "-A",
			"-o", `jsonpath={range .items[*]}{.metadata.annotations.kubestellar\.io/space}/{.metadata.name} {end}`)
	}
	harness.EachWorkloadSet(t, func(t *testing.T, w harness.WorkloadSet) {
		space := "gone-" + w.Name
		srv.CLI(t, "space", "create", space)
		k.MustRun(t, "--context", space, "apply", "-f", w.App)
		require.Contains(t, deployments(), space+"/"+w.AppDeployment+" ")
		require.Contains(t, srv.CLI(t, "space", "delete", space), fmt.Sprintf("space %q deleted", space))

		cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
		require.NoError(t, err)
		require.NotContains(t, cfg.Contexts, space, "the space's context is removed")
		require.NotContains(t, deployments(), space+"/")
		errOut := k.MustFail(t, "--server", base+"/spaces/"+space, "get", "ns")
		require.Contains(t, errOut, "NotFound")
	})

	// No token, and a wrong token: 401. (With no credentials at all,
	// kubectl prompts for a user name, so that case is a plain request.)
	insecure := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // status code only
	resp, err := insecure.Get(base + "/api/v1/namespaces")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	// Probes are open; metrics need a token.
	for _, path := range []string{"/healthz", "/livez", "/readyz", "/version"} {
		resp, err := insecure.Get(base + path)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
	}
	resp, err = insecure.Get(base + "/metrics")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
	req, err := http.NewRequest(http.MethodGet, base+"/metrics", nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+cfg.AuthInfos["kubestellar-admin"].Token)
	resp, err = insecure.Do(req)
	require.NoError(t, err)
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Contains(t, string(metrics), "apiserver_request_total", "Prometheus metrics are served")

	anon := filepath.Join(t.TempDir(), "anon.kubeconfig")
	cfg.AuthInfos["kubestellar-admin"].Token = "not-the-token"
	require.NoError(t, clientcmd.WriteToFile(*cfg, anon))
	errOut := harness.Kubectl{Kubeconfig: anon}.MustFail(t, "get", "ns")
	require.Contains(t, errOut, "You must be logged in to the server")

	// Secrets on disk are readable by their owner only.
	for _, f := range []string{"admin.kubeconfig", "admin.token", "pki/ca.key", "pki/serving.key"} {
		st, err := os.Stat(filepath.Join(srv.DataDir, f))
		require.NoError(t, err)
		require.Equal(t, os.FileMode(0o600), st.Mode().Perm(), f)
	}
}
