// Copyright The KubeStellar Authors.
// SPDX-License-Identifier: Apache-2.0

package scheduler

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	edgev2alpha1 "github.com/kubestellar/kubestellar/apis/edge/v2alpha1"
	tenancyv1alpha1 "github.com/kubestellar/kubestellar/apis/tenancy/v1alpha1"
	"github.com/kubestellar/kubestellar/controllers/internal/epstatus"
	"github.com/kubestellar/kubestellar/spaces"
)

// fakeScheduler is the world a reconciler sees: caches as maps, and writes
// that change them, as the server and the informers would. It records
// every write, in order, with the space its context carries.
type fakeScheduler struct {
	placements  map[string]*edgev2alpha1.EdgePlacement        // space|name
	slices      map[string]*edgev2alpha1.SinglePlacementSlice // space|name
	spaces      map[string]*tenancyv1alpha1.Space             // name
	locations   map[string][]*edgev2alpha1.Location           // space
	syncTargets map[string][]*edgev2alpha1.SyncTarget         // space
	// fail fails a write: "createSlice", "updateSlice", "deleteSlice" or
	// "updateStatus".
	fail map[string]error

	calls []string
	rv    int
}

const (
	wds = "wds1"
	inv = "inv1"
)

// newFakeScheduler holds a WDS that may select inventory inv1, whose
// Location loc1 (region=east) selects the SyncTargets labelled env=edge:
// edge1 and edge2 (and not other).
func newFakeScheduler() *fakeScheduler {
	f := &fakeScheduler{
		placements: map[string]*edgev2alpha1.EdgePlacement{}, slices: map[string]*edgev2alpha1.SinglePlacementSlice{},
		spaces: map[string]*tenancyv1alpha1.Space{}, locations: map[string][]*edgev2alpha1.Location{},
		syncTargets: map[string][]*edgev2alpha1.SyncTarget{}, fail: map[string]error{},
	}
	f.addSpace(wds, tenancyv1alpha1.SpaceTypeWDS, inv)
	f.addSpace(inv, tenancyv1alpha1.SpaceTypeInventory)
	f.locations[inv] = []*edgev2alpha1.Location{location("loc1", map[string]string{"region": "east"}, "env", "edge")}
	f.syncTargets[inv] = []*edgev2alpha1.SyncTarget{
		syncTarget("edge2", map[string]string{"env": "edge"}), syncTarget("edge1", map[string]string{"env": "edge"}),
		syncTarget("other", map[string]string{"env": "lab"}),
	}
	return f
}

func (f *fakeScheduler) addSpace(name, typ string, inventories ...string) {
	f.spaces[name] = &tenancyv1alpha1.Space{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1alpha1.SpaceSpec{Type: typ, InventorySpaces: inventories}}
}

func location(name string, labels map[string]string, instanceKey, instanceValue string) *edgev2alpha1.Location {
	return &edgev2alpha1.Location{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: edgev2alpha1.LocationSpec{
		Resource:         syncTargetsResource,
		InstanceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{instanceKey: instanceValue}},
	}}
}

func syncTarget(name string, labels map[string]string) *edgev2alpha1.SyncTarget {
	return &edgev2alpha1.SyncTarget{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, UID: types.UID("uid-" + name)}}
}

// place adds a placement to the WDS that selects the Locations labelled
// region=east.
func (f *fakeScheduler) place(name string) *edgev2alpha1.EdgePlacement {
	ep := &edgev2alpha1.EdgePlacement{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("ep-" + name), Generation: 2, ResourceVersion: "1"},
		Spec:       edgev2alpha1.EdgePlacementSpec{LocationSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"region": "east"}}}},
	}
	f.placements[spaces.Key(wds, "", name)] = ep
	return ep
}

// slice adds a slice to the WDS with the given destinations.
func (f *fakeScheduler) slice(name string, dests ...edgev2alpha1.SinglePlacement) *edgev2alpha1.SinglePlacementSlice {
	s := &edgev2alpha1.SinglePlacementSlice{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "5"},
		Destinations: dests, DestinationCount: int32(len(dests))}
	f.slices[spaces.Key(wds, "", name)] = s
	return s
}

