// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestGateKeepsTheRevisionItHas: a destination not admitted to a
// Progressive placement's current revision keeps that placement's copies
// exactly (no update, no delete, no create), while another placement's
// change goes through; admitted, it takes the whole revision at once.
func TestGateKeepsTheRevisionItHas(t *testing.T) {
	f := newFake()
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "gone", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "free", map[string]any{"a": "1"}))
	ep := f.place("wds1", "p", 1, cmClause("cm", "gone", "new"))
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	f.place("wds1", "q", 2, cmClause("free"))
	key := spaces.Key("wds1", "", "p")

	// Not admitted, with nothing in the mailbox: nothing of p is created.
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 2", "create namespaces default", "create configmaps default/free", "createSyncerConfig"}, calls)
	first := f.revisionFor[key]
	require.NotEmpty(t, first)

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 2", "create configmaps default/cm", "create configmaps default/gone", "updateSyncerConfig"}, calls)
	require.Equal(t, []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: first, Digest: mailboxDigest(f, "wds1", "p")}}, f.syncerConfigs[f.mailbox()].Spec.Rollouts)
	for _, name := range []string{"cm", "gone"} {
		require.Equal(t, first, f.get(cmGVR, f.mailbox(), "default", name).GetAnnotations()[edgev2alpha1.RevisionAnnotation], name)
	}
	require.Empty(t, f.get(cmGVR, f.mailbox(), "default", "free").GetAnnotations()[edgev2alpha1.RevisionAnnotation], "an All placement's copy has no revision")

	// A change: cm updated, gone deleted, new created, free (q's) updated.
	f.admitted = nil
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "2"}))
	delete(f.objects[cmGVR], spaces.Key("wds1", "default", "gone"))
	f.put(cmGVR, "wds1", configMap("default", "new", map[string]any{"a": "1"}))
	f.put(cmGVR, "wds1", configMap("default", "free", map[string]any{"a": "2"}))
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 2", "update configmaps default/free"}, calls, "only q's change goes through")
	require.Equal(t, first, f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Revision, "the record stays the revision the mailbox holds")
	second := f.revisionFor[key]
	require.NotEqual(t, first, second, "the change is a new revision")
	require.Equal(t, "1", f.get(cmGVR, f.mailbox(), "default", "cm").Object["data"].(map[string]any)["a"])
	require.NotNil(t, f.get(cmGVR, f.mailbox(), "default", "gone"), "what the revision drops stays until the destination takes it")
	require.Nil(t, f.get(cmGVR, f.mailbox(), "default", "new"))
	require.Contains(t, f.syncerConfigs[f.mailbox()].Spec.Resources, edgev2alpha1.SyncedResource{Version: "v1", Resource: "configmaps", Namespaced: true})

	// The same sources give the same revision.
	_, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, second, f.revisionFor[key])

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"recordProblems 2", "update configmaps default/cm", "create configmaps default/new", "delete configmaps default/gone", "updateSyncerConfig"}, calls)
	require.Equal(t, []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: second, Digest: mailboxDigest(f, "wds1", "p")}}, f.syncerConfigs[f.mailbox()].Spec.Rollouts)
	require.Equal(t, second, f.get(cmGVR, f.mailbox(), "default", "cm").GetAnnotations()[edgev2alpha1.RevisionAnnotation])

	// A status change of a source (what the status controller writes back)
	// is no revision.
	cm := f.get(cmGVR, "wds1", "default", "cm").DeepCopy()
	cm.Object["status"] = map[string]any{"x": "y"}
	f.put(cmGVR, "wds1", cm)
	_, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, second, f.revisionFor[key])
}

