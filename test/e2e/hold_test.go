// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// holdWorkload is a ConfigMap placed on every prod edge.
const holdWorkload = `apiVersion: v1
kind: Namespace
metadata: {name: store}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: prices, namespace: store}
data: {version: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: banner, namespace: store}
data: {text: winter}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: store}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [store]}
  - {apiGroup: "", resources: [configmaps], namespaces: [store]}
`

// TestEdgeHold: `kubestellar syncer hold` at the edge keeps every change
// of the mailbox (an update and a delete) out of the real edge cluster
// while the center shows the hold with what waits; the hold outlives a
// restart of the syncer; `kubestellar syncer release` brings the edge in
// step.
func TestEdgeHold(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	dataDir := t.TempDir()
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, dataDir)

	manifest := filepath.Join(t.TempDir(), "store.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(holdWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	poll(t, ek, equals("1"), "the prices at the edge", "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}")
	poll(t, ek, equals("winter"), "the banner at the edge", "get", "configmap", "banner", "-n", "store", "-o", "jsonpath={.data.text}")

	hold := srv.CLI(t, "syncer", "hold", "--data-dir", dataDir, "--for", "1h", "--reason", "store open")
	require.Contains(t, hold, "holding every change to this edge cluster until ")
	syncTarget := func(jsonpath string) []string {
		return []string{"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath=" + jsonpath}
	}
	poll(t, k, equals("store open"), "the SyncTarget to show the hold", syncTarget(`{.status.hold.reason}`)...)

	// Two changes at the center: both reach the mailbox, neither the edge.
	k.MustRun(t, "--context", "wds1", "-n", "store", "patch", "configmap", "prices", "--type", "merge", "-p", `{"data":{"version":"2"}}`)
	k.MustRun(t, "--context", "wds1", "-n", "store", "delete", "configmap", "banner")
	mailbox := k.MustRun(t, syncTarget(`{.status.mailboxSpace}`)...)
	inMailbox := func(args ...string) []string {
		return append([]string{"--server", srv.BaseURL() + "/spaces/" + mailbox}, args...)
	}
	poll(t, k, equals("2"), "the update in the mailbox", inMailbox("get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}")...)
	poll(t, k, equals(""), "the delete in the mailbox", inMailbox("get", "configmap", "banner", "-n", "store", "--ignore-not-found", "-o", "name")...)
	poll(t, k, equals("2"), "the syncer to count two objects waiting", syncTarget(`{.status.hold.waiting}`)...)
	require.Equal(t, "1", ek.MustRun(t, "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}"), "held: the update waits")
	require.Equal(t, "winter", ek.MustRun(t, "get", "configmap", "banner", "-n", "store", "-o", "jsonpath={.data.text}"), "held: the delete waits")
	require.Contains(t, k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "wide"), "HELD")

	// The hold is the edge's: a restarted syncer still holds.
	syncer.Stop(t)
	syncer.Start(t)
	poll(t, k, func(s string) bool { n, err := strconv.Atoi(s); return err == nil && n >= 2 }, "the restarted syncer to hold the two changes again",
		syncTarget(`{.status.hold.waiting}`)...)
	require.Equal(t, "1", ek.MustRun(t, "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}"), "still held after a restart")
	require.Equal(t, "winter", ek.MustRun(t, "get", "configmap", "banner", "-n", "store", "-o", "jsonpath={.data.text}"))

	release := srv.CLI(t, "syncer", "release", "--data-dir", dataDir)
	require.Contains(t, release, "released")
	poll(t, ek, equals("2"), "the update at the edge once released", "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}")
	poll(t, ek, equals(""), "the delete at the edge once released", "get", "configmap", "banner", "-n", "store", "--ignore-not-found", "-o", "name")
	poll(t, k, equals(""), "the SyncTarget to show no hold", syncTarget(`{.status.hold}`)...)
}
