// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

func equals(want string) func(string) bool { return func(s string) bool { return s == want } }

// TestPlacementScenarioWithKubectl runs the workload-management scenario of
// the README with the built binary and the real kubectl; the syncers' side
// is simulated by writing status into the mailboxes with kubectl.
func TestPlacementScenarioWithKubectl(t *testing.T) {
	placementScenario(t, harness.StartBinary(t, ""))
}

// placementScenario runs the README's placement scenario through srv with
// kubectl, reporting for the syncers, and returns the SyncTargets' mailbox
// spaces. Each mailbox ends with its customized copies: the ConfigMap
// "settings" in namespace "common" has region east in edge1's, west in
// edge2's.
func placementScenario(t *testing.T, srv *harness.Process) map[string]string {
	k := srv.Kubectl()
	examples := filepath.Join(harness.RepoRoot(), "docs", "examples", "placement")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	// The space controller caches Spaces without their managed fields and
	// writes them by update: every writer's entry stays.
	managers := k.MustRun(t, "get", "space", "wds1", "--show-managed-fields",
		"-o", `jsonpath={range .metadata.managedFields[*]}{.manager}/{.subresource} {end}`)
	require.ElementsMatch(t, []string{"kubestellar/", "kubestellar-space-controller/", "kubestellar-space-controller/status"}, strings.Fields(managers))
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	in := func(space string, args ...string) []string {
		return append([]string{"--server", base + "/spaces/" + space}, args...)
	}

	k.MustRun(t, "--context", "inv1", "apply", "-f", filepath.Join(examples, "inventory.yaml"))
	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(examples, "common.yaml"))
	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(examples, "special.yaml"))
	k.MustRun(t, "--context", "wds1", "wait", "--for", "condition=established", "--timeout=60s", "crd/widgets.example.com")
	poll(t, k, func(string) bool { return true }, "the Widget to apply", "--context", "wds1", "apply", "-f", filepath.Join(examples, "widget.yaml"))

	mb := map[string]string{}
	for _, st := range []string{"edge1", "edge2"} {
		mb[st] = poll(t, k, func(s string) bool { return s != "" }, "the mailbox of "+st,
			"--context", "inv1", "get", "synctarget", st, "-o", "jsonpath={.status.mailboxSpace}")
	}
	poll(t, k, equals("True"), "the common placement to be Ready",
		"--context", "wds1", "get", "edgeplacement", "common", "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	require.Equal(t, "2", k.MustRun(t, "--context", "wds1", "get", "epl", "common", "-o", "jsonpath={.status.matchingLocationCount}"))

	// Each mailbox holds its customized copy.
	for st, region := range map[string]string{"edge1": "east", "edge2": "west"} {
		poll(t, k, equals(region), "the customized ConfigMap in "+st+"'s mailbox",
			in(mb[st], "get", "configmap", "settings", "-n", "common", "-o", "jsonpath={.data.region}")...)
		poll(t, k, equals("2 "+region), "the customized Deployment in "+st+"'s mailbox",
			in(mb[st], "get", "deployment", "web", "-n", "common", "-o", `jsonpath={.spec.replicas} {.metadata.labels.example\.com/region}`)...)
	}
	// The special workload only on edge2; the CRD named in its SyncerConfig.
	poll(t, k, equals("w1"), "the Widget in edge2's mailbox", in(mb["edge2"], "get", "widgets", "-n", "special", "-o", "jsonpath={.items[*].metadata.name}")...)
	require.Equal(t, "widgets.example.com", k.MustRun(t, in(mb["edge2"], "get", "syncerconfig", "the-one", "-o", "jsonpath={.spec.crds[*]}")...))
	errOut := k.MustFail(t, in(mb["edge1"], "get", "deployment", "special", "-n", "special")...)
	require.Contains(t, errOut, "NotFound")
	// Every ConfigMap of common is placed, but for the namespace's root CA
	// ConfigMap: each edge has its own.
	poll(t, k, func(s string) bool { return strings.TrimSpace(s) == "configmap/kube-root-ca.crt" }, "common's root CA ConfigMap in wds1", "--context", "wds1", "get", "configmap", "kube-root-ca.crt", "-n", "common", "-o", "name")
	errOut = k.MustFail(t, in(mb["edge1"], "get", "configmap", "kube-root-ca.crt", "-n", "common")...)
	require.Contains(t, errOut, "NotFound")

	// Syncers report, each with a token of its own (a mailbox is written
	// by its syncer, not the admin): status into the copies, pod state
	// beside it.
	syncer := map[string]func(args ...string) []string{}
	for _, st := range []string{"edge1", "edge2"} {
		token := syncerToken(t, srv, "inv1/"+st)
		syncer[st] = func(args ...string) []string { return append(in(mb[st], args...), "--token", token) }
	}
	reportStatus := func(st, ns, name string, available int, running int) {
		status, _ := json.Marshal(map[string]any{"status": map[string]any{"replicas": 2, "readyReplicas": available, "availableReplicas": available}})
		k.MustRun(t, syncer[st]("patch", "deployment", name, "-n", ns, "--subresource=status", "--type=merge", "-p", string(status))...)
		k.MustRun(t, syncer[st]("annotate", "--overwrite", "deployment", name, "-n", ns,
			fmt.Sprintf(`edge.kubestellar.io/associated-state={"podPhases":{"Running":%d}}`, running))...)
	}
	reportStatus("edge1", "common", "web", 0, 0)
	reportStatus("edge2", "common", "web", 2, 2)
	reportStatus("edge2", "special", "special", 1, 1)

	poll(t, k, equals("1 1"), "the special Deployment's singleton status and executing count",
		"--context", "wds1", "get", "deployment", "special", "-n", "special",
		"-o", `jsonpath={.status.availableReplicas} {.metadata.labels.kubestellar\.io/executing-count}`)
	// edge1 has nothing available (the WDS Deployment wants 1): it is listed.
	poll(t, k, equals("[2,2,2] edge1"), "the CombinedStatus of the common Deployment",
		"--context", "wds1", "get", "combinedstatus", "common.deployments.web", "-n", "common",
		"-o", `jsonpath={.results[?(@.name=="available")].rows[0].columns} {.results[?(@.name=="not-available")].rows[*].columns[0]}`)

	// An object upsynced from an edge appears in the WDS.
	k.MustRunStdin(t, strings.NewReader(`apiVersion: v1
kind: Namespace
metadata: {name: reports, labels: {edge.kubestellar.io/upsynced: "true"}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: report, namespace: reports, labels: {edge.kubestellar.io/upsynced: "true"}}
data: {pods: "1"}
`), syncer["edge1"]("create", "-f", "-")...)
	poll(t, k, equals("1 inv1/edge1"), "the upsynced ConfigMap in the WDS",
		"--context", "wds1", "get", "configmap", "report-edge1", "-n", "reports",
		"-o", `jsonpath={.data.pods} {.metadata.annotations.edge\.kubestellar\.io/upsynced-from}`)

	// Deleting the special placement removes its objects from edge2's mailbox, and only those.
	k.MustRun(t, "--context", "wds1", "delete", "edgeplacement", "special")
	poll(t, k, equals(""), "the special workload to leave edge2's mailbox",
		in(mb["edge2"], "get", "deployments", "-n", "special", "-o", "jsonpath={.items[*].metadata.name}")...)
	// With its Widgets gone, the mailbox no longer serves their CRD.
	poll(t, k, func(out string) bool { return !strings.Contains(out, "widgets") }, "the Widget CRD to be unbound from edge2's mailbox",
		in(mb["edge2"], "api-resources", "--api-group", "example.com")...)
	require.Equal(t, "web", k.MustRun(t, in(mb["edge2"], "get", "deployment", "-n", "common", "-o", "jsonpath={.items[*].metadata.name}")...))
	return mb
}

// syncerToken makes a token for a SyncTarget ("inventory/name") with
// `kubestellar token create` and returns it.
func syncerToken(t *testing.T, srv *harness.Process, syncTarget string) string {
	t.Helper()
	cmd := exec.Command(srv.Bin, "token", "create", "--sync-target", syncTarget)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+srv.Kubeconfig)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "kubestellar token create --sync-target %s\n%s", syncTarget, stderr.String())
	return strings.TrimSpace(string(out))
}
