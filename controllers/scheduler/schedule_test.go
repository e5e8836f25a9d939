// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
)

var syncTargetsResource = edgev2alpha1.GroupVersionResource{Group: edgev2alpha1.GroupName, Version: "v2alpha1", Resource: "synctargets"}

func labelsSel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func mkLoc(space, name string, labels map[string]string, instances *metav1.LabelSelector) Location {
	return Location{Space: space, Location: &edgev2alpha1.Location{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       edgev2alpha1.LocationSpec{Resource: syncTargetsResource, InstanceSelector: instances},
	}}
}

func mkST(space, name string, labels map[string]string) SyncTarget {
	return SyncTarget{Space: space, SyncTarget: &edgev2alpha1.SyncTarget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, UID: types.UID("uid-" + space + "-" + name)},
	}}
}

func dest(space, loc, st string) edgev2alpha1.SinglePlacement {
	return edgev2alpha1.SinglePlacement{Space: space, LocationName: loc, SyncTargetName: st, SyncTargetUID: types.UID("uid-" + space + "-" + st)}
}

func TestSchedule(t *testing.T) {
	prod := map[string]string{"env": "prod"}
	dev := map[string]string{"env": "dev"}
	edge := map[string]string{"kind": "edge"}
	all := &metav1.LabelSelector{}

	unschedulable := mkST("inv", "unsched", edge)
	unschedulable.Spec.Unschedulable = true
	deleting := mkST("inv", "deleting", edge)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}

	notSyncTargets := mkLoc("inv", "nodes", prod, all)
	notSyncTargets.Spec.Resource = edgev2alpha1.GroupVersionResource{Version: "v1", Resource: "nodes"}
	otherGroup := mkLoc("inv", "othergroup", prod, all)
	otherGroup.Spec.Resource = edgev2alpha1.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "synctargets"}
	invalidInstances := mkLoc("inv", "invalid", prod, &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kind", Operator: "Bogus"}}})

	for _, tc := range []struct {
		name         string
		selectors    []metav1.LabelSelector
		locations    []Location
		syncTargets  map[string][]SyncTarget
		want         []edgev2alpha1.SinglePlacement
		wantMatching int
		wantErr      string
	}{
		{
			name:        "no selectors select nothing",
			locations:   []Location{mkLoc("inv", "l", prod, all)},
			syncTargets: map[string][]SyncTarget{"inv": {mkST("inv", "a", nil)}},
		},
		{
			name:         "one Location, its SyncTargets sorted",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{mkLoc("inv", "l", prod, labelsSel("kind", "edge"))},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "c", edge), mkST("inv", "other", nil), mkST("inv", "a", edge)}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "l", "a"), dest("inv", "l", "c")},
			wantMatching: 1,
		},
		{
			name:      "any selector matches",
			selectors: []metav1.LabelSelector{*labelsSel("env", "prod"), *labelsSel("env", "dev")},
			locations: []Location{mkLoc("inv", "p", prod, labelsSel("name", "a")), mkLoc("inv", "d", dev, labelsSel("name", "b")),
				mkLoc("inv", "t", map[string]string{"env": "test"}, all)},
			syncTargets: map[string][]SyncTarget{"inv": {mkST("inv", "a", map[string]string{"name": "a"}),
				mkST("inv", "b", map[string]string{"name": "b"}), mkST("inv", "c", nil)}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "p", "a"), dest("inv", "d", "b")},
			wantMatching: 2,
		},
		{
			name:         "an empty placement selector matches every Location",
			selectors:    []metav1.LabelSelector{{}},
			locations:    []Location{mkLoc("inv", "p", prod, labelsSel("name", "a")), mkLoc("inv", "n", nil, labelsSel("name", "b"))},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "a", map[string]string{"name": "a"}), mkST("inv", "b", map[string]string{"name": "b"})}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "p", "a"), dest("inv", "n", "b")},
			wantMatching: 2,
		},
		{
			name:         "Locations that do not select SyncTargets count but select nothing",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{notSyncTargets, otherGroup},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "a", edge)}},
			wantMatching: 2,
		},
		{
			name:         "nil instance selector selects nothing",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{mkLoc("inv", "l", prod, nil)},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "a", edge)}},
			wantMatching: 1,
		},
		{
			name:         "invalid instance selector selects nothing, other Locations still work",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{invalidInstances, mkLoc("inv", "ok", prod, labelsSel("name", "b"))},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "a", edge), mkST("inv", "b", map[string]string{"name": "b", "kind": "edge"})}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "ok", "b")},
			wantMatching: 2,
		},
		{
			name:         "instance selector matching no SyncTarget",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{mkLoc("inv", "l", prod, labelsSel("kind", "cloud"))},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "a", edge)}},
			wantMatching: 1,
		},
		{
			name:         "unschedulable and deleting SyncTargets excluded",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{mkLoc("inv", "l", prod, labelsSel("kind", "edge"))},
			syncTargets:  map[string][]SyncTarget{"inv": {unschedulable, deleting, mkST("inv", "ok", edge)}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "l", "ok")},
			wantMatching: 1,
		},
		{
			name:         "a SyncTarget reached by two Locations is one destination, through the first by name",
			selectors:    []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations:    []Location{mkLoc("inv", "zz", prod, all), mkLoc("inv", "aa", prod, labelsSel("kind", "edge")), mkLoc("inv", "mm", prod, all)},
			syncTargets:  map[string][]SyncTarget{"inv": {mkST("inv", "st", edge), mkST("inv", "plain", nil)}},
			want:         []edgev2alpha1.SinglePlacement{dest("inv", "mm", "plain"), dest("inv", "aa", "st")},
			wantMatching: 3,
		},
		{
			name:      "same SyncTarget name in two spaces is two destinations, sorted by space",
			selectors: []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations: []Location{mkLoc("inv2", "l", prod, all), mkLoc("inv1", "l", prod, all)},
			syncTargets: map[string][]SyncTarget{
				"inv1": {mkST("inv1", "st", nil), mkST("inv1", "b", nil)},
				"inv2": {mkST("inv2", "st", nil), mkST("inv2", "a", nil)},
			},
			want:         []edgev2alpha1.SinglePlacement{dest("inv1", "l", "b"), dest("inv1", "l", "st"), dest("inv2", "l", "a"), dest("inv2", "l", "st")},
			wantMatching: 2,
		},
		{
			name:      "SyncTargets of another space are not selected",
			selectors: []metav1.LabelSelector{*labelsSel("env", "prod")},
			locations: []Location{mkLoc("inv1", "l", prod, all), mkLoc("inv2", "l", dev, all)},
			syncTargets: map[string][]SyncTarget{
				"inv1": {mkST("inv1", "mine", edge)},
				"inv2": {mkST("inv2", "theirs", edge)},
			},
			want:         []edgev2alpha1.SinglePlacement{dest("inv1", "l", "mine")},
			wantMatching: 1,
		},
		{
			name:        "invalid placement selector",
			selectors:   []metav1.LabelSelector{*labelsSel("env", "prod"), {MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}},
			locations:   []Location{mkLoc("inv", "l", prod, all)},
			syncTargets: map[string][]SyncTarget{"inv": {mkST("inv", "a", nil)}},
			wantErr:     "spec.locationSelectors[1]: ",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ep := &edgev2alpha1.EdgePlacement{ObjectMeta: metav1.ObjectMeta{Name: "ep"}, Spec: edgev2alpha1.EdgePlacementSpec{LocationSelectors: tc.selectors}}
			var asked []string
			syncTargets := func(space string, _ *metav1.LabelSelector) []SyncTarget {
				asked = append(asked, space)
				return tc.syncTargets[space]
			}
			got, matching, err := schedule(ep, tc.locations, syncTargets)
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				require.Nil(t, got)
				require.Zero(t, matching)
				require.Empty(t, asked)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.wantMatching, matching)
			for _, d := range got {
				require.Contains(t, asked, d.Space)
			}
		})
	}
}
