// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestSyncerAtRestWritesNothing: a syncer whose tunnel is open writes its
// SyncTarget's status when something in it changes, not on every
// heartbeat. At rest its heartbeats (every 2 s here) read the SyncTarget
// and write nothing, so that a fleet at rest costs the datastore no
// write; the edge is not shown late meanwhile; a change (an object placed
// on it) is written at once.
func TestSyncerAtRestWritesNothing(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	harness.StartSyncer(t, join, c.KubeconfigPath, "") // --heartbeat-interval 2s, --status-refresh by default
	syncTarget := func(jsonpath string) []string {
		return []string{"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath=" + jsonpath}
	}
	conditions := `{.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="Heartbeat")].status}`
	poll(t, k, equals("True True"), "the syncer connected and heartbeating", syncTarget(conditions)...)

	// The heartbeats' reads, counted by the server, are the clock: the
	// syncer is the only one to GET the SyncTarget.
	reads := func() int {
		t.Helper()
		n := 0
		sc := bufio.NewScanner(strings.NewReader(k.MustRun(t, "get", "--raw", "/metrics")))
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, "apiserver_request_total{") && strings.Contains(line, `resource="synctargets"`) && strings.Contains(line, `verb="GET"`) {
				f := strings.Fields(line)
				v, err := strconv.ParseFloat(f[len(f)-1], 64)
				require.NoError(t, err, line)
				n += int(v)
			}
		}
		return n
	}
	// quiet says whether the SyncTarget stays unwritten over the next
	// heartbeats heartbeats.
	quiet := func(heartbeats int) bool {
		t.Helper()
		rv, from := k.MustRun(t, syncTarget("{.metadata.resourceVersion}")...), reads()
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return reads() >= from+heartbeats, nil
		})
		require.NoError(t, err, "the syncer's heartbeats stopped reading its SyncTarget (%d reads so far)", reads())
		return k.MustRun(t, syncTarget("{.metadata.resourceVersion}")...) == rv
	}
	// Once connected the status settles within a few writes (the
	// tunnel's condition, the first report); then it stays unwritten.
	settled := false
	for range 10 {
		if settled = quiet(3); settled {
			break
		}
	}
	require.True(t, settled, "the SyncTarget was written on every heartbeat: a syncer at rest should write nothing")
	require.True(t, quiet(8), "the SyncTarget was written at rest, 8 heartbeats after it had settled")
	require.Equal(t, "True True", k.MustRun(t, syncTarget(conditions)...), "the edge shown late while its tunnel is open")

	// A change is reported at once, not at the next refresh.
	before := k.MustRun(t, syncTarget("{.status.syncedObjects}")...)
	placement := filepath.Join(t.TempDir(), "placed.yaml")
	require.NoError(t, os.WriteFile(placement, []byte(`apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: default}
data: {mode: calm}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: settings}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [settings]}
`), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", placement)
	poll(t, k, func(s string) bool { return s != before && s != "" && s != "0" }, "the placed ConfigMap counted in the SyncTarget's status",
		syncTarget("{.status.syncedObjects}")...)
}
