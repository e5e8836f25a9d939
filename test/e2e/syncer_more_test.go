// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

const offlineWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: app}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cfg, namespace: app}
data: {greeting: hello}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: seed, namespace: app}
data: {value: initial}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: app}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: steady, namespace: app}
spec:
  replicas: 1
  selector: {matchLabels: {app: steady}}
  template:
    metadata: {labels: {app: steady}}
    spec: {containers: [{name: steady, image: nginx:1.27}]}
---
# The center stores this as it is; the edge's API server refuses it (the
# selector does not select the template's labels).
apiVersion: apps/v1
kind: Deployment
metadata: {name: broken, namespace: app}
spec:
  replicas: 1
  selector: {matchLabels: {app: broken}}
  template:
    metadata: {labels: {app: something-else}}
    spec: {containers: [{name: broken, image: nginx:1.27}]}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: app}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  wantSingletonReportedState: true
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [app]}
  - {apiGroup: "", resources: [configmaps], namespaces: [app], objectNames: [cfg]}
  - {apiGroup: "", resources: [configmaps], namespaces: [app], objectNames: [seed], createOnly: true}
  - {apiGroup: apps, resources: [deployments], namespaces: [app]}
`

// TestSyncerOffline stops the center for a minute: the edge keeps running
// and is not touched, a syncer restarted meanwhile works from its saved
// state, and after the center returns the syncer catches up without
// restarting what did not change. An object the edge refuses is reported
// while everything else syncs.
func TestSyncerOffline(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	dataDir := t.TempDir()
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, dataDir)

	manifest := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(offlineWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	for name, replicas := range map[string]string{"web": "2", "steady": "1"} {
		poll(t, ek, equals(replicas), name+" to be available at the edge",
			"get", "deployment", name, "-n", "app", "-o", "jsonpath={.status.availableReplicas}")
	}
	poll(t, ek, equals("initial"), "the create-only ConfigMap at the edge",
		"get", "configmap", "seed", "-n", "app", "-o", "jsonpath={.data.value}")
	poll(t, k, equals("1"), "the singleton status of steady in the WDS",
		"--context", "wds1", "get", "deployment", "steady", "-n", "app", "-o", "jsonpath={.status.availableReplicas}")

	// The refused object: reported on its copy and the SyncTarget, retried,
	// and not in the way of the rest.
	mb := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	poll(t, k, func(s string) bool { return strings.HasPrefix(s, "Rejected:") && strings.Contains(s, "selector") },
		"the rejection on the copy", "--server", srv.BaseURL()+"/spaces/"+mb, "get", "deployment", "broken", "-n", "app",
		"-o", `jsonpath={.metadata.annotations.edge\.kubestellar\.io/sync-error}`)
	poll(t, k, equals("broken Rejected"), "the rejection on the SyncTarget", "--context", "inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.problems[*].name} {.status.problems[*].reason}`)
	poll(t, k, equals("False EdgeSynced"), "the rejection in the WDS's singleton status",
		"--context", "wds1", "get", "deployment", "broken", "-n", "app",
		"-o", `jsonpath={.status.conditions[?(@.type=="EdgeSynced")].status} {.status.conditions[*].type}`)

	podUIDs := func() string {
		return ek.MustRun(t, "get", "pods", "-n", "app", "-l", "app in (web,steady)", "--sort-by=.metadata.name", "-o", "jsonpath={.items[*].metadata.uid}")
	}
	edgeState := func() string {
		return ek.MustRun(t, "get", "deployments,configmaps", "-n", "app", "-o",
			`jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.generation}:{.metadata.annotations.edge\.kubestellar\.io/applied-hash} {end}`)
	}
	uidsBefore, stateBefore := podUIDs(), edgeState()
	require.Len(t, strings.Fields(uidsBefore), 3)

	// The center goes away for a minute; the syncer is restarted meanwhile.
	outage := time.Now()
	srv.Stop(t)
	syncer.WaitLog(t, "lost the center", time.Minute)
	syncer.Stop(t)
	syncer.Start(t)
	syncer.WaitLog(t, "loaded the last desired state (", 30*time.Second)
	syncer.WaitLog(t, "waiting for the center", 30*time.Second)
	time.Sleep(time.Until(outage.Add(60 * time.Second))) // the outage itself, not a wait for readiness
	require.Equal(t, stateBefore, edgeState(), "the edge was changed while the center was away")
	require.Equal(t, uidsBefore, podUIDs(), "pods were replaced while the center was away")
	require.Equal(t, "2", ek.MustRun(t, "get", "deployment", "web", "-n", "app", "-o", "jsonpath={.status.availableReplicas}"))

	// The center returns; a change made there reaches the edge, and what did
	// not change is left alone.
	srv.Restart(t)
	k.MustRun(t, "--context", "wds1", "patch", "configmap", "seed", "-n", "app", "--type=merge", "-p", `{"data":{"value":"changed"}}`)
	k.MustRun(t, "--context", "wds1", "patch", "configmap", "cfg", "-n", "app", "--type=merge", "-p", `{"data":{"greeting":"welcome back"}}`)
	pollFor(t, 2*time.Minute, ek, equals("welcome back"), "the change made at the center to reach the edge",
		"get", "configmap", "cfg", "-n", "app", "-o", "jsonpath={.data.greeting}")
	pollFor(t, 2*time.Minute, k, equals("True"), "the syncer to be connected again", "--context", "inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status}`)
	require.Equal(t, uidsBefore, podUIDs(), "pods were replaced on reconnect")
	stateAfter := edgeState()
	for _, obj := range []string{"Deployment/web", "Deployment/steady"} {
		require.Equal(t, field(stateBefore, obj), field(stateAfter, obj), "%s was re-applied on reconnect", obj)
	}
	require.NotEqual(t, field(stateBefore, "ConfigMap/cfg"), field(stateAfter, "ConfigMap/cfg"))
	require.Contains(t, syncer.Log(), "connected to "+srv.BaseURL())
	// The create-only object was made once and is left alone (the change to
	// it was made before the one to cfg, which has arrived).
	require.Equal(t, "initial", ek.MustRun(t, "get", "configmap", "seed", "-n", "app", "-o", "jsonpath={.data.value}"))
}

