// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func edgeObj(generation int64, spec, status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x", "generation": generation}, "spec": spec, "status": status}}
	return u
}

func TestObjectHealth(t *testing.T) {
	deploy := schema.GroupResource{Group: "apps", Resource: "deployments"}
	sts := schema.GroupResource{Group: "apps", Resource: "statefulsets"}
	ds := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	job := schema.GroupResource{Group: "batch", Resource: "jobs"}
	cm := schema.GroupResource{Resource: "configmaps"}
	for _, tc := range []struct {
		name    string
		gr      schema.GroupResource
		obj     *unstructured.Unstructured
		healthy bool
		message string
	}{
		{"a Deployment its controller has not seen", deploy, edgeObj(3, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(2), "replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(2)}), false,
			"waiting for its controller to observe generation 3 (it has seen 2)"},
		{"a Deployment half updated", deploy, edgeObj(3, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(3), "replicas": int64(3), "updatedReplicas": int64(1), "availableReplicas": int64(2)}), false,
			"1 of 2 replicas updated"},
		{"a Deployment with old replicas left", deploy, edgeObj(3, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(3), "replicas": int64(3), "updatedReplicas": int64(2), "availableReplicas": int64(2)}), false,
			"1 old replicas pending termination"},
		{"a Deployment updated, not available", deploy, edgeObj(3, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(3), "replicas": int64(2), "updatedReplicas": int64(2), "availableReplicas": int64(1)}), false,
			"1 of 2 updated replicas available"},
		{"a Deployment past its progress deadline", deploy, edgeObj(3, map[string]any{"replicas": int64(2)},
			map[string]any{"observedGeneration": int64(3), "conditions": []any{map[string]any{"type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded", "message": "ReplicaSet x has timed out progressing."}}}),
			false, "its progress deadline passed: ReplicaSet x has timed out progressing."},
		{"a Deployment done (replicas defaulting to 1)", deploy, edgeObj(1, map[string]any{},
			map[string]any{"observedGeneration": int64(1), "replicas": int64(1), "updatedReplicas": int64(1), "availableReplicas": int64(1)}), true, ""},
		{"a StatefulSet not all available", sts, edgeObj(1, map[string]any{"replicas": int64(3)},
			map[string]any{"observedGeneration": int64(1), "updatedReplicas": int64(3), "availableReplicas": int64(2)}), false, "2 of 3 replicas available"},
		{"an OnDelete StatefulSet is not waited on to update", sts, edgeObj(1, map[string]any{"replicas": int64(1), "updateStrategy": map[string]any{"type": "OnDelete"}},
			map[string]any{"observedGeneration": int64(1), "availableReplicas": int64(1)}), true, ""},
		{"a DaemonSet updating", ds, edgeObj(2, nil,
			map[string]any{"observedGeneration": int64(2), "desiredNumberScheduled": int64(4), "updatedNumberScheduled": int64(3), "numberAvailable": int64(4)}), false, "3 of 4 pods updated"},
		{"a Job running", job, edgeObj(1, nil, map[string]any{}), false, "the job has not completed"},
		{"a Job failed", job, edgeObj(1, nil, map[string]any{"conditions": []any{map[string]any{"type": "Failed", "status": "True", "message": "BackoffLimitExceeded"}}}), false, "the job failed: BackoffLimitExceeded"},
		{"a Job complete", job, edgeObj(1, nil, map[string]any{"conditions": []any{map[string]any{"type": "Complete", "status": "True"}}}), true, ""},
		{"a ConfigMap is healthy once there", cm, edgeObj(0, nil, nil), true, ""},
	} {
		healthy, message := objectHealth(tc.gr, tc.obj)
		require.Equal(t, tc.healthy, healthy, tc.name)
		require.Equal(t, tc.message, message, tc.name)
	}
}

// TestAppliedReport: the syncer speaks of a revision only once the edge
// object has the content of the copy that carries it.
func TestAppliedReport(t *testing.T) {
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	d := &desired{Hash: "h2", Revision: "r2"}
	edge := edgeObj(0, nil, nil)
	edge.SetAnnotations(map[string]string{AppliedHashAnnotation: "h1"})
	require.Empty(t, appliedReport(gvr, "r2", d, edge), "the edge has the old content")
	require.Empty(t, appliedReport(gvr, "r2", nil, edge))
	require.Empty(t, appliedReport(gvr, "r2", d, nil))
	edge.SetAnnotations(map[string]string{AppliedHashAnnotation: "h2"})
	require.Empty(t, appliedReport(gvr, "r3", d, edge), "the copy moved on since")
	var a edgev2alpha1.Applied
	require.NoError(t, json.Unmarshal([]byte(appliedReport(gvr, "r2", d, edge)), &a))
	require.Equal(t, edgev2alpha1.Applied{Revision: "r2", Healthy: true}, a)
	edge.SetGeneration(7)
	require.NoError(t, json.Unmarshal([]byte(appliedReport(gvr, "r2", d, edge)), &a))
	require.Equal(t, int64(7), a.Generation, "the edge object's generation, for a health check to compare")
}

// A new revision that leaves a copy's content as it was is nothing to do
// at the edge, and the syncer reports that revision applied: a rollout
// whose new revision changed one object of ten waits for the reports of
// all ten.
func TestNewRevisionOfTheSameContent(t *testing.T) {
	f := newRemovalFixture(t)
	f.s.copies = map[schema.GroupVersionResource]*running{configMapsGVR: {}}
	copyOf := func(revision string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "c", "namespace": "data", "annotations": map[string]any{edgev2alpha1.RevisionAnnotation: revision}},
			"data":     map[string]any{"k": "v"}}}
	}
	desiredNow := func() *desired {
		f.s.mu.Lock()
		defer f.s.mu.Unlock()
		return f.s.desired[keyOf(configMapsGVR, copyOf(""))]
	}
	f.s.onCopy(configMapsGVR, copyOf("r1"))
	first := desiredNow()
	require.Equal(t, "r1", first.Revision)
	edge := first.Object.DeepCopy() // applied at the edge
	require.Contains(t, appliedReport(configMapsGVR, "r1", first, edge), `"revision":"r1"`)

	f.s.mu.Lock()
	f.s.dirty = false
	f.s.mu.Unlock()
	f.s.onCopy(configMapsGVR, copyOf("r2"))
	second := desiredNow()
	require.Equal(t, "r2", second.Revision, "the copy's new revision is the one to report")
	require.Equal(t, first.Hash, second.Hash)
	f.s.mu.Lock()
	require.False(t, f.s.dirty, "the same content: nothing new to apply or save")
	f.s.mu.Unlock()
	require.Contains(t, appliedReport(configMapsGVR, "r2", second, edge), `"revision":"r2"`,
		"the edge object has the content of r2 already")
}
