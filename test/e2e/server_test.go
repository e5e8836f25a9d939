// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e tests the built kubestellar binary with the real kubectl, on
// the manifests users apply: the project's own (test/manifests) and, where
// present, real manifests of public projects (harness.SharedWorkloads).
package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestQuickStartWithKubectl follows the README: a space, then the
// manifests users really apply — a multi-document application, a
// kustomization with an HPA, a StatefulSet with a StorageClass, CRDs with
// CEL rules and defaults and their CRs — client-side and server-side. It
// runs over every workload set (harness.EachWorkloadSet), each in a space
// of its own.
func TestQuickStartWithKubectl(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	harness.EachWorkloadSet(t, func(t *testing.T, w harness.WorkloadSet) {
		space := "wds-" + w.Name
		require.Contains(t, srv.CLI(t, "space", "create", space), fmt.Sprintf(`context %q added`, space))
		require.Contains(t, srv.CLI(t, "space", "list"), space)
		kc := func(args ...string) []string { return append([]string{"--context", space}, args...) }

		k.MustRun(t, kc("create", "namespace", "demo")...)
		k.MustRun(t, kc("apply", "-f", w.App)...)
		k.MustRun(t, kc("-n", "demo", "apply", "-k", w.Kustomization)...)
		apply := kc("apply")
		for _, f := range w.StatefulSet {
			apply = append(apply, "-f", f)
		}
		k.MustRun(t, apply...)
		// One multi-document manifest holding CRDs and instances of them. As
		// with any Kubernetes API server, the instances map only once the
		// CRDs are served, so apply converges within a few attempts.
		multi := multiDocument(t, append(append([]string{}, w.CRDs...), w.CRs)...)
		var lastErr string
		applied := false
		for attempt := 0; attempt < 20 && !applied; attempt++ {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			_, errOut, err := k.Run(ctx, kc("apply", "--server-side", "-f", multi)...)
			cancel()
			applied, lastErr = err == nil, errOut
		}
		require.True(t, applied, "the multi-document manifest with CRDs and CRs did not apply: %s", lastErr)

		all := k.MustRun(t, kc("get", "all", "-A")...)
		want := append([]string{"statefulset.apps/" + w.StatefulSetName, "deployment.apps/" + w.KustomizationName,
			"service/" + w.KustomizationName, "horizontalpodautoscaler.autoscaling/" + w.KustomizationName}, w.AppObjects...)
		for _, obj := range want {
			require.Contains(t, all, obj)
		}
		require.Contains(t, k.MustRun(t, kc("get", "deploy,svc,cm", "-n", "demo")...), w.KustomizationName)
		require.Contains(t, k.MustRun(t, kc("get", w.CRResource, "-o", "name")...), w.CRObject)
		require.Equal(t, w.Provisioner, k.MustRun(t, kc("get", "sc", w.StorageClass, "-o", "jsonpath={.provisioner}")...))

		// A CEL validation rule of the CRDs refuses an instance, saying why.
		errOut := k.MustFail(t, kc("apply", "-f", w.Rejected)...)
		require.Contains(t, errOut, w.RejectedMessage)

		// Every Service has a type: ClusterIP where the manifest gives none.
		types := k.MustRun(t, kc("get", "svc", "-A", "-o", `jsonpath={range .items[*]}{.metadata.name}={.spec.type}{"\n"}{end}`)...)
		for _, line := range strings.Fields(types) {
			name, typ, _ := strings.Cut(line, "=")
			require.NotEmpty(t, typ, "service %s has no type", name)
		}
		require.Contains(t, k.MustRun(t, kc("get", "svc", w.KustomizationName, "-n", "demo")...), "ClusterIP")

		// The default context is root, which is empty of all this.
		require.NotContains(t, k.MustRun(t, "get", "deploy", "-A"), w.AppDeployment)

		// Server-side apply of built-in kinds, and re-apply with a conflict.
		out := k.MustRun(t, kc("apply", "--server-side", "-f", w.App)...)
		require.Contains(t, out, "serverside-applied")
		managers := k.MustRun(t, kc("get", "deploy", w.AppDeployment, "-o", "jsonpath={.metadata.managedFields[*].manager}")...)
		require.Contains(t, managers, "kubectl")
		k.MustRun(t, kc("scale", "deploy", w.AppDeployment, "--replicas=5")...)
		require.Equal(t, "5", k.MustRun(t, kc("get", "deploy", w.AppDeployment, "-o", "jsonpath={.spec.replicas}")...))

		// kubectl explain, for built-in kinds, CRDs and apiextensions itself.
		require.Contains(t, k.MustRun(t, kc("explain", "deployment.spec.replicas")...), "FIELD: replicas <integer>")
		require.Contains(t, k.MustRun(t, kc("explain", w.Explain)...), w.ExplainShows)
		require.Contains(t, k.MustRun(t, kc("explain", "crd.spec.group")...), "group <string>")

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
		errOut = k.MustFail(t, kc("apply", "--validate=strict", "-f", bad)...)
		require.Contains(t, errOut, `unknown field "spec.bogusField"`)
		require.NoError(t, os.WriteFile(bad, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: bad, namespace: default, labels: "not-a-map"}
`), 0o600))
		errOut = k.MustFail(t, kc("create", "--validate=false", "-f", bad)...)
		require.Contains(t, errOut, "cannot unmarshal")
	})
}

// TestServiceTypeDefaultOwnedByNobody checks the one default the center
// applies to a built-in kind: a Service without a type gets ClusterIP, as
// in any cluster, and no field manager owns it, so an apply that sets
// another type later meets no conflict.
func TestServiceTypeDefaultOwnedByNobody(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	svc := func(typ string) string {
		f := filepath.Join(t.TempDir(), "svc.yaml")
		spec := "  ports: [{port: 80}]\n"
		if typ != "" {
			spec += "  type: " + typ + "\n"
		}
		require.NoError(t, os.WriteFile(f, []byte("apiVersion: v1\nkind: Service\nmetadata: {name: web, namespace: default}\nspec:\n"+spec), 0o600))
		return f
	}
	k.MustRun(t, "apply", "--server-side", "--field-manager=author", "-f", svc(""))
	require.Equal(t, "ClusterIP", k.MustRun(t, "get", "svc", "web", "-o", "jsonpath={.spec.type}"))
	require.Contains(t, k.MustRun(t, "get", "svc", "web"), "ClusterIP")
	var managed []metav1.ManagedFieldsEntry
	require.NoError(t, json.Unmarshal([]byte(k.MustRun(t, "get", "svc", "web", "-o", "jsonpath={.metadata.managedFields}")), &managed))
	require.NotEmpty(t, managed)
	for _, m := range managed {
		require.NotNil(t, m.FieldsV1, m.Manager)
		require.NotContains(t, m.FieldsV1.GetRawString(), `"f:type"`, "the defaulted type is owned by nobody, not %s", m.Manager)
	}

	// Another manager sets a type: no conflict, no --force-conflicts.
	k.MustRun(t, "apply", "--server-side", "--field-manager=edge-tuning", "-f", svc("NodePort"))
	require.Equal(t, "NodePort", k.MustRun(t, "get", "svc", "web", "-o", "jsonpath={.spec.type}"))
	// It gives the field up again: the default comes back.
	k.MustRun(t, "apply", "--server-side", "--field-manager=edge-tuning", "-f", svc(""))
	require.Equal(t, "ClusterIP", k.MustRun(t, "get", "svc", "web", "-o", "jsonpath={.spec.type}"))
}

// TestTwoSpacesWithIdenticalObjectsAndWatches applies the same manifest to
// two spaces while kubectl watches one of them.
func TestTwoSpacesWithIdenticalObjectsAndWatches(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "left")
	srv.CLI(t, "space", "create", "right")

	// The server's kube-root-ca.crt is left out: it comes on its own time.
	lines := k.Lines(t, "--context", "left", "get", "configmaps", "-n", "default", "--field-selector", "metadata.name!=kube-root-ca.crt", "--watch",
		"--output-watch-events", "-o", `jsonpath={.type} {.object.metadata.name} {.object.data.side}{"\n"}`)
	// Wait until the watch is established by writing a first marker and
	// seeing it.
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
