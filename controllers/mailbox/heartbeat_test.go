// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package mailbox

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

func TestHeartbeatStale(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	st := func(connected metav1.ConditionStatus, last *time.Time) *edgev2alpha1.SyncTarget {
		s := &edgev2alpha1.SyncTarget{}
		if connected != "" {
			s.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetHeartbeat, Status: connected}}
		}
		if last != nil {
			tm := metav1.NewTime(*last)
			s.Status.LastSyncerHeartbeatTime = &tm
		}
		return s
	}
	tunnel := func(s *edgev2alpha1.SyncTarget, status metav1.ConditionStatus, since time.Time) *edgev2alpha1.SyncTarget {
		s.Status.Conditions = append(s.Status.Conditions, metav1.Condition{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: status,
			LastTransitionTime: metav1.NewTime(since)})
		return s
	}
	recent, old := now.Add(-10*time.Second), now.Add(-edgev2alpha1.SyncerHeartbeatTimeout-time.Second)
	pastRefresh := now.Add(-edgev2alpha1.SyncerStatusRefresh - edgev2alpha1.SyncerHeartbeatTimeout - time.Second)
	atTimeout, justPast := now.Add(-edgev2alpha1.SyncerHeartbeatTimeout), now.Add(-edgev2alpha1.SyncerHeartbeatTimeout-time.Millisecond)
	for _, tc := range []struct {
		desc      string
		st        *edgev2alpha1.SyncTarget
		wantStale bool
		wantWait  time.Duration
	}{
		{desc: "never connected", st: st("", nil)},
		{desc: "connected, recent heartbeat", st: st(metav1.ConditionTrue, &recent), wantWait: edgev2alpha1.SyncerHeartbeatTimeout - 10*time.Second + time.Second},
		{desc: "connected, old heartbeat", st: st(metav1.ConditionTrue, &old), wantStale: true},
		{desc: "connected, heartbeat exactly the timeout ago", st: st(metav1.ConditionTrue, &atTimeout), wantWait: time.Second},
		{desc: "connected, heartbeat just past the timeout", st: st(metav1.ConditionTrue, &justPast), wantStale: true},
		{desc: "already disconnected", st: st(metav1.ConditionFalse, &old)},
		{desc: "connected without a heartbeat time", st: st(metav1.ConditionTrue, nil)},
		// The tunnel open: the syncer writes only what changed, and at
		// least every SyncerStatusRefresh.
		{desc: "tunnel open, heartbeat past the timeout", st: tunnel(st(metav1.ConditionTrue, &old), metav1.ConditionTrue, now.Add(-time.Hour)),
			wantWait: edgev2alpha1.SyncerStatusRefresh + time.Second - time.Second},
		{desc: "tunnel open, heartbeat past the refresh", st: tunnel(st(metav1.ConditionTrue, &pastRefresh), metav1.ConditionTrue, now.Add(-time.Hour)), wantStale: true},
		// The tunnel closed after the last heartbeat: the timeout runs
		// from the close.
		{desc: "tunnel closed just now, old heartbeat", st: tunnel(st(metav1.ConditionTrue, &old), metav1.ConditionFalse, now),
			wantWait: edgev2alpha1.SyncerHeartbeatTimeout + time.Second},
		{desc: "tunnel closed long ago, old heartbeat", st: tunnel(st(metav1.ConditionTrue, &old), metav1.ConditionFalse, now.Add(-time.Hour)), wantStale: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			stale, wait := heartbeatStale(tc.st, now)
			if stale != tc.wantStale || wait != tc.wantWait {
				t.Errorf("heartbeatStale = %v, %v; want %v, %v", stale, wait, tc.wantStale, tc.wantWait)
			}
		})
	}
}
