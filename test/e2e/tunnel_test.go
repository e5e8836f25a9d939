// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestTunnel: the syncer's reverse tunnel carries an admin's kubectl from
// the center to the edge cluster (gets, describe, logs, logs -f, exec, exec
// with stdin, a watch), SyncerConnected follows
// it, it comes back after a server restart, and whatever is not a syncer's
// own tunnel or an admin's request is refused.
func TestTunnel(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	syncer := harness.StartSyncer(t, join, c.KubeconfigPath, "")
	syncer.WaitLog(t, "tunnel open", time.Minute)
	require.Contains(t, syncer.Log(), "stream=true", "the tunnel is a stream of the syncer's HTTP/2 connection, not a connection of its own")
	recorded := `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="SyncerConnected")].reason} {.status.tunnelServer}`
	poll(t, k, equals("True TunnelOpen "+srv.BaseURL()), "SyncerConnected to follow the tunnel", "--context", "inv1", "get", "synctarget", "edge1",
		"-o", recorded)
	// The record follows the tunnel whoever wrote it last: written closed
	// while the tunnel is open (as the leader's sweep of dead servers does
	// when a busy server is late renewing its Lease), it is said open again.
	now := time.Now().UTC().Format(time.RFC3339)
	patched := k.MustRun(t, "--context", "inv1", "patch", "synctarget", "edge1", "--subresource=status", "--type=merge", "-p",
		`{"status":{"tunnelServer":null,"conditions":[{"type":"SyncerConnected","status":"False","reason":"TunnelClosed","message":"written by the test","lastTransitionTime":"`+now+`"}]}}`)
	require.Equal(t, "synctarget.edge.kubestellar.io/edge1 patched", strings.TrimSpace(patched), "the record written closed (not a no-op)")
	poll(t, k, equals("True TunnelOpen "+srv.BaseURL()), "SyncerConnected said open again after a write that said closed",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", recorded)

	// kubectl on the edge cluster, through the center.
	viaCenter := harness.Kubectl{Kubeconfig: filepath.Join(t.TempDir(), "edge1.kubeconfig")}
	require.NoError(t, os.WriteFile(viaCenter.Kubeconfig, []byte(srv.CLI(t, "kubeconfig", "--edge", "edge1", "--inventory-space", "inv1")), 0o600))
	require.Equal(t, strings.Join(c.NodeNames, " "), viaCenter.MustRun(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	ek.MustRun(t, "create", "deployment", "hello", "--image", "nginx:1.27", "--replicas", "2")
	poll(t, viaCenter, func(s string) bool { return strings.Count(s, "hello-") == 2 }, "the edge's pods through the center",
		"get", "pods", "-A", "-o", "name")
	require.Contains(t, viaCenter.MustRun(t, "describe", "deployment", "hello"), "Replicas:")

	// logs and exec: the center's API server, the tunnel, the syncer, the
	// edge's API server, then the node's kubelet API (kwok's).
	require.Equal(t, "edgecluster edge1: container started\n", viaCenter.MustRun(t, "logs", "deployment/hello"))
	require.Equal(t, "edge1\n", viaCenter.MustRun(t, "exec", "deployment/hello", "--", "sh", "-c", "echo $EDGECLUSTER"))
	// (kwok's exec does not pass on the end of stdin, so the command reads
	// one line rather than to the end.)
	require.Equal(t, "read from the center\n", viaCenter.MustRunStdin(t, strings.NewReader("from the center\n"),
		"exec", "-i", "deployment/hello", "--", "sh", "-c", `read line; echo "read $line"`),
		"exec -i carries stdin to the edge and back")
	logLines := viaCenter.Lines(t, "logs", "-f", "deployment/hello")
	require.Equal(t, "edgecluster edge1: container started", <-logLines)
	require.NoError(t, c.AppendPodLog("written at the edge while followed from the center"))
	select {
	case line := <-logLines:
		require.Equal(t, "written at the edge while followed from the center", line)
	case <-time.After(time.Minute):
		t.Fatal("kubectl logs -f through the tunnel saw nothing new")
	}

	// A watch through the tunnel sees a change made at the edge.
	lines := viaCenter.Lines(t, "get", "configmaps", "-n", "default", "--watch", "-o", "name")
	require.Equal(t, "configmap/kube-root-ca.crt", <-lines, "the watch's initial list")
	ek.MustRun(t, "create", "configmap", "seen-through-the-tunnel")
	select {
	case line := <-lines:
		require.Equal(t, "configmap/seen-through-the-tunnel", line)
	case <-time.After(time.Minute):
		t.Fatal("the watch through the tunnel saw nothing")
	}

	// Refusals: only admins use the edge proxy; only a syncer's own token
	// opens a tunnel, with a WebSocket handshake; no token at all is 401.
	token := strings.SplitN(flagValue(t, join, "--token"), "::", 2)[1]
	require.Contains(t, viaCenter.MustFail(t, "--token", token, "get", "nodes"), "Forbidden")
	admin := strings.TrimSpace(readFile(t, filepath.Join(srv.DataDir, "admin.token")))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}, Timeout: 10 * time.Second}
	status := func(bearer string) int {
		req, err := http.NewRequest(http.MethodGet, srv.BaseURL()+"/kubestellar/v1/tunnel", nil)
		require.NoError(t, err)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Equal(t, http.StatusUnauthorized, status(""))
	require.Equal(t, http.StatusUnauthorized, status("abcdef.0000000000000000"))
	require.Equal(t, http.StatusForbidden, status(admin), "an admin token is not a syncer's")
	require.Equal(t, http.StatusBadRequest, status(token), "a plain GET is not a WebSocket handshake")

	// The tunnel comes back after a server restart.
	before := strings.Count(syncer.Log(), "\ntunnel open")
	connectedSince := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1",
		"-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].lastTransitionTime}`)
	t.Logf("server stopped in %s", srv.Stop(t).Round(10*time.Millisecond))
	restarted := time.Now()
	srv.Restart(t)
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Count(syncer.Log(), "\ntunnel open") > before, nil
	})
	require.NoError(t, err, "the tunnel did not come back; syncer log:\n%s", syncer.Log())
	t.Logf("tunnel back %s after the restarted server was ready", time.Since(restarted).Round(10*time.Millisecond))
	poll(t, viaCenter, func(s string) bool { return strings.Contains(s, "hello") }, "the edge through the center again",
		"get", "deployments", "-o", "name")
	// The outage was recorded: False when the server stopped, True since the
	// tunnel came back.
	connected := `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status} {.status.conditions[?(@.type=="SyncerConnected")].reason} ` +
		`{.status.conditions[?(@.type=="SyncerConnected")].lastTransitionTime}`
	out := poll(t, k, func(s string) bool {
		return strings.HasPrefix(s, "True TunnelOpen ") && !strings.HasSuffix(s, " "+connectedSince)
	},
		"SyncerConnected to show the outage", "--context", "inv1", "get", "synctarget", "edge1", "-o", connected)

	// A server killed has no chance to say its tunnels closed; the one
	// that follows still shows the outage, as a new period from the
	// tunnel's return.
	srv.Kill()
	srv.Restart(t)
	poll(t, k, func(s string) bool { return strings.HasPrefix(s, "True TunnelReopened ") && s != out },
		"SyncerConnected to show the outage after kill -9", "--context", "inv1", "get", "synctarget", "edge1", "-o", connected)
}
