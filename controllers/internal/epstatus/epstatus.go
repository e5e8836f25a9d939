// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

// Package epstatus keeps the summary conditions of an EdgePlacement. The
// scheduler owns the Scheduled condition and the placement translator the
// Propagated one; whichever writes the status also recomputes Ready and
// Misconfigured from both, so they agree once both have written. The
// status and upsync controllers report the way back from the edge in
// conditions of their own (StatusReturned, Upsynced), set with SetReport,
// which do not count toward Ready or Misconfigured.
package epstatus

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// Condition types owned by the controllers.
const (
	Scheduled  = "Scheduled"
	Propagated = "Propagated"
)

// Set records one controller's condition and recomputes Ready and
// Misconfigured; it reports whether anything changed.
func Set(ep *edgev2alpha1.EdgePlacement, cond metav1.Condition) bool {
	cond.ObservedGeneration = ep.Generation
	changed := meta.SetStatusCondition(&ep.Status.Conditions, cond)
	scheduled := meta.FindStatusCondition(ep.Status.Conditions, Scheduled)
	propagated := meta.FindStatusCondition(ep.Status.Conditions, Propagated)

	misconfigured := metav1.Condition{Type: edgev2alpha1.EdgePlacementMisconfigured, Status: metav1.ConditionFalse, Reason: "AsExpected", ObservedGeneration: ep.Generation}
	for _, c := range []*metav1.Condition{scheduled, propagated} {
		if c != nil && c.Status == metav1.ConditionFalse {
			misconfigured.Status, misconfigured.Reason, misconfigured.Message = metav1.ConditionTrue, c.Reason, c.Message
			break
		}
	}
	ready := metav1.Condition{Type: edgev2alpha1.EdgePlacementReady, Status: metav1.ConditionFalse, Reason: "Pending", ObservedGeneration: ep.Generation}
	switch {
	case misconfigured.Status == metav1.ConditionTrue:
		ready.Reason, ready.Message = misconfigured.Reason, misconfigured.Message
	case scheduled != nil && propagated != nil && scheduled.Status == metav1.ConditionTrue && propagated.Status == metav1.ConditionTrue:
		ready.Status, ready.Reason = metav1.ConditionTrue, "Propagated"
	default:
		ready.Message = "waiting for scheduling and propagation"
	}
	changed = meta.SetStatusCondition(&ep.Status.Conditions, misconfigured) || changed
	changed = meta.SetStatusCondition(&ep.Status.Conditions, ready) || changed
	return changed
}

// Condition types that report how the reported state and upsynced objects
// of a placement come back. They describe the way back from the edge, not
// the placement itself: they do not count toward Ready or Misconfigured.
const (
	// StatusReturned is the status controller's: whether what the syncers
	// report about the placed objects could be read and written back.
	StatusReturned = "StatusReturned"
	// Upsynced is the upsync controller's: whether every edge object its
	// upsync clauses select is copied into the WDS.
	Upsynced = "Upsynced"
)

// SetReport records a condition that does not count toward Ready and
// Misconfigured (StatusReturned, Upsynced); it reports whether anything
// changed.
func SetReport(ep *edgev2alpha1.EdgePlacement, cond metav1.Condition) bool {
	cond.ObservedGeneration = ep.Generation
	return meta.SetStatusCondition(&ep.Status.Conditions, cond)
}
