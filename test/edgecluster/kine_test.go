// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package edgecluster

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// TestKineModuleMatchesMain checks that the standalone kine is built with
// kubestellar's kine and with the same version of every module the two
// go.mod files share (SQLite's driver, etcd's, gRPC...): the kine that
// kube-apiserver is compared on is the one kubestellar embeds.
func TestKineModuleMatchesMain(t *testing.T) {
	main := requirements(t, filepath.Join("..", "..", "go.mod"))
	kine := requirements(t, filepath.Join("kine", "go.mod"))
	require.NotEmpty(t, main["github.com/k3s-io/kine"])
	require.Equal(t, main["github.com/k3s-io/kine"], kine["github.com/k3s-io/kine"], "kine's version")
	shared := 0
	for path, version := range kine {
		if want, ok := main[path]; ok {
			shared++
			require.Equal(t, want, version, "%s: test/edgecluster/kine/go.mod should require kubestellar's version (go get %s@%s there, then go mod tidy)", path, path, want)
		}
	}
	require.Greater(t, shared, 50, "the two modules should share most of kine's dependencies")
}

// requirements reads the required modules' versions from a go.mod file.
func requirements(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string]string{}
	inBlock := false
	scanner := bufio.NewScanner(bytes.NewReader(data))
	for scanner.Scan() {
		line, _, _ := strings.Cut(scanner.Text(), "//")
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0:
		case fields[0] == "require" && len(fields) == 2 && fields[1] == "(":
			inBlock = true
		case inBlock && fields[0] == ")":
			inBlock = false
		case inBlock && len(fields) == 2:
			out[fields[0]] = fields[1]
		case fields[0] == "require" && len(fields) == 3:
			out[fields[1]] = fields[2]
		}
	}
	require.NoError(t, scanner.Err())
	return out
}

// TestAPIServerOnKine starts the standalone kine over SQLite and
// kube-apiserver alone on it, writes through it, stops both and checks
// that nothing is left.
func TestAPIServerOnKine(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kine and kube-apiserver")
	}
	ctx := t.Context()
	dir := t.TempDir()
	kine, err := StartKine(ctx, KineOptions{Dir: dir, Endpoint: "sqlite://" + filepath.Join(dir, "state.db"), Logf: t.Logf})
	require.NoError(t, err)
	t.Cleanup(func() { _ = kine.Stop() })

	c, err := StartAPIServer(ctx, APIServerOptions{Options: Options{Name: "on-kine", Logf: t.Logf}, EtcdServers: []string{kine.Endpoint}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Stop() })
	pids, ports := c.PIDs(), c.Ports()
	require.Len(t, pids, 1)
	require.Contains(t, pids, "kube-apiserver")

	client, err := kubernetes.NewForConfig(c.Config)
	require.NoError(t, err)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stored-in-kine"}, Data: map[string]string{"k": "v"}}
	_, err = client.CoreV1().ConfigMaps("default").Create(ctx, cm, metav1.CreateOptions{})
	require.NoError(t, err)
	got, err := client.CoreV1().ConfigMaps("default").Get(ctx, cm.Name, metav1.GetOptions{})
	require.NoError(t, err)
	require.Equal(t, "v", got.Data["k"])
	version, err := client.Discovery().ServerVersion()
	require.NoError(t, err)
	require.Equal(t, c.binVersions().Kubernetes, version.GitVersion)

	require.NoError(t, c.Stop())
	requireGone(t, pids, ports)
	kinePID := kine.PID()
	require.NoError(t, kine.Stop())
	require.False(t, processExists(kinePID), "kine should be gone after Stop")
	_, err = os.Stat(c.Dir)
	require.True(t, os.IsNotExist(err), "the API server's directory should be removed")
}