// field returns the "name@..." entry of obj in a space-separated list.
func field(list, obj string) string {
	for _, f := range strings.Fields(list) {
		if strings.HasPrefix(f, obj+"@") {
			return f
		}
	}
	return ""
}

// TestSyncerThreeLevels joins a kubestellar server as the edge of another:
// its syncer's target is a WDS of the middle tier, which places onward to
// a real edge cluster. A Deployment placed at the top runs at the bottom
// and its status shows at the top.
func TestSyncerThreeLevels(t *testing.T) {
	top := harness.StartBinary(t, "")
	mid := harness.StartBinary(t, "")
	kt, km := top.Kubectl(), mid.Kubectl()
	for _, s := range []*harness.Process{top, mid} {
		s.CLI(t, "space", "create", "inv1", "--type", "inventory")
		s.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	}
	leaf := edgecluster.Start(t, edgecluster.Options{Name: "leaf"})
	kl := harness.Kubectl{Kubeconfig: leaf.KubeconfigPath}

	// The middle tier's WDS is the top's edge; the leaf is the middle's.
	harness.StartSyncer(t, top.JoinCommand(t, "mid", "--inventory-space", "inv1", "--labels", "tier=mid"), mid.Kubeconfig, "", "--context", "wds1")
	harness.StartSyncer(t, mid.JoinCommand(t, "leaf", "--inventory-space", "inv1", "--labels", "tier=leaf"), leaf.KubeconfigPath, "")

	placement := func(name, tier string) string {
		return `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: ` + name + `}
spec:
  locationSelectors: [{matchLabels: {tier: ` + tier + `}}]
  wantSingletonReportedState: true
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [demo]}
  - {apiGroup: apps, resources: [deployments], namespaces: [demo]}
`
	}
	dir := t.TempDir()
	onward, down := filepath.Join(dir, "onward.yaml"), filepath.Join(dir, "down.yaml")
	require.NoError(t, os.WriteFile(onward, []byte(placement("onward", "leaf")), 0o600))
	require.NoError(t, os.WriteFile(down, []byte(placement("down", "mid")), 0o600))
	km.MustRun(t, "--context", "wds1", "apply", "-f", onward)
	kt.MustRun(t, "--context", "wds1", "apply", "-f", down)
	kt.MustRun(t, "--context", "wds1", "create", "namespace", "demo")
	kt.MustRun(t, "--context", "wds1", "create", "deployment", "app", "-n", "demo", "--image", "nginx:1.27", "--replicas", "2")

	poll(t, km, equals("2"), "the Deployment in the middle tier's WDS",
		"--context", "wds1", "get", "deployment", "app", "-n", "demo", "-o", "jsonpath={.spec.replicas}")
	pollFor(t, 2*time.Minute, kl, equals("2"), "the Deployment to run at the bottom",
		"get", "deployment", "app", "-n", "demo", "-o", "jsonpath={.status.availableReplicas}")
	pollFor(t, 2*time.Minute, kt, equals("2 1"), "the bottom's status at the top",
		"--context", "wds1", "get", "deployment", "app", "-n", "demo",
		"-o", `jsonpath={.status.availableReplicas} {.metadata.labels.kubestellar\.io/executing-count}`)
}
