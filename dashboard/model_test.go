// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package dashboard

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var now = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func syncTarget(name string, connected metav1.ConditionStatus, heartbeatAgo time.Duration, problems int) *edgev2alpha1.SyncTarget {
	st := &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if connected != "" {
		st.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.SyncTargetSyncerConnected, Status: connected, Reason: "Tunnel" + string(connected)}}
	}
	if heartbeatAgo > 0 {
		hb := metav1.NewTime(now.Add(-heartbeatAgo))
		st.Status.LastSyncerHeartbeatTime = &hb
	}
	for i := range problems {
		st.Status.Problems = append(st.Status.Problems, edgev2alpha1.SyncProblem{Group: "apps", Resource: "deployments", Namespace: "ns", Name: fmt.Sprint("d", i), Reason: "Rejected"})
	}
	return st
}

func TestEdgeStates(t *testing.T) {
	tests := []struct {
		desc      string
		st        *edgev2alpha1.SyncTarget
		wantState string
	}{
		{desc: "never connected", st: syncTarget("a", "", 0, 0), wantState: StateNew},
		{desc: "connected, fresh heartbeat", st: syncTarget("a", metav1.ConditionTrue, time.Second, 0), wantState: StateConnected},
		{desc: "connected, no heartbeat yet", st: syncTarget("a", metav1.ConditionTrue, 0, 0), wantState: StateConnected},
		// While the tunnel is open the syncer writes its status when it
		// changes and at least every SyncerStatusRefresh.
		{desc: "connected, silent past the timeout but within the refresh", st: syncTarget("a", metav1.ConditionTrue, edgev2alpha1.SyncerHeartbeatTimeout+time.Second, 0), wantState: StateConnected},
		{desc: "connected at the refresh and timeout", st: syncTarget("a", metav1.ConditionTrue, edgev2alpha1.SyncerStatusRefresh+edgev2alpha1.SyncerHeartbeatTimeout, 0), wantState: StateConnected},
		{desc: "connected, silent past the refresh and timeout", st: syncTarget("a", metav1.ConditionTrue, edgev2alpha1.SyncerStatusRefresh+edgev2alpha1.SyncerHeartbeatTimeout+time.Second, 0), wantState: StateSilent},
		{desc: "tunnel closed", st: syncTarget("a", metav1.ConditionFalse, time.Second, 0), wantState: StateDisconnected},
		{desc: "unknown", st: syncTarget("a", metav1.ConditionUnknown, time.Second, 0), wantState: StateDisconnected},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			require.Equal(t, tc.wantState, edgeOf("inv", tc.st).at(now).State)
		})
	}
}

func TestEdgeProblemsBounded(t *testing.T) {
	e := edgeOf("inv", syncTarget("a", metav1.ConditionTrue, time.Second, 7)).at(now)
	require.Equal(t, 7, e.ProblemCount)
	require.Len(t, e.Problems, maxProblemsShown)
	require.Equal(t, Problem{Object: "deployments.apps/ns/d0", Reason: "Rejected"}, e.Problems[0])
}

// fleetOf makes n edges in space inv; every tenth disconnected, every
// seventh with a problem.
func fleetOf(n int) []edgeRecord {
	records := make([]edgeRecord, 0, n)
	for i := range n {
		status, problems := metav1.ConditionTrue, 0
		if i%10 == 0 {
			status = metav1.ConditionFalse
		}
		if i%7 == 0 {
			problems = 1
		}
		records = append(records, edgeOf(fmt.Sprint("inv", i%3), syncTarget(fmt.Sprintf("edge%04d", i), status, time.Second, problems)))
	}
	return records
}

