// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// A copy of a Progressive placement carries its rollout revision; the
// syncer says, in the copy's edgev2alpha1.AppliedAnnotation, when the edge
// object has that copy's content and whether it is healthy by its kind.
// The center's rollout reads it: it is the only judge of health that sees
// the edge object itself (its generation, its spec, its controllers'
// progress). Health is judged as `kubectl rollout status` does.

// appliedReport returns the AppliedAnnotation value for a copy of revision
// rev, or "" when the edge object does not have that copy's content yet
// (the old value, which names an older revision, stays).
func appliedReport(gvr schema.GroupVersionResource, rev string, d *desired, edge *unstructured.Unstructured) string {
	if d == nil || d.Revision != rev || edge == nil || edge.GetAnnotations()[AppliedHashAnnotation] != d.Hash {
		return ""
	}
	healthy, message := objectHealth(gvr.GroupResource(), edge)
	// Within what the center takes (MaxAppliedLength), with room for the
	// revision and JSON's escapes.
	data, _ := json.Marshal(edgev2alpha1.Applied{Revision: rev, Healthy: healthy, Message: cut(message, edgev2alpha1.MaxAppliedLength/4), Generation: edge.GetGeneration()})
	return string(data)
}

var (
	deploymentsGR  = appsv1.SchemeGroupVersion.WithResource("deployments").GroupResource()
	statefulSetsGR = appsv1.SchemeGroupVersion.WithResource("statefulsets").GroupResource()
	daemonSetsGR   = appsv1.SchemeGroupVersion.WithResource("daemonsets").GroupResource()
	jobsGR         = batchv1.SchemeGroupVersion.WithResource("jobs").GroupResource()
)

// objectHealth judges an edge object: a Deployment, StatefulSet or DaemonSet is
// healthy when its controller has observed its generation and every
// replica is updated and available; a Job when it is complete; anything
// else when it is there.
func objectHealth(gr schema.GroupResource, obj *unstructured.Unstructured) (bool, string) {
	num := func(fields ...string) int64 {
		v, _, _ := unstructured.NestedInt64(obj.Object, fields...)
		return v
	}
	if gr == deploymentsGR || gr == statefulSetsGR || gr == daemonSetsGR {
		if og := num("status", "observedGeneration"); og < obj.GetGeneration() {
			return false, fmt.Sprintf("waiting for its controller to observe generation %d (it has seen %d)", obj.GetGeneration(), og)
		}
	}
	switch gr {
	case deploymentsGR:
		if c := condition(obj, "Progressing"); c != nil && c["reason"] == "ProgressDeadlineExceeded" {
			return false, fmt.Sprintf("its progress deadline passed: %v", c["message"])
		}
		want := int64(1)
		if v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
			want = v
		}
		updated, total, available := num("status", "updatedReplicas"), num("status", "replicas"), num("status", "availableReplicas")
		switch {
		case updated < want:
			return false, fmt.Sprintf("%d of %d replicas updated", updated, want)
		case total > updated:
			return false, fmt.Sprintf("%d old replicas pending termination", total-updated)
		case available < updated:
			return false, fmt.Sprintf("%d of %d updated replicas available", available, updated)
		}
	case statefulSetsGR:
		want := int64(1)
		if v, found, _ := unstructured.NestedInt64(obj.Object, "spec", "replicas"); found {
			want = v
		}
		strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "updateStrategy", "type")
		updated, available := num("status", "updatedReplicas"), num("status", "availableReplicas")
		switch {
		case strategy != "OnDelete" && updated < want:
			return false, fmt.Sprintf("%d of %d replicas updated", updated, want)
		case available < want:
			return false, fmt.Sprintf("%d of %d replicas available", available, want)
		}
	case daemonSetsGR:
		want := num("status", "desiredNumberScheduled")
		updated, available := num("status", "updatedNumberScheduled"), num("status", "numberAvailable")
		switch {
		case updated < want:
			return false, fmt.Sprintf("%d of %d pods updated", updated, want)
		case available < want:
			return false, fmt.Sprintf("%d of %d pods available", available, want)
		}
	case jobsGR:
		if c := condition(obj, "Failed"); c != nil && c["status"] == "True" {
			return false, fmt.Sprintf("the job failed: %v", c["message"])
		}
		if c := condition(obj, "Complete"); c == nil || c["status"] != "True" {
			return false, "the job has not completed"
		}
	}
	return true, ""
}

// condition returns a status condition of an object by type, or nil.
func condition(obj *unstructured.Unstructured, typ string) map[string]any {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == typ {
			return m
		}
	}
	return nil
}
