// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	"github.com/kubestellar/kubestellar/spaces"
)

// TestJoinerGetsTheCompletedRevision: a destination that holds none of a
// Progressive placement's copies and is not admitted to its current
// revision gets the last revision that completed, made from the snapshot
// (through its JSON, as stored) for this destination: customized with the
// Customizer as it was, parameters expanded, large integers intact. It
// keeps it until admitted, and then takes the current revision.
func TestJoinerGetsTheCompletedRevision(t *testing.T) {
	f := newFake()
	cm := configMap("default", "cm", map[string]any{"a": "1", "where": "%(region)"})
	cm.SetAnnotations(map[string]string{edgev2alpha1.CustomizerAnnotation: "cust", edgev2alpha1.ExpandParametersAnnotation: "true"})
	cm.Object["big"] = int64(9007199254740993)
	f.put(cmGVR, "wds1", cm)
	f.put(cmGVR, "wds1", configMap("default", "old", map[string]any{"a": "1"}))
	f.customizers[spaces.Key("wds1", "default", "cust")] = &edgev2alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "cust", Namespace: "default", ResourceVersion: "7"},
		Replacements: []edgev2alpha1.Replacement{{Path: ".data.tier", Value: rawJSON(`"gold"`)}}}
	ep := f.place("wds1", "p", 1, cmClause("cm", "old", "new"))
	ep.UID = "p-uid"
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")

	// The first revision completes; the rollout keeps its snapshot.
	f.admitted = map[string]bool{key: true}
	_, _, err := f.run(t)
	require.NoError(t, err)
	first := f.revisionFor[key]
	atFirst := f.get(cmGVR, f.mailbox(), "default", "cm")
	require.Equal(t, map[string]any{"a": "1", "where": "east", "tier": "gold"}, atFirst.Object["data"])
	r := f.reconciler()
	sources := r.sources(context.Background(), f.syncTargets[spaces.Key(inv, "", stName)])
	sel, synced := r.selectAll(context.Background(), sources)
	require.True(t, synced)
	stored := storedSnapshot(t, r, sel, sources[0].source, first)
	require.Equal(t, first, stored.Revision)
	require.Equal(t, "p-uid", stored.PlacementUID)
	require.Len(t, stored.Entries, 2)

	// A second revision: cm and its Customizer change, old goes, new comes.
	f.admitted = nil
	cm = cm.DeepCopy()
	cm.Object["data"] = map[string]any{"a": "2", "where": "%(region)"}
	f.put(cmGVR, "wds1", cm)
	delete(f.objects[cmGVR], spaces.Key("wds1", "default", "old"))
	f.put(cmGVR, "wds1", configMap("default", "new", map[string]any{"a": "1"}))
	f.customizers[spaces.Key("wds1", "default", "cust")] = &edgev2alpha1.Customizer{ObjectMeta: metav1.ObjectMeta{Name: "cust", Namespace: "default", ResourceVersion: "8"},
		Replacements: []edgev2alpha1.Replacement{{Path: ".data.tier", Value: rawJSON(`"silver"`)}}}

	// edge1 joins now (its mailbox holds nothing of p): with no snapshot,
	// it gets nothing until its wave.
	for _, name := range []string{"cm", "old"} {
		delete(f.objects[cmGVR], spaces.Key(f.mailbox(), "default", name))
	}
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.NotContains(t, calls, "create configmaps default/cm")
	second := f.revisionFor[key]
	require.NotEqual(t, first, second)

	// With the snapshot, it gets the completed revision, exactly.
	f.completed = map[string]*rolloutSnapshot{key: stored}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Subset(t, calls, []string{"create configmaps default/cm", "create configmaps default/old"})
	require.NotContains(t, calls, "create configmaps default/new")
	got := f.get(cmGVR, f.mailbox(), "default", "cm")
	require.Equal(t, atFirst.Object["data"], got.Object["data"])
	require.Equal(t, int64(9007199254740993), got.Object["big"])
	require.Equal(t, first, got.GetAnnotations()[edgev2alpha1.RevisionAnnotation])
	require.Equal(t, "p", got.GetAnnotations()[edgev2alpha1.SourcePlacementAnnotation])
	require.Equal(t, first, f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Revision, "the record names the revision given")

	// It keeps it: nothing of p is written again.
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 1"}, calls)

	// Admitted, it takes the current revision.
	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"recordProblems 1", "update configmaps default/cm", "create configmaps default/new", "delete configmaps default/old", "updateSyncerConfig"}, calls)
	require.Equal(t, second, f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Revision)
	got = f.get(cmGVR, f.mailbox(), "default", "cm")
	require.Equal(t, map[string]any{"a": "2", "where": "east", "tier": "silver"}, got.Object["data"])
	require.Equal(t, second, got.GetAnnotations()[edgev2alpha1.RevisionAnnotation])
}

