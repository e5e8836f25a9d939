// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package syncer

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

// TestSameStatus: a heartbeat that would change only the heartbeat's time
// writes nothing; any other change is written. A status read back from
// the server (no problems: the field absent) is the same as the one the
// syncer builds (an empty list).
func TestSameStatus(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	read := edgev2alpha1.SyncTargetStatus{LastSyncerHeartbeatTime: &t0, SyncedObjects: 3, SyncerVersion: "v1"}
	for _, tc := range []struct {
		desc string
		edit func(*edgev2alpha1.SyncTargetStatus)
		same bool
	}{
		{desc: "only the heartbeat's time", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.LastSyncerHeartbeatTime = &t1 }, same: true},
		{desc: "an empty list of problems for none", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.Problems = []edgev2alpha1.SyncProblem{} }, same: true},
		{desc: "a count", edit: func(s *edgev2alpha1.SyncTargetStatus) { s.SyncedObjects = 4 }},
		{desc: "a problem", edit: func(s *edgev2alpha1.SyncTargetStatus) {
			s.Problems = []edgev2alpha1.SyncProblem{{Resource: "configmaps", Name: "a", Reason: edgev2alpha1.SyncReasonConflict}}
		}},
		{desc: "a condition's message", edit: func(s *edgev2alpha1.SyncTargetStatus) {
			s.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetSynced, Status: metav1.ConditionTrue, Message: "4 objects in step"}}
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			built := read.DeepCopy()
			tc.edit(built)
			if got := sameStatus(&read, built); got != tc.same {
				t.Errorf("sameStatus = %v, want %v", got, tc.same)
			}
		})
	}
}