func destination(st string) edgev2alpha1.SinglePlacement {
	return edgev2alpha1.SinglePlacement{Space: inv, LocationName: "loc1", SyncTargetName: st, SyncTargetUID: types.UID("uid-" + st)}
}

// both are the destinations of a placement of the fake's world.
var both = []edgev2alpha1.SinglePlacement{destination("edge1"), destination("edge2")}

func (f *fakeScheduler) record(ctx context.Context, verb, name string) error {
	space, _ := spaces.FromContext(ctx)
	f.calls = append(f.calls, verb+" "+space+"/"+name)
	return f.fail[verb]
}

func (f *fakeScheduler) reconciler() *reconciler {
	spaceOf := func(ctx context.Context) string {
		space, _ := spaces.FromContext(ctx)
		return space
	}
	return &reconciler{
		placement: func(space, name string) (*edgev2alpha1.EdgePlacement, bool) {
			ep, ok := f.placements[spaces.Key(space, "", name)]
			return ep, ok
		},
		slice: func(space, name string) (*edgev2alpha1.SinglePlacementSlice, bool) {
			s, ok := f.slices[spaces.Key(space, "", name)]
			return s, ok
		},
		space: func(name, typ string) (*tenancyv1alpha1.Space, bool) {
			sp, ok := f.spaces[name]
			if !ok || sp.Spec.Type != typ || sp.DeletionTimestamp != nil {
				return nil, false
			}
			return sp, true
		},
		locations: func(space string) []*edgev2alpha1.Location { return f.locations[space] },
		// The whole space: a superset of what the selector matches.
		syncTargets: func(space string, _ *metav1.LabelSelector) []*edgev2alpha1.SyncTarget { return f.syncTargets[space] },
		createSlice: func(ctx context.Context, s *edgev2alpha1.SinglePlacementSlice) error {
			if err := f.record(ctx, "createSlice", s.Name); err != nil {
				return err
			}
			s = s.DeepCopy()
			f.rv++
			s.ResourceVersion = fmt.Sprint(f.rv)
			f.slices[spaces.Key(spaceOf(ctx), "", s.Name)] = s
			return nil
		},
		updateSlice: func(ctx context.Context, s *edgev2alpha1.SinglePlacementSlice) error {
			if err := f.record(ctx, "updateSlice", s.Name); err != nil {
				return err
			}
			f.slices[spaces.Key(spaceOf(ctx), "", s.Name)] = s.DeepCopy()
			return nil
		},
		deleteSlice: func(ctx context.Context, name string) error {
			if err := f.record(ctx, "deleteSlice", name); err != nil {
				return err
			}
			delete(f.slices, spaces.Key(spaceOf(ctx), "", name))
			return nil
		},
		updateStatus: func(ctx context.Context, ep *edgev2alpha1.EdgePlacement) error {
			if err := f.record(ctx, "updateStatus", ep.Name); err != nil {
				return err
			}
			f.placements[spaces.Key(spaceOf(ctx), "", ep.Name)] = ep.DeepCopy()
			return nil
		},
	}
}

// requireCondition checks a condition of the placement the fake holds.
func requireCondition(t *testing.T, f *fakeScheduler, name, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	ep := f.placements[spaces.Key(wds, "", name)]
	require.NotNil(t, ep)
	c := meta.FindStatusCondition(ep.Status.Conditions, typ)
	require.NotNil(t, c, "condition %s", typ)
	require.Equal(t, status, c.Status, "condition %s: %s", typ, c.Message)
	require.Equal(t, reason, c.Reason, "condition %s", typ)
	require.Equal(t, ep.Generation, c.ObservedGeneration)
	return c
}

