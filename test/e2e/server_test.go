// Package e2e tests the built kubestellar binary with the real kubectl and
// real manifests of public projects, as a user runs them.
package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestQuickStartWithKubectl follows the README: a space, then the
// manifests users really apply — a multi-document application, a
// kustomization with an HPA, CRDs with CEL rules and defaults and their CRs,
// a StatefulSet with a StorageClass — client-side and server-side.
func TestQuickStartWithKubectl(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	w := harness.Workloads(t)

	out := srv.CLI(t, "space", "create", "wds1")
	require.Contains(t, out, `context "wds1" added`)
	require.Contains(t, srv.CLI(t, "space", "list"), "wds1")

	k.MustRun(t, "--context", "wds1", "create", "namespace", "demo")
	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(w, "guestbook.yaml"))
	k.MustRun(t, "--context", "wds1", "-n", "demo", "apply", "-k", filepath.Join(w, "podinfo"))
	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(w, "cassandra-service.yaml"), "-f", filepath.Join(w, "cassandra-statefulset.yaml"))
	// One multi-document manifest holding CRDs and instances of them. As with
	// any Kubernetes API server, the instances map only once the CRDs are
	// served, so apply converges within a few attempts.
	multi := multiDocument(t, filepath.Join(w, "gateway-api-crds", "gatewayclasses.yaml"), filepath.Join(w, "gateway-api-crds", "gateways.yaml"),
		filepath.Join(w, "gateway-api-crds", "httproutes.yaml"), filepath.Join(w, "gateway-api-crds", "referencegrants.yaml"),
		filepath.Join(w, "gateway-api-basic-http.yaml"))
	applied := false
	for attempt := 0; attempt < 20 && !applied; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, _, err := k.Run(ctx, "--context", "wds1", "apply", "--server-side", "-f", multi)
		cancel()
		applied = err == nil
	}
	require.True(t, applied, "the multi-document manifest with CRDs and CRs did not apply")

	all := k.MustRun(t, "--context", "wds1", "get", "all", "-A")
	for _, want := range []string{"deployment.apps/frontend", "service/redis-master", "statefulset.apps/cassandra",
		"horizontalpodautoscaler.autoscaling/podinfo", "deployment.apps/podinfo"} {
		require.Contains(t, all, want)
	}
	require.Contains(t, k.MustRun(t, "--context", "wds1", "get", "deploy,svc,cm", "-n", "demo"), "podinfo")
	require.Contains(t, k.MustRun(t, "--context", "wds1", "get", "httproutes", "-o", "name"), "httproute.gateway.networking.k8s.io/http-app-1")
	require.Equal(t, "k8s.io/minikube-hostpath", k.MustRun(t, "--context", "wds1", "get", "sc", "fast", "-o", "jsonpath={.provisioner}"))

	// The default context is root, which is empty of all this.
	require.NotContains(t, k.MustRun(t, "get", "deploy", "-A"), "frontend")

	// Server-side apply of built-in kinds, and re-apply with a conflict.
	out = k.MustRun(t, "--context", "wds1", "apply", "--server-side", "-f", filepath.Join(w, "guestbook.yaml"))
	require.Contains(t, out, "serverside-applied")
	managers := k.MustRun(t, "--context", "wds1", "get", "deploy", "frontend", "-o", "jsonpath={.metadata.managedFields[*].manager}")
	require.Contains(t, managers, "kubectl")
	k.MustRun(t, "--context", "wds1", "scale", "deploy", "frontend", "--replicas=5")
	require.Equal(t, "5", k.MustRun(t, "--context", "wds1", "get", "deploy", "frontend", "-o", "jsonpath={.spec.replicas}"))

	// kubectl explain, for built-in kinds, CRDs and apiextensions itself.
	require.Contains(t, k.MustRun(t, "--context", "wds1", "explain", "deployment.spec.replicas"), "FIELD: replicas <integer>")
	require.Contains(t, k.MustRun(t, "--context", "wds1", "explain", "httproute.spec.hostnames"), "hostnames <[]string>")
	require.Contains(t, k.MustRun(t, "--context", "wds1", "explain", "crd.spec.group"), "group <string>")

	// Strict validation names the problem.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	require.NoError(t, os.WriteFile(bad, []byte(`apiVersion: apps/v1