// TestGateForASyncerThatReports: a syncer that reports rollouts hears of
// the revision from the SyncerConfig's record alone: the copies do not
// carry it, so a new revision writes only what changed (and the record),
// and the record's digest is what a syncer computes from the copies it
// reads. A placement with a CEL health check still has each copy carry
// its revision: the check reads each copy's report.
func TestGateForASyncerThatReports(t *testing.T) {
	f := newFake()
	for _, name := range []string{"a", "b", "c"} {
		f.put(cmGVR, "wds1", configMap("default", name, map[string]any{"v": "1"}))
	}
	ep := f.place("wds1", "p", 1, cmClause("a", "b", "c"))
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")
	_, _, err := f.run(t)
	require.NoError(t, err)
	f.syncerConfigs[f.mailbox()].Status.ReportsRollouts = true

	f.admitted = map[string]bool{key: true}
	_, _, err = f.run(t)
	require.NoError(t, err)
	first := f.revisionFor[key]
	for _, name := range []string{"a", "b", "c"} {
		require.NotContains(t, f.get(cmGVR, f.mailbox(), "default", name).GetAnnotations(), edgev2alpha1.RevisionAnnotation, name)
	}
	require.Equal(t, []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: first, Digest: mailboxDigest(f, "wds1", "p")}}, f.syncerConfigs[f.mailbox()].Spec.Rollouts)

	// One object changes: a new revision writes that copy and the record.
	f.put(cmGVR, "wds1", configMap("default", "b", map[string]any{"v": "2"}))
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 1", "update configmaps default/b", "updateSyncerConfig"}, calls)
	second := f.revisionFor[key]
	require.NotEqual(t, first, second)
	rec := f.syncerConfigs[f.mailbox()].Spec.Rollouts
	require.Equal(t, []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: second, Digest: mailboxDigest(f, "wds1", "p")}}, rec)

	// A CEL health check: each copy carries the revision again.
	ep.Spec.Rollout.HealthCheck = &edgev2alpha1.RolloutHealthCheck{CEL: "true"}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"recordProblems 1", "update configmaps default/a", "update configmaps default/b", "update configmaps default/c", "updateSyncerConfig"}, calls)
	for _, name := range []string{"a", "b", "c"} {
		require.Equal(t, second, f.get(cmGVR, f.mailbox(), "default", name).GetAnnotations()[edgev2alpha1.RevisionAnnotation], name)
	}
	require.NotEqual(t, rec[0].Digest, f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Digest, "the copies' content changed with their annotation")
	require.Equal(t, mailboxDigest(f, "wds1", "p"), f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Digest)
}

// mailboxDigest is CopiesDigest of a placement's copies in the fake's
// mailbox, computed as a syncer does from what it reads.
func mailboxDigest(f *fakeMailbox, wds, placement string) string {
	var entries []edgev2alpha1.CopyDigestEntry
	for gvr, objs := range f.objects {
		if isNamespaces(gvr) {
			continue
		}
		for k, o := range objs {
			ann := o.GetAnnotations()
			if k != spaces.Key(f.mailbox(), o.GetNamespace(), o.GetName()) || ann[edgev2alpha1.SourceSpaceAnnotation] != wds || ann[edgev2alpha1.SourcePlacementAnnotation] != placement {
				continue
			}
			entries = append(entries, edgev2alpha1.CopyDigestEntry{Resource: gvr.GroupResource().String(), Namespace: o.GetNamespace(), Name: o.GetName(),
				ContentHash: ann[edgev2alpha1.ContentHashAnnotation]})
		}
	}
	return edgev2alpha1.CopiesDigest(entries)
}

var widgetGVR = schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}

