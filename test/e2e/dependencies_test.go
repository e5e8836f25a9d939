// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// followWorkload is a Deployment that needs a ConfigMap (a volume), a
// Secret (an env var), a ServiceAccount and, optionally, a ConfigMap that
// does not exist; the placement selects the namespace and the Deployment
// only, and follows its dependencies.
const followWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: shop}
data: {mode: follow}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: unrelated, namespace: shop}
data: {mode: stays-home}
---
apiVersion: v1
kind: Secret
metadata: {name: db, namespace: shop}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: web, namespace: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      serviceAccountName: web
      volumes:
      - {name: settings, configMap: {name: settings}}
      - {name: extra, configMap: {name: not-made-yet, optional: true}}
      containers:
      - name: web
        image: nginx:1.27
        volumeMounts: [{name: settings, mountPath: /etc/web}]
        env: [{name: DB_PASSWORD, valueFrom: {secretKeyRef: {name: db, key: password}}}]
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: shop}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  dependencies: Follow
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [shop]}
  - {apiGroup: apps, resources: [deployments], namespaces: [shop]}
`

// TestDependenciesFollow: a Deployment placed with dependencies: Follow
// arrives at a real edge cluster with the ConfigMap, Secret and
// ServiceAccount it references, and nothing else of its namespace; the
// placement lists them; a reference to an object the WDS does not hold is
// a problem on the placement, not a silent skip; and when the Deployment
// leaves, they leave with it.
func TestDependenciesFollow(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	harness.StartSyncer(t, join, c.KubeconfigPath, "")

	manifest := filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(followWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)

	poll(t, ek, equals("1"), "the Deployment to be available at the edge",
		"get", "deployment", "web", "-n", "shop", "-o", "jsonpath={.status.availableReplicas}")
	poll(t, ek, equals("follow"), "the ConfigMap it mounts at the edge", "get", "configmap", "settings", "-n", "shop", "-o", "jsonpath={.data.mode}")
	poll(t, ek, equals("czNjcmV0"), "the Secret it reads at the edge", "get", "secret", "db", "-n", "shop", "-o", "jsonpath={.data.password}")
	poll(t, ek, equals("web"), "its ServiceAccount at the edge", "get", "serviceaccount", "web", "-n", "shop", "-o", "jsonpath={.metadata.name}")
	require.Equal(t, "", ek.MustRun(t, "get", "configmap", "unrelated", "-n", "shop", "--ignore-not-found", "-o", "name"),
		"what the Deployment does not reference stays in the WDS")

	placement := func(jsonpath string) []string {
		return []string{"--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath=" + jsonpath}
	}
	poll(t, k, equals("3 /configmaps shop/settings /secrets shop/db /serviceaccounts shop/web "), "the placement to list its three dependencies",
		placement(`{.status.dependencyCount} {range .status.dependencies[*]}{.apiGroup}/{.resource} {.namespace}/{.name} {end}`)...)
	poll(t, k, equals("True"), "the placement to be propagated", placement(`{.status.conditions[?(@.type=="Propagated")].status}`)...)
	wide := k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "wide")
	require.Contains(t, wide, "DEPENDENCIES", "kubectl get -o wide shows the count")

	// A reference to what the WDS does not hold is a problem, named.
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "deployment", "web", "--type", "json", "-p",
		`[{"op":"add","path":"/spec/template/spec/containers/0/envFrom","value":[{"configMapRef":{"name":"missing"}}]}]`)
	got := poll(t, k, func(s string) bool { return strings.HasPrefix(s, "False DependencyNotFound") }, "the placement to report the missing ConfigMap",
		placement(`{.status.conditions[?(@.type=="Propagated")].status} {.status.conditions[?(@.type=="Propagated")].reason} {.status.conditions[?(@.type=="Propagated")].message}`)...)
	require.Contains(t, got, "deployment shop/web references ConfigMap shop/missing (spec.template.spec.containers[0].envFrom[0].configMapRef), which is not in the WDS")
	k.MustRun(t, "--context", "wds1", "-n", "shop", "create", "configmap", "missing", "--from-literal=made=now")
	poll(t, ek, equals("now"), "the ConfigMap, once made, to follow", "get", "configmap", "missing", "-n", "shop", "-o", "jsonpath={.data.made}")
	poll(t, k, equals("True"), "the problem to clear", placement(`{.status.conditions[?(@.type=="Propagated")].status}`)...)

	// A change of a dependency follows; when the Deployment leaves, they
	// leave with it (the namespace, selected, stays).
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "configmap", "settings", "--type", "merge", "-p", `{"data":{"mode":"changed"}}`)
	poll(t, ek, equals("changed"), "the ConfigMap's change at the edge", "get", "configmap", "settings", "-n", "shop", "-o", "jsonpath={.data.mode}")
	k.MustRun(t, "--context", "wds1", "-n", "shop", "delete", "deployment", "web")
	for _, what := range []string{"deployment/web", "configmap/settings", "configmap/missing", "secret/db", "serviceaccount/web"} {
		poll(t, ek, equals(""), what+" to leave the edge", "get", what, "-n", "shop", "--ignore-not-found", "-o", "name")
	}
	poll(t, k, equals(""), "the placement to list no dependency (the count omitted when 0)", placement(`{.status.dependencyCount}`)...)
	require.Equal(t, "shop", ek.MustRun(t, "get", "namespace", "shop", "-o", "jsonpath={.metadata.name}"))
}
