// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package placement

import (
	"testing"

	"github.com/stretchr/testify/require"

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
	require.Equal(t, []string{"recordProblems 2", "create configmaps default/cm", "create configmaps default/gone"}, calls)
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
	require.ElementsMatch(t, []string{"recordProblems 2", "update configmaps default/cm", "create configmaps default/new", "delete configmaps default/gone"}, calls)
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
