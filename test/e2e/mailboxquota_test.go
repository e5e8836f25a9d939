// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestSyncerAtItsMailboxQuota runs a real syncer against a server started
// with a small --mailbox-object-limit, and an edge with more objects to
// upsync than its mailbox may hold. The server holds the mailbox at the
// limit and keeps running; the syncer says why it stops; once objects are
// deleted at the edge, the syncer removes their upsyncs first, and the
// waiting objects take their place.
func TestSyncerAtItsMailboxQuota(t *testing.T) {
	const limit = 8
	srv := harness.StartBinary(t, "", "--mailbox-object-limit", strconv.Itoa(limit))
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	k.MustRunStdin(t, strings.NewReader(`apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: reports}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  upsync: [{apiGroup: "", resources: [configmaps], namespaces: [reports]}]
`), "--context", "wds1", "create", "-f", "-")
	ek.MustRun(t, "create", "namespace", "reports")
	const atEdge = limit + 4
	for i := range atEdge {
		ek.MustRun(t, "create", "configmap", fmt.Sprintf("report-%02d", i), "-n", "reports", "--from-literal=i="+strconv.Itoa(i))
	}
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "")
	mb := poll(t, k, func(s string) bool { return strings.Contains(s, "-mb-") }, "the mailbox of edge1",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	inMailbox := func(args ...string) []string {
		return append([]string{"--server", srv.BaseURL() + "/spaces/" + mb}, args...)
	}
	count := func(s string) int { return len(strings.Fields(s)) }
	// The edge's own kube-root-ca.crt is in the namespace too, and upsynced.
	reports := func(s string) int {
		n := 0
		for _, name := range strings.Fields(s) {
			if strings.HasPrefix(name, "report-") {
				n++
			}
		}
		return n
	}

	// The mailbox fills to the limit (its ConfigMaps of every namespace
	// count), and no further.
	poll(t, k, func(s string) bool { return count(s) == limit }, fmt.Sprintf("%d ConfigMaps in the mailbox", limit),
		inMailbox("get", "configmaps", "-A", "-o", "jsonpath={.items[*].metadata.name}")...)
	syncer.WaitLog(t, "--mailbox-object-limit "+strconv.Itoa(limit), time.Minute)
	upsynced := func() int {
		return reports(k.MustRun(t, inMailbox("get", "configmaps", "-n", "reports", "-l", "edge.kubestellar.io/upsynced=true", "-o", "jsonpath={.items[*].metadata.name}")...))
	}
	full := upsynced()
	require.Positive(t, full)
	require.Less(t, full, atEdge)
	require.Equal(t, limit, count(k.MustRun(t, inMailbox("get", "configmaps", "-A", "-o", "jsonpath={.items[*].metadata.name}")...)),
		"still at the limit after the syncer's retries")
	require.Equal(t, "ok", k.MustRun(t, "get", "--raw", "/readyz"), "the server is unharmed")

	// Deleting at the edge makes room: removals go first, so every object
	// left at the edge fits and gets upsynced.
	left := full - 2
	for i := range atEdge - left {
		ek.MustRun(t, "delete", "configmap", fmt.Sprintf("report-%02d", i), "-n", "reports")
	}
	poll(t, k, func(s string) bool { return reports(s) == left && !strings.Contains(s, "report-00") },
		fmt.Sprintf("the %d ConfigMaps left at the edge, upsynced", left),
		inMailbox("get", "configmaps", "-n", "reports", "-l", "edge.kubestellar.io/upsynced=true", "-o", "jsonpath={.items[*].metadata.name}")...)
	require.Contains(t, k.MustRun(t, inMailbox("get", "configmap", fmt.Sprintf("report-%02d", atEdge-1), "-n", "reports", "-o", "name")...),
		fmt.Sprintf("report-%02d", atEdge-1), "one that waited for room")
}
