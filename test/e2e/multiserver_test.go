// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
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

// TestServersShareIdentityOnPostgres: servers on one PostgreSQL started
// with the same --token present the same CA and admin token, and each sees
// what the other writes; a server with another token refuses to start; the
// datastore password appears in no log.
func TestServersShareIdentityOnPostgres(t *testing.T) {
	pg := harness.StartPostgres(t)
	args := []string{"--datastore-endpoint", pg.DSN, "--token", "cluster-secret"}
	a := harness.StartBinary(t, "", args...)
	b := harness.StartBinary(t, "", args...)
	c := harness.StartBinary(t, "", args...)
	for _, f := range []string{"pki/ca.crt", "admin.token"} {
		for _, other := range []*harness.Process{b, c} {
			require.Equal(t, readFile(t, filepath.Join(a.DataDir, f)), readFile(t, filepath.Join(other.DataDir, f)), "%s differs between the servers", f)
		}
	}
	ka, kb := a.Kubectl(), b.Kubectl()
	a.CLI(t, "space", "create", "wds1")
	// b learns of the space from the datastore (kine polls PostgreSQL).
	poll(t, kb, func(string) bool { return true }, "the space made through a to be served by b",
		"--server", b.BaseURL()+"/spaces/wds1", "create", "configmap", "from-b", "--from-literal=k=v")
	poll(t, ka, equals("v"), "the ConfigMap written through b, read through a",
		"--server", a.BaseURL()+"/spaces/wds1", "get", "configmap", "from-b", "-o", "jsonpath={.data.k}")
	poll(t, ka, equals("v"), "the ConfigMap written through b, read through c",
		"--server", c.BaseURL()+"/spaces/wds1", "get", "configmap", "from-b", "-o", "jsonpath={.data.k}")
	// a's admin kubeconfig works against b and c: same CA, same token.
	for _, other := range []*harness.Process{b, c} {
		require.Contains(t, ka.MustRun(t, "--server", other.BaseURL(), "get", "namespaces", "-o", "name"), "namespace/default")
	}

	// Another token: refused, with the reason, and no second CA.
	dir := t.TempDir()
	cmd := exec.Command(harness.Binary(t), "server", "start", "--data-dir", dir, "--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(harness.FreePort(t)), "--datastore-endpoint", pg.DSN, "--token", "another-secret")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a server with another token started:\n%s", out)
	require.Contains(t, string(out), "started with another --token")
	_, statErr := os.Stat(filepath.Join(dir, "pki", "ca.crt"))
	require.True(t, os.IsNotExist(statErr), "the refused server made a CA of its own")

	for _, p := range []*harness.Process{a, b, c} {
		require.NotContains(t, readFile(t, p.LogPath), pg.Password, "the datastore password is in %s", p.LogPath)
	}
	require.NotContains(t, string(out), pg.Password)

	// The controllers run on one server, the lease holder; when it dies the
	// other takes over and the controllers work on.
	holder := func() string {
		return ka.MustRun(t, "--server", b.BaseURL(), "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	}
	poll(t, kb, func(s string) bool { return s != "" }, "a leader", "--server", b.BaseURL(), "get", "lease", "-n", "kube-system",
		"kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	a.CLI(t, "space", "create", "inv1", "--type", "inventory")
	poll(t, ka, func(string) bool { return true }, "a SyncTarget to be created", "--server", a.BaseURL()+"/spaces/inv1",
		"create", "-f", filepath.Join(harness.RepoRoot(), "docs", "examples", "placement", "inventory.yaml"))
	mailbox := poll(t, ka, func(s string) bool { return s != "" }, "edge1's mailbox", "--server", a.BaseURL()+"/spaces/inv1",
		"get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	// The SyncTarget names it as it is stored; the leader's mailbox
	// controller makes it.
	poll(t, ka, equals("Ready"), "edge1's mailbox to be made by the leader", "--server", a.BaseURL(),
		"get", "space", mailbox, "-o", "jsonpath={.status.phase}")
	leader, survivors := splitLeader(t, holder(), a, b, c)
	survivor := survivors[0]
	killed := time.Now()
	leader.Kill()
	ks := survivor.Kubectl()
	pollFor(t, time.Minute, ks, func(s string) bool { return leads(s, survivors) }, "a survivor to lead",
		"--server", survivor.BaseURL(), "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	t.Logf("new leader %s after the leader was killed", time.Since(killed).Round(100*time.Millisecond))
	ks.MustRun(t, "--server", survivor.BaseURL()+"/spaces/inv1", "label", "synctarget", "edge2", "moved=yes")
	ks.MustRun(t, "--server", survivor.BaseURL()+"/spaces/inv1", "delete", "synctarget", "edge1", "--wait=false")
	pollFor(t, time.Minute, ks, equals("edge2"), "the new leader's controllers to finish deleting edge1 (its mailbox, then the finalizer)",
		"--server", survivor.BaseURL()+"/spaces/inv1", "get", "synctargets", "-o", "jsonpath={.items[*].metadata.name}")
}

// TestSyncerFailsOver: a syncer given two servers of one cluster keeps
// syncing when the one it uses is killed: a change made meanwhile reaches
// the edge, and the edge's pods are the same pods. The edge's API is
// reachable through either server: the one without the tunnel forwards to
// the one with it. When the server holding the tunnel dies with the
// syncer, the others say the SyncTarget is not connected.
func TestSyncerFailsOver(t *testing.T) {
	pg := harness.StartPostgres(t)
	args := []string{"--datastore-endpoint", pg.DSN, "--token", "cluster-secret"}
	a := harness.StartBinary(t, "", args...)
	b := harness.StartBinary(t, "", args...)
	ka, kb := a.Kubectl(), b.Kubectl()
	a.CLI(t, "space", "create", "inv1", "--type", "inventory")
	a.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := a.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	for i := range join {
		if join[i] == "--server" {
			join[i+1] += "," + b.BaseURL()
		}
	}
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "")
	syncer.WaitLog(t, "connected to "+a.BaseURL(), time.Minute)

	manifest := filepath.Join(t.TempDir(), "app.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(offlineWorkload), 0o600))
	ka.MustRun(t, "--server", a.BaseURL()+"/spaces/wds1", "apply", "-f", manifest)
	pollFor(t, 2*time.Minute, ek, equals("2"), "web to be available at the edge",
		"get", "deployment", "web", "-n", "app", "-o", "jsonpath={.status.availableReplicas}")
	pods := func() string {
		return ek.MustRun(t, "get", "pods", "-n", "app", "-l", "app in (web,steady)", "--sort-by=.metadata.name", "-o", "jsonpath={.items[*].metadata.uid}")
	}
	before := pods()

	// The edge through the server that does not hold the tunnel: b
	// forwards to a, which the SyncTarget names.
	tunnelServer := func(k harness.Kubectl, server string) string {
		return k.MustRun(t, "--server", server+"/spaces/inv1", "get", "synctarget", "edge1",
			"-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.tunnelServer}`)
	}
	poll(t, kb, equals("True "+a.BaseURL()), "edge1's tunnel to be recorded on a", "--server", b.BaseURL()+"/spaces/inv1",
		"get", "synctarget", "edge1", "-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.tunnelServer}`)
	viaB := harness.Kubectl{Kubeconfig: filepath.Join(t.TempDir(), "edge1-via-b.kubeconfig")}
	require.NoError(t, os.WriteFile(viaB.Kubeconfig, []byte(b.CLI(t, "kubeconfig", "--edge", "edge1", "--inventory-space", "inv1")), 0o600))
	require.Contains(t, viaB.MustRun(t, "get", "pods", "-n", "app", "-o", "name"), "pod/web-")
	require.Equal(t, "edge1\n", viaB.MustRun(t, "exec", "-n", "app", "deployment/web", "--", "sh", "-c", "echo $EDGECLUSTER"),
		"exec through b, forwarded to a")

	a.Kill()
	poll(t, kb, func(string) bool { return true }, "a change through the surviving server",
		"--server", b.BaseURL()+"/spaces/wds1", "patch", "configmap", "cfg", "-n", "app", "--type=merge", "-p", `{"data":{"greeting":"failed over"}}`)
	pollFor(t, 2*time.Minute, ek, equals("failed over"), "the change to reach the edge through the other server",
		"get", "configmap", "cfg", "-n", "app", "-o", "jsonpath={.data.greeting}")
	require.Equal(t, before, pods(), "pods were replaced on failover")
	pollFor(t, time.Minute, kb, equals("True "+b.BaseURL()), "edge1's tunnel to be recorded on b", "--server", b.BaseURL()+"/spaces/inv1",
		"get", "synctarget", "edge1", "-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.tunnelServer}`)
	require.Equal(t, "True "+b.BaseURL(), tunnelServer(kb, b.BaseURL()))
	require.Contains(t, viaB.MustRun(t, "get", "pods", "-n", "app", "-o", "name"), "pod/web-", "the edge through b, which holds the tunnel now")

	// b and the syncer die together: b cannot say the tunnel closed, so a
	// third server, leading, finds b's Lease run out and says it.
	third := harness.StartBinary(t, "", args...)
	kc := third.Kubectl()
	killed := time.Now()
	syncer.Kill()
	b.Kill()
	pollFor(t, 2*time.Minute, kc, equals("False TunnelClosed "), "edge1's SyncerConnected to show the tunnel lost with b",
		"--server", third.BaseURL()+"/spaces/inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="SyncerConnected")].reason} {.status.tunnelServer}`)
	t.Logf("edge1 shown not connected %s after b and its syncer were killed", time.Since(killed).Round(100*time.Millisecond))
	require.Contains(t, syncer.Log(), "moving to the next")
	require.NotContains(t, syncer.Log()[strings.Index(syncer.Log(), "moving to the next"):], "objects synced to the edge cluster",
		"the syncer started over instead of resuming")
}

// TestLeaderKilledDuringPropagation kills the leading server while it
// propagates 1,000 objects to 10 SyncTargets: the other server leads
// within seconds and every mailbox ends exactly right, nothing lost,
// duplicated or half-written.
func TestLeaderKilledDuringPropagation(t *testing.T) {
	const targets, objects = 10, 1000
	pg := harness.StartPostgres(t)
	args := []string{"--datastore-endpoint", pg.DSN, "--token", "cluster-secret"}
	a := harness.StartBinary(t, "", args...)
	b := harness.StartBinary(t, "", args...)
	c := harness.StartBinary(t, "", args...)
	ka := a.Kubectl()
	a.CLI(t, "space", "create", "inv1", "--type", "inventory")
	a.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	dir := t.TempDir()
	var inv, work strings.Builder
	for i := range targets {
		fmt.Fprintf(&inv, "apiVersion: edge.kubestellar.io/v2alpha1\nkind: SyncTarget\nmetadata: {name: st%d, labels: {env: prod}}\n---\n", i)
	}
	inv.WriteString("apiVersion: edge.kubestellar.io/v2alpha1\nkind: Location\nmetadata: {name: all, labels: {env: prod}}\n" +
		"spec:\n  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}\n  instanceSelector: {matchLabels: {env: prod}}\n")
	work.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: bulk}\n")
	for i := range objects {
		fmt.Fprintf(&work, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm%d, namespace: bulk}\ndata: {index: \"%d\"}\n", i, i)
	}
	placement := "apiVersion: edge.kubestellar.io/v2alpha1\nkind: EdgePlacement\nmetadata: {name: bulk}\nspec:\n" +
		"  locationSelectors: [{matchLabels: {env: prod}}]\n  downsync:\n" +
		"  - {apiGroup: \"\", resources: [namespaces], objectNames: [bulk]}\n  - {apiGroup: \"\", resources: [configmaps], namespaces: [bulk]}\n"
	for name, content := range map[string]string{"inv.yaml": inv.String(), "work.yaml": work.String(), "placement.yaml": placement} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600))
	}
	ka.MustRun(t, "--context", "inv1", "apply", "-f", filepath.Join(dir, "inv.yaml"))
	ka.MustRun(t, "--context", "wds1", "create", "-f", filepath.Join(dir, "work.yaml"))
	mailboxes := make([]string, targets)
	for i := range targets {
		mailboxes[i] = poll(t, ka, func(s string) bool { return s != "" }, "a mailbox", "--context", "inv1",
			"get", "synctarget", fmt.Sprintf("st%d", i), "-o", "jsonpath={.status.mailboxSpace}")
	}
	count := func(k harness.Kubectl, server, mailbox string) int {
		out, _, err := k.Run(context.Background(), "--server", server+"/spaces/"+mailbox, "get", "configmaps", "-n", "bulk", "-o", "name")
		if err != nil {
			return -1
		}
		return strings.Count(out, "configmap/")
	}

	// Start propagating, and kill the leader once it is under way.
	ka.MustRun(t, "--context", "wds1", "apply", "-f", filepath.Join(dir, "placement.yaml"))
	holder := ka.MustRun(t, "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	leader, survivors := splitLeader(t, holder, a, b, c)
	survivor := survivors[0]
	ks := survivor.Kubectl()
	err := wait.PollUntilContextTimeout(context.Background(), 20*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		return count(ks, survivor.BaseURL(), mailboxes[0]) > 0, nil
	})
	require.NoError(t, err, "propagation did not start")
	killed := time.Now()
	leader.Kill()
	total := 0
	for _, mb := range mailboxes {
		total += max(count(ks, survivor.BaseURL(), mb), 0)
	}
	t.Logf("leader killed with %d of %d copies written", total, targets*objects)
	pollFor(t, time.Minute, ks, func(s string) bool { return leads(s, survivors) }, "a survivor to lead",
		"--server", survivor.BaseURL(), "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	t.Logf("new leader %s after the leader was killed", time.Since(killed).Round(100*time.Millisecond))

	// Every mailbox ends with exactly the 1,000 copies, each with its content.
	for _, mb := range mailboxes {
		err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 5*time.Minute, true, func(context.Context) (bool, error) {
			return count(ks, survivor.BaseURL(), mb) == objects, nil
		})
		require.NoError(t, err, "mailbox %s has %d copies, want %d", mb, count(ks, survivor.BaseURL(), mb), objects)
		out := ks.MustRun(t, "--server", survivor.BaseURL()+"/spaces/"+mb, "get", "configmaps", "-n", "bulk",
			"-o", `jsonpath={range .items[*]}{.metadata.name}={.data.index} {end}`)
		seen := map[string]bool{}
		for _, f := range strings.Fields(out) {
			name, index, _ := strings.Cut(f, "=")
			require.Equal(t, "cm"+index, name, "copy %s in %s has the wrong content", name, mb)
			require.False(t, seen[name], "copy %s twice in %s", name, mb)
			seen[name] = true
		}
		require.Len(t, seen, objects)
	}
	t.Logf("all %d mailboxes exactly right %s after the leader was killed", targets, time.Since(killed).Round(100*time.Millisecond))
}

// splitLeader returns the server a Lease holder identity names, and the others.
func splitLeader(t *testing.T, holder string, servers ...*harness.Process) (*harness.Process, []*harness.Process) {
	t.Helper()
	var leader *harness.Process
	var others []*harness.Process
	for _, s := range servers {
		if strings.Contains(holder, s.BaseURL()+"_") {
			leader = s
		} else {
			others = append(others, s)
		}
	}
	require.NotNil(t, leader, "no server holds the lease %q", holder)
	return leader, others
}

// leads reports whether a Lease holder identity names one of servers.
func leads(holder string, servers []*harness.Process) bool {
	for _, s := range servers {
		if strings.Contains(holder, s.BaseURL()+"_") {
			return true
		}
	}
	return false
}
