// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// shopPlacement is a namespace with a Deployment, placed on every prod
// edge; the rollout is for the test to add.
const shopPlacement = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "registry.example/shop:1"}]
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: shop}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [shop]}
  - {apiGroup: apps, resources: [deployments], namespaces: [shop]}
`

// rolloutWorkload is a Deployment rolled out to every prod edge, the
// canaries first, one edge at a time, each healthy for 10 seconds before
// the next.
const rolloutWorkload = shopPlacement + `  rollout:
    strategy: Progressive
    waves: [{name: canary, selector: {matchLabels: {ring: canary}}}]
    maxConcurrency: 1
    minSuccessTime: 10s
    progressDeadline: 20s
`

// noticeWorkload is a ConfigMap given to every prod edge at once.
const noticeWorkload = `apiVersion: v1
kind: ConfigMap
metadata: {name: notice, namespace: shop}
data: {text: "after the restart"}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: notice}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [shop], objectNames: [notice]}]
`

// rolloutFleet starts a server with the spaces inv1 and wds1 and two real
// edge clusters, each with its syncer: edge1 (env=prod, ring=canary) and
// edge2 (env=prod); it returns kubectl for the server and for each edge.
func rolloutFleet(t *testing.T) (*harness.Process, harness.Kubectl, map[string]harness.Kubectl) {
	srv := harness.StartBinary(t, "")
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	edges := map[string]harness.Kubectl{}
	for name, labels := range map[string]string{"edge1": "env=prod,ring=canary", "edge2": "env=prod"} {
		c := edgecluster.Start(t, edgecluster.Options{Name: name})
		edges[name] = harness.Kubectl{Kubeconfig: c.KubeconfigPath}
		harness.StartSyncer(t, srv.JoinCommand(t, name, "--inventory-space", "inv1", "--labels", labels), c.KubeconfigPath, "")
	}
	return srv, srv.Kubectl(), edges
}

// rolloutStatus returns a function that runs kubestellar rollout status
// of a placement with more arguments, and returns its output.
func rolloutStatus(srv *harness.Process, placement string) func(args ...string) (string, error) {
	return func(args ...string) (string, error) {
		cmd := exec.Command(srv.Bin, append([]string{"rollout", "status", placement}, args...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+srv.Kubeconfig)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
}

// TestProgressiveRollout: two real edge clusters, each with its syncer.
// A change of a Progressive placement's Deployment reaches the canary
// first, and the other edge only once the canary's Deployment has been
// healthy (as its syncer judges it at the edge) for minSuccessTime; a
// change the canary cannot run pauses the rollout past the progress
// deadline, names the edge, and never reaches the other edge; reverting
// it is a new revision that rolls out again; a rollout paused by hand
// reaches no edge until resumed, a restart of the server included; a
// placement's own health check (CEL) replaces the syncer's judgement; an
// edge that joins mid-rollout gets the last completed revision.
func TestProgressiveRollout(t *testing.T) {
	srv, k, edges := rolloutFleet(t)
	canary, other := edges["edge1"], edges["edge2"]
	image := func(ek harness.Kubectl) []string {
		return []string{"get", "deployment", "web", "-n", "shop", "--ignore-not-found", "-o", "jsonpath={.spec.template.spec.containers[0].image}"}
	}
	status := rolloutStatus(srv, "wds1/shop")
	setImage := func(tag string) {
		k.MustRun(t, "--context", "wds1", "-n", "shop", "set", "image", "deployment/web", "web=registry.example/shop:"+tag)
	}

	notice := filepath.Join(t.TempDir(), "notice.yaml")
	require.NoError(t, os.WriteFile(notice, []byte(noticeWorkload), 0o600))
	manifest := filepath.Join(t.TempDir(), "shop.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(rolloutWorkload), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)

	// The first revision rolls out in waves too, to completion.
	out, err := status("--timeout", "3m")
	require.NoError(t, err, out)
	require.Contains(t, out, "EdgePlacement wds1/shop: Complete, revision ")
	require.Contains(t, out, "  wave canary       1 destinations: 1 updated, 1 healthy, 0 failed, 0 waiting")
	require.Contains(t, out, "  wave rest         1 destinations: 1 updated, 1 healthy, 0 failed, 0 waiting")
	for _, ek := range edges {
		require.Equal(t, "registry.example/shop:1", ek.MustRun(t, image(ek)...))
	}
	rolloutMetrics := func() string {
		var lines []string
		for _, l := range strings.Split(k.MustRun(t, "get", "--raw", "/metrics"), "\n") {
			if strings.HasPrefix(l, "kubestellar_rollout_") {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	metrics := rolloutMetrics()
	require.Contains(t, metrics, `kubestellar_rollout_placements{phase="Complete"} 1`)
	require.Contains(t, metrics, "kubestellar_rollout_duration_seconds_count 1")

	// A change: the canary first; the other edge keeps the old Deployment
	// while the canary proves itself.
	setImage("2")
	poll(t, canary, equals("registry.example/shop:2"), "the change at the canary", image(canary)...)
	require.Equal(t, "registry.example/shop:1", other.MustRun(t, image(other)...), "the other edge waits for the canary")
	out, err = status("--watch=false")
	require.NoError(t, err, out)
	require.Contains(t, out, "Progressing")
	require.Contains(t, out, "> wave canary")
	poll(t, other, equals("registry.example/shop:2"), "the change at the other edge once the canary is done", image(other)...)
	out, err = status("--timeout", "2m")
	require.NoError(t, err, out)

	// A change the canary cannot run: its pods find no node.
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "deployment", "web", "--type", "merge", "-p",
		`{"spec":{"template":{"spec":{"nodeSelector":{"no-such-node":"true"},"containers":[{"name":"web","image":"registry.example/shop:3"}]}}}}`)
	poll(t, canary, equals("registry.example/shop:3"), "the bad change at the canary", image(canary)...)
	out, err = status("--timeout", "2m")
	require.Error(t, err, "a paused rollout fails the status: %s", out)
	require.Contains(t, out, "1 destinations failed, more than maxFailures (0): inv1/edge1")
	require.Contains(t, out, "inv1/edge1 (wave canary): Failed: not healthy within the progress deadline (20s): deployments.apps shop/web:")
	require.Equal(t, "registry.example/shop:2", other.MustRun(t, image(other)...), "a failed canary stops the rollout")
	require.Contains(t, k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "wide"), "Paused")
	metrics = rolloutMetrics()
	require.Contains(t, metrics, `kubestellar_rollout_placements{phase="Paused"} 1`)
	require.Contains(t, metrics, `kubestellar_rollout_placements{phase="Complete"} 0`)
	require.Contains(t, metrics, "kubestellar_rollout_destination_failures_total 1")

	// Rolling back is a change like any other: a new revision, from the
	// canary on.
	k.MustRun(t, "--context", "wds1", "-n", "shop", "patch", "deployment", "web", "--type", "json", "-p",
		`[{"op":"remove","path":"/spec/template/spec/nodeSelector"},{"op":"replace","path":"/spec/template/spec/containers/0/image","value":"registry.example/shop:2"}]`)
	out, err = status("--timeout", "3m")
	require.NoError(t, err, out)
	for _, ek := range edges {
		require.Equal(t, "registry.example/shop:2", ek.MustRun(t, image(ek)...))
		require.Equal(t, "", ek.MustRun(t, "get", "deployment", "web", "-n", "shop", "-o", "jsonpath={.spec.template.spec.nodeSelector}"))
	}

	// Paused by hand: no edge takes a change until resumed.
	require.Contains(t, srv.CLI(t, "rollout", "pause", "wds1/shop"), "EdgePlacement wds1/shop: rollout paused")
	poll(t, k, equals("Paused"), "the rollout to show paused", "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.status.rollout.phase}")
	revision := k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.status.rollout.revision}")
	setImage("4")
	poll(t, k, func(s string) bool { return s != "" && s != revision }, "the rollout to see the new revision",
		"--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.status.rollout.revision}")
	require.Equal(t, "registry.example/shop:2", canary.MustRun(t, image(canary)...), "paused: not even the canary")

	// Across a restart of the server the edges keep the revision they
	// have: once a change of another placement (all at once) has reached
	// the canary after the restart, its mailbox has been written since,
	// and its Deployment is still the old one.
	srv.Restart(t)
	k.MustRun(t, "--context", "wds1", "apply", "-f", notice)
	poll(t, canary, equals("after the restart"), "the notice at the canary", "get", "configmap", "notice", "-n", "shop", "-o", "jsonpath={.data.text}")
	require.Equal(t, "registry.example/shop:2", canary.MustRun(t, image(canary)...), "a restart gives no edge a revision it was not admitted to")
	out, err = status("--timeout", "10s")
	require.Error(t, err)
	require.Contains(t, out, "paused by spec.rollout.paused")
	require.Contains(t, srv.CLI(t, "rollout", "resume", "wds1/shop"), "rollout resumed")
	out, err = status("--timeout", "3m")
	require.NoError(t, err, out)
	for _, ek := range edges {
		require.Equal(t, "registry.example/shop:4", ek.MustRun(t, image(ek)...))
	}

	// The placement's own health check replaces the syncer's: one the
	// canary cannot pass (three ready replicas of two) fails it.
	k.MustRun(t, "--context", "wds1", "patch", "edgeplacement", "shop", "--type", "merge", "-p",
		`{"spec":{"rollout":{"healthCheck":{"cel":"obj.status.observedGeneration == obj.metadata.generation && obj.status.readyReplicas >= 3"}}}}`)
	setImage("5")
	poll(t, canary, equals("registry.example/shop:5"), "the change at the canary", image(canary)...)
	out, err = status("--timeout", "2m")
	require.Error(t, err, "the health check fails the canary: %s", out)
	require.Contains(t, out, "inv1/edge1 (wave canary): Failed: not healthy within the progress deadline (20s): deployments.apps shop/web: spec.rollout.healthCheck.cel is not true")
	require.Equal(t, "registry.example/shop:4", other.MustRun(t, image(other)...))

	// An edge that joins mid-rollout (in the last wave, its syncer not yet
	// started) gets the last revision that completed, not the one the
	// canary failed; the snapshot it comes from is not in the WDS.
	completed := k.MustRun(t, "--context", "wds1", "get", "edgeplacement", "shop", "-o", "jsonpath={.status.rollout.completedRevision}")
	require.NotEmpty(t, completed)
	srv.CLI(t, "synctarget", "create", "edge3", "--inventory-space", "inv1", "--labels", "env=prod")
	joiner := poll(t, k, func(s string) bool { return s != "" }, "the mailbox of the edge that joins",
		"--context", "inv1", "get", "synctarget", "edge3", "-o", "jsonpath={.status.mailboxSpace}")
	inJoiner := []string{"--server", srv.BaseURL() + "/spaces/" + joiner, "get", "deployment", "web", "-n", "shop", "--ignore-not-found", "-o",
		`jsonpath={.spec.template.spec.containers[0].image} {.metadata.annotations.edge\.kubestellar\.io/revision}`}
	poll(t, k, equals("registry.example/shop:4 "+completed), "the completed revision in the joiner's mailbox", inJoiner...)
	require.NotContains(t, k.MustRun(t, "--context", "wds1", "get", "secrets", "-A", "-o", "name"), "rollout-")

	// What the rollout cannot follow is refused, with the field.
	for patch, want := range map[string]string{
		`{"spec":{"rollout":{"maxConcurrency":"ten"}}}`:                                                                         `spec.rollout.maxConcurrency: Invalid value: "ten"`,
		`{"spec":{"rollout":{"healthCheck":{"cel":"obj.status.ready =="}}}}`:                                                    `spec.rollout.healthCheck.cel: Invalid value: compilation failed`,
		`{"spec":{"rollout":{"waves":[{"name":"a","selector":{"matchExpressions":[{"key":"ring","operator":"Sometimes"}]}}]}}}`: `spec.rollout.waves[0].selector: Invalid value`,
	} {
		out := k.MustFail(t, "--context", "wds1", "patch", "edgeplacement", "shop", "--type", "merge", "-p", patch)
		require.Contains(t, out, want)
	}
	bad, err := exec.Command(srv.Bin, "rollout", "status", "shop").CombinedOutput()
	require.Error(t, err)
	require.Contains(t, string(bad), `"shop": name the placement as WDS/NAME`)
}

// widgetRollout is a CRD of the WDS, one of its objects, and a
// Progressive placement of both: the canary first, which stays healthy
// for 30 seconds before the other edge's turn.
const widgetRollout = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        description: DESCRIPTION
        properties:
          spec: {type: object, properties: {size: {type: integer}}}
---
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: widgets}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: "", resources: [namespaces], objectNames: [shop]}
  - {apiGroup: apiextensions.k8s.io, resources: [customresourcedefinitions], objectNames: [widgets.example.com]}
  - {apiGroup: example.com, resources: [widgets], namespaces: [shop]}
  rollout:
    strategy: Progressive
    waves: [{name: canary, selector: {matchLabels: {ring: canary}}}]
    minSuccessTime: 30s
    progressDeadline: 2m
`

