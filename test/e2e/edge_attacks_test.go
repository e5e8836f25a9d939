// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/kubestellar/kubestellar/test/harness"
)

// attacker runs the real kubectl against one space of the server with a
// bearer token of its own (a syncer's), overriding the admin kubeconfig's
// server and credentials; only the CA stays.
type attacker struct {
	k     harness.Kubectl
	base  string
	token string
}

func (a attacker) args(space string, args []string) []string {
	server := a.base
	if space != "" {
		server += "/spaces/" + space
	}
	// After the command: kubectl takes flags before it for a plugin's name.
	return append(append([]string{}, args...), "--server", server, "--token", a.token)
}

// refused runs kubectl in space, expects a refusal and returns what
// kubectl said.
func (a attacker) refused(t *testing.T, space string, args ...string) string {
	t.Helper()
	return a.k.MustFail(t, a.args(space, args)...)
}

// allowed runs kubectl in space and expects it to work.
func (a attacker) allowed(t *testing.T, space string, args ...string) string {
	t.Helper()
	return a.k.MustRun(t, a.args(space, args)...)
}

func (a attacker) apply(t *testing.T, space, manifest string, wantAllowed bool) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, errOut, err := a.k.RunStdin(ctx, strings.NewReader(manifest), a.args(space, []string{"create", "-f", "-"})...)
	if wantAllowed {
		require.NoError(t, err, "kubectl create in %s\n%s\n%s", space, out, errOut)
	} else {
		require.Error(t, err, "kubectl create in %s was expected to be refused\n%s", space, out)
	}
	return errOut
}

const hostileEdgePlacement = `apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: takeover}
spec:
  locationSelectors: [{}]
  downsync:
  - {apiGroup: apps, resources: [daemonsets], namespaces: ["*"], createOnly: true}
  upsync:
  - {apiGroup: "", resources: [secrets], namespaces: ["*"]}
`

const privilegedDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: root-everywhere, namespace: default}
spec:
  selector: {matchLabels: {app: x}}
  template:
    metadata: {labels: {app: x}}
    spec:
      hostPID: true
      containers: [{name: x, image: busybox, securityContext: {privileged: true}}]
`

// TestEdgeAttacks takes one edge's syncer token, as a compromised edge
// would, and tries what an audit of the server found it could do: make
// placements from its mailbox, point its SyncTarget at another space as its
// mailbox, inject status into other spaces through forged copies, claim
// the tunnel or the server's conditions, and learn which spaces exist. Each
// is refused by the server itself (authorization or admission), while what
// a syncer needs keeps working.
func TestEdgeAttacks(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "inv2", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	srv.CLI(t, "space", "create", "wds2", "--type", "wds", "--inventory-space", "inv2")
	join1 := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	srv.JoinCommand(t, "edge2", "--inventory-space", "inv1", "--labels", "env=prod")
	srv.JoinCommand(t, "edge3", "--inventory-space", "inv2", "--labels", "env=prod")
	edge1 := attacker{k: k, base: srv.BaseURL(), token: flagValue(t, join1, "--token")}
	mailbox := func(inv, st string) string {
		return poll(t, k, func(s string) bool { return strings.Contains(s, "-mb-") }, "the mailbox of "+st,
			"--context", inv, "get", "synctarget", st, "-o", "jsonpath={.status.mailboxSpace}")
	}
	mb1, mb2 := mailbox("inv1", "edge1"), mailbox("inv1", "edge2")

	// A workload in wds1 placed on env=prod: a real copy in each mailbox.
	k.MustRun(t, "--context", "wds1", "create", "configmap", "settings", "-n", "default", "--from-literal", "k=v")
	k.MustRunStdin(t, strings.NewReader(`apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: settings}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync: [{apiGroup: "", resources: [configmaps], namespaces: [default], objectNames: [settings]}]
