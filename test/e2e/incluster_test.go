// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/kubestellar/kubestellar/packaging"
	"github.com/kubestellar/kubestellar/syncer"
	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// shopWorkload is placed on edge1 before its syncer's manifest is made, so
// that the manifest's RBAC covers it: a namespace, a ConfigMap and a
// Deployment.
const shopWorkload = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  color: blue
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata:
  name: shop
spec:
  locationSelectors:
  - matchLabels: {env: prod}
  downsync:
  - apiGroup: ""
    resources: [namespaces]
    objectNames: [shop]
  - apiGroup: ""
    resources: [configmaps]
    namespaces: [shop]
  - apiGroup: apps
    resources: [deployments]
    namespaces: [shop]
`

// TestSyncerInCluster: the syncer as a Deployment inside its edge cluster,
// from `kubestellar syncer manifest`, with only the manifest's RBAC.
//
// The manifest passes a server-side dry run and is applied with the real
// kubectl to a real edge cluster whose syncer namespace enforces Pod
// Security "restricted"; helm (built from its module) renders the chart to
// the same objects and installs them in a dry run. kwok runs no
// containers, so the syncer is started as the pod would run it: the
// Deployment's own arguments, the kubelet's environment, a service account
// token the edge's TokenRequest minted and the token Secret's contents in
// files, and no kubeconfig. It syncs the placement, answers its probes,
// reports a kind placed later, outside its RBAC, as MissingPermission on
// the SyncTarget until `kubestellar syncer rbac` grants it, restarts (a new
// image) without re-applying what is unchanged, and is uninstalled leaving
// its workloads.
func TestSyncerInCluster(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	edge := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: edge.KubeconfigPath}

	// The SyncTarget (its join command unused) and its workload.
	srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	pollStdin(t, k, shopWorkload, "the workload to be accepted", "--context", "wds1", "apply", "-f", "-")
	// The mailbox's SyncerConfig says what is placed: the RBAC follows it.
	require.NoError(t, wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(srv.CLIStdout(t, "syncer", "rbac", "--sync-target", "inv1/edge1"), "deployments"), nil
	}), "the placement to reach edge1's mailbox")

	manifest := srv.CLIStdout(t, "syncer", "manifest", "--sync-target", "inv1/edge1", "--image", "registry.example/kubestellar:test")
	objs, err := packaging.DecodeManifest([]byte(manifest))
	require.NoError(t, err)
	deploy := find(t, objs, "Deployment", "kubestellar-syncer")
	placed := find(t, objs, "ClusterRole", "kubestellar-syncer:kubestellar-syncer:placed")
	require.Contains(t, mustYAML(t, placed.Object["rules"]), "deployments", "the manifest grants what is placed now")
	require.NotContains(t, mustYAML(t, placed.Object["rules"]), "services", "and nothing more")

	// The chart, rendered and installed (dry run) by the real helm, is
	// the same objects.
	checkChart(t, edge, ek, objs)

	// Applied to the edge: a server-side dry run first (once its
	// namespace exists: a dry run makes none to put the rest in), then for
	// real, with no Pod Security warning; the syncer's pod is admitted
	// into its restricted namespace.
	ns := find(t, objs, "Namespace", "kubestellar-syncer")
	ek.MustRunStdin(t, strings.NewReader(mustYAML(t, ns.Object)), "apply", "-f", "-")
	dry, dryErr, err := ek.RunStdin(context.Background(), strings.NewReader(manifest), "apply", "--dry-run=server", "-f", "-")
	require.NoError(t, err, "%s%s", dry, dryErr)
	require.Contains(t, dry, "deployment.apps/kubestellar-syncer created (server dry run)")
	require.NotContains(t, dryErr, "PodSecurity", "the syncer's pod meets the restricted level")
	require.Contains(t, ek.MustFail(t, "get", "deployment", "kubestellar-syncer", "-n", "kubestellar-syncer"), "NotFound", "a dry run makes nothing")
	out, errOut, err := ek.RunStdin(context.Background(), strings.NewReader(manifest), "apply", "-f", "-")
	require.NoError(t, err, "%s%s", out, errOut)
	require.NotContains(t, errOut, "PodSecurity", "the syncer's pod meets the restricted level")
	require.Equal(t, "restricted", ek.MustRun(t, "get", "namespace", "kubestellar-syncer", "-o", `jsonpath={.metadata.labels.pod-security\.kubernetes\.io/enforce}`))
	poll(t, ek, equals("1"), "the syncer's pod to be admitted and running (kwok)", "get", "deployment", "kubestellar-syncer", "-n", "kubestellar-syncer",
		"-o", "jsonpath={.status.availableReplicas}")

	// The syncer, started as that pod would run it.
	sa := "system:serviceaccount:kubestellar-syncer:kubestellar-syncer"
	// The aggregated ClusterRole is filled in by the edge's controller
	// manager, a moment after it is applied.
	poll(t, ek, func(s string) bool { return strings.TrimSpace(s) == "yes" }, "the syncer's aggregated ClusterRole",
		"auth", "can-i", "patch", "deployments.apps", "-n", "shop", "--as", sa)
	require.Equal(t, "no", strings.TrimSpace(canI(t, ek, "create", "secrets", "-n", "shop", "--as", sa)),
		"the syncer may not touch Secrets: nothing placed is one")
	require.Equal(t, "no", strings.TrimSpace(canI(t, ek, "get", "services", "-n", "shop", "--as", sa)))
	pod := startInClusterSyncer(t, edge, ek, deploy)
	poll(t, ek, equals("blue"), "the ConfigMap at the edge", "get", "configmap", "settings", "-n", "shop", "-o", "jsonpath={.data.color}")
	poll(t, ek, equals("1"), "the Deployment to be available at the edge", "get", "deployment", "web", "-n", "shop", "-o", "jsonpath={.status.availableReplicas}")
	poll(t, k, equals("True"), "the SyncTarget to be synced", "--context", "inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.conditions[?(@.type=="Synced")].status}`)
	pod.waitReady(t)
	// The SyncTarget says where its syncer runs, and which image.
	poll(t, k, imageIs("registry.example/kubestellar:test"), "the syncer's mode and image on the SyncTarget",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.syncerMode} {.status.syncerImage}")

	// A kind placed later, outside the syncer's RBAC: a clear problem on
	// the SyncTarget and the copy, not a crash or a silent skip.
	pollStdin(t, k, `
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  selector: {app: web}
  ports:
  - port: 80
`, "the Service in the WDS", "--context", "wds1", "apply", "-f", "-")
	k.MustRun(t, "--context", "wds1", "patch", "edgeplacement", "shop", "--type=json", "-p",
		`[{"op":"add","path":"/spec/downsync/-","value":{"apiGroup":"","resources":["services"],"namespaces":["shop"]}}]`)
	problem := poll(t, k, func(s string) bool { return strings.HasPrefix(s, "services web MissingPermission") },
		"the missing permission on the SyncTarget", "--context", "inv1", "get", "synctarget", "edge1", "-o",
		`jsonpath={.status.problems[?(@.reason=="MissingPermission")].resource} {.status.problems[?(@.reason=="MissingPermission")].name} {.status.problems[?(@.reason=="MissingPermission")].reason} {.status.problems[?(@.reason=="MissingPermission")].message}`)
	require.Contains(t, problem, "the syncer may not get services in namespace shop at the edge")
	require.Contains(t, problem, "kubestellar syncer rbac --sync-target inv1/edge1")
	mb := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	base := srv.BaseURL()
	poll(t, k, func(s string) bool { return strings.HasPrefix(s, "MissingPermission: ") }, "the problem on the mailbox copy",
		"--server", base+"/spaces/"+mb, "get", "service", "web", "-n", "shop", "-o", `jsonpath={.metadata.annotations.edge\.kubestellar\.io/sync-error}`)
	synced := []string{"--context", "wds1", "get", "edgeplacement", "shop", "-o",
		`jsonpath={.status.conditions[?(@.type=="Synced")].status} {.status.conditions[?(@.type=="Synced")].reason} {.status.conditions[?(@.type=="Synced")].message}`}
	placementProblem := poll(t, k, func(s string) bool { return strings.HasPrefix(s, "False MissingPermission ") }, "the missing permission in the WDS's placement status", synced...)
	require.Contains(t, placementProblem, "at SyncTarget inv1/edge1, services shop/web: MissingPermission: the syncer may not get services")
	require.Equal(t, "True", k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`),
		"the placement itself is carried out")
	require.Contains(t, ek.MustFail(t, "get", "service", "web", "-n", "shop"), "NotFound")
	require.True(t, pod.running(), "the syncer keeps running")

	// The edge's admin grants it; the syncer retries on its own.
	rbac := srv.CLIStdout(t, "syncer", "rbac", "--sync-target", "inv1/edge1")
	require.Contains(t, rbac, "services")
	ek.MustRunStdin(t, strings.NewReader(rbac), "apply", "-f", "-")
	pollFor(t, 2*time.Minute, ek, equals("80"), "the Service at the edge once granted", "get", "service", "web", "-n", "shop", "-o", "jsonpath={.spec.ports[0].port}")
	poll(t, k, equals(""), "the problem to clear", "--context", "inv1", "get", "synctarget", "edge1", "-o",
		`jsonpath={.status.problems[?(@.reason=="MissingPermission")].name}`)
	poll(t, k, func(s string) bool { return strings.HasPrefix(s, "True NoProblems ") }, "the placement's Synced condition to clear", synced...)

	// A new image: the pod is replaced (Recreate), its emptyDir with it.
	// Nothing unchanged is applied again and no workload restarts.
	written := []string{"get", "deployment", "web", "-n", "shop", "-o",
		`jsonpath={.metadata.generation} {.metadata.managedFields[?(@.manager=="` + syncer.FieldManager + `")].time}`}
	before := ek.MustRun(t, written...)
	ek.MustRun(t, "set", "image", "deployment/kubestellar-syncer", "-n", "kubestellar-syncer", "syncer=registry.example/kubestellar:test2")
	poll(t, ek, equals("registry.example/kubestellar:test2"), "the new syncer pod, the old one gone first (Recreate)",
		"get", "pods", "-n", "kubestellar-syncer", "-l", "app.kubernetes.io/name=kubestellar-syncer", "-o", "jsonpath={.items[*].spec.containers[0].image}")
	pod.stop(t)
	pod = startInClusterSyncer(t, edge, ek, deploy)
	pod.waitReady(t)
	poll(t, k, imageIs("registry.example/kubestellar:test2"), "the new image on the SyncTarget",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.syncerMode} {.status.syncerImage}")
	poll(t, k, equals("True"), "the SyncTarget to be synced again", "--context", "inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.conditions[?(@.type=="Synced")].status}`)
	require.Equal(t, before, ek.MustRun(t, written...), "the workload was not written again")

	// Uninstall: the syncer's objects go, its workloads stay.
	pod.stop(t)
	uninstall := srv.CLIStdout(t, "syncer", "manifest", "--uninstall")
	ek.MustRunStdin(t, strings.NewReader(uninstall), "delete", "-f", "-", "--wait=false")
	require.Contains(t, ek.MustFail(t, "get", "clusterrole", "kubestellar-syncer:kubestellar-syncer:self"), "NotFound")
	require.Contains(t, ek.MustFail(t, "get", "clusterrolebinding", "kubestellar-syncer:kubestellar-syncer"), "NotFound")
	poll(t, ek, func(s string) bool { return s == "" || s == "Terminating" }, "the syncer's namespace to go",
		"get", "namespaces", "-o", `jsonpath={.items[?(@.metadata.name=="kubestellar-syncer")].status.phase}`)
	require.Equal(t, "1 blue 80", ek.MustRun(t, "get", "deployment,configmap,service", "-n", "shop", "-o",
		`jsonpath={.items[?(@.kind=="Deployment")].spec.replicas} {.items[?(@.kind=="ConfigMap")].data.color} {.items[?(@.kind=="Service")].spec.ports[0].port}`),
		"what the syncer placed keeps running")
}