kind: Deployment
metadata: {name: bad, namespace: default}
spec:
  replicas: 1
  bogusField: 1
  selector: {matchLabels: {a: b}}
  template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: nginx}]}}
`), 0o600))
	errOut := k.MustFail(t, "--context", "wds1", "apply", "--validate=strict", "-f", bad)
	require.Contains(t, errOut, `unknown field "spec.bogusField"`)
	require.NoError(t, os.WriteFile(bad, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: bad, namespace: default, labels: "not-a-map"}
`), 0o600))
	errOut = k.MustFail(t, "--context", "wds1", "create", "--validate=false", "-f", bad)
	require.Contains(t, errOut, "cannot unmarshal")
}

// TestTwoSpacesWithIdenticalObjectsAndWatches applies the same manifest to
// two spaces while kubectl watches one of them.
func TestTwoSpacesWithIdenticalObjectsAndWatches(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "left")
	srv.CLI(t, "space", "create", "right")

	lines := k.Lines(t, "--context", "left", "get", "configmaps", "-n", "default", "--watch",
		"--output-watch-events", "-o", `jsonpath={.type} {.object.metadata.name} {.object.data.side}{"\n"}`)
	// kube-root-ca is not created here; wait until the watch is established
	// by writing a first marker and seeing it.
	k.MustRun(t, "--context", "left", "create", "configmap", "ready", "--from-literal=side=left")
	expectLine(t, lines, "ADDED ready left")

	manifest := func(side string) string {
		f := filepath.Join(t.TempDir(), side+".yaml")
		require.NoError(t, os.WriteFile(f, []byte(fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: same, namespace: default}
data: {side: %s}
`, side)), 0o600))
		return f
	}
	k.MustRun(t, "--context", "right", "apply", "-f", manifest("right"))
	k.MustRun(t, "--context", "left", "apply", "-f", manifest("left"))
	expectLine(t, lines, "ADDED same left")
	k.MustRun(t, "--context", "right", "label", "configmap", "same", "touched=yes")
	k.MustRun(t, "--context", "right", "delete", "configmap", "same")
	k.MustRun(t, "--context", "left", "create", "configmap", "marker", "--from-literal=side=left")
	// The next event must be left's marker: right's label and delete never show.
	expectLine(t, lines, "ADDED marker left")

	require.Equal(t, "left", k.MustRun(t, "--context", "left", "get", "cm", "same", "-o", "jsonpath={.data.side}"))
	k.MustFail(t, "--context", "right", "get", "cm", "same")

	// The wildcard space lists both spaces' objects, each with its space.
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	out := k.MustRun(t, "--server", base+"/spaces/*", "get", "configmaps", "-A",
		"-o", `jsonpath={range .items[*]}{.metadata.annotations.kubestellar\.io/space}/{.metadata.name} {end}`)
	require.Contains(t, out, "left/same")
	require.Contains(t, out, "left/marker")
	require.NotContains(t, out, "right/same")
}

func expectLine(t *testing.T, lines <-chan string, want string) {
	t.Helper()
	select {
	case line, ok := <-lines:
		require.True(t, ok, "kubectl watch ended before %q", want)
		require.Equal(t, want, strings.TrimSpace(line))
	case <-time.After(30 * time.Second):
		t.Fatalf("kubectl watch did not show %q", want)
	}
}

// multiDocument concatenates manifests into one multi-document YAML file.
func multiDocument(t *testing.T, files ...string) string {
	var docs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		require.NoError(t, err)
		docs = append(docs, strings.TrimPrefix(string(data), "---\n"))
	}
	out := filepath.Join(t.TempDir(), "multi.yaml")
	require.NoError(t, os.WriteFile(out, []byte(strings.Join(docs, "\n---\n")), 0o600))
	return out
}