`), "--context", "wds1", "create", "-f", "-")
	poll(t, k, func(s string) bool { return s == "v" }, "the copy in edge1's mailbox",
		"--server", srv.BaseURL()+"/spaces/"+mb1, "get", "configmap", "settings", "-n", "default", "-o", "jsonpath={.data.k}")

	t.Run("no placements from a mailbox", func(t *testing.T) {
		out := edge1.apply(t, mb1, hostileEdgePlacement, false)
		require.Contains(t, out, "Forbidden")
		out = edge1.apply(t, mb1, privilegedDaemonSet, false)
		require.Contains(t, out, "may write only upsynced objects")
		// Not even the admin: a mailbox is the server's and its syncer's.
		out = k.MustFail(t, "--server", srv.BaseURL()+"/spaces/"+mb1, "create", "configmap", "planted", "-n", "default")
		require.Contains(t, out, "is a mailbox")
		// EdgePlacements live in workload description spaces only.
		for _, space := range []string{"inv1", ""} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			args := []string{"create", "-f", "-"}
			if space != "" {
				args = append([]string{"--context", space}, args...)
			}
			_, errOut, err := k.RunStdin(ctx, strings.NewReader(hostileEdgePlacement), args...)
			cancel()
			require.Error(t, err, "an EdgePlacement in space %q", space)
			require.Contains(t, errOut, `edgeplacements live in spaces of type "wds"`)
		}
	})

	t.Run("a WDS reaches only the inventory spaces it names", func(t *testing.T) {
		k.MustRunStdin(t, strings.NewReader(strings.Replace(hostileEdgePlacement, "takeover", "everywhere", 1)), "--context", "wds1", "create", "-f", "-")
		dests := poll(t, k, func(s string) bool { return strings.Contains(s, "edge1") && strings.Contains(s, "edge2") },
			"wds1's placement to reach inv1's SyncTargets",
			"--context", "wds1", "get", "singleplacementslice", "everywhere", "-o", "jsonpath={.destinations[*].syncTargetName}")
		require.NotContains(t, dests, "edge3", "edge3 is in inv2, which wds1 does not name")
		k.MustRunStdin(t, strings.NewReader(strings.Replace(hostileEdgePlacement, "takeover", "everywhere", 1)), "--context", "wds2", "create", "-f", "-")
		dests = poll(t, k, func(s string) bool { return strings.Contains(s, "edge3") }, "wds2's placement to reach inv2's SyncTarget",
			"--context", "wds2", "get", "singleplacementslice", "everywhere", "-o", "jsonpath={.destinations[*].syncTargetName}")
		require.NotContains(t, dests, "edge1")
		// A WDS that names no inventory space places nothing, and says why.
		srv.CLI(t, "space", "create", "wds3", "--type", "wds")
		k.MustRunStdin(t, strings.NewReader(hostileEdgePlacement), "--context", "wds3", "create", "-f", "-")
		poll(t, k, func(s string) bool { return s == "NoInventorySpaces" }, "the placement in wds3 to say it has no inventory",
			"--context", "wds3", "get", "edgeplacement", "takeover", "-o", `jsonpath={.status.conditions[?(@.type=="Scheduled")].reason}`)
	})

	t.Run("no mailbox redirection", func(t *testing.T) {
		k.MustRun(t, "--context", "wds1", "create", "secret", "generic", "topsecret", "-n", "default", "--from-literal", "password=hunter2")
		out := edge1.refused(t, "inv1", "patch", "synctarget", "edge1", "--subresource=status", "--type=merge",
			"-p", `{"status":{"mailboxSpace":"wds1"}}`)
		require.Contains(t, out, "mailboxSpace")
		out = edge1.refused(t, "wds1", "get", "secret", "topsecret", "-n", "default", "-o", "jsonpath={.data.password}")
		require.Contains(t, out, "Forbidden")
		require.Equal(t, mb1, k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}"))
	})

	t.Run("no status injection through forged copies", func(t *testing.T) {
		forged := `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-forged
  namespace: default
  labels: {edge.kubestellar.io/placement-copy: "true"}
  annotations: {edge.kubestellar.io/source-space: wds1, edge.kubestellar.io/want-singleton: "true"}
