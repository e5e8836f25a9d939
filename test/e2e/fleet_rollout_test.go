// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// fleetWorkload is a Deployment rolled out to every prod edge in three
// waves (canary, early, the rest), two edges of a wave at a time, each
// healthy for 2 s before it counts as done.
const fleetWorkload = shopPlacement + `  rollout:
    strategy: Progressive
    waves:
    - {name: canary, selector: {matchLabels: {ring: canary}}}
    - {name: early, selector: {matchLabels: {ring: early}}}
    maxConcurrency: 2
    minSuccessTime: 2s
    progressDeadline: 20s
`

// TestProgressiveRolloutOverAFleet: a rollout over two real edge clusters
// and eight simulated edges (the real syncer in this process against an
// edge cluster in memory, as the bench's). A change that the canaries
// cannot run (its pods ask for a node label no node has) fails them at the
// progress deadline and pauses the rollout, and every other edge keeps the
// previous revision, in its mailbox and at its cluster; the fix rolls out
// wave by wave, two edges at a time, to completion.
func TestProgressiveRolloutOverAFleet(t *testing.T) {
	srv, k, real := rolloutFleet(t)
	waves := map[string][]*simEdge{}
	for ring, n := range map[string]int{"canary": 1, "early": 4, "rest": 3} {
		for i := range n {
			labels := "env=prod"
			if ring != "rest" {
				labels += ",ring=" + ring
			}
			waves[ring] = append(waves[ring], startSimEdge(t, srv, fmt.Sprintf("sim-%s-%d", ring, i), "--inventory-space", "inv1", "--labels", labels))
		}
	}
	all := slices.Concat(waves["canary"], waves["early"], waves["rest"])
	status := rolloutStatus(srv, "wds1/shop")
	realImage := []string{"get", "deployment", "web", "-n", "shop", "--ignore-not-found", "-o", "jsonpath={.spec.template.spec.containers[0].image}"}
	const image = "registry.example/shop:"

	manifest := filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(fleetWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	out, err := status("--timeout", "3m")
	require.NoError(t, err, out)
	require.Contains(t, out, "  wave canary       2 destinations: 2 updated, 2 healthy, 0 failed, 0 waiting")
	require.Contains(t, out, "  wave early        4 destinations: 4 updated, 4 healthy, 0 failed, 0 waiting")
	require.Contains(t, out, "  wave rest         4 destinations: 4 updated, 4 healthy, 0 failed, 0 waiting")
	for _, e := range all {
		require.Equal(t, image+"1", e.image(t), e.name)
	}
	first := k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.status.rollout.completedRevision}")

	// A change the canaries cannot run: it stops there.
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "deployment", "web", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"nodeSelector":{"no-such-node":"true"},"containers":[{"name":"web","image":"registry.example/shop:2"}]}}}}`)
	out, err = status("--timeout", "2m")
	require.Error(t, err, "a paused rollout fails the status: %s", out)
	require.Contains(t, out, "2 destinations failed, more than maxFailures (0): inv1/edge1, inv1/sim-canary-0")
	require.Contains(t, out, "inv1/sim-canary-0 (wave canary): Failed: not healthy within the progress deadline (20s): deployments.apps shop/web: 0 of 2 updated replicas available")
	require.Equal(t, image+"2", waves["canary"][0].image(t))
	require.Equal(t, image+"2", real["edge1"].MustRun(t, realImage...))
	require.Equal(t, image+"1", real["edge2"].MustRun(t, realImage...), "a failed canary stops the rollout")
	for _, e := range append(waves["early"], waves["rest"]...) {
		require.Equal(t, image+"1", e.image(t), "%s keeps the previous revision", e.name)
		mailbox := k.MustRun(t, "--context", "inv1", "get", "synctarget", e.name, "-o", "jsonpath={.status.mailboxSpace}")
		mb := []string{"--server", srv.BaseURL() + "/spaces/" + mailbox}
		// The copy carries no revision (its syncer reports rollouts): the
		// mailbox's SyncerConfig records it, and the syncer reports on it
		// in its SyncTarget's status, with its heartbeat (the
		// SyncerConfig's status holds no report).
		require.Equal(t, image+"1|", k.MustRun(t, append(mb, "get", "deployment", "web", "-n", "shop", "-o",
			`jsonpath={.spec.template.spec.containers[0].image}|{.metadata.annotations.edge\.kubestellar\.io/revision}`)...), "%s's mailbox", e.name)
		require.Equal(t, "wds1/shop "+first+" ", k.MustRun(t, append(mb, "get", "syncerconfig", "the-one", "-o",
			`jsonpath={.spec.rollouts[0].placement} {.spec.rollouts[0].revision} {.status.reportsRollouts}`)...), "%s's SyncerConfig", e.name)
		require.Equal(t, "true wds1/shop "+first+" true", k.MustRun(t, "--context", "inv1", "get", "synctarget", e.name, "-o",
			`jsonpath={.status.reportsRollouts} {.status.rollouts[0].placement} {.status.rollouts[0].revision} {.status.rollouts[0].healthy}`), "%s's SyncTarget", e.name)
	}

	// The fix rolls out wave by wave, to completion.
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "deployment", "web", "--type", "json", "-p",
		`[{"op":"remove","path":"/spec/template/spec/nodeSelector"},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/shop:3"}]`)
	out, err = status("--timeout", "3m")
	require.NoError(t, err, out)
	require.Contains(t, out, "Complete")
	for _, ek := range real {
		require.Equal(t, image+"3", ek.MustRun(t, realImage...))
	}
	arrivals := func(edges []*simEdge) []time.Time {
		var at []time.Time
		for _, e := range edges {
			require.Equal(t, image+"3", e.image(t), e.name)
			at = append(at, e.arrival(image+"3"))
		}
		slices.SortFunc(at, func(a, b time.Time) int { return a.Compare(b) })
		return at
	}
	canary, early, rest := arrivals(waves["canary"]), arrivals(waves["early"]), arrivals(waves["rest"])
	require.True(t, canary[len(canary)-1].Before(early[0]), "the early wave after the canary: %v, %v", canary, early)
	require.True(t, early[len(early)-1].Before(rest[0]), "the rest after the early wave: %v, %v", early, rest)
	// Two of the early wave's four at a time: its third edge only once
	// one of the first two has been healthy for minSuccessTime.
	require.GreaterOrEqual(t, early[2].Sub(early[0]), 1500*time.Millisecond, "two of the early wave's four at a time: %v", early)
}
