// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCRDsPerSpaceSplitWaitsForEveryServer: two servers share an etcd;
// spaces x and y share a CRD (stored once, bound to both). A server
// started with --crds-per-space while the other still runs without it
// refuses to split the CRDs, naming the server that runs; once that one
// has stopped, it splits them, each space keeping the CRD and its
// instances.
func TestCRDsPerSpaceSplitWaitsForEveryServer(t *testing.T) {
	e := harness.StartEtcd(t)
	args := append(e.ServerArgs(), "--token", "cluster-secret")
	a := harness.StartBinary(t, "", append([]string{"--crds-per-space=false"}, args...)...)
	crd := filepath.Join(harness.RepoRoot(), "test", "manifests", "crds", "backups.yaml")
	in := func(p *harness.Process, space string, kubectlArgs ...string) []string {
		return append(kubectlArgs, "--server", p.BaseURL()+"/spaces/"+space)
	}
	backup := "apiVersion: ops.example.com/v1\nkind: Backup\nmetadata: {name: nightly, namespace: default}\nspec: {target: t, window: {start: 1, end: 4}}\n"
	for _, space := range []string{"x", "y"} {
		a.CLI(t, "space", "create", space)
		a.Kubectl().MustRun(t, in(a, space, "apply", "-f", crd)...)
	}
	a.Kubectl().MustRun(t, in(a, "x", "wait", "--for=condition=Established", "crd/backups.ops.example.com", "--timeout=60s")...)
	_, _, err := runKubectlUntil(time.Minute, a.Kubectl(), backup, func(string) bool { return true }, in(a, "x", "apply", "-f", "-")...)
	require.NoError(t, err)

	// b, with the flag, while a runs: refused, naming a.
	bDir, bPort := t.TempDir(), harness.FreePort(t)
	startB := func(flags ...string) (output string, refused bool) {
		t.Helper()
		if flags == nil {
			flags = []string{"--crds-per-space"}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, harness.Binary(t), append(append([]string{"server", "start", "--data-dir", bDir, "--bind-address", "127.0.0.1",
			"--port", strconv.Itoa(bPort)}, flags...), args...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		ready := make(chan error, 1)
		go func() { ready <- harness.WaitReady(ctx, bPort, 90*time.Second) }()
		select {
		case <-exited:
			return out.String(), true
		case err := <-ready:
			require.NoError(t, err, "b neither refused nor became ready:\n%s", out.String())
			cancel()
			<-exited
			return out.String(), false
		}
	}
	out, refused := startB()
	require.True(t, refused, "b split the CRDs while a ran without the flag:\n%s", out)
	require.Contains(t, out, "still runs on this datastore")
	require.Contains(t, out, strconv.Itoa(a.Port), "the refusal names the server that runs")
	// Without the flag given (a rolling upgrade), b starts, and the CRDs
	// stay bound while a runs.
	out, refused = startB([]string{}...)
	require.False(t, refused, "b, not asked to split the CRDs, refused to start beside a:\n%s", out)
	require.Contains(t, out, "the datastore holds CRDs bound to spaces")

	// a stopped: b splits once a's Lease has run out.
	a.Stop(t)
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, refused = startB()
		if !refused {
			break
		}
		require.Contains(t, out, "still runs on this datastore", "b refused for another reason")
		require.True(t, time.Now().Before(deadline), "b still refused two minutes after a stopped:\n%s", out)
		time.Sleep(time.Second)
	}
	b := harness.StartBinary(t, bDir, append(args, "--crds-per-space")...)
	for _, space := range []string{"x", "y"} {
		b.Kubectl().MustRun(t, in(b, space, "wait", "--for=condition=Established", "crd/backups.ops.example.com", "--timeout=60s")...)
	}
	got := b.Kubectl().MustRun(t, in(b, "x", "get", "backups", "nightly", "-o", "jsonpath={.spec.target}")...)
	require.Equal(t, "t", strings.TrimSpace(got), "x's backup after the split")
	// Each space's own now: y's change is not x's.
	b.Kubectl().MustRun(t, in(b, "y", "label", "crd", "backups.ops.example.com", "mine=y")...)
	require.NotContains(t, b.Kubectl().MustRun(t, in(b, "x", "get", "crd", "backups.ops.example.com", "--show-labels")...), "mine=y")
}