// imageIs accepts "in-cluster IMAGE", with the digest the kubelet (here,
// kwok) reports, if any.
func imageIs(image string) func(string) bool {
	return func(s string) bool {
		rest, ok := strings.CutPrefix(s, "in-cluster "+image)
		return ok && (rest == "" || strings.HasPrefix(rest, "@sha256:"))
	}
}

// checkChart renders the chart with helm and the values the CLI's manifest
// holds, and compares the objects; then installs it in a dry run against
// the edge cluster (in a namespace of its own: a dry run makes no
// namespace to put the rest in).
func checkChart(t *testing.T, edge *edgecluster.Cluster, ek harness.Kubectl, cliObjs []*unstructured.Unstructured) {
	t.Helper()
	helm := newHelmCLI(t, harness.Helm(t), edge.KubeconfigPath)
	chart := filepath.Join(harness.RepoRoot(), "packaging", "chart")
	deploy := find(t, cliObjs, "Deployment", "kubestellar-syncer")
	secret := find(t, cliObjs, "Secret", "kubestellar-syncer-token")
	placed := find(t, cliObjs, "ClusterRole", "kubestellar-syncer:kubestellar-syncer:placed")
	c := container(t, deploy)
	token, err := base64.StdEncoding.DecodeString(secret.Object["data"].(map[string]any)["token"].(string))
	require.NoError(t, err)
	values := map[string]any{
		"server": argValue(t, c, "--server"), "syncTarget": argValue(t, c, "--sync-target"), "image": c["image"],
		"createNamespace": true, "token": map[string]any{"value": string(token)}, "rbac": map[string]any{"rules": placed.Object["rules"]},
	}
	valuesFile := filepath.Join(t.TempDir(), "values.yaml")
	require.NoError(t, os.WriteFile(valuesFile, []byte(mustYAML(t, values)), 0o600))

	rendered := helm.mustRun(t, "template", "kubestellar-syncer", chart, "--namespace", "kubestellar-syncer", "-f", valuesFile)
	helmObjs, err := packaging.DecodeManifest([]byte(rendered))
	require.NoError(t, err)
	require.Equal(t, describe(t, cliObjs), describe(t, helmObjs), "helm template and kubestellar syncer manifest make the same objects")

	ek.MustRun(t, "create", "namespace", "helm-check")
	ek.MustRun(t, "label", "namespace", "helm-check", "pod-security.kubernetes.io/enforce=restricted")
	values["createNamespace"] = false
	require.NoError(t, os.WriteFile(valuesFile, []byte(mustYAML(t, values)), 0o600))
	out := helm.mustRun(t, "install", "kubestellar-syncer", chart, "--namespace", "helm-check", "-f", valuesFile, "--dry-run=server")
	require.Contains(t, out, "STATUS: pending-install")
	require.Contains(t, out, "kind: Deployment")
	require.Contains(t, ek.MustFail(t, "get", "deployment", "kubestellar-syncer", "-n", "helm-check"), "NotFound", "a dry run installs nothing")
	ek.MustRun(t, "delete", "namespace", "helm-check", "--wait=false")
}

