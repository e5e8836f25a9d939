package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

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
	for _, f := range []string{"pki/ca.crt", "admin.token"} {
		require.Equal(t, readFile(t, filepath.Join(a.DataDir, f)), readFile(t, filepath.Join(b.DataDir, f)), "%s differs between the servers", f)
	}
	ka, kb := a.Kubectl(), b.Kubectl()
	a.CLI(t, "space", "create", "wds1")
	// b learns of the space from the datastore (kine polls PostgreSQL).
	poll(t, kb, func(string) bool { return true }, "the space made through a to be served by b",
		"--server", b.BaseURL()+"/spaces/wds1", "create", "configmap", "from-b", "--from-literal=k=v")
	poll(t, ka, equals("v"), "the ConfigMap written through b, read through a",
		"--server", a.BaseURL()+"/spaces/wds1", "get", "configmap", "from-b", "-o", "jsonpath={.data.k}")
	// a's admin kubeconfig works against b: same CA, same token.
	require.Contains(t, ka.MustRun(t, "--server", b.BaseURL(), "get", "namespaces", "-o", "name"), "namespace/default")

	// Another token: refused, with the reason, and no second CA.
	dir := t.TempDir()
	cmd := exec.Command(harness.Binary(t), "server", "start", "--data-dir", dir, "--bind-address", "127.0.0.1",
		"--port", strconv.Itoa(harness.FreePort(t)), "--datastore-endpoint", pg.DSN, "--token", "another-secret")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "a server with another token started:\n%s", out)
	require.Contains(t, string(out), "started with another --token")
	_, statErr := os.Stat(filepath.Join(dir, "pki", "ca.crt"))
	require.True(t, os.IsNotExist(statErr), "the refused server made a CA of its own")

	for _, p := range []*harness.Process{a, b} {
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
	poll(t, ka, func(s string) bool { return s != "" }, "edge1's mailbox", "--server", a.BaseURL()+"/spaces/inv1",
		"get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	leader, survivor := a, b
	if strings.Contains(holder(), b.BaseURL()) {
		leader, survivor = b, a
	}
	killed := time.Now()
	leader.Kill()
	ks := survivor.Kubectl()
	pollFor(t, time.Minute, ks, func(s string) bool { return strings.Contains(s, survivor.BaseURL()) }, "the survivor to lead",
		"--server", survivor.BaseURL(), "get", "lease", "-n", "kube-system", "kubestellar-controllers", "-o", "jsonpath={.spec.holderIdentity}")
	t.Logf("new leader %s after the leader was killed", time.Since(killed).Round(100*time.Millisecond))
	ks.MustRun(t, "--server", survivor.BaseURL()+"/spaces/inv1", "label", "synctarget", "edge2", "moved=yes")
	ks.MustRun(t, "--server", survivor.BaseURL()+"/spaces/inv1", "delete", "synctarget", "edge1", "--wait=false")
	pollFor(t, time.Minute, ks, equals("edge2"), "the new leader's controllers to finish deleting edge1 (its mailbox, then the finalizer)",
		"--server", survivor.BaseURL()+"/spaces/inv1", "get", "synctargets", "-o", "jsonpath={.items[*].metadata.name}")
}

// TestSyncerFailsOver: a syncer given two servers of one cluster keeps
// syncing when the one it uses is killed: a change made meanwhile reaches
// the edge, and the edge's pods are the same pods.
func TestSyncerFailsOver(t *testing.T) {
	pg := harness.StartPostgres(t)
	args := []string{"--datastore-endpoint", pg.DSN, "--token", "cluster-secret"}
	a := harness.StartBinary(t, "", args...)
	b := harness.StartBinary(t, "", args...)
	ka, kb := a.Kubectl(), b.Kubectl()
	a.CLI(t, "space", "create", "inv1", "--type", "inventory")
	a.CLI(t, "space", "create", "wds1", "--type", "wds")
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

	a.Kill()
	poll(t, kb, func(string) bool { return true }, "a change through the surviving server",
		"--server", b.BaseURL()+"/spaces/wds1", "patch", "configmap", "cfg", "-n", "app", "--type=merge", "-p", `{"data":{"greeting":"failed over"}}`)
	pollFor(t, 2*time.Minute, ek, equals("failed over"), "the change to reach the edge through the other server",
		"get", "configmap", "cfg", "-n", "app", "-o", "jsonpath={.data.greeting}")
	require.Equal(t, before, pods(), "pods were replaced on failover")
	require.Contains(t, syncer.Log(), "moving to the next")
	require.NotContains(t, syncer.Log()[strings.Index(syncer.Log(), "moving to the next"):], "objects synced to the edge cluster",
		"the syncer started over instead of resuming")
}