// widgetCRD is a WDS's CRD of widgets; description stands for any change
// of its definition.
func widgetCRD(plural, description string) *unstructured.Unstructured {
	kind := "Widget"
	if plural != "widgets" {
		kind = "Gadget"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".example.com"},
		"spec": map[string]any{"group": "example.com", "scope": "Namespaced",
			"names": map[string]any{"plural": plural, "kind": kind, "listKind": kind + "List"},
			"versions": []any{map[string]any{"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "description": description}}}}}}}
}

// mailboxCRD is the description of the mailbox's CRD of this name (the
// part of widgetCRD's definition that tells its versions apart), or ""
// when the mailbox has none.
func (f *fakeMailbox) mailboxCRD(name string) string {
	obj := f.get(crdGVR, f.mailbox(), "", name)
	if obj == nil {
		return ""
	}
	versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
	desc, _, _ := unstructured.NestedString(versions[0].(map[string]any), "schema", "openAPIV3Schema", "description")
	return desc
}

// TestGateKeepsTheCRDsItHas: with CRDs per space, a Progressive
// placement's CRDs roll out as its objects do. A destination not admitted
// keeps serving its mailbox's copy of a CRD as it is (and the edge the
// CRDs its record names), gets no CRD new in the revision, and keeps a
// CRD the revision no longer places while its copies of the CRD's
// objects stay; admitted, it takes them all.
func TestGateKeepsTheCRDsItHas(t *testing.T) {
	f := newFake()
	f.perSpace = true
	f.served = append(f.served,
		resource{GroupVersionResource: crdGVR, Kind: "CustomResourceDefinition"},
		resource{GroupVersionResource: widgetGVR, Kind: "Widget", Namespaced: true},
		resource{GroupVersionResource: widgetGVR.GroupVersion().WithResource("gadgets"), Kind: "Gadget", Namespaced: true})
	f.put(crdGVR, "wds1", widgetCRD("widgets", "first"))
	f.put(widgetGVR, "wds1", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}, "spec": map[string]any{"size": "1"}}})
	apiextensions, example := "apiextensions.k8s.io", "example.com"
	crdClause := func(names ...string) edgev2alpha1.DownsyncClause {
		return edgev2alpha1.DownsyncClause{APIGroup: &apiextensions, Resources: []string{"customresourcedefinitions"}, ObjectNames: names}
	}
	widgets := edgev2alpha1.DownsyncClause{APIGroup: &example, Resources: []string{"widgets"}, ObjectNames: []string{"w"}}
	ep := f.place("wds1", "p", 1, crdClause("widgets.example.com"), widgets)
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")
	mailboxCRD := f.mailboxCRD
	cfg := func() *edgev2alpha1.SyncerConfig { return f.syncerConfigs[f.mailbox()] }

	// Not admitted, nothing held: no CRD either.
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.NotContains(t, calls, "create customresourcedefinitions widgets.example.com")
	require.Empty(t, cfg().Spec.CRDs)

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "create customresourcedefinitions widgets.example.com")
	require.Contains(t, calls, "create widgets default/w")
	require.Equal(t, "first", mailboxCRD("widgets.example.com"))
	require.Equal(t, []string{"widgets.example.com"}, cfg().Spec.CRDs)
	first := f.revisionFor[key]
	require.Equal(t, []edgev2alpha1.RolloutRecord{{Placement: "wds1/p", Revision: first, Digest: mailboxDigest(f, "wds1", "p"),
		CRDs: []string{"widgets.example.com"}}}, cfg().Spec.Rollouts)

	// The definition changes: a new revision, which a destination not
	// admitted does not take; a CRD new in it waits too.
	f.admitted = nil
	f.put(crdGVR, "wds1", widgetCRD("widgets", "second"))
	f.put(crdGVR, "wds1", widgetCRD("gadgets", "new"))
	ep.Spec.Downsync[0] = crdClause("widgets.example.com", "gadgets.example.com")
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.NotEqual(t, first, f.revisionFor[key], "a change of definition is a new revision")
	require.NotContains(t, calls, "update customresourcedefinitions widgets.example.com")
	require.NotContains(t, calls, "create customresourcedefinitions gadgets.example.com")
	require.Equal(t, "first", mailboxCRD("widgets.example.com"))
	require.Equal(t, []string{"widgets.example.com"}, cfg().Spec.CRDs, "the edge keeps the CRDs its revision placed")
	require.Equal(t, first, cfg().Spec.Rollouts[0].Revision)

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "update customresourcedefinitions widgets.example.com")
	require.Contains(t, calls, "create customresourcedefinitions gadgets.example.com")
	require.Equal(t, "second", mailboxCRD("widgets.example.com"))
	require.Equal(t, []string{"gadgets.example.com", "widgets.example.com"}, cfg().Spec.CRDs)
	second := f.revisionFor[key]
	require.Equal(t, []string{"gadgets.example.com", "widgets.example.com"}, cfg().Spec.Rollouts[0].CRDs)

	// A revision without widgets at all: a destination not admitted keeps
	// the CRD, its widget and what its edge has.
	f.admitted = nil
	ep.Spec.Downsync = []edgev2alpha1.DownsyncClause{cmClause("cm")}
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.NotEqual(t, second, f.revisionFor[key])
	for _, c := range calls {
		require.NotContains(t, c, "delete", "nothing leaves a destination not admitted")
	}
	require.Equal(t, "second", mailboxCRD("widgets.example.com"))
	require.NotNil(t, f.get(widgetGVR, f.mailbox(), "default", "w"))
	require.Equal(t, []string{"gadgets.example.com", "widgets.example.com"}, cfg().Spec.CRDs)

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "delete widgets default/w")
	require.Contains(t, calls, "delete customresourcedefinitions widgets.example.com")
	require.Contains(t, calls, "delete customresourcedefinitions gadgets.example.com")
	require.Empty(t, cfg().Spec.CRDs)
	require.Empty(t, cfg().Spec.Rollouts[0].CRDs)
}