// inClusterSyncer is the syncer run as its pod would be.
type inClusterSyncer struct {
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
	health string
}

// startInClusterSyncer runs the binary with the Deployment's arguments, in
// the environment a kubelet gives the pod: KUBERNETES_SERVICE_HOST/PORT, a
// projected service account token (minted by the edge's TokenRequest for
// the manifest's ServiceAccount) with the edge's CA, and the token Secret
// mounted as a file. No kubeconfig, no other credential.
func startInClusterSyncer(t *testing.T, edge *edgecluster.Cluster, ek harness.Kubectl, deploy *unstructured.Unstructured) *inClusterSyncer {
	t.Helper()
	dir := t.TempDir()
	saDir := filepath.Join(dir, "serviceaccount")
	require.NoError(t, os.MkdirAll(saDir, 0o700))
	saToken := ek.MustRun(t, "create", "token", "kubestellar-syncer", "-n", "kubestellar-syncer", "--duration", "1h")
	require.NoError(t, os.WriteFile(filepath.Join(saDir, "token"), []byte(strings.TrimSpace(saToken)), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(saDir, "ca.crt"), edge.Config.CAData, 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(saDir, "namespace"), []byte("kubestellar-syncer"), 0o600))
	joinToken, err := base64.StdEncoding.DecodeString(ek.MustRun(t, "get", "secret", "kubestellar-syncer-token", "-n", "kubestellar-syncer", "-o", "jsonpath={.data.token}"))
	require.NoError(t, err)
	tokenFile := filepath.Join(dir, "join-token")
	require.NoError(t, os.WriteFile(tokenFile, joinToken, 0o600))
	u, err := url.Parse(edge.Config.Host)
	require.NoError(t, err)

	health := fmt.Sprintf("127.0.0.1:%d", harness.FreePort(t))
	var args []string
	for _, a := range container(t, deploy)["args"].([]any) {
		arg := a.(string)
		switch {
		case strings.HasPrefix(arg, "--token-file="):
			arg = "--token-file=" + tokenFile
		case strings.HasPrefix(arg, "--data-dir="):
			arg = "--data-dir=" + filepath.Join(dir, "data") // the emptyDir
		case strings.HasPrefix(arg, "--health-address="):
			arg = "--health-address=" + health
		}
		args = append(args, arg)
	}
	args = append(args, "--service-account-dir="+saDir, "--heartbeat-interval=2s", "-v=2")
	s := &inClusterSyncer{log: filepath.Join(dir, "syncer.log"), health: health, exited: make(chan struct{})}
	logFile, err := os.Create(s.log)
	require.NoError(t, err)
	s.cmd = exec.Command(harness.Binary(t), args...)
	// The pod kwok runs for the Deployment: its name is what the downward
	// API would give the syncer.
	podName := poll(t, ek, func(s string) bool { return s != "" }, "the syncer's pod", "get", "pods", "-n", "kubestellar-syncer",
		"-l", "app.kubernetes.io/name=kubestellar-syncer", "--field-selector", "status.phase=Running", "-o", "jsonpath={.items[0].metadata.name}")
	s.cmd.Env = []string{"KUBERNETES_SERVICE_HOST=" + u.Hostname(), "KUBERNETES_SERVICE_PORT=" + u.Port(), "HOME=" + dir, "PATH=/usr/bin:/bin",
		syncer.PodNameEnv + "=" + podName, syncer.PodNamespaceEnv + "=kubestellar-syncer"}
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	require.NoError(t, s.cmd.Start())
	go func() {
		_ = s.cmd.Wait()
		logFile.Close()
		close(s.exited)
	}()
	t.Cleanup(func() {
		s.stop(t)
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			t.Logf("the in-cluster syncer's log:\n%s", data[max(0, len(data)-8000):])
		}
	})
	return s
}