func TestFleet(t *testing.T) {
	records := fleetOf(1000)
	view := Fleet(records, now, Query{})
	require.Equal(t, FleetCounts{Total: 1000, Connected: 900, Disconnected: 100, WithProblems: 143, Problems: 143, Spaces: 3}, view.Counts)
	require.Equal(t, Paging{Page: 0, Pages: 20, PageSize: DefaultPageSize, Matched: 1000}, view.Paging)
	require.Len(t, view.Edges, DefaultPageSize, "one page only goes to the browser")
	require.Equal(t, StateDisconnected, view.Edges[0].State, "the disconnected first")
	require.Equal(t, int((edgev2alpha1.SyncerStatusRefresh+edgev2alpha1.SyncerHeartbeatTimeout)/time.Second), view.HeartbeatTimeoutSeconds)

	// The last page; a page past the end is the last.
	last := Fleet(records, now, Query{Page: 99, PageSize: 300})
	require.Equal(t, Paging{Page: 4, Pages: 5, PageSize: MaxPageSize, Matched: 1000}, last.Paging)
	require.Len(t, last.Edges, 200)

	trouble := Fleet(records, now, Query{Only: "trouble", PageSize: MaxPageSize})
	require.Equal(t, 100+143-15, trouble.Paging.Matched, "disconnected or with problems (15 are both)")
	// Disconnected first, then connected with problems.
	require.Equal(t, StateDisconnected, trouble.Edges[0].State)
	require.Equal(t, StateConnected, trouble.Edges[100].State)
	require.Equal(t, 1, trouble.Edges[100].ProblemCount)

	one := Fleet(records, now, Query{Text: "INV1/EDGE0001"})
	require.Equal(t, 1, one.Paging.Matched)
	require.Equal(t, "edge0001", one.Edges[0].Name)
	require.Equal(t, 1000, one.Counts.Total, "counts ignore the filters")

	disconnected := Fleet(records, now, Query{Only: StateDisconnected})
	require.Equal(t, 100, disconnected.Paging.Matched)
}

func TestPlacements(t *testing.T) {
	ready := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "good"}}
	ready.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.EdgePlacementReady, Status: metav1.ConditionTrue, Reason: "Propagated"},
		{Type: edgev2alpha1.EdgePlacementMisconfigured, Status: metav1.ConditionFalse, Reason: "AsExpected"}}
	broken := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "broken"}}
	broken.Status.Conditions = []metav1.Condition{{Type: edgev2alpha1.EdgePlacementReady, Status: metav1.ConditionFalse, Reason: "InvalidLocationSelector"},
		{Type: edgev2alpha1.EdgePlacementMisconfigured, Status: metav1.ConditionTrue, Reason: "InvalidLocationSelector", Message: "bad operator"}}
	placements := []Placement{placementOf("wds1", ready), placementOf("wds1", broken)}
	edges := map[string]edgeRecord{"inv/e1": edgeOf("inv", syncTarget("e1", metav1.ConditionTrue, time.Second, 0))}
	slices := map[string][]Destination{"wds1/good": {{Space: "inv", SyncTarget: "e1"}, {Space: "inv", SyncTarget: "gone"}}}

	view := Placements(placements, slices, edges, nil, now, Query{})
	require.Equal(t, 2, view.Total)
	require.Equal(t, 1, view.Trouble)
	require.Equal(t, "broken", view.Placements[0].Name, "troubled first")
	require.Equal(t, &Condition{Status: "True", Reason: "InvalidLocationSelector", Message: "bad operator"}, view.Placements[0].Misconfigured)
	require.Empty(t, view.Placements[0].Destinations)
	noCopies := CopyCounts{Summary: "no copies"}
	require.Equal(t, []Destination{{Space: "inv", SyncTarget: "e1", State: StateConnected, Copies: noCopies}, {Space: "inv", SyncTarget: "gone", State: "unknown", Copies: noCopies}},
		view.Placements[1].Destinations)

	require.Len(t, Placements(placements, slices, edges, nil, now, Query{Only: "trouble"}).Placements, 1)
	require.Nil(t, view.Placements[1].Rollout, "all at once: no rollout")

	// A rollout paused (by hand, or past maxFailures) needs a look.
	rolling := ready.DeepCopy()
	rolling.Name = "rolling"
	rolling.Spec.Rollout = &edgev2alpha1.Rollout{Strategy: edgev2alpha1.RolloutProgressive}
	rolling.Status.Rollout = &edgev2alpha1.RolloutStatus{Revision: "r2", Phase: edgev2alpha1.RolloutPhasePaused, CurrentWave: "canary",
		Message: "1 destinations failed, more than maxFailures (0): inv/e1"}
	p := placementOf("wds1", rolling)
	require.True(t, p.Trouble)
	require.Equal(t, &Rollout{Phase: "Paused", Revision: "r2", CurrentWave: "canary", Message: "1 destinations failed, more than maxFailures (0): inv/e1"}, p.Rollout)
	rolling.Status.Rollout.Phase, rolling.Status.Rollout.Message = edgev2alpha1.RolloutPhaseProgressing, ""
	require.False(t, placementOf("wds1", rolling).Trouble, "progressing is not trouble")
}