// TestProgressiveRolloutOfACRD: a Progressive placement's CRD rolls out
// in waves as its objects do: a change of definition in the WDS reaches
// the canary edge first, while the other edge (and its mailbox) keeps
// the definition it has, and the other edge once the canary's wave has
// succeeded.
func TestProgressiveRolloutOfACRD(t *testing.T) {
	srv, k, edges := rolloutFleet(t)
	canary, other := edges["edge1"], edges["edge2"]
	status := rolloutStatus(srv, "wds1/widgets")
	apply := func(description string) {
		manifest := filepath.Join(t.TempDir(), "widgets.yaml")
		require.NoError(t, os.WriteFile(manifest, []byte(strings.ReplaceAll(widgetRollout, "DESCRIPTION", description)), 0o600))
		k.MustRun(t, "--context", "wds1", "apply", "-f", manifest)
	}
	apply("first")
	k.MustRun(t, "--context", "wds1", "wait", "--for", "condition=established", "--timeout=60s", "crd/widgets.example.com")
	pollStdin(t, k, "apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w, namespace: shop}\nspec: {size: 1}\n", "the widget",
		"--context", "wds1", "apply", "-f", "-")
	out, err := status("--timeout", "3m")
	require.NoError(t, err, out)
	require.Contains(t, out, "EdgePlacement wds1/widgets: Complete, revision ")
	description := []string{"get", "crd", "widgets.example.com", "--ignore-not-found", "-o", "jsonpath={.spec.versions[0].schema.openAPIV3Schema.description}"}
	for name, ek := range edges {
		poll(t, ek, equals("first"), "the CRD at "+name, description...)
		poll(t, ek, equals("w"), "the widget at "+name, "get", "widgets.example.com", "-n", "shop", "-o", "jsonpath={.items[*].metadata.name}")
	}
	otherMailbox := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge2", "-o", "jsonpath={.status.mailboxSpace}")
	inOtherMailbox := append([]string{"--server", srv.BaseURL() + "/spaces/" + otherMailbox}, description...)

	// The definition changes: the canary first.
	apply("second")
	poll(t, canary, equals("second"), "the new definition at the canary", description...)
	require.Equal(t, "first", other.MustRun(t, description...), "the other edge keeps the definition it has during the canary's wave")
	require.Equal(t, "first", k.MustRun(t, inOtherMailbox...), "and so does its mailbox")
	out, err = status()
	require.NoError(t, err, out)
	require.Contains(t, out, "EdgePlacement wds1/widgets: Progressing")

	// Then the other edge, once the canary's wave has succeeded.
	out, err = status("--timeout", "3m")
	require.NoError(t, err, out)
	require.Contains(t, out, "EdgePlacement wds1/widgets: Complete, revision ")
	poll(t, other, equals("second"), "the new definition at the other edge", description...)
	require.Equal(t, "w", other.MustRun(t, "get", "widgets.example.com", "-n", "shop", "-o", "jsonpath={.items[*].metadata.name}"))
}