// TestGateKeepsTheCRDOfKeptCopies: a placement that places custom
// resources but not their CRD (the edge has it by other means) still has
// the mailbox serve it; a revision that stops placing them leaves the
// CRD, and so the copies, to a destination not admitted.
func TestGateKeepsTheCRDOfKeptCopies(t *testing.T) {
	f := newFake()
	f.perSpace = true
	f.served = append(f.served, resource{GroupVersionResource: widgetGVR, Kind: "Widget", Namespaced: true})
	f.put(crdGVR, "wds1", widgetCRD("widgets", "first"))
	f.put(widgetGVR, "wds1", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}}})
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	example := "example.com"
	ep := f.place("wds1", "p", 1, edgev2alpha1.DownsyncClause{APIGroup: &example, Resources: []string{"widgets"}, ObjectNames: []string{"w"}})
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")
	f.admitted = map[string]bool{key: true}
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "create customresourcedefinitions widgets.example.com")
	require.Contains(t, calls, "create widgets default/w")
	require.Empty(t, f.syncerConfigs[f.mailbox()].Spec.CRDs, "the placement does not place the CRD at the edge")

	f.admitted = nil
	ep.Spec.Downsync = []edgev2alpha1.DownsyncClause{cmClause("cm")}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.NotContains(t, calls, "delete customresourcedefinitions widgets.example.com")
	require.NotNil(t, f.get(crdGVR, f.mailbox(), "", "widgets.example.com"))
	require.NotNil(t, f.get(widgetGVR, f.mailbox(), "default", "w"))

	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "delete widgets default/w")
	require.Contains(t, calls, "delete customresourcedefinitions widgets.example.com")
}

// TestGateLeavesAnUpsyncedCRDAtTheCenter: a Progressive placement that
// upsyncs custom resources has its mailbox serve their CRD, but does not
// place the CRD at the edge: not in spec.crds, not in its rollout's
// record, whether the destination is admitted or not (a syncer creates
// what spec.crds names at its edge).
func TestGateLeavesAnUpsyncedCRDAtTheCenter(t *testing.T) {
	f := newFake()
	f.perSpace = true
	f.served = append(f.served, resource{GroupVersionResource: widgetGVR, Kind: "Widget", Namespaced: true})
	f.put(crdGVR, "wds1", widgetCRD("widgets", "first"))
	f.put(cmGVR, "wds1", configMap("default", "cm", map[string]any{"a": "1"}))
	ep := f.place("wds1", "p", 1, cmClause("cm"))
	ep.Spec.Upsync = []edgev2alpha1.UpsyncClause{{APIGroup: "example.com", Resources: []string{"widgets"}}}
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")
	cfg := func() *edgev2alpha1.SyncerConfig { return f.syncerConfigs[f.mailbox()] }

	for _, admitted := range []bool{false, true, false} {
		f.admitted = map[string]bool{key: admitted}
		_, _, err := f.run(t)
		require.NoError(t, err)
		require.Equal(t, "first", f.mailboxCRD("widgets.example.com"), "admitted %v: the mailbox serves the upsynced resource", admitted)
		require.Empty(t, cfg().Spec.CRDs, "admitted %v: the placement does not place the CRD at the edge", admitted)
		for _, rec := range cfg().Spec.Rollouts {
			require.Empty(t, rec.CRDs, "admitted %v", admitted)
		}
	}
	require.NotEmpty(t, cfg().Spec.Rollouts)

	// A change of the definition: a destination not admitted serves the
	// upsynced resource as its mailbox has it until its wave comes, then
	// as the WDS has it; at the center alone throughout.
	f.put(crdGVR, "wds1", widgetCRD("widgets", "second"))
	for _, step := range []struct {
		admitted bool
		want     string
	}{{false, "first"}, {true, "second"}} {
		admitted, want := step.admitted, step.want
		f.admitted = map[string]bool{key: admitted}
		_, _, err := f.run(t)
		require.NoError(t, err)
		require.Equal(t, want, f.mailboxCRD("widgets.example.com"), "admitted %v", admitted)
		require.Empty(t, cfg().Spec.CRDs, "admitted %v", admitted)
	}
}
