// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// edgeDataWorkload places a CRD, a ConfigMap in namespace "data" (which
// is placed only because the ConfigMap is in it), and a ConfigMap in
// namespace "scratch" (placed explicitly).
const edgeDataWorkload = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: v1
kind: Namespace
metadata: {name: data}
---
apiVersion: v1
kind: Namespace
metadata: {name: scratch}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: data}
data: {mode: placed}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: tmp, namespace: scratch}
data: {mode: placed}
---
apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: data}
spec:
  locationSelectors: [{matchLabels: {env: prod}}]
  downsync:
  - {apiGroup: apiextensions.k8s.io, resources: [customresourcedefinitions], objectNames: [gadgets.example.com]}
  - {apiGroup: "", resources: [namespaces], objectNames: [scratch]}
  - {apiGroup: "", resources: [configmaps], namespaces: [data, scratch]}
`

// edgeMade are objects made directly at the edge: a Secret and a
// PersistentVolumeClaim in the placed namespace "data", and an instance of
// the placed CRD elsewhere.
const edgeMade = `apiVersion: v1
kind: Secret
metadata: {name: edge-made, namespace: data}
stringData: {password: only-here}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: claim, namespace: data}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 1Gi}}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: edge-made, namespace: default}
`

// TestEdgeDataSurvivesUnplacement removes every placed object of a
// namespace that also holds objects made at the edge (a Secret, a PVC),
// and the CRD of an instance made at the edge: the syncer keeps the
// namespace (the same one, never deleted and made again), its contents and
// the CRD, and its SyncTarget says why. A namespace that held only placed
// objects goes; the kept ones go too once what held them is deleted at the
// edge.
func TestEdgeDataSurvivesUnplacement(t *testing.T) {
	srv := harness.StartBinary(t, "")
	k := srv.Kubectl()
	srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
	srv.CLI(t, "space", "create", "wds1", "--type", "wds", "--inventory-space", "inv1")
	c := edgecluster.Start(t, edgecluster.Options{Name: "edge1"})
	ek := harness.Kubectl{Kubeconfig: c.KubeconfigPath}
	join := srv.JoinCommand(t, "edge1", "--inventory-space", "inv1", "--labels", "env=prod")
	harness.StartSyncer(t, join, c.KubeconfigPath, "")

	dir := t.TempDir()
	workload, made := filepath.Join(dir, "workload.yaml"), filepath.Join(dir, "edge-made.yaml")
	require.NoError(t, os.WriteFile(workload, []byte(edgeDataWorkload), 0o600))
	require.NoError(t, os.WriteFile(made, []byte(edgeMade), 0o600))
	k.MustRun(t, "--context", "wds1", "apply", "-f", workload)
	owner := `jsonpath={.metadata.labels.edge\.kubestellar\.io/syncer}`
	poll(t, ek, equals("edge1"), "the placed ConfigMap in data at the edge", "get", "configmap", "settings", "-n", "data", "-o", owner)
	poll(t, ek, equals("edge1"), "the placed ConfigMap in scratch at the edge", "get", "configmap", "tmp", "-n", "scratch", "-o", owner)
	poll(t, ek, equals("edge1 edge1"), "the syncer's namespaces at the edge", "get", "namespace", "data", "scratch", "-o",
		`jsonpath={.items[*].metadata.labels.edge\.kubestellar\.io/syncer}`)
	poll(t, ek, equals("True"), "the placed CRD to be established at the edge", "get", "crd", "gadgets.example.com", "-o",
		`jsonpath={.status.conditions[?(@.type=="Established")].status}`)
	dataUID := ek.MustRun(t, "get", "namespace", "data", "-o", "jsonpath={.metadata.uid}")
	ek.MustRun(t, "apply", "-f", made)

	// Every placed object of data leaves: its ConfigMap deleted in the WDS.
	// Then the placement goes: scratch, its ConfigMap and the CRD leave.
	k.MustRun(t, "--context", "wds1", "delete", "configmap", "settings", "-n", "data")
	poll(t, ek, equals(""), "the placed ConfigMap to leave data at the edge",
		"get", "configmaps", "-n", "data", "-l", edgev2alpha1.SyncerOwnerLabel, "-o", "jsonpath={.items[*].metadata.name}")
	k.MustRun(t, "--context", "wds1", "delete", "edgeplacement", "data")

	// The syncer keeps data and the CRD, and says so, after its grace
	// period; data is never deleted meanwhile.
	problems := `jsonpath={range .status.problems[*]}{.resource}/{.name}={.reason}: {.message}{"\n"}{end}`
	kept := func(out string) bool {
		return strings.Contains(out, "namespaces/data="+edgev2alpha1.SyncReasonKeptInUse) &&
			strings.Contains(out, "customresourcedefinitions/gadgets.example.com="+edgev2alpha1.SyncReasonKeptInUse)
	}
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		ns, errOut, err := ek.Run(ctx, "get", "namespace", "data", "--ignore-not-found", "-o", "jsonpath={.metadata.uid} {.status.phase}")
		if err != nil {
			return false, nil // the edge's API was busy: ask again
		}
		if ns != dataUID+" Active" {
			return false, fmt.Errorf("the syncer deleted namespace data, which holds a Secret and a PVC made at the edge: "+
				"it is now %q (want %q) %s", ns, dataUID+" Active", errOut)
		}
		last, _, err = k.Run(ctx, "--context", "inv1", "get", "synctarget", "edge1", "-o", problems)
		return err == nil && kept(last), nil
	})
	require.NoError(t, err, "waiting for the SyncTarget to say namespace data and CRD gadgets.example.com are kept\nlast problems:\n%s", last)
	require.Contains(t, last, "(persistentvolumeclaims/claim, secrets/edge-made)", "the report names what holds data")
	require.Contains(t, last, "(default/edge-made)", "the report names the CRD's instance made at the edge")
	require.Equal(t, "False KeptInUse", k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o",
		`jsonpath={.status.conditions[?(@.type=="Synced")].status} {.status.conditions[?(@.type=="Synced")].reason}`))
	require.Equal(t, "only-here", ek.MustRun(t, "get", "secret", "edge-made", "-n", "data", "-o", "go-template={{.data.password | base64decode}}"))
	require.Equal(t, "claim", ek.MustRun(t, "get", "pvc", "claim", "-n", "data", "-o", "jsonpath={.metadata.name}"))
	require.Equal(t, "edge-made", ek.MustRun(t, "get", "gadget", "edge-made", "-n", "default", "-o", "jsonpath={.metadata.name}"))

	// scratch held only placed objects: it goes.
	if !eventually(2*time.Minute, ek, equals(""), "get", "namespace", "scratch", "--ignore-not-found", "-o", "name") {
		// What kept it: the mailbox's copy (still there, or Terminating)
		// or the syncer (the edge namespace, its labels and phase).
		mb := k.MustRun(t, "--context", "inv1", "get", "synctarget", "edge1", "-o", "jsonpath={.status.mailboxSpace}")
		cfg, err := clientcmd.LoadFromFile(srv.Kubeconfig)
		require.NoError(t, err)
		inMailbox, _, _ := k.Run(context.Background(), "--server", cfg.Clusters["root"].Server+"/spaces/"+mb,
			"get", "namespaces,configmaps,syncerconfigs", "-A", "-o", "yaml")
		atEdge, _, _ := ek.Run(context.Background(), "get", "namespace", "scratch", "-o", "yaml")
		t.Fatalf("namespace scratch did not leave the edge in 2 minutes.\nThe mailbox %s holds:\n%s\nAt the edge:\n%s", mb, inMailbox, atEdge)
	}

	// Once what held them is deleted at the edge, data and the CRD go too,
	// and the report with them.
	ek.MustRun(t, "delete", "-f", made)
	pollFor(t, 3*time.Minute, ek, equals(""), "namespace data and the CRD to leave the edge once nothing holds them",
		"get", "namespace/data", "crd/gadgets.example.com", "--ignore-not-found", "-o", "name")
	pollFor(t, time.Minute, k, equals(""), "the SyncTarget to report nothing", "--context", "inv1", "get", "synctarget", "edge1", "-o", problems)
}
