// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package epstatus

import (
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func cond(typ string, status metav1.ConditionStatus, reason, message string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, Message: message}
}

// summary is what Set derives, without timestamps.
type summary struct {
	status          metav1.ConditionStatus
	reason, message string
}

func summaryOf(t *testing.T, ep *edgev2alpha1.EdgePlacement, typ string) summary {
	t.Helper()
	c := meta.FindStatusCondition(ep.Status.Conditions, typ)
	require.NotNil(t, c, "condition %s", typ)
	require.Equal(t, ep.Generation, c.ObservedGeneration, "observedGeneration of %s", typ)
	require.False(t, c.LastTransitionTime.IsZero(), "lastTransitionTime of %s", typ)
	return summary{c.Status, c.Reason, c.Message}
}

func TestSet(t *testing.T) {
	const gen = 7
	schedOK := cond(Scheduled, metav1.ConditionTrue, "Scheduled", "1 matching locations, 2 destinations")
	schedBad := cond(Scheduled, metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad")
	schedUnknown := cond(Scheduled, metav1.ConditionUnknown, "Unknown", "")
	propUnknown := cond(Propagated, metav1.ConditionUnknown, "Unknown", "")
	propOK := cond(Propagated, metav1.ConditionTrue, "Propagated", "every selected object is in its mailboxes")
	propBad := cond(Propagated, metav1.ConditionFalse, "CustomizationFailed", "deployment ns/web: bad path")
	waiting := summary{metav1.ConditionFalse, "Pending", "waiting for scheduling and propagation"}
	asExpected := summary{metav1.ConditionFalse, "AsExpected", ""}

	for _, tc := range []struct {
		name              string
		before            []metav1.Condition // set first, one call each
		set               metav1.Condition
		wantReady         summary
		wantMisconfigured summary
	}{
		{name: "only scheduled", set: schedOK, wantReady: waiting, wantMisconfigured: asExpected},
		{name: "only propagated", set: propOK, wantReady: waiting, wantMisconfigured: asExpected},
		{name: "scheduled then propagated", before: []metav1.Condition{schedOK}, set: propOK,
			wantReady: summary{metav1.ConditionTrue, "Propagated", ""}, wantMisconfigured: asExpected},
		{name: "propagated then scheduled", before: []metav1.Condition{propOK}, set: schedOK,
			wantReady: summary{metav1.ConditionTrue, "Propagated", ""}, wantMisconfigured: asExpected},
		{name: "scheduling unknown", before: []metav1.Condition{propOK}, set: schedUnknown, wantReady: waiting, wantMisconfigured: asExpected},
		{name: "propagation unknown", before: []metav1.Condition{schedOK}, set: propUnknown, wantReady: waiting, wantMisconfigured: asExpected},
		{name: "scheduled, propagation already unknown", before: []metav1.Condition{propUnknown}, set: schedOK, wantReady: waiting, wantMisconfigured: asExpected},
		{name: "scheduling failed", before: []metav1.Condition{propOK}, set: schedBad,
			wantReady:         summary{metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"},
			wantMisconfigured: summary{metav1.ConditionTrue, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"}},
		{name: "scheduling failed alone", set: schedBad,
			wantReady:         summary{metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"},
			wantMisconfigured: summary{metav1.ConditionTrue, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"}},
		{name: "propagation failed", before: []metav1.Condition{schedOK}, set: propBad,
			wantReady:         summary{metav1.ConditionFalse, "CustomizationFailed", "deployment ns/web: bad path"},
			wantMisconfigured: summary{metav1.ConditionTrue, "CustomizationFailed", "deployment ns/web: bad path"}},
		{name: "both failed: scheduling is reported", before: []metav1.Condition{propBad}, set: schedBad,
			wantReady:         summary{metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"},
			wantMisconfigured: summary{metav1.ConditionTrue, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"}},
		{name: "both failed, propagation set last: scheduling is still reported", before: []metav1.Condition{schedBad}, set: propBad,
			wantReady:         summary{metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"},
			wantMisconfigured: summary{metav1.ConditionTrue, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"}},
		{name: "recovery", before: []metav1.Condition{schedOK, propBad}, set: propOK,
			wantReady: summary{metav1.ConditionTrue, "Propagated", ""}, wantMisconfigured: asExpected},
		{name: "regression", before: []metav1.Condition{schedOK, propOK}, set: schedBad,
			wantReady:         summary{metav1.ConditionFalse, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"},
			wantMisconfigured: summary{metav1.ConditionTrue, "InvalidLocationSelector", "spec.locationSelectors[0]: bad"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: gen}}
			for _, c := range tc.before {
				require.True(t, Set(ep, c))
			}
			set := tc.set
			set.ObservedGeneration = 99 // Set takes the placement's generation
			require.True(t, Set(ep, set), "first call changes something")

			got := summaryOf(t, ep, tc.set.Type)
			require.Equal(t, summary{tc.set.Status, tc.set.Reason, tc.set.Message}, got)
			require.Equal(t, tc.wantReady, summaryOf(t, ep, edgev2alpha1.EdgePlacementReady), "Ready")
			require.Equal(t, tc.wantMisconfigured, summaryOf(t, ep, edgev2alpha1.EdgePlacementMisconfigured), "Misconfigured")

			want := 2 + 1 // Ready, Misconfigured and the condition set
			for _, c := range tc.before {
				if c.Type != tc.set.Type {
					want++
					break
				}
			}
			require.Len(t, ep.Status.Conditions, want)

			before := ep.DeepCopy()
			require.False(t, Set(ep, set), "repeating the same condition changes nothing")
			require.Equal(t, before.Status, ep.Status)
		})
	}
}

func TestSetReportsChanges(t *testing.T) {
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: 1}}
	sched := cond(Scheduled, metav1.ConditionTrue, "Scheduled", "1 matching locations, 1 destinations")
	require.True(t, Set(ep, sched))
	require.False(t, Set(ep, sched))

	t.Run("message change", func(t *testing.T) {
		sched.Message = "2 matching locations, 2 destinations"
		require.True(t, Set(ep, sched))
		require.Equal(t, sched.Message, meta.FindStatusCondition(ep.Status.Conditions, Scheduled).Message)
		require.False(t, Set(ep, sched))
	})
	t.Run("new generation", func(t *testing.T) {
		ep.Generation = 2
		require.True(t, Set(ep, sched))
		for _, typ := range []string{Scheduled, edgev2alpha1.EdgePlacementReady, edgev2alpha1.EdgePlacementMisconfigured} {
			require.Equal(t, int64(2), meta.FindStatusCondition(ep.Status.Conditions, typ).ObservedGeneration, typ)
		}
		require.False(t, Set(ep, sched))
	})
	t.Run("only the summary changes", func(t *testing.T) {
		// Propagated arrives already recorded (as if written by the other
		// controller); setting Scheduled again must still update Ready.
		ep.Status.Conditions = append(ep.Status.Conditions, metav1.Condition{Type: Propagated, Status: metav1.ConditionTrue,
			Reason: "Propagated", ObservedGeneration: 2, LastTransitionTime: metav1.Now()})
		require.True(t, Set(ep, sched))
		require.Equal(t, metav1.ConditionTrue, meta.FindStatusCondition(ep.Status.Conditions, edgev2alpha1.EdgePlacementReady).Status)
		require.False(t, Set(ep, sched))
	})
}

func TestSetReportLeavesTheSummaryAlone(t *testing.T) {
	ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "ep", Generation: 4}}
	require.True(t, Set(ep, cond(Scheduled, metav1.ConditionTrue, "Scheduled", "")))
	require.True(t, Set(ep, cond(Propagated, metav1.ConditionTrue, "Propagated", "")))
	before := ep.DeepCopy()

	for _, typ := range []string{StatusReturned, Upsynced} {
		failed := cond(typ, metav1.ConditionFalse, "Broken", "something at the edge")
		failed.ObservedGeneration = 99 // SetReport takes the placement's generation
		require.True(t, SetReport(ep, failed), typ)
		require.False(t, SetReport(ep, failed), "repeating %s changes nothing", typ)
		got := summaryOf(t, ep, typ)
		require.Equal(t, summary{metav1.ConditionFalse, "Broken", "something at the edge"}, got)
	}
	for _, typ := range []string{edgev2alpha1.EdgePlacementReady, edgev2alpha1.EdgePlacementMisconfigured} {
		require.Equal(t, meta.FindStatusCondition(before.Status.Conditions, typ), meta.FindStatusCondition(ep.Status.Conditions, typ),
			"%s does not count %s or %s", typ, StatusReturned, Upsynced)
	}
	// Set, called later by the scheduler or the translator, keeps them.
	require.False(t, Set(ep, cond(Scheduled, metav1.ConditionTrue, "Scheduled", "")))
	require.NotNil(t, meta.FindStatusCondition(ep.Status.Conditions, StatusReturned))
	require.NotNil(t, meta.FindStatusCondition(ep.Status.Conditions, Upsynced))
}
