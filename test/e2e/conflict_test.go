// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/kubestellar/kubestellar/test/harness"
)

// One SyncTarget, reached through two Locations: east (env=prod) and west.
const conflictInventory = `apiVersion: edge.kubestellar.io/v2alpha1
kind: SyncTarget
metadata: {name: edge1, labels: {name: edge1}}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: Location
metadata: {name: east, labels: {env: prod, region: east}}
spec:
  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}
  instanceSelector: {matchLabels: {name: edge1}}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: Location
metadata: {name: west, labels: {region: west}}
spec:
  resource: {group: edge.kubestellar.io, version: v2alpha1, resource: synctargets}
  instanceSelector: {matchLabels: {name: edge1}}
`

// sharedWorkload is what each WDS places: ConfigMap default/shared with
// data of its own.
func sharedWorkload(data string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: ConfigMap
metadata: {name: shared, namespace: default}
data: {v: %s}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: shared}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  wantSingletonReportedState: true
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [shared]}]
`, data)
}

// conflictedCondition prints each Conflicted condition of a placement on a
// line: status, reason, message.
const conflictedCondition = `jsonpath={range .status.conditions[?(@.type=="Conflicted")]}{.status} {.reason} {.message}{"\n"}{end}`

// TestConflictingSourcesAtOneDestination places ConfigMap default/shared
// from two WDSes at one SyncTarget with the built server and the real
// kubectl: the older placement's copy is the mailbox's (what the syncer
// applies at the edge), the other placement says so once, and the copy
// never shows the loser's data while both sources keep changing. Then the
// center-only executing-count label changes on the winner's object without
// rewriting its copy; the winner's object goes and comes back, and the
// copy stays with the source that took it meanwhile; and two placements of one WDS that customize the
// same object differently (through two Locations) are decided the same way.
func TestConflictingSourcesAtOneDestination(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	for _, wds := range []string{"wds1", "wds2"} {
		srv.CLI(t, "space", "create", wds, "--type", "wds", "--inventory-space", "inv1")
	}
	cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
	require.NoError(t, err)
	base := cfg.Clusters["root"].Server
	in := func(space string, args ...string) []string {
		return append([]string{"--server", base + "/spaces/" + space}, args...)
	}
	apply := func(space, manifest string) {
		k.MustRunStdin(t, strings.NewReader(manifest), "--context", space, "apply", "-f", "-")
	}

	apply("inv1", conflictInventory)
	mb := poll(t, k, func(s string) bool { return s != "" }, "the mailbox of edge1",
		"--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
	copyOf := func(name string, fields string) []string {
		return in(mb, "get", "configmap", name, "-n", "default", "-o", "jsonpath="+fields)
	}
	const dataAndSource = `{.data.v} {.metadata.annotations.edge\.kubestellar\.io/source-space}`

	// wds1 places first: its placement is the older, its copy the first.
	apply("wds1", sharedWorkload("one"))
	poll(t, k, equals("one wds1"), "wds1's copy in the mailbox", copyOf("shared", dataAndSource)...)
	apply("wds2", sharedWorkload("two"))

	// wds2's placement reports the conflict, once, naming the object, the
	// destination and the winner; wds1's reports none.
	conflict := poll(t, k, func(s string) bool { return strings.HasPrefix(s, "True PlacedFromAnotherSpace ") },
		"wds2's placement to report the conflict", "--context", "wds2", "get", "edgeplacement", "shared", "-o", conflictedCondition)
	require.Equal(t, 1, strings.Count(conflict, "\n"), "one Conflicted condition: %q", conflict)
	require.Contains(t, conflict, "configmap default/shared for SyncTarget inv1/edge1 is placed from EdgePlacement wds1/shared")
	require.Empty(t, k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shared", "-o", conflictedCondition))
	since := k.MustRun(t, "--context", "wds2", "get", "edgeplacement", "shared", "-o",
		`jsonpath={.status.conditions[?(@.type=="Conflicted")].lastTransitionTime}`)
	require.Equal(t, "one wds1", k.MustRun(t, copyOf("shared", dataAndSource)...))

	// From here every version of the copy is seen, by a watch. Each round
	// changes the loser's object, then the winner's: both come through one
	// watch of ConfigMaps, in order, so the version carrying the winner's
	// change was decided knowing the loser's. Each round must make exactly
	// one version, the winner's.
	versions := k.Lines(t, in(mb, "get", "configmap", "shared", "-n", "default", "--watch", "-o",
		`jsonpath={.metadata.resourceVersion} {.data.v} {.metadata.annotations.edge\.kubestellar\.io/source-space} {.metadata.labels}{"\n"}`)...)
	next := func(what string) []string {
		t.Helper()
		select {
		case line, ok := <-versions:
			require.True(t, ok, "the watch of the copy ended while waiting for %s", what)
			return strings.SplitN(line, " ", 4)
		case <-time.After(time.Minute):
			require.FailNow(t, "no new version of the copy", "waiting for %s", what)
		}
		return nil
	}
	first := next("the copy as it is")
	require.Equal(t, []string{"one", "wds1"}, first[1:3])
	lastRV := first[0]
	patch := func(space, value string) {
		k.MustRun(t, "--context", space, "patch", "configmap", "shared", "-n", "default", "--type=merge", "-p", `{"data":{"v":"`+value+`"}}`)
	}
	for round := 1; round <= 5; round++ {
		patch("wds2", fmt.Sprintf("two-%d", round))
		want := fmt.Sprintf("one-%d", round)
		patch("wds1", want)
		v := next("round " + want)
		require.Equal(t, []string{want, "wds1"}, v[1:3], "round %d: the copy's next version (resourceVersion %s, after %s) must be the winner's new data", round, v[0], lastRV)
		require.NotContains(t, v[3], "executing-count", "the center-only label reached the copy")
		lastRV = v[0]
	}
	require.Equal(t, conflict, k.MustRun(t, "--context", "wds2", "get", "edgeplacement", "shared", "-o", conflictedCondition),
		"the conflict is reported as it was")
	require.Equal(t, since, k.MustRun(t, "--context", "wds2", "get", "edgeplacement", "shared", "-o",
		`jsonpath={.status.conditions[?(@.type=="Conflicted")].lastTransitionTime}`), "the condition never went and came back")

	// executing-count is the status controller's (the winner wants its
	// singleton state): set by hand, it is put back; neither change writes
	// a version of the copy, as the next version shows.
	count := `jsonpath={.metadata.labels.kubestellar\.io/executing-count}`
	poll(t, k, func(s string) bool { return s != "" }, "the executing count of wds1's ConfigMap",
		"--context", "wds1", "get", "configmap", "shared", "-n", "default", "-o", count)
	k.MustRun(t, "--context", "wds1", "label", "--overwrite", "configmap", "shared", "-n", "default", "kubestellar.io/executing-count=7")
	poll(t, k, func(s string) bool { return s != "7" }, "the status controller to put the executing count back",
		"--context", "wds1", "get", "configmap", "shared", "-n", "default", "-o", count)
	patch("wds1", "final")
	v := next("the final version")
	require.Equal(t, []string{"final", "wds1"}, v[1:3], "a version of the copy was written for a change of executing-count alone (resourceVersion %s, after %s)", v[0], lastRV)
	require.NotContains(t, v[3], "executing-count")

	// wds1's object goes: wds2's copy takes its place, and wds2's placement
	// no longer reports a conflict. wds1's object comes back: its placement
	// is still the older, but wds2 holds the copy now and keeps it.
	k.MustRun(t, "--context", "wds1", "delete", "configmap", "shared", "-n", "default")
	poll(t, k, equals("two-5 wds2"), "wds2's copy once wds1 no longer places it", copyOf("shared", dataAndSource)...)
	poll(t, k, equals(""), "wds2's conflict to go", "--context", "wds2", "get", "edgeplacement", "shared", "-o", conflictedCondition)
	apply("wds1", sharedWorkload("one-again"))
	poll(t, k, func(s string) bool {
		return strings.HasPrefix(s, "True PlacedFromAnotherSpace ") && strings.Contains(s, "EdgePlacement wds2/shared")
	},
		"wds1's placement to report that wds2 holds the copy", "--context", "wds1", "get", "edgeplacement", "shared", "-o", conflictedCondition)
	require.Equal(t, "two-5 wds2", k.MustRun(t, copyOf("shared", dataAndSource)...))

	// One WDS, two placements reaching edge1 through Locations whose
	// parameters differ: the older one's customization is the copy's.
	apply("wds1", `apiVersion: v1
kind: ConfigMap
metadata: {name: regional, namespace: default, annotations: {edge.kubestellar.io/expand-parameters: "true"}}
data: {v: "%(region)"}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: by-east}
spec:
  locationSelectors: [{matchLabels: {region: east}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [regional]}]
`)
	poll(t, k, equals("east wds1"), "by-east's copy", copyOf("regional", dataAndSource)...)
	apply("wds1", `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: by-west}
spec:
  locationSelectors: [{matchLabels: {region: west}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [regional]}]
`)
	custom := poll(t, k, func(s string) bool { return strings.HasPrefix(s, "True CustomizedDifferently ") },
		"by-west to report its customization conflict", "--context", "wds1", "get", "edgeplacement", "by-west", "-o", conflictedCondition)
	require.Equal(t, 1, strings.Count(custom, "\n"), "one Conflicted condition: %q", custom)
	require.Contains(t, custom, "configmap default/regional for SyncTarget inv1/edge1 is customized differently by EdgePlacement wds1/by-east")
	require.Empty(t, k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "by-east", "-o", conflictedCondition))
	require.Equal(t, "east wds1", k.MustRun(t, copyOf("regional", dataAndSource)...))
}
