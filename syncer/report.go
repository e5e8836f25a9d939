// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var (
	podsGVR        = corev1.SchemeGroupVersion.WithResource("pods")
	replicaSetsGVR = appsv1.SchemeGroupVersion.WithResource("replicasets")
)

const (
	byController = "byController"
	byUID        = "byUID"
)

func indexByController(obj any) ([]string, error) {
	m, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	if uid := controllerUID(m); uid != "" {
		return []string{string(uid)}, nil
	}
	return nil, nil
}

func indexByUID(obj any) ([]string, error) {
	if m, ok := obj.(metav1.Object); ok {
		return []string{string(m.GetUID())}, nil
	}
	return nil, nil
}

// onDescendant reports the workload a pod or ReplicaSet belongs to.
func (s *Syncer) onDescendant(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	uid := controllerUID(m)
	for range 2 { // pod -> ReplicaSet -> Deployment at most
		if uid == "" {
			return
		}
		s.mu.Lock()
		key, ok := s.workloadUID[string(uid)]
		rsets := s.rsets
		s.mu.Unlock()
		if ok {
			s.reportQ.Add(key)
			return
		}
		if rsets == nil {
			return
		}
		owners, _ := rsets.informer.GetIndexer().ByIndex(byUID, string(uid))
		if len(owners) == 0 {
			return
		}
		uid = controllerUID(owners[0].(metav1.Object))
	}
}

// reconcileReport writes to a mailbox copy what the syncer knows of it: the
// edge object's status, the state of its descendants, and why it is not in
// step, if it is not.
func (s *Syncer) reconcileReport(ctx context.Context, key objKey) (bool, error) {
	if key.GVR == crdsGVR || key.GVR == namespacesGVR {
		return false, nil
	}
	// Where a copy's and its edge object's news meet: the rollout
	// reports may change with them too.
	s.rolloutsSoon()
	s.mu.Lock()
	copies := s.copies[key.GVR]
	edgeCache := s.edgeObjs[key.GVR]
	prob, hasProblem := s.problems[key]
	owner := s.owner
	s.mu.Unlock()
	if copies == nil {
		return false, nil
	}
	cp := copies.get(key.Namespace, key.Name)
	if cp == nil {
		return false, nil
	}
	var edge *unstructured.Unstructured
	if edgeCache != nil {
		if e := edgeCache.get(key.Namespace, key.Name); e != nil && ownedBy(e, owner) {
			edge = e
		}
	}
	// Annotations: why it is not in step; the state of its descendants.
	want := map[string]string{}
	tooLong := false // an associated state too long to write: the old one goes
	if hasProblem {
		want[edgev2alpha1.SyncErrorAnnotation] = cut(prob.Reason+": "+prob.Message, edgev2alpha1.MaxSyncErrorLength)
	}
	if edge != nil && isWorkload(key.GVR) {
		state, err := s.associated(edge.GetUID())
		if err != nil {
			return false, err
		}
		if data := associatedJSON(state); data != "" {
			want[edgev2alpha1.AssociatedStateAnnotation] = data
		} else {
			tooLong = true
		}
	}
	if rev := cp.GetAnnotations()[edgev2alpha1.RevisionAnnotation]; rev != "" && !hasProblem {
		s.mu.Lock()
		d := s.desired[key]
		s.mu.Unlock()
		if v := appliedReport(key.GVR, rev, d, edge); v != "" {
			want[edgev2alpha1.AppliedAnnotation] = v
		}
	}
	patch := map[string]any{}
	for _, k := range []string{edgev2alpha1.SyncErrorAnnotation, edgev2alpha1.AssociatedStateAnnotation, edgev2alpha1.AppliedAnnotation} {
		have, had := cp.GetAnnotations()[k]
		w, wanted := want[k]
		switch {
		case wanted && (!had || have != w):
			patch[k] = w
		case !wanted && had && (k == edgev2alpha1.SyncErrorAnnotation || hasProblem || tooLong):
			// The state of descendants stays while the edge cache starts;
			// it goes when the object is not kubestellar's at the edge.
			patch[k] = nil
		}
	}
	rc := s.mailbox.Resource(key.GVR).Namespace(key.Namespace)
	if len(patch) > 0 {
		klog.FromContext(ctx).V(4).Info("reporting on a copy", "object", key.String(), "annotations", patch)
		data, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": patch}})
		updated, err := rc.Patch(ctx, key.Name, types.MergePatchType, data, metav1.PatchOptions{FieldManager: FieldManager})
		if err != nil {
			return false, s.centerErr(err)
		}
		cp = updated
	}
	// Status: the edge object's; or, while it cannot be kept in step, a
	// condition saying why.
	have, hadStatus := cp.Object["status"]
	var wantStatus any
	switch {
	case edge != nil && edge.Object["status"] != nil && !hasProblem:
		wantStatus = edge.Object["status"]
		if tooLarge := statusTooLarge(wantStatus); tooLarge != nil {
			// The center refuses it: keep the last status, saying why.
			wantStatus = withSyncedCondition(have, tooLarge)
		}
	case hasProblem && (hadStatus || isWorkload(key.GVR)):
		wantStatus = withSyncedCondition(have, &prob)
	case hadStatus:
		wantStatus = withSyncedCondition(have, nil)
	default:
		return false, nil
	}
	if hadStatus && apiequality.Semantic.DeepEqual(have, wantStatus) {
		return false, nil
	}
	cp = cp.DeepCopy()
	cp.Object["status"] = wantStatus
	_, err := rc.UpdateStatus(ctx, cp, metav1.UpdateOptions{FieldManager: FieldManager})
	if apierrors.IsNotFound(err) {
		// A kind without a status subresource keeps status in the object.
		_, err = rc.Update(ctx, cp, metav1.UpdateOptions{FieldManager: FieldManager})
	}
	if err != nil {
		return false, s.centerErr(err)
	}
	return false, nil
}