func TestReconcile(t *testing.T) {
	errBoom := errors.New("boom")
	notFound := apierrors.NewNotFound(schema.GroupResource{Group: edgev2alpha1.GroupName, Resource: "singleplacementslices"}, "ep1")
	tests := []struct {
		desc string
		// setup builds the world; the key reconciled is wds1/ep1 unless key is set.
		setup     func(f *fakeScheduler)
		key       string
		wantCalls []string
		wantErr   error
		// check inspects the world after the reconcile.
		check func(t *testing.T, f *fakeScheduler)
	}{
		{
			desc:      "a new placement gets its slice, then Scheduled",
			setup:     func(f *fakeScheduler) { f.place("ep1") },
			wantCalls: []string{"createSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				s := f.slices[spaces.Key(wds, "", "ep1")]
				require.Equal(t, both, s.Destinations, "the SyncTargets loc1 selects, sorted, and not the one it does not")
				require.Equal(t, int32(2), s.DestinationCount)
				require.Equal(t, []metav1.OwnerReference{{APIVersion: edgev2alpha1.SchemeGroupVersion.String(), Kind: "EdgePlacement",
					Name: "ep1", UID: "ep-ep1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}, s.OwnerReferences)
				c := requireCondition(t, f, "ep1", epstatus.Scheduled, metav1.ConditionTrue, reasonScheduled)
				require.Equal(t, "1 matching locations, 2 destinations", c.Message)
				requireCondition(t, f, "ep1", edgev2alpha1.EdgePlacementMisconfigured, metav1.ConditionFalse, "AsExpected")
				ep := f.placements[spaces.Key(wds, "", "ep1")]
				require.Equal(t, int32(1), ep.Status.MatchingLocationCount)
				require.Equal(t, int64(2), ep.Status.ObservedGeneration)
			},
		},
		{
			desc: "a slice with the right destinations is left alone",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				f.slice("ep1", both...)
			},
			wantCalls: []string{"updateStatus wds1/ep1"},
		},
		{
			desc: "a slice with other destinations is updated in place",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				s := f.slice("ep1", destination("gone"))
				s.OwnerReferences = []metav1.OwnerReference{{Kind: "Stale", Name: "x"}}
			},
			wantCalls: []string{"updateSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				s := f.slices[spaces.Key(wds, "", "ep1")]
				require.Equal(t, both, s.Destinations)
				require.Equal(t, int32(2), s.DestinationCount)
				require.Equal(t, "5", s.ResourceVersion, "an update of the cached object, not a new one")
				require.Len(t, s.OwnerReferences, 1)
				require.Equal(t, "EdgePlacement", s.OwnerReferences[0].Kind)
			},
		},
		{
			desc: "a slice whose count disagrees with its destinations is updated",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				f.slice("ep1", both...).DestinationCount = 7
			},
			wantCalls: []string{"updateSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Equal(t, int32(2), f.slices[spaces.Key(wds, "", "ep1")].DestinationCount)
			},
		},
		{
			desc: "a SyncTarget that is unschedulable or being deleted is no destination",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				f.syncTargets[inv][0].Spec.Unschedulable = true // edge2
				f.syncTargets[inv][1].DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
			},
			wantCalls: []string{"createSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Empty(t, f.slices[spaces.Key(wds, "", "ep1")].Destinations)
				c := requireCondition(t, f, "ep1", epstatus.Scheduled, metav1.ConditionTrue, reasonScheduled)
				require.Equal(t, "1 matching locations, 0 destinations", c.Message)
			},
		},
		{
			desc: "a WDS that names no inventory space: an empty slice and NoInventorySpaces",
			setup: func(f *fakeScheduler) {
				f.addSpace(wds, tenancyv1alpha1.SpaceTypeWDS)
				f.place("ep1").Status.MatchingLocationCount = 3
			},
			wantCalls: []string{"createSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Empty(t, f.slices[spaces.Key(wds, "", "ep1")].Destinations)
				c := requireCondition(t, f, "ep1", epstatus.Scheduled, metav1.ConditionFalse, reasonNoInventorySpaces)
				require.Contains(t, c.Message, `spec.inventorySpaces of Space "wds1"`, "the message says what to do")
				requireCondition(t, f, "ep1", edgev2alpha1.EdgePlacementMisconfigured, metav1.ConditionTrue, reasonNoInventorySpaces)
				require.Equal(t, int32(0), f.placements[spaces.Key(wds, "", "ep1")].Status.MatchingLocationCount)
			},
		},
		{
			desc: "inventory spaces that do not exist or are of another type count for nothing",
			setup: func(f *fakeScheduler) {
				f.addSpace(wds, tenancyv1alpha1.SpaceTypeWDS, "missing", "other-wds")
				f.addSpace("other-wds", tenancyv1alpha1.SpaceTypeWDS)
				f.locations["other-wds"] = f.locations[inv]
				f.syncTargets["other-wds"] = f.syncTargets[inv]
				f.place("ep1")
				f.slice("ep1", both...)
			},
			wantCalls: []string{"updateSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Empty(t, f.slices[spaces.Key(wds, "", "ep1")].Destinations, "the destinations through other-wds went")
				requireCondition(t, f, "ep1", epstatus.Scheduled, metav1.ConditionFalse, reasonNoInventorySpaces)
			},
		},
		{
			desc: "Locations of inventories the WDS does not name are not selected",
			setup: func(f *fakeScheduler) {
				f.addSpace("inv2", tenancyv1alpha1.SpaceTypeInventory)
				f.locations["inv2"] = []*edgev2alpha1.Location{location("loc2", map[string]string{"region": "east"}, "env", "edge")}
				f.syncTargets["inv2"] = []*edgev2alpha1.SyncTarget{syncTarget("edge9", map[string]string{"env": "edge"})}
				f.place("ep1")
			},
			wantCalls: []string{"createSlice wds1/ep1", "updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Equal(t, both, f.slices[spaces.Key(wds, "", "ep1")].Destinations)
			},
		},
		{
			desc: "an invalid selector: Misconfigured, and the slice and matching count stay",
			setup: func(f *fakeScheduler) {
				ep := f.place("ep1")
				ep.Spec.LocationSelectors = append(ep.Spec.LocationSelectors, metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: "Near"}}})
				ep.Status.MatchingLocationCount = 3
				f.slice("ep1", destination("old"))
			},
			wantCalls: []string{"updateStatus wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Equal(t, []edgev2alpha1.SinglePlacement{destination("old")}, f.slices[spaces.Key(wds, "", "ep1")].Destinations,
					"nothing moves on a broken spec")
				c := requireCondition(t, f, "ep1", epstatus.Scheduled, metav1.ConditionFalse, reasonInvalidLocationSelector)
				require.Contains(t, c.Message, "spec.locationSelectors[1]")
				requireCondition(t, f, "ep1", edgev2alpha1.EdgePlacementMisconfigured, metav1.ConditionTrue, reasonInvalidLocationSelector)
				ep := f.placements[spaces.Key(wds, "", "ep1")]
				require.Equal(t, int32(3), ep.Status.MatchingLocationCount)
				require.Equal(t, int64(2), ep.Status.ObservedGeneration)
			},
		},
		{
			desc:      "a deleted placement: its slice is deleted",
			setup:     func(f *fakeScheduler) { f.slice("ep1", both...) },
			wantCalls: []string{"deleteSlice wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.NotContains(t, f.slices, spaces.Key(wds, "", "ep1"))
			},
		},
		{
			desc: "a placement being deleted: its slice is deleted, its status left",
			setup: func(f *fakeScheduler) {
				f.place("ep1").DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
				f.slice("ep1", both...)
			},
			wantCalls: []string{"deleteSlice wds1/ep1"},
		},
		{
			desc:  "a deleted placement without a slice: nothing to do",
			setup: func(f *fakeScheduler) {},
		},
		{
			desc: "a slice already gone from the server is no error",
			setup: func(f *fakeScheduler) {
				f.slice("ep1", both...)
				f.fail["deleteSlice"] = notFound
			},
			wantCalls: []string{"deleteSlice wds1/ep1"},
		},
		{
			desc: "a failed deletion is returned",
			setup: func(f *fakeScheduler) {
				f.slice("ep1", both...)
				f.fail["deleteSlice"] = errBoom
			},
			wantCalls: []string{"deleteSlice wds1/ep1"},
			wantErr:   errBoom,
		},
		{
			desc: "a placement outside a WDS is inert and loses its slice",
			setup: func(f *fakeScheduler) {
				f.addSpace(wds, tenancyv1alpha1.SpaceTypeInventory)
				f.place("ep1")
				f.slice("ep1", both...)
			},
			wantCalls: []string{"deleteSlice wds1/ep1"},
			check: func(t *testing.T, f *fakeScheduler) {
				require.Empty(t, f.placements[spaces.Key(wds, "", "ep1")].Status.Conditions, "an inert placement gets no status")
			},
		},
		{
			desc: "a placement in a WDS being deleted is inert",
			setup: func(f *fakeScheduler) {
				f.spaces[wds].DeletionTimestamp = &metav1.Time{Time: time.Unix(1700000000, 0)}
				f.place("ep1")
			},
		},
		{
			desc: "a failed slice write stops before the status",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				f.fail["createSlice"] = errBoom
			},
			wantCalls: []string{"createSlice wds1/ep1"},
			wantErr:   errBoom,
			check: func(t *testing.T, f *fakeScheduler) {
				require.Empty(t, f.placements[spaces.Key(wds, "", "ep1")].Status.Conditions)
			},
		},
		{
			desc: "a failed status write is returned",
			setup: func(f *fakeScheduler) {
				f.place("ep1")
				f.fail["updateStatus"] = errBoom
			},
			wantCalls: []string{"createSlice wds1/ep1", "updateStatus wds1/ep1"},
			wantErr:   errBoom,
		},
		{
			desc:  "a key that is not one is dropped",
			setup: func(f *fakeScheduler) { f.place("ep1") },
			key:   "a|b|c|d",
		},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			f := newFakeScheduler()
			tc.setup(f)
			key := tc.key
			if key == "" {
				key = spaces.Key(wds, "", "ep1")
			}
			err := f.reconciler().reconcile(context.Background(), key)
			if tc.wantErr != nil {
				require.ErrorIs(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.wantCalls, f.calls)
			if tc.check != nil {
				tc.check(t, f)
			}
			if len(f.fail) > 0 {
				return // the caches have not seen the failed write
			}
			// What the reconcile wrote, the caches now hold: looking again
			// changes nothing.
			f.calls = nil
			require.NoError(t, f.reconciler().reconcile(context.Background(), key))
			require.Empty(t, f.calls, "a second reconcile of the same world writes nothing")
		})
	}
}