func (s *inClusterSyncer) running() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// waitReady waits for /readyz, as the kubelet's readiness probe would,
// after /livez answers.
func (s *inClusterSyncer) waitReady(t *testing.T) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if !s.running() {
			return false, fmt.Errorf("the syncer exited")
		}
		for _, path := range []string{"/livez", "/readyz"} {
			resp, err := http.Get("http://" + s.health + path)
			if err != nil {
				last = err.Error()
				return false, nil
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			last = fmt.Sprintf("%s: %d %s", path, resp.StatusCode, body)
			if resp.StatusCode != http.StatusOK {
				return false, nil
			}
		}
		return true, nil
	})
	require.NoError(t, err, "the syncer's probes; last: %s", last)
	require.Contains(t, last, "ok: connected; mailbox ")
}

func (s *inClusterSyncer) stop(t *testing.T) {
	if s.cmd.Process == nil || !s.running() {
		return
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
		t.Errorf("the syncer did not stop within 30 s of SIGTERM")
	}
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	require.Failf(t, "not in the manifest", "%s %s", kind, name)
	return nil
}

func container(t *testing.T, deploy *unstructured.Unstructured) map[string]any {
	t.Helper()
	containers, _, err := unstructured.NestedSlice(deploy.Object, "spec", "template", "spec", "containers")
	require.NoError(t, err)
	require.Len(t, containers, 1)
	return containers[0].(map[string]any)
}

func argValue(t *testing.T, c map[string]any, flag string) string {
	t.Helper()
	for _, a := range c["args"].([]any) {
		if v, ok := strings.CutPrefix(a.(string), flag+"="); ok {
			return v
		}
	}
	require.Failf(t, "no such argument", "%s in %v", flag, c["args"])
	return ""
}

// describe is the objects as sorted YAML documents, to compare two
// renderings.
func describe(t *testing.T, objs []*unstructured.Unstructured) []string {
	t.Helper()
	var out []string
	for _, o := range objs {
		out = append(out, mustYAML(t, o.Object))
	}
	sort.Strings(out)
	return out
}

func mustYAML(t *testing.T, v any) string {
	t.Helper()
	data, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(data)
}