// TestJoinerGetsTheCompletedCRDs: with CRDs per space, a joiner gets the
// CRDs of the completed revision from its snapshot, as they were, and
// keeps them until admitted.
func TestJoinerGetsTheCompletedCRDs(t *testing.T) {
	f := newFake()
	f.perSpace = true
	f.served = append(f.served, resource{GroupVersionResource: crdGVR, Kind: "CustomResourceDefinition"},
		resource{GroupVersionResource: widgetGVR, Kind: "Widget", Namespaced: true})
	f.put(crdGVR, "wds1", widgetCRD("widgets", "first"))
	f.put(widgetGVR, "wds1", &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w", "namespace": "default"}}})
	apiextensions, example := "apiextensions.k8s.io", "example.com"
	ep := f.place("wds1", "p", 1,
		edgev2alpha1.DownsyncClause{APIGroup: &apiextensions, Resources: []string{"customresourcedefinitions"}, ObjectNames: []string{"widgets.example.com"}},
		edgev2alpha1.DownsyncClause{APIGroup: &example, Resources: []string{"widgets"}, ObjectNames: []string{"w"}})
	ep.UID = "p-uid"
	ep.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	key := spaces.Key("wds1", "", "p")
	description := func() string { return f.mailboxCRD("widgets.example.com") }

	// The first revision completes somewhere: its snapshot, as stored.
	r := f.reconciler()
	sources := r.sources(context.Background(), f.syncTargets[spaces.Key(inv, "", stName)])
	sel, synced := r.selectAll(context.Background(), sources)
	require.True(t, synced)
	first := r.revisionOf(sel, sources[0].source)
	stored := storedSnapshot(t, r, sel, sources[0].source, first)
	require.True(t, stored.WithCRDs)
	require.Len(t, stored.CRDs, 1)

	// The definition changes; edge1 joins and gets the first one.
	f.put(crdGVR, "wds1", widgetCRD("widgets", "second"))
	f.completed = map[string]*rolloutSnapshot{key: stored}
	calls, _, err := f.run(t)
	require.NoError(t, err)
	require.Subset(t, calls, []string{"create customresourcedefinitions widgets.example.com", "create widgets default/w"})
	require.Equal(t, "first", description())
	require.Equal(t, []string{"widgets.example.com"}, f.syncerConfigs[f.mailbox()].Spec.CRDs)
	require.Equal(t, first, f.syncerConfigs[f.mailbox()].Spec.Rollouts[0].Revision)

	// It keeps it until admitted.
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Equal(t, []string{"recordProblems 1"}, calls)
	f.admitted = map[string]bool{key: true}
	calls, _, err = f.run(t)
	require.NoError(t, err)
	require.Contains(t, calls, "update customresourcedefinitions widgets.example.com")
	require.Equal(t, "second", description())
}

// TestSnapshotBounds: a snapshot past its bound is refused as too large,
// and one that inflates past the bound cannot be read.
func TestSnapshotBounds(t *testing.T) {
	noise := make([]byte, maxSnapshotBytes)
	_, err := rand.Read(noise)
	require.NoError(t, err)
	cm := configMap("default", "big", map[string]any{"x": hex.EncodeToString(noise)})
	raw, err := cm.MarshalJSON()
	require.NoError(t, err)
	_, err = (&rolloutSnapshot{Revision: "r1", Entries: []snapshotEntry{{Version: "v1", Resource: "configmaps", Object: raw}}}).encode()
	require.ErrorIs(t, err, errSnapshotTooLarge)

	zeros := configMap("default", "zeros", map[string]any{"x": strings.Repeat("a", maxSnapshotJSON)})
	raw, err = zeros.MarshalJSON()
	require.NoError(t, err)
	s := &rolloutSnapshot{Revision: "r1", Entries: []snapshotEntry{{Version: "v1", Resource: "configmaps", Object: raw}}}
	data, err := s.encode()
	require.NoError(t, err, "zeros compress well")
	_, err = decodeSnapshot(data)
	require.ErrorContains(t, err, "inflated")
}

// storedSnapshot is the snapshot of the revision as the rollout stores it
// and reads it back: through its JSON.
func storedSnapshot(t *testing.T, r *mailboxReconciler, sel *selection, p source, revision string) *rolloutSnapshot {
	t.Helper()
	snap, err := r.snapshotOf(sel, p, revision)
	require.NoError(t, err)
	data, err := snap.encode()
	require.NoError(t, err)
	stored, err := decodeSnapshot(data)
	require.NoError(t, err)
	return stored
}