`
		out := edge1.apply(t, mb1, forged, false)
		require.Contains(t, out, "Forbidden")
		// The real copy: its provenance is the server's...
		out = edge1.refused(t, mb1, "annotate", "configmap", "settings", "-n", "default", "--overwrite", "edge.kubestellar.io/source-space=kube-public")
		require.Contains(t, out, "a copy the server made")
		edge1.refused(t, mb1, "label", "configmap", "settings", "-n", "default", "edge.kubestellar.io/placement-copy-")
		edge1.refused(t, mb1, "patch", "configmap", "settings", "-n", "default", "--type=merge", "-p", `{"metadata":{"finalizers":["edge/hold"]}}`)
		edge1.refused(t, mb1, "delete", "configmap", "settings", "-n", "default")
		// ...while what a syncer reports about it is its own.
		edge1.allowed(t, mb1, "annotate", "configmap", "settings", "-n", "default", "--overwrite", "edge.kubestellar.io/sync-error=Rejected: test")
		// And nothing reaches another mailbox.
		out = edge1.refused(t, mb2, "get", "configmaps", "-n", "default")
		require.Contains(t, out, "Forbidden")
	})

	t.Run("no claims on what the server owns", func(t *testing.T) {
		out := edge1.refused(t, "inv1", "patch", "synctarget", "edge1", "--subresource=status", "--type=merge",
			"-p", `{"status":{"tunnelServer":"https://attacker.example:6443"}}`)
		require.Contains(t, out, "tunnelServer")
		now := time.Now().UTC().Format(time.RFC3339)
		edge1.refused(t, "inv1", "patch", "synctarget", "edge1", "--subresource=status", "--type=merge",
			"-p", `{"status":{"conditions":[{"type":"SyncerConnected","status":"True","reason":"TunnelOpen","message":"forged","lastTransitionTime":"`+now+`"}]}}`)
		// What describes the syncer is its to report.
		edge1.allowed(t, "inv1", "patch", "synctarget", "edge1", "--subresource=status", "--type=merge",
			"-p", `{"status":{"syncerVersion":"v-test","syncedObjects":3,"lastSyncerHeartbeatTime":"`+now+`"}}`)
		edge1.refused(t, "inv1", "label", "synctarget", "edge1", "env=dev")
		edge1.refused(t, "inv1", "get", "synctarget", "edge2")
		// Spaces are the admin's: no mailbox made by hand, no type changed.
		out = k.MustFail(t, "patch", "space", "wds1", "--type=merge", "-p", `{"spec":{"type":"inventory"}}`)
		require.Contains(t, out, "immutable")
		out = k.MustFail(t, "label", "space", "wds2", "edge.kubestellar.io/sync-target-name=edge1")
		require.Contains(t, out, "only the server sets label")
	})

	t.Run("can-i tells the truth", func(t *testing.T) {
		canI := func(space string, args ...string) string {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, errOut, err := k.Run(ctx, edge1.args(space, append([]string{"auth", "can-i"}, args...))...)
			if out == "" {
				t.Logf("kubectl auth can-i %v in %s: %v\n%s", args, space, err, errOut)
			}
			answer, _, _ := strings.Cut(strings.TrimSpace(out), " ") // "no - <reason>"
			return answer
		}
		require.Equal(t, "yes", canI(mb1, "get", "configmaps"))
		require.Equal(t, "no", canI(mb1, "deletecollection", "configmaps"))
		require.Equal(t, "no", canI("wds1", "get", "secrets"))
		require.Equal(t, "no", canI(mb2, "get", "configmaps"))
		require.Equal(t, "yes", canI("inv1", "patch", "synctargets/edge1", "--subresource=status"))
		require.Equal(t, "no", canI("inv1", "patch", "synctargets/edge1"))
		list := edge1.allowed(t, "inv1", "auth", "can-i", "--list")
		require.Contains(t, list, "synctargets.edge.kubestellar.io/status")
	})

	t.Run("no CRD shadows a built-in", func(t *testing.T) {
		k.MustRun(t, "--context", "wds1", "create", "namespace", "work")
		k.MustRunStdin(t, strings.NewReader(`apiVersion: coordination.k8s.io/v1
kind: Lease
metadata: {name: keep-me, namespace: work}
spec: {holderIdentity: me}
`), "--context", "wds1", "create", "-f", "-")
		shadow := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: leases.coordination.k8s.io
  annotations: {api-approved.kubernetes.io: "https://github.com/kubernetes/enhancements/pull/1111"}
spec:
  group: coordination.k8s.io
  names: {kind: Lease, plural: leases}
  scope: Namespaced
  versions: [{name: v9, served: true, storage: true, schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}}]
`
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, errOut, err := k.RunStdin(ctx, strings.NewReader(shadow), "--context", "wds2", "create", "-f", "-")
		require.Error(t, err, "a CRD in a built-in group")
		require.Contains(t, errOut, "the server serves this group itself")
		out := k.MustFail(t, "delete", "crd", "synctargets.edge.kubestellar.io")
		require.Contains(t, out, "kubestellar's own CRDs")
		require.Equal(t, "me", k.MustRun(t, "--context", "wds1", "get", "lease", "keep-me", "-n", "work", "-o", "jsonpath={.spec.holderIdentity}"))
	})

	t.Run("no space oracle", func(t *testing.T) {
		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // probing answers only
		get := func(path, token string) (int, string) {
			req, err := http.NewRequest(http.MethodGet, srv.BaseURL()+path, nil)
			require.NoError(t, err)
			if token != "" {
				req.Header.Set("Authorization", "Bearer "+token)
			}
			resp, err := client.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			require.NoError(t, err)
			return resp.StatusCode, string(body)
		}
		for _, token := range []string{"", edge1.token} {
			for _, p := range []string{"/healthz", "/readyz", "/version", "/api"} {
				existing, existingBody := get("/spaces/wds1"+p, token)
				missing, missingBody := get("/spaces/no-such-space"+p, token)
				require.Equal(t, existing, missing, "%s with token=%t: an existing and a missing space answer alike", p, token != "")
				require.Equal(t, strings.ReplaceAll(existingBody, "wds1", "X"), strings.ReplaceAll(missingBody, "no-such-space", "X"), p)
				require.NotEqual(t, http.StatusOK, existing, "%s of a space is not public", p)
			}
		}
		code, _ := get("/healthz", "")
		require.Equal(t, http.StatusOK, code, "the root's probes stay open")
	})
}