// statusTooLarge returns the problem of an edge status longer than the
// center takes into a copy (edgev2alpha1.MaxCopyStatusLength), or nil.
func statusTooLarge(status any) *problem {
	data, err := json.Marshal(status)
	if err != nil || len(data) <= edgev2alpha1.MaxCopyStatusLength {
		return nil
	}
	return &problem{Reason: edgev2alpha1.SyncReasonStatusTooLarge, Message: fmt.Sprintf(
		"the status at the edge is %d bytes in JSON, more than the %d the center takes; the copy keeps its last status", len(data), edgev2alpha1.MaxCopyStatusLength)}
}

// withSyncedCondition returns status with the EdgeSynced condition set to
// say p, or removed when p is nil.
func withSyncedCondition(status any, p *problem) any {
	st, _ := runtime.DeepCopyJSONValue(status).(map[string]any)
	if st == nil {
		if p == nil {
			return status
		}
		st = map[string]any{}
	}
	var message string
	if p != nil {
		message = cut(p.Message, edgev2alpha1.MaxSyncErrorLength)
	}
	conds, _ := st["conditions"].([]any)
	out := make([]any, 0, len(conds)+1)
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == edgev2alpha1.SyncedConditionType {
			if p != nil && m["reason"] == p.Reason && m["message"] == message {
				return status
			}
			continue
		}
		out = append(out, c)
	}
	if p != nil {
		out = append(out, map[string]any{"type": edgev2alpha1.SyncedConditionType, "status": "False",
			"reason": p.Reason, "message": message, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)})
	}
	if len(out) == 0 {
		delete(st, "conditions")
	} else {
		st["conditions"] = out
	}
	return st
}

// associated computes the state of an edge workload's descendants.
func (s *Syncer) associated(uid types.UID) (edgev2alpha1.AssociatedState, error) {
	s.mu.Lock()
	pods, rsets := s.pods, s.rsets
	s.mu.Unlock()
	if pods == nil || !pods.informer.HasSynced() || !rsets.informer.HasSynced() {
		return edgev2alpha1.AssociatedState{}, errRetry
	}
	var replicaSets []*appsv1.ReplicaSet
	owners := []string{string(uid)}
	items, _ := rsets.informer.GetIndexer().ByIndex(byController, string(uid))
	for _, item := range items {
		rs := &appsv1.ReplicaSet{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.(*unstructured.Unstructured).Object, rs); err != nil {
			continue
		}
		replicaSets = append(replicaSets, rs)
		owners = append(owners, string(rs.UID))
	}
	var podList []*corev1.Pod
	for _, o := range owners {
		items, _ := pods.informer.GetIndexer().ByIndex(byController, o)
		for _, item := range items {
			pod := &corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(item.(*unstructured.Unstructured).Object, pod); err != nil {
				continue
			}
			podList = append(podList, pod)
		}
	}
	return associatedState(uid, replicaSets, podList), nil
}

// centerErr marks errors of an unreachable center, which the heartbeat
// reports once, rather than every write.
func (s *Syncer) centerErr(err error) error {
	if !s.connected.Load() {
		return fmt.Errorf("%w: %v", errOffline, err)
	}
	return err
}

// associatedJSON is the associated-state annotation of a state: within
// MaxAssociatedStateLength, without the not-ready pods if need be (the
// phases still count them), or "" when even that is too long (phases of
// many made-up names).
func associatedJSON(state edgev2alpha1.AssociatedState) string {
	data, _ := json.Marshal(state)
	if len(data) > edgev2alpha1.MaxAssociatedStateLength {
		state.NotReadyPods = nil
		data, _ = json.Marshal(state)
	}
	if len(data) > edgev2alpha1.MaxAssociatedStateLength {
		return ""
	}
	return string(data)
}
