// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// unusedEdgeKubeconfig is a kubeconfig the syncer loads but never reaches:
// these joins are refused before the edge matters.
func unusedEdgeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "edge.kubeconfig")
	require.NoError(t, os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
clusters: [{name: edge, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: edge, user: {token: unused}}]
contexts: [{name: edge, context: {cluster: edge, user: edge}}]
current-context: edge
`), 0o600))
	return path
}

// joinFails runs `kubestellar syncer join` and returns its output; it must
// exit with an error by itself.
func joinFails(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, harness.Binary(t), args...).CombinedOutput()
	require.Error(t, err, "join was expected to be refused:\n%s", out)
	require.NoError(t, ctx.Err(), "join did not give up by itself:\n%s", out)
	return string(out)
}

// TestJoinIsRefused: a token pinning another CA, a token used for another
// SyncTarget and a revoked token do not join.
func TestJoinIsRefused(t *testing.T) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1")
	srv.JoinCommand(t, "edge2", "--inventory-space", "inv1")
	edgeKubeconfig := unusedEdgeKubeconfig(t)
	token := flagValue(t, join, "--token")
	with := func(flag, value string) []string {
		args := append([]string{}, join...)
		for i := range args {
			if args[i] == flag {
				args[i+1] = value
			}
		}
		return append(args, "--kubeconfig", edgeKubeconfig, "--data-dir", t.TempDir())
	}

	// Another server's CA: refused before the token is sent.
	otherCA := "K10" + strings.Repeat("0", 64) + "::" + strings.SplitN(token, "::", 2)[1]
	out := joinFails(t, with("--token", otherCA)...)
	require.Contains(t, out, "but the token pins CA 000000000000")
	require.NotContains(t, out, "connected to")

	// A token of edge1's used for edge2.
	out = joinFails(t, with("--sync-target", "edge2")...)
	require.Contains(t, out, "the token is for SyncTarget inv1/edge1, not --sync-target edge2")

	// A revoked token: the server refuses it; the syncer says so and keeps
	// trying (a token may be re-issued), never connecting.
	id := strings.SplitN(strings.SplitN(token, "::", 2)[1], ".", 2)[0]
	srv.CLI(t, "token", "revoke", id)
	syncer := harness.StartSyncer(t, join, edgeKubeconfig, "")
	syncer.WaitLog(t, "the server does not accept the token", 30*time.Second)
	require.NotContains(t, syncer.Log(), "connected to")
}
