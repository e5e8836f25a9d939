// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
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

// Attacks on the tunnel by an edge whose token should no longer work (see
// issue 13, findings 4 and 5): a tunnel is bound to its token and to its
// SyncTarget's UID.

// revocationDeadline bounds how long the server may take to end what a
// revoked token holds open (it should take well under a second; the margin
// is for a loaded test machine).
const revocationDeadline = 10 * time.Second

// edgeWithSyncer is a SyncTarget of inv1 with its edge cluster and syncer,
// tunnel open.
type edgeWithSyncer struct {
	name      string
	bearer    string // "id.secret"
	tokenID   string
	syncer    *harness.Syncer
	viaCenter harness.Kubectl // kubectl on the edge through the center
}

func startEdgeWithSyncer(t *testing.T, srv *harness.Process, name string) *edgeWithSyncer {
	t.Helper()
	join := srv.JoinCommand(t, name, "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: name})
	e := &edgeWithSyncer{name: name, syncer: harness.StartSyncer(t, join, c.KubeconfigPath, "")}
	e.bearer = strings.SplitN(flagValue(t, join, "--token"), "::", 2)[1]
	e.tokenID, _, _ = strings.Cut(e.bearer, ".")
	e.syncer.WaitLog(t, "tunnel open", time.Minute)
	poll(t, srv.Kubectl(), equals("True"), name+"'s SyncerConnected", syncerConnectedArgs(name)...)
	e.viaCenter = harness.Kubectl{Kubeconfig: filepath.Join(t.TempDir(), name+".kubeconfig")}
	require.NoError(t, os.WriteFile(e.viaCenter.Kubeconfig, []byte(srv.CLI(t, "kubeconfig", "--edge", name, "--inventory-space", "inv1")), 0o600))
	require.Equal(t, strings.Join(c.NodeNames, " "), e.viaCenter.MustRun(t, "get", "nodes", "-o", "jsonpath={.items[*].metadata.name}"))
	return e
}

func syncerConnectedArgs(name string) []string {
	return []string{"--context", "inv1", "get", "synctarget", name, "-o", `jsonpath={.status.conditions[?(@.type=="SyncerConnected")].status}`}
}

// curlWatch opens a watch of SyncTarget edge1 of inv1 (by name: all a
// syncer may watch) with a bearer token, with curl; the channel closes
// when the watch ends.
func curlWatch(t *testing.T, srv *harness.Process, bearer string) <-chan string {
	t.Helper()
	return harness.StreamLines(t, os.Environ(), "curl", "-sS", "-N", "--cacert", filepath.Join(srv.DataDir, "pki", "ca.crt"),
		"-H", "Authorization: Bearer "+bearer, srv.BaseURL()+"/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets?watch=true&fieldSelector=metadata.name%3Dedge1")
}

// curlStatus returns the HTTP status of a GET with a bearer token.
func curlStatus(t *testing.T, srv *harness.Process, bearer, path string) string {
	t.Helper()
	code, _ := curlAs(t, srv, bearer, http.MethodGet, path, "")
	return code
}

// watchEnds waits until a watch's lines stop, reading what comes meanwhile.
func watchEnds(t *testing.T, lines <-chan string, deadline time.Duration, what string) time.Duration {
	t.Helper()
	start := time.Now()
	timeout := time.After(deadline)
	for {
		select {
		case _, open := <-lines:
			if !open {
				return time.Since(start)
			}
		case <-timeout:
			t.Fatalf("%s: the watch was still open after %s", what, deadline)
		}
	}
}

// TestEdgeAttackRevokedTokenKeepsNothingOpen: after `token revoke`, the
// syncer's open tunnel is closed (the edge proxy answers 503 and
// SyncerConnected goes False) and an open watch with the token ends, both
// within revocationDeadline; the token gets 401 from then on.
func TestEdgeAttackRevokedTokenKeepsNothingOpen(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	edge1 := startEdgeWithSyncer(t, srv, "edge1")

	watch := curlWatch(t, srv, edge1.bearer)
	select {
	case line := <-watch:
		require.Contains(t, line, `"type":"ADDED"`, "the watch is open")
	case <-time.After(time.Minute):
		t.Fatal("the watch with the syncer's token showed nothing")
	}

	srv.CLI(t, "token", "revoke", edge1.tokenID)
	revoked := time.Now()
	took := watchEnds(t, watch, revocationDeadline, "the watch of the revoked token")
	t.Logf("the watch ended %s after `token revoke` returned", took.Round(time.Millisecond))

	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, revocationDeadline, true, func(ctx context.Context) (bool, error) {
		out, _, err := k.Run(ctx, syncerConnectedArgs("edge1")...)
		return err == nil && out == "False", nil
	})
	require.NoError(t, err, "SyncerConnected still %q after the revocation", k.MustRun(t, syncerConnectedArgs("edge1")...))
	t.Logf("SyncerConnected False %s after `token revoke` returned", time.Since(revoked).Round(time.Millisecond))
	errOut := edge1.viaCenter.MustFail(t, "get", "nodes")
	require.Contains(t, errOut, "has no tunnel open", "the edge proxy has no tunnel to use")
	require.Equal(t, "401", curlStatus(t, srv, edge1.bearer, "/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets/edge1"))
	require.Contains(t, edge1.syncer.Log(), "tunnel closed")
	require.Contains(t, readFile(t, srv.LogPath), "syncer token no longer authenticates: ending its requests")
}

// TestEdgeAttackSyncTargetMadeAgain: a SyncTarget deleted (without
// revoking its tokens, as `kubectl delete` does) and made again under the
// same name is another SyncTarget: the old syncer's tunnel closes and never
// serves the new one's edge proxy, and the old token is refused, saying to
// create a new one.
func TestEdgeAttackSyncTargetMadeAgain(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	edge3 := startEdgeWithSyncer(t, srv, "edge3")
	oldUID := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge3", "-o", "jsonpath={.metadata.uid}")

	k.MustRun(t, "--context", "inv1", "delete", "synctarget", "edge3", "--wait=true")
	require.Contains(t, srv.CLI(t, "token", "list"), edge3.tokenID, "the old token is still stored")
	srv.CLI(t, "synctarget", "create", "edge3", "--inventory-space", "inv1")
	newUID := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge3", "-o", "jsonpath={.metadata.uid}")
	require.NotEqual(t, oldUID, newUID)

	// The new edge3 has no syncer: the edge proxy has no tunnel for it.
	var lastOut, lastErr string
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, revocationDeadline, true, func(ctx context.Context) (bool, error) {
		out, errOut, err := edge3.viaCenter.Run(ctx, "get", "nodes", "-o", "name")
		if ctx.Err() == nil { // not cut short by the deadline
			lastOut, lastErr = out, errOut
		}
		return err != nil && strings.Contains(errOut, "has no tunnel open"), nil
	})
	require.NoError(t, err, "the old syncer's tunnel still serves the new edge3: kubectl get nodes through the center printed %q, error %q",
		strings.TrimSpace(lastOut), strings.TrimSpace(lastErr))
	require.Equal(t, "401", curlStatus(t, srv, edge3.bearer, "/spaces/inv1/apis/edge.kubestellar.io/v2alpha1/synctargets/edge3"),
		"the old token is refused")
	poll(t, k, func(s string) bool { return s != "True" }, "the new edge3 not to be said connected", syncerConnectedArgs("edge3")...)
	require.Contains(t, readFile(t, srv.LogPath), "syncer token "+edge3.tokenID+" was made for an earlier SyncTarget inv1/edge3")
	require.Contains(t, readFile(t, srv.LogPath), "create a new token")
}
