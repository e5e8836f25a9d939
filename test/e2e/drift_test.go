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

// driftWorkload places a Deployment whose replicas the placement sets, and
// a ConfigMap.
const driftWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: drift}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: drift}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx:1.27}]}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: drift}
data: {mode: placed-value}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: drift}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [drift]}
  - {apiGroup: apps, resources: [deployments], namespaces: [drift]}
  - {apiGroup: "", resources: [configmaps], namespaces: [drift], objectNames: [settings]}
`

// TestEdgeDriftReverted changes at the edge, with kubectl, fields the
// syncer manages (kubectl scale of a Deployment, kubectl edit of a
// ConfigMap's data) and deletes an object it placed: each is reverted, and
// the SyncTarget counts exactly those reverts, naming the last. An
// annotation added at the edge, which the syncer does not manage, stays.
// The syncer's first applies are not counted, nor is its restart, which
// rewrites nothing.
func TestEdgeDriftReverted(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "", "--status-refresh", "2s")

	manifest := filepath.Join(t.TempDir(), "drift.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(driftWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	poll(t, ek, equals("2"), "the Deployment to be available at the edge",
		"get", "deployment", "web", "-n", "drift", "-o", "jsonpath={.status.availableReplicas}")
	poll(t, ek, equals("placed-value"), "the ConfigMap at the edge", "get", "configmap", "settings", "-n", "drift", "-o", "jsonpath={.data.mode}")
	syncTarget := func(jsonpath string) []string {
		return []string{"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath=" + jsonpath}
	}
	poll(t, k, equals("True 3 objects in step"), "the SyncTarget to report the three objects in step",
		syncTarget(`{.status.conditions[?(@.type=="Synced")].status} {.status.conditions[?(@.type=="Synced")].message}`)...)
	driftCount := `{.status.drift.reverted}`
	require.Equal(t, "", k.MustRun(t, syncTarget(driftCount)...), "the syncer's first applies are not drift")

	// An annotation of the edge's own: not the syncer's to manage.
	ek.MustRun(t, "annotate", "deployment", "web", "-n", "drift", "team=edge")

	// kubectl scale: spec.replicas, which the placement sets.
	ek.MustRun(t, "scale", "deployment", "web", "-n", "drift", "--replicas=5")
	poll(t, ek, equals("2 edge"), "the Deployment's replicas to be put back, its annotation kept",
		"get", "deployment", "web", "-n", "drift", "-o", "jsonpath={.spec.replicas} {.metadata.annotations.team}")
	poll(t, k, equals("1 apps/deployments drift/web Changed .spec.replicas"), "the SyncTarget to count the revert",
		syncTarget(driftCount+` {.status.drift.last.group}/{.status.drift.last.resource} {.status.drift.last.namespace}/{.status.drift.last.name} `+
			`{.status.drift.last.reason} {.status.drift.last.fields[*]}`)...)

	// kubectl edit: the ConfigMap's data.
	t.Setenv("KUBE_EDITOR", "sed -i s/placed-value/edited-at-the-edge/")
	out := ek.MustRun(t, "edit", "configmap", "settings", "-n", "drift")
	require.Contains(t, out, "edited", "kubectl edit changed the ConfigMap")
	poll(t, ek, equals("placed-value"), "the ConfigMap's data to be put back", "get", "configmap", "settings", "-n", "drift", "-o", "jsonpath={.data.mode}")
	poll(t, k, equals("2 /configmaps drift/settings Changed .data.mode"), "the SyncTarget to count the revert",
		syncTarget(driftCount+` {.status.drift.last.group}/{.status.drift.last.resource} {.status.drift.last.namespace}/{.status.drift.last.name} `+
			`{.status.drift.last.reason} {.status.drift.last.fields[*]}`)...)

	// Deleted at the edge: made again.
	uid := ek.MustRun(t, "get", "configmap", "settings", "-n", "drift", "-o", "jsonpath={.metadata.uid}")
	ek.MustRun(t, "delete", "configmap", "settings", "-n", "drift", "--wait=true")
	poll(t, ek, func(s string) bool { return s != "" && !strings.HasPrefix(s, uid) }, "the ConfigMap to be made again",
		"get", "configmap", "settings", "-n", "drift", "--ignore-not-found", "-o", "jsonpath={.metadata.uid} {.data.mode}")
	poll(t, k, equals("3 settings Deleted"), "the SyncTarget to count the revert",
		syncTarget(driftCount+` {.status.drift.last.name} {.status.drift.last.reason}`)...)

	// Three reverts, counted once each: two more heartbeats later the
	// count is the same. (--status-refresh 2s: the syncer writes its
	// status on every heartbeat, whether or not something changed.)
	stillThree := func(what string) {
		t.Helper()
		beat := k.MustRun(t, syncTarget(`{.status.lastSyncerHeartbeatTime}`)...)
		for range 2 {
			beat = pollFor(t, time.Minute, k, func(s string) bool { return s != beat }, "a later heartbeat", syncTarget(`{.status.lastSyncerHeartbeatTime}`)...)
		}
		require.Equal(t, "3", k.MustRun(t, syncTarget(driftCount)...), what)
	}
	stillThree("each revert is counted once")

	// Where an operator sees it.
	wide := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "wide")
	require.Regexp(t, `(?m)^NAME\s.*\sDRIFT\s`, wide)
	require.Regexp(t, `(?m)^edge1\s.*\s3\s+\S+$`, wide, "the Drift column")
	describe := k.MustRun(t, "--context", "inv1", "describe", "synctarget", "edge1")
	require.Contains(t, describe, "Drift:")
	require.Regexp(t, `Reverted:\s+3`, describe)

	// A restarted syncer applies each object once to check it: a no-op,
	// not drift.
	// (The ConfigMap's resourceVersion, the Deployment's generation: its
	// status changes on its own.)
	versions := func() string {
		return ek.MustRun(t, "get", "deployments,configmaps", "-n", "drift", "-l", "edge.kubestellar.io/syncer",
			"-o", `jsonpath={range .items[*]}{.kind}/{.metadata.name}@{.metadata.generation}/{.metadata.resourceVersion} {end}`)
	}
	before := versions()
	syncer.Stop(t)
	syncer.Start(t)
	syncer.WaitLog(t, "objects synced to the edge cluster", 2*time.Minute)
	stillThree("a restart is not drift")
	after := versions()
	require.Equal(t, field(before, "ConfigMap/settings"), field(after, "ConfigMap/settings"), "the restart rewrote the ConfigMap")
	generation := func(list string) string { return strings.Split(field(list, "Deployment/web"), "/")[0] }
	require.Equal(t, generation(before), generation(after), "the restart rewrote the Deployment's spec")
	require.Contains(t, syncer.Log(), `verdict="applyToVerify"`, "the restarted syncer checked the objects")
	require.Equal(t, "edge", ek.MustRun(t, "get", "deployment", "web", "-n", "drift", "-o", "jsonpath={.metadata.annotations.team}"))
}
