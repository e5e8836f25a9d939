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