// TestReconcileFollowsChanges reconciles one placement through a sequence
// of changes of the world, as the informers would deliver them.
func TestReconcileFollowsChanges(t *testing.T) {
	f := newFakeScheduler()
	r := f.reconciler()
	key := spaces.Key(wds, "", "ep1")
	ctx := context.Background()
	step := func(desc string, change func(), wantCalls ...string) {
		t.Helper()
		f.calls = nil
		change()
		require.NoError(t, r.reconcile(ctx, key), desc)
		require.Equal(t, wantCalls, f.calls, desc)
	}
	step("placed", func() { f.place("ep1") }, "createSlice wds1/ep1", "updateStatus wds1/ep1")
	step("a SyncTarget leaves the Location", func() { f.syncTargets[inv][0].Labels = map[string]string{"env": "lab"} },
		"updateSlice wds1/ep1", "updateStatus wds1/ep1")
	require.Equal(t, []edgev2alpha1.SinglePlacement{destination("edge1")}, f.slices[key].Destinations)
	step("a SyncTarget changes a label no Location selects on", func() { f.syncTargets[inv][1].Labels["color"] = "blue" })
	step("the Location stops matching the placement", func() { f.locations[inv][0].Labels = nil },
		"updateSlice wds1/ep1", "updateStatus wds1/ep1")
	require.Empty(t, f.slices[key].Destinations)
	require.Equal(t, int32(0), f.placements[key].Status.MatchingLocationCount)
	step("the placement is deleted", func() { delete(f.placements, key) }, "deleteSlice wds1/ep1")
	step("nothing left", func() {})
}
