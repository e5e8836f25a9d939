// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/kubestellar/kubestellar/test/edgecluster"
	"github.com/kubestellar/kubestellar/test/harness"
)

// TestCRDsPerSpacePlacedOntoEdges: with --crds-per-space, WDS wds-a holds
// a workload set's CRDs as they are (the Gateway API's standard channel
// in the shared set, the project's own otherwise) and wds-b a definition
// of one of them of its own (a field more, in every version), each with an
// object of that kind under one name. wds-a places its CRD and object onto
// edge1, wds-b onto edge2, two real edge clusters joined with `syncer
// join`: each edge gets its WDS's definition (explain at the edge says
// which) and its WDS's object. Then wds-b's placement selects edge1 too:
// both placements report the conflict (DefinedDifferently), and edge1's
// CRD and object stay wds-a's.
func TestCRDsPerSpacePlacedOntoEdges(t *testing.T) {
	harness.EachWorkloadSet(t, func(t *testing.T, w harness.WorkloadSet) {
		srv := harness.StartBinary(t, "", "--crds-per-space")
		k := srv.Kubectl()
		srv.CLI(t, "space", "create", "inv1", "--type", "inventory")
		for _, wds := range []string{"wds-a", "wds-b"} {
			srv.CLI(t, "space", "create", wds, "--type", "wds", "--inventory-space", "inv1")
		}
		edges := map[string]*edge{}
		for name, ring := range map[string]string{"edge1": "a", "edge2": "b"} {
			c := edgecluster.Start(t, edgecluster.Options{Name: name})
			e := &edge{name: name, cluster: c, k: harness.Kubectl{Kubeconfig: c.KubeconfigPath}}
			e.join = srv.JoinCommand(t, name, "--inventory-space", "inv1", "--labels", "env=prod,ring="+ring)
			edges[name] = e
		}
		for _, e := range edges {
			e.syncer = harness.StartSyncer(t, e.join, e.cluster.KubeconfigPath, "")
		}
		for _, e := range edges {
			e.syncer.WaitLog(t, "mailbox ", time.Minute)
		}

		// The definitions: wds-a's as they are, wds-b's with a field more.
		crd := harness.Manifests(t, w.NamespacedCRD)[0]
		name := crd.GetName()
		plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
		kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		variant := crd.DeepCopy()
		versions, _, _ := unstructured.NestedSlice(variant.Object, "spec", "versions")
		for i := range versions {
			v := versions[i].(map[string]any)
			require.NoError(t, unstructured.SetNestedField(v, map[string]any{"type": "string", "description": "the team of wds-b"},
				"schema", "openAPIV3Schema", "properties", "spec", "properties", "team"))
		}
		require.NoError(t, unstructured.SetNestedSlice(variant.Object, versions, "spec", "versions"))
		k.MustRun(t, "--context", "wds-a", "apply", "--server-side", "-f", multiDocument(t, w.CRDs...))
		k.MustRun(t, "--context", "wds-b", "apply", "--server-side", "-f", writeObjects(t, variant))
		for _, wds := range []string{"wds-a", "wds-b"} {
			k.MustRun(t, "--context", wds, "wait", "--for", "condition=established", "--timeout=60s", "crd/"+name)
			k.MustRun(t, "--context", wds, "create", "namespace", "apps")
		}

		// One object of the kind under one name in each WDS.
		var object *unstructured.Unstructured
		for _, obj := range harness.Manifests(t, w.CRs) {
			if obj.GetKind() == kind && object == nil {
				object = obj
			}
		}
		require.NotNil(t, object, "%s holds no %s", w.CRs, kind)
		poll(t, k, func(string) bool { return true }, "wds-a's objects", "--context", "wds-a", "apply", "--server-side", "-n", "apps", "-f", w.CRs)
		ofB := object.DeepCopy()
		require.NoError(t, unstructured.SetNestedField(ofB.Object, "b", "spec", "team"))
		poll(t, k, func(string) bool { return true }, "wds-b's object", "--context", "wds-b", "apply", "--server-side", "-n", "apps", "-f", writeObjects(t, ofB))

		place := func(wds, placement, selector string) {
			k.MustRunStdin(t, strings.NewReader(`apiVersion: edge.kubestellar.io/v2alpha1
kind: EdgePlacement
metadata: {name: `+placement+`}
spec:
  locationSelectors: [{matchLabels: {`+selector+`}}]
  downsync:
  - {apiGroup: apiextensions.k8s.io, resources: [customresourcedefinitions], objectNames: [`+name+`]}
  - {apiGroup: `+group+`, resources: [`+plural+`], namespaces: [apps]}
`), "--context", wds, "apply", "-f", "-")
		}
		place("wds-a", "pa", "ring: a")
		place("wds-b", "pb", "ring: b")

		e1, e2 := edges["edge1"].k, edges["edge2"].k
		hasObject := func(s string) bool { return strings.Contains(" "+s+" ", " "+object.GetName()+" ") }
		poll(t, e1, hasObject, "wds-a's objects at edge1", "get", plural+"."+group, "-n", "apps", "-o", "jsonpath={.items[*].metadata.name}")
		poll(t, e2, equals(object.GetName()+" b"), "wds-b's object, with its field, at edge2", "get", plural+"."+group, "-n", "apps",
			"-o", "jsonpath={.items[*].metadata.name} {.items[*].spec.team}")
		// Each edge serves its WDS's definition. An edge's kube-apiserver
		// publishes a new CRD's OpenAPI, which explain reads, moments
		// after it serves the resource.
		explain := []string{"explain", strings.ToLower(kind) + ".spec.team", "--api-version", group + "/" + servedVersion(t, crd)}
		poll(t, e2, func(s string) bool { return strings.Contains(s, "the team of wds-b") }, "edge2's explanation of the field", explain...)
		pollFailure(t, e1, `field "team" does not exist`, "edge1's definition, without the field", explain...)
		crdAtEdge1 := e1.MustRun(t, "get", "crd", name, "-o", "jsonpath={.metadata.resourceVersion}")

		// wds-b's placement selects edge1 too: edge1 keeps wds-a's
		// definition, and both placements say so.
		place("wds-b", "pb", "env: prod")
		for wds, p := range map[string]string{"wds-a": "pa", "wds-b": "pb"} {
			poll(t, k, equals("True DefinedDifferently"), "the conflict on "+wds+"/"+p, "--context", wds, "get", "edgeplacement", p,
				"-o", `jsonpath={.status.conditions[?(@.type=="Conflicted")].status} {.status.conditions[?(@.type=="Conflicted")].reason}`)
		}
		require.Equal(t, crdAtEdge1, e1.MustRun(t, "get", "crd", name, "-o", "jsonpath={.metadata.resourceVersion}"), "edge1's CRD is left as it was")
		require.Empty(t, e1.MustRun(t, "get", plural+"."+group, object.GetName(), "-n", "apps", "-o", "jsonpath={.spec.team}"),
			"edge1's object is wds-a's")
		require.Equal(t, object.GetName()+" b", e2.MustRun(t, "get", plural+"."+group, "-n", "apps", "-o", "jsonpath={.items[*].metadata.name} {.items[*].spec.team}"),
			"edge2's is wds-b's still")
	})
}

// servedVersion is the first served version of a CRD.
func servedVersion(t *testing.T, crd *unstructured.Unstructured) string {
	t.Helper()
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	for _, v := range versions {
		m := v.(map[string]any)
		if served, _ := m["served"].(bool); served {
			return m["name"].(string)
		}
	}
	t.Fatalf("CRD %s serves no version", crd.GetName())
	return ""
}

// writeObjects writes objects to a manifest of their own, as JSON
// documents.
func writeObjects(t *testing.T, objs ...*unstructured.Unstructured) string {
	t.Helper()
	var docs []string
	for _, obj := range objs {
		data, err := json.Marshal(obj.Object)
		require.NoError(t, err)
		docs = append(docs, string(data))
	}
	path := filepath.Join(t.TempDir(), "objects.yaml")
	require.NoError(t, os.WriteFile(path, []byte(strings.Join(docs, "\n---\n")), 0o600))
	return path
}
