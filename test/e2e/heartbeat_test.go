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
// from the syncer's own cache of it, and neither read from the server nor
// write, so that a fleet at rest costs the server no request and the
// datastore no write; the edge is not shown late meanwhile; a change (an
// object placed on it) is written at once.
func TestSyncerAtRestWritesNothing(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	// --heartbeat-interval 2s, --status-refresh by default; -v 4 logs the
	// heartbeats that have nothing to report, the test's clock.
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "", "-v", "4")
	syncTarget := func(jsonpath string) []string {
		return []string{"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath=" + jsonpath}
	}
	conditions := `{.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="Heartbeat")].status}`
	poll(t, k, equals("True True"), "the syncer connected and heartbeating", syncTarget(conditions)...)

	// gets counts the server's GETs of SyncTargets: the test reads them
	// with lists of all, so that every GET is the syncer's (the server's
	// metrics count a list by name as a GET).
	gets := func() int {
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
	rv := func() string {
		return k.MustRun(t, "--context", "inv1", "get", "synctargets", "-o", `jsonpath={.items[?(@.metadata.name=="edge1")].metadata.resourceVersion}`)
	}
	idle := func() int { return strings.Count(syncer.Log(), "heartbeat: nothing new to report") }
	// quiet says whether the SyncTarget stays unwritten, and unread by the
	// syncer, over the next heartbeats that find nothing to report.
	quiet := func(heartbeats int) (unwritten, unread bool) {
		t.Helper()
		before, read, from := rv(), gets(), idle()
		err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
			return idle() >= from+heartbeats, nil
		})
		require.NoError(t, err, "the syncer's heartbeats did not find the status settled (%d idle heartbeats so far)", idle())
		return rv() == before, gets() == read
	}
	// Once connected the status settles within a few writes (the
	// tunnel's condition, the first report); then it stays unwritten.
	settled := false
	for range 10 {
		if settled, _ = quiet(3); settled {
			break
		}
	}
	require.True(t, settled, "the SyncTarget was written on every heartbeat: a syncer at rest should write nothing")
	unwritten, unread := quiet(8)
	require.True(t, unwritten, "the SyncTarget was written at rest, 8 heartbeats after it had settled")
	require.True(t, unread, "the syncer read its SyncTarget from the server at rest: its heartbeats should read its own cache")
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