func TestSpaces(t *testing.T) {
	rows := []SpaceRow{{Name: "wds1", Type: "wds"}, {Name: "inv1", Type: "inventory"}, {Name: "mb-1", Type: "mailbox"}, {Name: "plain"}}
	names := func(v SpacesView) []string {
		var out []string
		for _, s := range v.Spaces {
			out = append(out, s.Name)
		}
		return out
	}
	require.Equal(t, []string{"inv1", "plain", "wds1"}, names(Spaces(rows, Query{})), "mailboxes only when asked")
	require.Equal(t, []string{"inv1", "mb-1", "plain", "wds1"}, names(Spaces(rows, Query{Only: "all"})))
	require.Equal(t, []string{"mb-1"}, names(Spaces(rows, Query{Only: "mailbox"})))
	require.Equal(t, []string{"wds1"}, names(Spaces(rows, Query{Text: "WDS"})))
}

// TestStoreVisibility: a viewer sees the edges and placements of the
// spaces where it may list them, and the spaces that hold them.
func TestStoreVisibility(t *testing.T) {
	s := NewStore()
	s.synced = true
	s.edges["inv1/a"] = edgeOf("inv1", syncTarget("a", metav1.ConditionTrue, time.Second, 0))
	s.edges["inv2/b"] = edgeOf("inv2", syncTarget("b", metav1.ConditionFalse, time.Second, 0))
	s.placements["wds1/p"] = Placement{Space: "wds1", Name: "p"}
	s.slices["wds1/p"] = []Destination{{Space: "inv1", SyncTarget: "a"}}
	for _, n := range []string{"inv1", "inv2", "wds1"} {
		s.spaces[n] = SpaceRow{Name: n}
	}
	all := func(string, schema.GroupVersionResource) bool { return true }
	onlyInv2 := func(space string, gvr schema.GroupVersionResource) bool {
		return space == "inv2" && gvr == SyncTargetsGVR
	}

	admin := s.Compute("fleet", all, now, Query{})
	require.Equal(t, 2, admin.Fleet.Counts.Total)
	u := s.Compute("fleet", onlyInv2, now, Query{})
	require.Equal(t, 1, u.Fleet.Counts.Total)
	require.Equal(t, "b", u.Fleet.Edges[0].Name)
	require.Empty(t, s.Compute("placements", onlyInv2, now, Query{}).Places.Placements)
	sp := s.Compute("spaces", onlyInv2, now, Query{})
	require.Equal(t, []SpaceRow{{Name: "inv2", SyncTargets: 1}}, sp.Spaces.Spaces)
	require.Len(t, s.Compute("spaces", all, now, Query{}).Spaces.Spaces, 3)
	// A member of wds1 sees its row, though nothing in it.
	member := func(space string, gvr schema.GroupVersionResource) bool { return space == "wds1" && gvr == SpacesGVR }
	require.Equal(t, []SpaceRow{{Name: "wds1"}}, s.Compute("spaces", member, now, Query{}).Spaces.Spaces)

	s.synced = false
	require.True(t, s.Compute("fleet", all, now, Query{}).Loading)
}

func TestStoreNoticesSilence(t *testing.T) {
	s := NewStore()
	s.edges["inv1/a"] = edgeOf("inv1", syncTarget("a", metav1.ConditionTrue, time.Second, 0))
	changed := s.Changed()
	s.checkSilence(now)
	select {
	case <-changed:
		t.Fatal("nothing changed yet")
	default:
	}
	s.checkSilence(now.Add(edgev2alpha1.SyncerHeartbeatTimeout))
	select {
	case <-changed:
		t.Fatal("an edge whose tunnel is open shown silent within the status refresh")
	default:
	}
	s.checkSilence(now.Add(edgev2alpha1.SyncerStatusRefresh + edgev2alpha1.SyncerHeartbeatTimeout))
	select {
	case <-changed:
	default:
		t.Fatal("an edge fell silent unnoticed")
	}
}

// TestEdgeSyncerWhere: the fleet view says which syncer serves each edge,
// where it runs and from which image, so that mixed versions show.
func TestEdgeSyncerWhere(t *testing.T) {
	st := syncTarget("a", metav1.ConditionTrue, time.Second, 0)
	st.Status.SyncerVersion, st.Status.SyncerMode, st.Status.SyncerImage = "v0.30.0", edgev2alpha1.SyncerModeInCluster, "registry.example/kubestellar:v0.30.0@sha256:abcd"
	e := edgeOf("inv", st).at(now)
	require.Equal(t, "v0.30.0", e.SyncerVersion)
	require.Equal(t, "in-cluster", e.SyncerMode)
	require.Equal(t, "registry.example/kubestellar:v0.30.0@sha256:abcd", e.SyncerImage)
}
