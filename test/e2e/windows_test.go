// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestUpdateWindows: outside its SyncTarget's update windows an edge
// takes no change (the update reaches the mailbox, not the real edge
// cluster, and the SyncTarget says when the next window opens and what
// waits); a window that is open lets it through; windows a syncer could
// not read are refused by the server with the field named.
func TestUpdateWindows(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	harness.StartSyncer(t, join, c.KubeconfigPath, "")

	manifest := filepath.Join(t.TempDir(), "store.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(holdWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	poll(t, ek, equals("1"), "the prices at the edge", "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}")

	// A window that opened an hour ago for a minute: closed until tomorrow.
	opened := time.Now().UTC().Add(-time.Hour)
	closed := fmt.Sprintf(`{"spec":{"updateWindows":[{"schedule":"%d %d * * *","duration":"1m"}]}}`, opened.Minute(), opened.Hour())
	k.MustRun(t, "--context", "inv1", "patch", "synctarget", "edge1", "--type", "merge", "-p", closed)
	syncTarget := func(jsonpath string) []string {
		return []string{"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath=" + jsonpath}
	}
	poll(t, k, equals("false"), "the syncer to report the window closed", syncTarget(`{.status.updateWindow.open}`)...)
	next := k.MustRun(t, syncTarget(`{.status.updateWindow.nextChange}`)...)
	nextOpen, err := time.Parse(time.RFC3339, next)
	require.NoError(t, err, "nextChange %q", next)
	require.WithinDuration(t, opened.Add(24*time.Hour).Truncate(time.Minute), nextOpen, time.Minute, "the next window opens tomorrow")

	k.MustRun(t, "--context", "wds1", "-n", "store", "patch", "configmap", "prices", "--type", "merge", "-p", `{"data":{"version":"2"}}`)
	poll(t, k, equals("1"), "the syncer to count the change waiting", syncTarget(`{.status.updateWindow.waiting}`)...)
	require.Equal(t, "1", ek.MustRun(t, "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}"), "outside the window the update waits")

	// A window open now lets it through.
	k.MustRun(t, "--context", "inv1", "patch", "synctarget", "edge1", "--type", "merge", "-p",
		`{"spec":{"updateWindows":[{"schedule":"* * * * *","duration":"10m","timeZone":"Europe/Paris"}]}}`)
	poll(t, ek, equals("2"), "the update at the edge once a window is open", "get", "configmap", "prices", "-n", "store", "-o", "jsonpath={.data.version}")
	poll(t, k, equals("true"), "the SyncTarget to show the window open", syncTarget(`{.status.updateWindow.open}`)...)

	// What a syncer could not read is refused, with the field.
	for patch, want := range map[string]string{
		`{"spec":{"updateWindows":[{"schedule":"every night","duration":"1h"}]}}`:                      `spec.updateWindows[0].schedule: Invalid value: "every night": not a cron schedule`,
		`{"spec":{"updateWindows":[{"schedule":"0 2 * * *","duration":"1h","timeZone":"Mars/Base"}]}}`: `spec.updateWindows[0].timeZone: Invalid value: "Mars/Base": not a time zone`,
		`{"spec":{"updateWindows":[{"schedule":"0 2 * * *","duration":"200h"}]}}`:                      `spec.updateWindows[0].duration: Invalid value: "200h0m0s"`,
	} {
		out := k.MustFail(t, "--context", "inv1", "patch", "synctarget", "edge1", "--type", "merge", "-p", patch)
		require.Contains(t, out, want)
	}
}
