// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// edge is one real edge cluster with its syncer.
type edge struct {
	name    string
	cluster *edgecluster.Cluster
	k       harness.Kubectl
	join    []string
	syncer  *harness.Syncer
}

// TestSyncerScenario runs the README's workload-management scenario with
// two real edge clusters joined by `kubestellar syncer join` as
// `kubestellar synctarget create` prints it: downsync with per-cluster
// customization, status and pod state returned to the WDS, upsync, a
// conflict with an object the syncer does not own, least privilege of the
// syncer's token, and removal.
func TestSyncerScenario(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	examples := filepath.Join(harness.RepoRoot(), "docs", "examples", "placement")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	in := func(space string, args ...string) []string {
		return append([]string{"--server", base + "/spaces/" + space}, args...)
	}

	edges := map[string]*edge{}
	for _, name := range []string{"edge1", "edge2"} {
		c := edgecluster.Start(t, edgecluster.Options{Name: name})
		e := &edge{name: name, cluster: c, k: harness.Kubectl{Kubeconfig: c.KubeconfigPath}}
		e.join = srv.JoinCommand(t, name, "--inventory-space", "inv1", "--labels", "env=prod")
		edges[name] = e
	}
	// The inventory of the README: labels and annotations that placements
	// select and customization reads.
	k.MustRun(t, "--context", "inv1", "apply", "-f", filepath.Join(examples, "inventory.yaml"))

	// edge1 already has an object of the name of one the workload will
	// place there: the syncer must report it and leave it alone.
	e1 := edges["edge1"]
	e1.k.MustRun(t, "create", "namespace", "common")
	e1.k.MustRun(t, "create", "configmap", "taken", "-n", "common", "--from-literal=owner=edge-admin")

	for _, e := range edges {
		e.syncer = harness.StartSyncer(t, e.join, e.cluster.KubeconfigPath, "")
	}
	for _, e := range edges {
		e.syncer.WaitLog(t, "mailbox ", time.Minute)
	}

	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(examples, "common.yaml"))
	k.MustRun(t, "--context", "wds1", "create", "configmap", "taken", "-n", "common", "--from-literal=owner=kubestellar")
	k.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(examples, "special.yaml"))
	k.MustRun(t, "--context", "wds1", "wait", "--for", "condition=established", "--timeout=60s", "crd/widgets.example.com")
	poll(t, k, func(string) bool { return true }, "the Widget to apply", "--context", "wds1", "apply", "-f", filepath.Join(examples, "widget.yaml"))

	// Downsync, customized per cluster.
	for name, region := range map[string]string{"edge1": "east", "edge2": "west"} {
		ek := edges[name].k
		poll(t, ek, equals(region), "the customized ConfigMap at "+name,
			"get", "configmap", "settings", "-n", "common", "-o", "jsonpath={.data.region}")
		poll(t, ek, equals("2 "+region+" "+name), "the customized Deployment at "+name,
			"get", "deployment", "web", "-n", "common", "-o",
			`jsonpath={.spec.replicas} {.metadata.labels.example\.com/region} {.metadata.labels.edge\.kubestellar\.io/syncer}`)
		poll(t, ek, equals("2"), "the Deployment to be available at "+name,
			"get", "deployment", "web", "-n", "common", "-o", "jsonpath={.status.availableReplicas}")
	}
	// The special workload (CRD, CR, Deployment) only on edge2.
	poll(t, edges["edge2"].k, equals("w1"), "the Widget at edge2", "get", "widgets", "-n", "special", "-o", "jsonpath={.items[*].metadata.name}")
	poll(t, edges["edge2"].k, equals("1"), "the special Deployment to be available at edge2",
		"get", "deployment", "special", "-n", "special", "-o", "jsonpath={.status.availableReplicas}")
	require.Contains(t, e1.k.MustFail(t, "get", "namespace", "special"), "NotFound")
	require.Contains(t, e1.k.MustFail(t, "get", "crd", "widgets.example.com"), "NotFound")

	// The conflict: reported on the copy and the SyncTarget, the edge object intact.
	mb1 := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	poll(t, k, func(s string) bool { return strings.HasPrefix(s, "Conflict:") }, "the conflict on edge1's copy",
		in(mb1, "get", "configmap", "taken", "-n", "common", "-o", `jsonpath={.metadata.annotations.edge\.kubestellar\.io/sync-error}`)...)
	poll(t, k, equals("1 taken Conflict False"), "the conflict on the SyncTarget",
		"--context", "inv1", "get", "synctarget", "edge1", "-o",
		`jsonpath={.status.conflicts} {.status.problems[0].name} {.status.problems[0].reason} {.status.conditions[?(@.type=="Synced")].status}`)
	require.Equal(t, "edge-admin", e1.k.MustRun(t, "get", "configmap", "taken", "-n", "common", "-o", "jsonpath={.data.owner}"))
	poll(t, edges["edge2"].k, equals("kubestellar"), "the ConfigMap at edge2, where nothing is in its way",
		"get", "configmap", "taken", "-n", "common", "-o", "jsonpath={.data.owner}")

	// Status back in the WDS: singleton status and executing count of the
	// special Deployment; the common one summed over both clusters, with
	// pods per phase.
	poll(t, k, equals("1 1"), "the special Deployment's singleton status and executing count",
		"--context", "wds1", "get", "deployment", "special", "-n", "special",
		"-o", `jsonpath={.status.availableReplicas} {.metadata.labels.kubestellar\.io/executing-count}`)
	poll(t, k, equals("[4,2,4] "), "the CombinedStatus of the common Deployment",
		"--context", "wds1", "get", "combinedstatus", "common.deployments.web", "-n", "common",
		"-o", `jsonpath={.results[?(@.name=="available")].rows[0].columns} {.results[?(@.name=="not-available")].rows[*].columns[0]}`)
	for _, name := range []string{"edge1", "edge2"} {
		poll(t, k, equals("True"), "the syncer of "+name+" to be connected", "--context", "inv1", "get", "synctarget", name,
			"-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status}`)
	}
	require.NotEmpty(t, k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge2", "-o", "jsonpath={.status.syncerVersion}"))
	require.Equal(t, "host ", k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge2", "-o", "jsonpath={.status.syncerMode} {.status.syncerImage}"),
		"a syncer run by syncer join says it runs on a host, with no image")

	// Upsync: a ConfigMap made at edge1 in the upsynced namespace shows up in the WDS.
	e1.k.MustRun(t, "create", "namespace", "reports")
	e1.k.MustRun(t, "create", "configmap", "report", "-n", "reports", "--from-literal=pods=2")
	poll(t, k, equals("2 inv1/edge1"), "the upsynced ConfigMap in the WDS",
		"--context", "wds1", "get", "configmap", "report-edge1", "-n", "reports",
		"-o", `jsonpath={.data.pods} {.metadata.annotations.edge\.kubestellar\.io/upsynced-from}`)
	e1.k.MustRun(t, "patch", "configmap", "report", "-n", "reports", "--type=merge", "-p", `{"data":{"pods":"3"}}`)
	poll(t, k, equals("3"), "the upsynced ConfigMap to follow the edge",
		"--context", "wds1", "get", "configmap", "report-edge1", "-n", "reports", "-o", "jsonpath={.data.pods}")

	// The syncer's token reads its own mailbox, and nothing else.
	token := flagValue(t, e1.join, "--token")
	mb2 := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge2", "-o", "jsonpath={.status.mailboxSpace}")
	asSyncer := func(space string, args ...string) []string {
		return append([]string{"--server", base + "/spaces/" + space, "--token", strings.SplitN(token, "::", 2)[1]}, args...)
	}
	require.Contains(t, k.MustRun(t, asSyncer(mb1, "get", "configmaps", "-n", "common", "-o", "name")...), "configmap/settings")
	require.Contains(t, k.MustFail(t, asSyncer(mb2, "get", "configmaps", "-n", "common")...), "Forbidden")
	require.Contains(t, k.MustFail(t, asSyncer("wds1", "get", "configmaps", "-n", "common")...), "Forbidden")

	// Removing the placements removes their objects at the edge, and only those.
	k.MustRun(t, "--context", "wds1", "delete", "edgeplacement", "special")
	poll(t, edges["edge2"].k, equals(""), "the special workload to leave edge2",
		"get", "deployments,widgets", "-n", "special", "--ignore-not-found", "-o", "jsonpath={.items[*].metadata.name}")
	require.Equal(t, "web", edges["edge2"].k.MustRun(t, "get", "deployment", "-n", "common", "-o", "jsonpath={.items[*].metadata.name}"))
	k.MustRun(t, "--context", "wds1", "delete", "edgeplacement", "common")
	for _, e := range edges {
		poll(t, e.k, equals(""), "the common workload to leave "+e.name,
			"get", "deployments", "-n", "common", "--ignore-not-found", "-o", "jsonpath={.items[*].metadata.name}")
	}
	require.Equal(t, "edge-admin", e1.k.MustRun(t, "get", "configmap", "taken", "-n", "common", "-o", "jsonpath={.data.owner}"),
		"the object the syncer did not own is still there")
	require.Equal(t, "3", e1.k.MustRun(t, "get", "configmap", "report", "-n", "reports", "-o", "jsonpath={.data.pods}"),
		"the edge's own objects are still there")
}

// flagValue returns the value following flag in args.
func flagValue(t *testing.T, args []string, flag string) string {
	t.Helper()
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
	}
	t.Fatalf("%s not in %v", flag, args)
	return ""
}
